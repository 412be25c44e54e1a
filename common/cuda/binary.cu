// binary.cu: two-input elementwise ops (arithmetic and comparisons) and where() on the GPU.
// What each op computes is elementwise_ops.h's, the same code the CPU runs; the kernel body is
// elementwise.cuh's.
#include "elementwise.cuh"

namespace tiny::detail::cuda {
namespace {

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

TINY_BINARY_OPS(TINY_CUDA_INSTANTIATE)

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
