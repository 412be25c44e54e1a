// device.cpp: what does not depend on whether CUDA was compiled in.
#include "tiny/device.h"

#include "tiny/error.h"

namespace tiny::cuda {

void require_device(int i) {
  if (!available())
    throw RuntimeError("cannot use cuda:" + std::to_string(i) + ": CUDA is not available (" +
                       unavailable_reason() + ")");
  if (i < 0 || i >= device_count())
    throw RuntimeError("CUDA error: invalid device ordinal (cuda:" + std::to_string(i) + "; " +
                       std::to_string(device_count()) + " device(s) present)");
}

std::string DeviceProperties::str() const {
  return "_CudaDeviceProperties(name='" + name + "', major=" + std::to_string(major) +
         ", minor=" + std::to_string(minor) +
         ", total_memory=" + std::to_string(total_memory / (1024 * 1024)) +
         "MB, multi_processor_count=" + std::to_string(multi_processor_count) + ")";
}

}  // namespace tiny::cuda
