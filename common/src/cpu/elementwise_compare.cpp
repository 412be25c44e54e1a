// cpu/elementwise_compare.cpp: the CPU kernels of the comparisons (eq, ne, lt, le, gt, ge).
#include "elementwise.h"

namespace tiny::detail::cpu {
TINY_COMPARISON_OPS(TINY_CPU_INSTANTIATE)
}  // namespace tiny::detail::cpu
