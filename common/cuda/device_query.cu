// device_query.cu: is there a CUDA device, and what is it? Compiled by nvcc whenever the toolkit
// is present, so a CUDA compile error breaks the build even on a machine without a GPU. On a
// machine without a driver the runtime reports an error instead of a device count, and every
// query here turns that into "not available", with the runtime's reason.
#include <cuda_runtime.h>

#include <string>

#include "tiny/device.h"

namespace tiny::cuda {
namespace {

struct Probe {
  int count = 0;
  std::string reason;
};

const Probe& probe() {
  static const Probe result = [] {
    Probe p;
    const cudaError_t err = cudaGetDeviceCount(&p.count);
    if (err != cudaSuccess) {
      p.count = 0;
      p.reason = std::string("cudaGetDeviceCount failed: ") + cudaGetErrorName(err) + " (" +
                 cudaGetErrorString(err) + ")";
      cudaGetLastError();  // clear the sticky error so later calls start clean
    } else if (p.count == 0) {
      p.reason = "the CUDA driver reports no devices";
    }
    return p;
  }();
  return result;
}

}  // namespace

bool compiled() { return true; }
bool available() { return probe().count > 0; }
std::string unavailable_reason() { return available() ? "" : probe().reason; }
int device_count() { return probe().count; }

std::string device_name(int i) {
  if (i < 0 || i >= device_count()) return "";
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) return "";
  return prop.name;
}

}  // namespace tiny::cuda
