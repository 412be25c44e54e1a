// fused_math_placeholder.cpp: fused_math_source() until fusion/fused_math.inc lands: the
// generated kernels' float32 exp, erf, tanh and log as the compiler's scalar builtins (correct,
// but they keep the GELU loop from vectorising).
#include "fusion/fused_math.h"

namespace tiny::detail {
const char* fused_math_source() {
  return "inline float tiny_expf(float x) { return __builtin_expf(x); }\n"
         "inline float tiny_erff(float x) { return __builtin_erff(x); }\n"
         "inline float tiny_tanhf(float x) { return __builtin_tanhf(x); }\n"
         "inline float tiny_logf(float x) { return __builtin_logf(x); }\n";
}
}  // namespace tiny::detail
