// backend.cpp: the table of backends, indexed by device type: the one place where a device
// becomes the code that runs on it.
#include "backend.h"

namespace tiny::detail {

extern const Backend kCpuBackend;   // cpu/backend.cpp
extern const Backend kCudaBackend;  // ../cuda/cuda_backend.cpp

const Backend& backend(Device device) {
  static const Backend* const table[kBackends] = {&kCpuBackend, &kCudaBackend};
  return *table[static_cast<int>(device.type)];
}

}  // namespace tiny::detail

namespace tiny {
void synchronize(Device device) { detail::backend(device).synchronize(device.index); }
}  // namespace tiny
