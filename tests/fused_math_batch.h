// fused_math_batch.h: the fused kernels' math functions applied to an array, as a generated
// kernel applies them. fused_math_test.cpp instantiates it with the test's own compiler flags,
// fused_math_fma.cpp with AVX2 and FMA enabled, so that both codes are measured (and shown to
// give the same bits: tiny_fma is a fused multiply-add in both).
#pragma once
#include <cstddef>

namespace tiny::testing::fused_math {

enum class Fn { kExp, kErf, kTanh, kLog, kLog1p, kExpm1, kGelu };

using UnaryFn = float (*)(float);
using Batch = void (*)(Fn, const float*, float*, size_t);

// One loop per function, each of the shape `out[i] = f(in[i])` that the compiler vectorises.
// Each includer passes its own copies of the functions, so the instantiations differ by name.
template <UnaryFn Exp, UnaryFn Erf, UnaryFn Tanh, UnaryFn Log, UnaryFn Log1p, UnaryFn Expm1,
          UnaryFn Gelu>
void apply(Fn fn, const float* __restrict in, float* __restrict out, size_t n) {
  switch (fn) {
    case Fn::kExp:
      for (size_t i = 0; i < n; ++i) out[i] = Exp(in[i]);
      break;
    case Fn::kErf:
      for (size_t i = 0; i < n; ++i) out[i] = Erf(in[i]);
      break;
    case Fn::kTanh:
      for (size_t i = 0; i < n; ++i) out[i] = Tanh(in[i]);
      break;
    case Fn::kLog:
      for (size_t i = 0; i < n; ++i) out[i] = Log(in[i]);
      break;
    case Fn::kLog1p:
      for (size_t i = 0; i < n; ++i) out[i] = Log1p(in[i]);
      break;
    case Fn::kExpm1:
      for (size_t i = 0; i < n; ++i) out[i] = Expm1(in[i]);
      break;
    case Fn::kGelu:
      for (size_t i = 0; i < n; ++i) out[i] = Gelu(in[i]);
      break;
  }
}

// fused_math_fma.cpp's batch, built on x86-64 only (TINY_FUSED_MATH_FMA); call it only where the
// CPU has AVX2 and FMA.
extern const Batch kFmaBatch;

}  // namespace tiny::testing::fused_math
