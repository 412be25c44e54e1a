// binary.cu: two-input elementwise ops (arithmetic and comparisons) and where() on the GPU.
// What each op computes is elementwise_ops.h's, the same code the CPU runs.
#include <type_traits>

#include "../src/cuda_backend.h"
#include "elementwise.cuh"

namespace tiny::detail::cuda {
namespace {

template <typename Out, typename In, typename Op> struct BinaryBody {
  static constexpr int N = 3;
  struct Values {
    opmath_t<In> x, y;
  };
  Out* out;
  Input<In> a, b;
  Op op;
  __device__ Values load(const int64_t (&off)[N]) const { return {a.load(off[1]), b.load(off[2])}; }
  __device__ void store(int64_t offset, const Values& v) const { out[offset] = convert<Out>(op(v.x, v.y)); }
};

template <typename T> struct WhereBody {
  static constexpr int N = 4;
  using Values = opmath_t<T>;
  T* out;
  Input<bool> condition;
  Input<T> a, b;
  // Only the chosen side is read.
  __device__ Values load(const int64_t (&off)[N]) const {
    return condition.load(off[1]) ? a.load(off[2]) : b.load(off[3]);
  }
  __device__ void store(int64_t offset, Values v) const { out[offset] = convert<T>(v); }
};

}  // namespace

template <typename Op> void binary(const Tensor& out, const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype()) throw RuntimeError("binary op: inputs of different dtypes");
  const Shape& shape = out.shape();
  const std::array<Strides, 3> strides = {out.strides(), loop_strides(a, shape), loop_strides(b, shape)};
  dispatch_dtype(a.dtype(), [&]<typename T>() {
    // Comparisons produce bool; arithmetic keeps the compute dtype.
    using M = opmath_t<T>;
    using Out = std::conditional_t<std::is_same_v<decltype(Op{}(M{}, M{})), bool>, bool, T>;
    if (out.dtype() != dtype_of<Out>()) throw RuntimeError("binary op: unexpected output dtype");
    BinaryBody<Out, T, Op> body{static_cast<Out*>(out.data_ptr()), input_of<T>(a), input_of<T>(b), Op{}};
    launch(body, shape, strides, out.device().index);
  });
}

#define TINY_INSTANTIATE(NAME) \
  template void binary<ops::NAME>(const Tensor&, const Tensor&, const Tensor&);
TINY_BINARY_OPS(TINY_INSTANTIATE)
#undef TINY_INSTANTIATE

void where(const Tensor& out, const Tensor& condition, const Tensor& a, const Tensor& b) {
  const Shape& shape = out.shape();
  const std::array<Strides, 4> strides = {out.strides(), loop_strides(condition, shape),
                                          loop_strides(a, shape), loop_strides(b, shape)};
  dispatch_dtype(out.dtype(), [&]<typename T>() {
    WhereBody<T> body{static_cast<T*>(out.data_ptr()), input_of<bool>(condition), input_of<T>(a),
                      input_of<T>(b)};
    launch(body, shape, strides, out.device().index);
  });
}

}  // namespace tiny::detail::cuda
