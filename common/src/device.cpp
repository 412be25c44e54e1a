// device.cpp: what does not depend on whether CUDA was compiled in.
#include "tiny/device.h"

#include <atomic>
#include <cstdlib>
#include <string_view>

#include "tiny/error.h"

namespace tiny {

namespace {

// PyTorch's rule (ATen's compute_cpu_capability): its AVX2 kernels need both AVX2 and FMA.
bool processor_has_avx2_and_fma() {
#if defined(__x86_64__) && defined(__GNUC__)
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return false;
#endif
}

std::atomic<CpuCapability>& capability_slot() {
  static std::atomic<CpuCapability> slot{[] {
    const char* forced = std::getenv("TINY_CPU_CAPABILITY");
    if (forced != nullptr && std::string_view(forced) == "default") return CpuCapability::Default;
    return processor_has_avx2_and_fma() ? CpuCapability::Avx2 : CpuCapability::Default;
  }()};
  return slot;
}

}  // namespace

CpuCapability cpu_capability() { return capability_slot().load(); }

void set_cpu_capability(CpuCapability capability) {
  if (capability == CpuCapability::Avx2 && !processor_has_avx2_and_fma())
    throw RuntimeError("set_cpu_capability: this processor lacks AVX2 or FMA");
  capability_slot().store(capability);
}

}  // namespace tiny

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
