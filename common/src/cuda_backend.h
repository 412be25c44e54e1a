// cuda_backend.h: what the CUDA backend (common/cuda/*.cu) offers: the functions behind its row
// of the backend table (common/cuda/cuda_backend.cpp, see backend.h), the copies between host
// and device, and pinned memory. Not part of the public API.
//
// In a build without nvcc, common/cuda/cuda_absent.cpp implements it with clear errors, so the
// same sources link either way.
//
// Ordering: every kernel and copy goes on the device's default stream, so they run in the order
// they were issued; a caller never waits unless it reads a result on the host.
#pragma once
#include <cstddef>

#include "backend.h"
#include "tiny/tensor.h"

namespace tiny::detail::cuda {

// ---- memory (raw; the caching and the accounting are allocator.cpp's) --------------------------
/// cudaMalloc on `device`; RuntimeError "CUDA out of memory. Tried to allocate ..." on failure.
void* device_malloc(size_t nbytes, int device);
/// cudaFree of a device_malloc block.
void device_free(void* ptr, int device);
/// Page-locked host memory (cudaHostAlloc), which the GPU's copy engines read directly.
void* pinned_malloc(size_t nbytes);
/// Frees pinned memory, first waiting for any non-blocking copy still reading it.
void pinned_free(void* ptr);
/// Waits until no non-blocking copy issued so far still reads `ptr` (a pinned block about to be
/// handed out again by the cache).
void pinned_wait_idle(void* ptr);

// ---- copies ------------------------------------------------------------------------------------
/// Copies `nbytes` between any two devices. With `non_blocking` and pinned host memory the copy
/// is queued on the stream and the call returns at once (the host buffer is then tracked until
/// the copy has read it); otherwise the call returns when the bytes have arrived.
void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t nbytes,
                bool non_blocking, bool host_is_pinned);
/// Sets `nbytes` at `ptr` on `device` to zero (queued).
void zero_bytes(void* ptr, size_t nbytes, int device);

// ---- kernels -----------------------------------------------------------------------------------
// Operands may have any strides (broadcast ones have stride 0). An input may also be a 0-dim
// CPU tensor (a Python-number-like scalar), which is passed to the kernel by value, as PyTorch
// does. Inputs already have the op's compute dtype; `out` has the result dtype.

/// out = in converted to out's dtype, elementwise (any two dtypes, any layouts). The elementwise
/// ops' kernels are backend.h's cuda::elementwise<Op>.
void convert_tensor(const Tensor& out, const Tensor& in);
/// out = condition ? a : b.
void where(const Tensor& out, const Tensor& condition, const Tensor& a, const Tensor& b);
/// out[i] = scale * sum_j rows[i, j] for contiguous (m, n) `rows`, accumulated in out's dtype
/// (float64 for floating inputs, int64 for the others).
void sum_rows(const Tensor& out, const Tensor& rows, double scale);
/// The largest element of each row of contiguous (m, n) `rows` and its first index (NaN wins).
void max_rows(const Tensor& values, const Tensor& indices, const Tensor& rows);
/// out (b, M, N) = a (b, M, K) @ b (b, K, N) through cuBLAS; float16/bfloat16 accumulate in
/// float32, float32 uses TF32 tensor cores only when float32_matmul_precision() allows it.
void gemm(const Tensor& out, const Tensor& a, const Tensor& b);
/// One fused optimizer step for one parameter (optim_math.h), on the parameter's device.
void optimizer_update(const UpdateArgs& args);

}  // namespace tiny::detail::cuda
