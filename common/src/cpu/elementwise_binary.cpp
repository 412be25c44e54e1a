// cpu/elementwise_binary.cpp: the CPU kernels of the elementwise ops with two inputs that
// compute a number; the comparisons are in elementwise_compare.cpp.
#include "elementwise.h"

namespace tiny::detail::cpu {
TINY_BINARY_ARITHMETIC_OPS(TINY_CPU_INSTANTIATE)
}  // namespace tiny::detail::cpu
