// unary.cu: the one-input elementwise ops on the GPU, and conversion between dtypes (a copy
// through ops::Identity). What each op computes is elementwise_ops.h's, the same code the CPU
// runs; the kernel body is elementwise.cuh's.
#include "elementwise.cuh"

namespace tiny::detail::cuda {

TINY_UNARY_OPS(TINY_CUDA_INSTANTIATE)

void convert_tensor(const Tensor& out, const Tensor& in) {
  dispatch_dtype(out.dtype(), [&]<typename Out>() {
    dispatch_dtype(in.dtype(), [&]<typename In>() {
      ElementwiseBody<Out, In, ops::Identity> body{};
      body.out = static_cast<Out*>(out.data_ptr());
      body.in[0] = input_of<In>(in);
      launch(body, out.shape(), {out.strides(), loop_strides(in, out.shape())}, out.device().index);
    });
  });
}

}  // namespace tiny::detail::cuda
