// fused_math.h: the math functions generated C++ kernels call, as source text.
#pragma once

namespace tiny::detail {
/// Definitions of tiny_expf, tiny_erff, tiny_tanhf and tiny_logf (float32), pasted into every
/// generated C++ kernel.
const char* fused_math_source();
}  // namespace tiny::detail
