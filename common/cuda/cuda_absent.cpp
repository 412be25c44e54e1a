// cuda_absent.cpp: the CUDA entry points in a build without nvcc. The queries answer "no
// device"; everything that would need one raises a RuntimeError that says why, so the same
// library sources link and a CPU-only program runs as usual.
#include "../src/cuda_backend.h"
#include "../src/fusion/cuda_jit.h"
#include "tiny/device.h"

namespace tiny::cuda {

bool compiled() { return false; }
bool available() { return false; }
std::string unavailable_reason() {
  return "this build has no CUDA (configured where nvcc or a GPU was missing, or with TINY_CUDA=OFF; -DTINY_CUDA=ON builds it)";
}
int device_count() { return 0; }
std::string device_name(int) { return ""; }
DeviceProperties get_device_properties(int i) {
  require_device(i);
  return {};
}
void synchronize(int i) { require_device(i); }

struct Event::Impl {};
Event::Event() { require_device(0); }
Event::~Event() = default;
void Event::record() { require_device(0); }
void Event::synchronize() const { require_device(0); }
bool Event::query() const { return true; }
double Event::elapsed_time(const Event&) const {
  require_device(0);
  return 0;
}

}  // namespace tiny::cuda

namespace tiny::detail::cuda {

void* device_malloc(size_t, int device) {
  tiny::cuda::require_device(device);
  return nullptr;
}
void device_free(void*, int) {}
void* pinned_malloc(size_t) {
  tiny::cuda::require_device(0);
  return nullptr;
}
void pinned_free(void*) {}
void pinned_wait_idle(void*) {}
void copy_bytes(void*, Device, const void*, Device, size_t, bool, bool) {
  tiny::cuda::require_device(0);
}
void zero_bytes(void*, size_t, int device) { tiny::cuda::require_device(device); }
template <typename Op> void elementwise(const Tensor&, const Tensor* const*, const ops::Scalars&) {
  tiny::cuda::require_device(0);
}
#define TINY_INSTANTIATE(NAME) \
  template void elementwise<ops::NAME>(const Tensor&, const Tensor* const*, const ops::Scalars&);
TINY_ELEMENTWISE_OPS(TINY_INSTANTIATE)
#undef TINY_INSTANTIATE
void convert_tensor(const Tensor&, const Tensor&) { tiny::cuda::require_device(0); }
void where(const Tensor&, const Tensor&, const Tensor&, const Tensor&) {
  tiny::cuda::require_device(0);
}
void sum_rows(const Tensor&, const Tensor&, double) { tiny::cuda::require_device(0); }
void max_rows(const Tensor&, const Tensor&, const Tensor&) { tiny::cuda::require_device(0); }
void gemm(const Tensor&, const Tensor&, const Tensor&) { tiny::cuda::require_device(0); }
void optimizer_update(const UpdateArgs&) { tiny::cuda::require_device(0); }

}  // namespace tiny::detail::cuda

namespace tiny::detail::jit {

// Run-time compilation needs NVRTC and the driver API, neither of which a build without CUDA
// has; a caller asks nvrtc_available() first and keeps to the unfused ops when it is false.
namespace {
[[noreturn]] void no_cuda(const char* what) {
  throw RuntimeError(std::string(what) + ": the library was built without CUDA (" +
                     tiny::cuda::unavailable_reason() + ")");
}
}  // namespace

bool nvrtc_available() { return false; }
std::string nvrtc_compile(const std::string&, const std::string&, int) {
  no_cuda("nvrtc_compile: cannot compile a CUDA kernel at run time");
}
int current_device_arch() { no_cuda("current_device_arch: there is no CUDA device to ask"); }
bool driver_available() { return false; }
CudaKernel load_kernel(const std::string&, const std::string&) {
  no_cuda("load_kernel: cannot load a CUDA kernel");
}
void launch(const CudaKernel&, unsigned, unsigned, void**) {
  no_cuda("launch: cannot launch a CUDA kernel");
}

}  // namespace tiny::detail::jit
