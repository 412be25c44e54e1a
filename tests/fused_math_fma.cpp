// The fused kernels' math functions compiled as a generated kernel is on an AVX2 machine: AVX2
// vectors and fused multiply-add instructions, and no other contraction (-mavx2 -mfma
// -ffp-contract=off, set in tests/CMakeLists.txt). fused_math_test.cpp measures this copy beside its own.
#include "fused_math_batch.h"

namespace tiny::testing::fused_math {
namespace fma {
#include "fusion/fused_math.inc"
}  // namespace fma

// A constant, not a function: no code of this file runs before the test has checked that the
// CPU has AVX2 and FMA.
extern const Batch kFmaBatch =
    &apply<fma::tiny_expf, fma::tiny_erff, fma::tiny_tanhf, fma::tiny_logf, fma::tiny_log1pf,
           fma::tiny_expm1f, fma::tiny_geluf>;

}  // namespace tiny::testing::fused_math
