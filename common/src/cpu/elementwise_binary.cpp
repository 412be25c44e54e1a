// cpu/elementwise_binary.cpp: the CPU kernels of the elementwise ops with two inputs.
#include "elementwise.h"

namespace tiny::detail::cpu {
TINY_BINARY_OPS(TINY_CPU_INSTANTIATE)
}  // namespace tiny::detail::cpu
