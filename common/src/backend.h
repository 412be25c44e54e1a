// backend.h: the table of backends, and what each backend provides. Not part of the public API.
//
// The dispatcher (dispatch.h) and the ops decide everything a user can observe (shapes, dtypes,
// errors, the autograd record) once, for every device, then hand the element work to the backend
// of the inputs' device: backend(device) is the one place that maps a device to its code. The
// CPU backend lives in common/src/cpu/, the CUDA backend in common/cuda/ (or, in a build
// without nvcc, cuda_absent.cpp, whose entries raise a clear error). A backend is a row of
// function pointers; elementwise ops keep their per-backend kernels in their op table row
// (OpEntry::kernels), since each is a template instantiated for that op.
#pragma once
#include <cstddef>
#include <vector>

#include "elementwise_ops.h"
#include "optim_math.h"
#include "tiny/tensor.h"

namespace tiny::detail {

/// out = Op(inputs...) elementwise: `out` of the result dtype, inputs of the compute dtype,
/// broadcast to out's shape; any strides. On a GPU an input may also be a 0-dim CPU tensor (a
/// number, passed by value).
using ElementwiseKernel = void (*)(const Tensor& out, const Tensor* const* inputs,
                                   const ops::Scalars& scalars);

/// What one kind of device provides.
struct Backend {
  const char* name;
  // ---- memory (raw: the caching and accounting are allocator.cpp's) ----
  /// A block of `nbytes` on device `index` (pinned: page-locked host memory, CPU only), or
  /// nullptr when the device has no more.
  void* (*allocate)(size_t nbytes, int index, bool pinned);
  /// Returns a block from allocate().
  void (*release)(void* ptr, int index, bool pinned);
  /// Sets `nbytes` at `ptr` to zero.
  void (*zero_bytes)(void* ptr, size_t nbytes, int index);
  /// Waits for the work queued on device `index`.
  void (*synchronize)(int index);
  // ---- kernels ----
  /// dst = src on one device, converting dtypes; any layouts (same shape).
  void (*copy)(const Tensor& dst, const Tensor& src);
  /// out = condition ? a : b (a and b of out's dtype, all broadcast to out's shape).
  void (*where)(const Tensor& out, const Tensor& condition, const Tensor& a, const Tensor& b);
  /// out = the sum of `a` over the flagged dimensions divided by `divisor` (1 for a sum, the
  /// count for a mean): `out` contiguous, shaped as keepdim=True, float64 for floating inputs and
  /// int64 for the others; whatever it held before is overwritten.
  void (*sum)(const Tensor& out, const Tensor& a, const std::vector<bool>& reduce, double divisor);
  /// The largest element of each row of contiguous (m, n) `rows` and its first index (NaN wins).
  void (*max_rows)(const Tensor& values, const Tensor& indices, const Tensor& rows);
  /// out (..., M, N) = a (..., M, K) @ b (..., K, N): equal batch dimensions, any strides, one
  /// floating dtype; `out` contiguous, of the inputs' dtype.
  void (*matmul)(const Tensor& out, const Tensor& a, const Tensor& b);
  /// One optimizer step for one parameter, fused into one pass (optim_math.h).
  void (*optimizer_update)(const UpdateArgs& args);
};

/// The backend of a device type, indexed by Device::Type: cpu, cuda.
inline constexpr int kBackends = 2;
/// The backend that runs work on `device`.
const Backend& backend(Device device);

namespace cpu {
/// The CPU kernel of elementwise op Op (common/src/cpu/elementwise_*.cpp).
template <typename Op>
void elementwise(const Tensor& out, const Tensor* const* inputs, const ops::Scalars& scalars);
}  // namespace cpu

namespace cuda {
/// The CUDA kernel of elementwise op Op (common/cuda/elementwise_*.cu).
template <typename Op>
void elementwise(const Tensor& out, const Tensor* const* inputs, const ops::Scalars& scalars);
}  // namespace cuda

}  // namespace tiny::detail
