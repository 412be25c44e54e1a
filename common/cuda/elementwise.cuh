// elementwise.cuh: the two loops every elementwise GPU kernel is built from, and the kernel body
// of every elementwise op (ElementwiseBody); shared by unary.cu, binary.cu, ternary.cu and
// reduce.cu.
//
// An op is described by a small "kernel body" struct K with N operands (the output first):
//   K::Values load(const int64_t (&off)[N]) const;   reads the inputs of one element
//   void store(int64_t out_offset, const Values&) const;   computes it and writes the output
// and launch() picks the loop. The loop's geometry is the CPU's: detail::coalesce drops size-1
// dimensions and merges those contiguous in every operand, so a contiguous op (or one whose
// inputs are broadcast scalars) is a single run of elements, and gets the fast loop: each
// thread loads four elements, spaced a block apart so that a warp's loads are coalesced, before
// computing any, which keeps enough reads in flight to approach the memory's bandwidth.
// Anything else gets the general loop, which finds each element's operands through
// detail::LoopGeometry (internal.h, tested on the CPU).
#pragma once
#include <array>
#include <cstdint>
#include <type_traits>

#include "../src/cuda_backend.h"
#include "../src/internal.h"
#include "cuda_check.h"

namespace tiny::detail::cuda {

constexpr int kThreads = 256;  // threads per block
constexpr int kUnroll = 4;     // elements per thread in the contiguous loop

/// Per-operand steps of a single run: 1 (walks the elements) or 0 (a broadcast value).
template <int N> struct Steps { int64_t step[N]; };

template <typename K>
__global__ void __launch_bounds__(kThreads) contiguous_loop(K body, Steps<K::N> steps, int64_t n) {
  const int64_t base = static_cast<int64_t>(blockIdx.x) * kThreads * kUnroll + threadIdx.x;
  typename K::Values v[kUnroll];
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    const int64_t i = base + u * kThreads;
    if (i < n) {
      int64_t off[K::N];
#pragma unroll
      for (int k = 0; k < K::N; ++k) off[k] = i * steps.step[k];
      v[u] = body.load(off);
    }
  }
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    const int64_t i = base + u * kThreads;
    if (i < n) body.store(i, v[u]);
  }
}

template <typename K>
__global__ void __launch_bounds__(kThreads)
    general_loop(K body, LoopGeometry<K::N> geometry, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (i >= n) return;
  int64_t off[K::N];
  geometry.offsets(i, off);
  body.store(off[0], body.load(off));
}

/// Runs `body` over `shape`, operand k laid out with strides[k] (the output's first).
template <typename K>
void launch(const K& body, const Shape& shape, const std::array<Strides, K::N>& strides,
            int device) {
  constexpr int N = K::N;
  std::array<const Strides*, N> ptrs;
  for (int k = 0; k < N; ++k) ptrs[k] = &strides[k];
  const CoalescedLoop<N> loop = coalesce<N>(shape, ptrs);
  if (loop.empty) return;
  DeviceGuard guard(device);
  const int64_t n = shape_numel(shape);
  const size_t nd = loop.sizes.size();
  bool single_run = nd <= 1 && (nd == 0 || loop.steps[0][0] == 1);
  for (int k = 1; k < N && single_run && nd == 1; ++k)
    single_run = loop.steps[0][k] == 0 || loop.steps[0][k] == 1;
  if (single_run) {
    Steps<N> steps{};
    for (int k = 0; k < N; ++k) steps.step[k] = nd == 0 ? 0 : loop.steps[0][k];
    const int64_t blocks = (n + kThreads * kUnroll - 1) / (kThreads * kUnroll);
    contiguous_loop<K><<<static_cast<unsigned>(blocks), kThreads>>>(body, steps, n);
  } else {
    const LoopGeometry<N> geometry = LoopGeometry<N>::from(loop);
    const int64_t blocks = (n + kThreads - 1) / kThreads;
    general_loop<K><<<static_cast<unsigned>(blocks), kThreads>>>(body, geometry, n);
  }
  TINY_KERNEL_CHECK();
}

