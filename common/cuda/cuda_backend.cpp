// cuda_backend.cpp: the CUDA row of the backend table (backend.h). Host code, compiled in every
// build: it calls the entry points of cuda_backend.h, which the .cu files define when nvcc is
// present and cuda_absent.cpp defines (with clear errors) when it is not.
#include "../src/cuda_backend.h"

#include "tiny/device.h"
#include "tiny/ops.h"

namespace tiny::detail {

namespace {

void* allocate(size_t nbytes, int index, bool) { return cuda::device_malloc(nbytes, index); }
void release(void* ptr, int index, bool) { cuda::device_free(ptr, index); }
void synchronize(int index) { tiny::cuda::synchronize(index); }

void copy(const Tensor& dst, const Tensor& src) {
  // The same bytes in the same order: the driver's copy, as PyTorch's copy_ does.
  if (src.device() == dst.device() && src.dtype() == dst.dtype() && src.is_contiguous() &&
      dst.is_contiguous() && src.shape() == dst.shape())
    return cuda::copy_bytes(dst.data_ptr(), dst.device(), src.data_ptr(), src.device(),
                            dst.nbytes(), true, false);
  cuda::convert_tensor(dst, src);
}

// The reduced dimensions are moved last and made contiguous, so that each output is the sum of
// one contiguous row, which a block of threads reads together.
void sum(const Tensor& out, const Tensor& a, const std::vector<bool>& reduce, double divisor) {
  std::vector<int64_t> order;
  int64_t m = 1, n = 1;
  for (int64_t d = 0; d < a.dim(); ++d)
    if (!reduce[d]) order.push_back(d), m *= a.shape()[d];
  for (int64_t d = 0; d < a.dim(); ++d)
    if (reduce[d]) order.push_back(d), n *= a.shape()[d];
  const Tensor rows = a.detach().permute(order).contiguous().view({m, n});
  cuda::sum_rows(out.view({m}), rows, 1.0 / divisor);
}

// cuBLAS takes every float type directly (the 16-bit ones accumulate in float32) and any batch
// whose matrices sit at one stride from each other.
void matmul(const Tensor& out, const Tensor& a, const Tensor& b) {
  const DType dt = a.dtype();
  if (!is_floating(dt))
    throw not_implemented_for("addmm_cuda", dt);
  const int64_t M = a.size(-2), K = a.size(-1), N = b.size(-1);
  const int64_t nb = shape_numel(Shape(a.shape().begin(), a.shape().end() - 2));
  cuda::gemm(out.view({nb, M, N}), a.reshape({nb, M, K}), b.reshape({nb, K, N}));
}

}  // namespace

extern const Backend kCudaBackend = {
    "cuda", allocate,    release, cuda::zero_bytes, synchronize,
    copy,   cuda::where, sum,     cuda::max_rows,   matmul,
    cuda::optimizer_update,
};

}  // namespace tiny::detail
