// cpu/elementwise_ternary.cpp: the CPU kernels of the elementwise ops with three inputs.
#include "elementwise.h"

namespace tiny::detail::cpu {
TINY_TERNARY_OPS(TINY_CPU_INSTANTIATE)
}  // namespace tiny::detail::cpu
