// cpu/elementwise_unary.cpp: the CPU kernels of the elementwise ops with one input.
#include "elementwise.h"

namespace tiny::detail::cpu {
TINY_UNARY_OPS(TINY_CPU_INSTANTIATE)
}  // namespace tiny::detail::cpu
