// cpu/elementwise_unary_math.cpp: the CPU kernels of exp, log, tanh, erf, GELU and the other
// unary ops that call the library's vectorised transcendental functions.
#include "elementwise.h"

namespace tiny::detail::cpu {
TINY_UNARY_MATH_OPS(TINY_CPU_INSTANTIATE)
}  // namespace tiny::detail::cpu
