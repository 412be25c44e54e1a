// unary.cu: one-input elementwise ops on the GPU, and conversion between dtypes (a copy through
// ops::Identity). What each op computes is elementwise_ops.h's, the same code the CPU runs.
#include <type_traits>

#include "../src/cuda_backend.h"
#include "elementwise.cuh"

namespace tiny::detail::cuda {
namespace {

template <typename Out, typename In, typename Op> struct UnaryBody {
  static constexpr int N = 2;
  using Values = opmath_t<In>;
  Out* out;
  Input<In> in;
  Op op;
  __device__ Values load(const int64_t (&off)[N]) const { return in.load(off[1]); }
  __device__ void store(int64_t offset, Values x) const { out[offset] = convert<Out>(op(x)); }
};

template <typename T> constexpr bool is_float_v =
    std::is_floating_point_v<T> || std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

template <typename Out, typename In, typename Op> void run(const Tensor& out, const Tensor& in) {
  UnaryBody<Out, In, Op> body{static_cast<Out*>(out.data_ptr()), input_of<In>(in), Op{}};
  launch(body, out.shape(), {out.strides(), loop_strides(in, out.shape())}, out.device().index);
}

}  // namespace

template <typename Op> void unary(const Tensor& out, const Tensor& in) {
  if constexpr (std::is_same_v<Op, ops::Identity>) {
    // A conversion: every pair of dtypes.
    dispatch_dtype(out.dtype(), [&]<typename Out>() {
      dispatch_dtype(in.dtype(), [&]<typename In>() { run<Out, In, Op>(out, in); });
    });
  } else {
    if (out.dtype() != in.dtype()) throw RuntimeError("unary op: input and output dtypes differ");
    dispatch_dtype(in.dtype(), [&]<typename T>() {
      if constexpr (Op::floating_only && !is_float_v<T>)
        throw TypeError(std::string("not implemented for '") + dtype_legacy_name(in.dtype()) + "'");
      else
        run<T, T, Op>(out, in);
    });
  }
}

#define TINY_INSTANTIATE(NAME) template void unary<ops::NAME>(const Tensor&, const Tensor&);
TINY_UNARY_OPS(TINY_INSTANTIATE)
#undef TINY_INSTANTIATE

}  // namespace tiny::detail::cuda
