// cpu/elementwise_unary.cpp: the CPU kernels of the elementwise ops with one input, but for the
// transcendental ones (elementwise_unary_math.cpp).
#include "elementwise.h"

namespace tiny::detail::cpu {
TINY_UNARY_SIMPLE_OPS(TINY_CPU_INSTANTIATE)
TINY_UNARY_ALGEBRA_OPS(TINY_CPU_INSTANTIATE)
}  // namespace tiny::detail::cpu