/// An input of a kernel: a pointer into device memory, or (for a 0-dim or single-element CPU
/// tensor, PyTorch's "CPU scalar") a value passed with the launch.
template <typename T> struct Input {
  const T* ptr = nullptr;
  opmath_t<T> value{};

  __device__ opmath_t<T> load(int64_t offset) const {
    return ptr ? static_cast<opmath_t<T>>(ptr[offset]) : value;
  }
};

/// Makes the Input for tensor `t` of C++ element type T.
template <typename T> Input<T> input_of(const Tensor& t) {
  Input<T> in;
  if (t.device().is_cuda()) {
    in.ptr = static_cast<const T*>(t.data_ptr());
  } else {
    bool one_element = true;  // a single element, possibly broadcast (all strides 0)
    for (int64_t d = 0; d < t.dim(); ++d) one_element &= t.size(d) == 1 || t.stride(d) == 0;
    if (!one_element)
      throw RuntimeError(
          "Expected all tensors to be on the same device, but found at least two "
          "devices, cuda and cpu!");
    in.value = static_cast<opmath_t<T>>(*static_cast<const T*>(t.data_ptr()));
  }
  return in;
}

/// Strides of `t` for a loop over `shape`: broadcast ones, and 0 everywhere for a by-value scalar.
inline Strides loop_strides(const Tensor& t, const Shape& shape) {
  if (t.device().is_cpu()) return Strides(shape.size(), 0);
  return broadcast_strides(t, shape);
}

/// The body of elementwise op Op (elementwise_ops.h) with In-typed inputs and an Out-typed
/// output: the same call operator the CPU loops run.
template <typename Out, typename In, typename Op> struct ElementwiseBody {
  static constexpr int A = Op::arity;
  static constexpr int N = A + 1;
  struct Values {
    opmath_t<In> v[A];
  };
  Out* out;
  Input<In> in[A];
  Op op;
  __device__ Values load(const int64_t (&off)[N]) const {
    Values x;
#pragma unroll
    for (int k = 0; k < A; ++k) x.v[k] = in[k].load(off[k + 1]);
    return x;
  }
  __device__ void store(int64_t offset, const Values& x) const {
    if constexpr (A == 1) out[offset] = convert<Out>(op(x.v[0]));
    else if constexpr (A == 2) out[offset] = convert<Out>(op(x.v[0], x.v[1]));
    else out[offset] = convert<Out>(op(x.v[0], x.v[1], x.v[2]));
  }
};

template <typename Op>
void elementwise(const Tensor& out, const Tensor* const* inputs, const ops::Scalars& scalars) {
  constexpr int A = Op::arity;
  const Shape& shape = out.shape();
  std::array<Strides, A + 1> strides;
  strides[0] = out.strides();
  for (int k = 0; k < A; ++k) strides[k + 1] = loop_strides(*inputs[k], shape);
  dispatch_dtype(inputs[0]->dtype(), [&]<typename T>() {
    if constexpr (ops::kCompiledFor<Op, T>) {
      // Comparisons give bool; everything else keeps the compute dtype.
      using M = opmath_t<T>;
      using Out = std::conditional_t<std::is_same_v<decltype(Op{}.math(M{})), bool>, bool, T>;
      if (out.dtype() != dtype_of<Out>())
        throw RuntimeError("elementwise kernel: unexpected output dtype");
      ElementwiseBody<Out, T, Op> body{};
      body.out = static_cast<Out*>(out.data_ptr());
      for (int k = 0; k < A; ++k) body.in[k] = input_of<T>(*inputs[k]);
      body.op.p = scalars;
      launch(body, shape, strides, out.device().index);
    } else {
      throw RuntimeError(std::string("elementwise kernel not compiled for '") +
                      dtype_legacy_name(inputs[0]->dtype()) + "'");
    }
  });
}

/// Instantiates the CUDA kernel of op struct NAME.
#define TINY_CUDA_INSTANTIATE(NAME) \
  template void elementwise<ops::NAME>(const Tensor&, const Tensor* const*, const ops::Scalars&);

}  // namespace tiny::detail::cuda
