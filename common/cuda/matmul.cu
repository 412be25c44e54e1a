// matmul.cu: matrix products on the GPU through cuBLAS, the vendor's tuned library (tensor cores
// for the 16-bit types and TF32, and a kernel chosen per shape), as PyTorch uses it.
//
// cuBLAS reads matrices column by column. A row-major matrix read column by column is its
// transpose, so C = A B (row-major) is computed as C^T = B^T A^T (column-major), which needs no
// copy: the operands are passed in swapped order, each with "transposed" or not depending on
// which of its strides is 1.
#include <array>
#include <memory>
#include <mutex>

#include "../src/cuda_backend.h"
#include "cuda_check.h"
#include "elementwise.cuh"
#include "tiny/ops.h"

namespace tiny::detail::cuda {
namespace {

cublasHandle_t handle_for(int device) {
  // One handle per device, created on first use and kept for the life of the process (cuBLAS
  // handles are costly to create, and destroying them at exit races the driver's own teardown).
  static std::array<cublasHandle_t, 64> handles{};
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  if (!handles.at(device)) TINY_CUDA_CHECK(cublasCreate(&handles[device]));
  return handles[device];
}

struct Operand {
  Tensor t;  // keeps a copy alive until the call is queued
  cublasOperation_t op = CUBLAS_OP_N;
  int64_t ld = 1, batch_stride = 0;
};

// How cuBLAS reads one operand (detail::blas_layout), packing it first when it must.
Operand prepare(const Tensor& t) {
  Operand o{t};
  auto layout = blas_layout(t.size(1), t.size(2), t.stride(1), t.stride(2));
  if (!layout) {
    o.t = t.contiguous();
    layout = blas_layout(t.size(1), t.size(2), o.t.stride(1), o.t.stride(2));
  }
  o.op = layout->transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
  o.ld = layout->ld;
  o.batch_stride = o.t.size(0) == 1 ? 0 : o.t.stride(0);
  return o;
}

cudaDataType_t cuda_type(DType d) {
  switch (d) {
    case kFloat32: return CUDA_R_32F;
    case kFloat64: return CUDA_R_64F;
    case kFloat16: return CUDA_R_16F;
    case kBFloat16: return CUDA_R_16BF;
    default:
      throw not_implemented_for("addmm_cuda", d);
  }
}

}  // namespace

void gemm(const Tensor& out, const Tensor& a, const Tensor& b) {
  const int64_t batch = a.size(0), M = a.size(1), K = a.size(2), N = b.size(2);
  if (M == 0 || N == 0 || batch == 0) return;
  if (K == 0) {
    zero_bytes(out.data_ptr(), out.nbytes(), out.device().index);
    return;
  }
  constexpr int64_t kIntMax = 2147483647;
  if (M > kIntMax || N > kIntMax || K > kIntMax || batch > kIntMax)
    throw RuntimeError("matmul on CUDA: dimensions above 2^31 - 1 are not supported by cuBLAS");
  const int device = out.device().index;
  DeviceGuard guard(device);
  const Operand A = prepare(a), B = prepare(b);
  const cudaDataType_t type = cuda_type(out.dtype());
  cublasHandle_t handle = handle_for(device);
  // Products are accumulated in float32 for every float type but float64; float32 inputs are
  // rounded to TF32 first only when float32_matmul_precision() allows it.
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  if (out.dtype() == kFloat64) compute = CUBLAS_COMPUTE_64F;
  else if (out.dtype() == kFloat32 && float32_matmul_precision() != "highest")
    compute = CUBLAS_COMPUTE_32F_FAST_TF32;
  const float alpha32 = 1.0f, beta32 = 0.0f;
  const double alpha64 = 1.0, beta64 = 0.0;
  const void* alpha = compute == CUBLAS_COMPUTE_64F ? static_cast<const void*>(&alpha64) : &alpha32;
  const void* beta = compute == CUBLAS_COMPUTE_64F ? static_cast<const void*>(&beta64) : &beta32;
  // Column-major: C^T (N x M, ld N) = B^T (N x K) A^T (K x M).
  TINY_CUDA_CHECK(cublasGemmStridedBatchedEx(
      handle, B.op, A.op, static_cast<int>(N), static_cast<int>(M), static_cast<int>(K), alpha,
      B.t.data_ptr(), type, static_cast<int>(B.ld), B.batch_stride, A.t.data_ptr(), type,
      static_cast<int>(A.ld), A.batch_stride, beta, out.data_ptr(), type, static_cast<int>(N),
      M * N, static_cast<int>(batch), compute, CUBLAS_GEMM_DEFAULT));
}

}  // namespace tiny::detail::cuda
