// ternary.cu: the three-input elementwise ops on the GPU (lerp, addcmul, addcdiv). What each op
// computes is elementwise_ops.h's, the same code the CPU runs; the kernel body is elementwise.cuh's.
#include "elementwise.cuh"

namespace tiny::detail::cuda {

TINY_TERNARY_OPS(TINY_CUDA_INSTANTIATE)

}  // namespace tiny::detail::cuda
