// optim.cu: the fused optimizer updates on the GPU, one thread per element (a grid-stride loop),
// running the same update_element as the CPU (../src/optim_math.h). nvcc fuses each madd, as
// PyTorch's CUDA kernels do, so the GPU matches the CPU's FMA copy.
#include "../src/cuda_backend.h"
#include "../src/internal.h"
#include "../src/optim_math.h"
#include "cuda_check.h"

namespace tiny::detail::cuda {

namespace {

template <UpdateRule Rule, typename T> __global__ void update_kernel(UpdateArgs args) {
  const int64_t stride = int64_t(blockDim.x) * gridDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < args.n; i += stride)
    update_element<Rule, true, T, opmath_t<T>>(args, i);
}

template <UpdateRule Rule> void run(const UpdateArgs& a) {
  if (a.n == 0) return;
  DeviceGuard guard(a.device);
  constexpr int kThreads = 256;
  const int64_t blocks = std::min<int64_t>((a.n + kThreads - 1) / kThreads, 65535);
  dispatch_floating(a.dtype, "optimizer step", [&]<typename T>() {
    update_kernel<Rule, T><<<static_cast<unsigned>(blocks), kThreads>>>(a);
  });
  TINY_KERNEL_CHECK();
}

}  // namespace

void optimizer_update(const UpdateArgs& a) {
  visit_rule(a.rule, [&]<UpdateRule Rule>() { run<Rule>(a); });
}

}  // namespace tiny::detail::cuda
