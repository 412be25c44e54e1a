// The fused kernels' math functions (common/src/fusion/fused_math.inc): their error in ulps
// against the long double functions over millions of float32 values spread across the whole
// range, their special values exactly, and the copy of the file's text that the library embeds
// for the code generator.
//
// Each function is measured as two codes: compiled with this test's flags, and, on an x86-64
// CPU with AVX2 and FMA, as fused_math_fma.cpp compiles it (AVX2 vectors and fused
// multiply-adds, as a generated kernel gets them from -march=native). Both run through
// vectorised loops (fused_math_batch.h).
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "fused_math_batch.h"
#include "fusion/fused_math.h"
#include "test_util.h"

namespace tiny::testing::fused_math {
namespace plain {
#include "fusion/fused_math.inc"
}  // namespace plain

namespace {

float from_bits(uint32_t u) { return __builtin_bit_cast(float, u); }
uint32_t to_bits(float x) { return __builtin_bit_cast(uint32_t, x); }

struct Build {
  std::string name;
  Batch batch;
};

std::vector<Build> builds() {
  std::vector<Build> out{
      {"test flags", &apply<plain::tiny_expf, plain::tiny_erff, plain::tiny_tanhf, plain::tiny_logf,
                            plain::tiny_log1pf, plain::tiny_expm1f, plain::tiny_geluf>}};
#ifdef TINY_FUSED_MATH_FMA
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    out.push_back({"avx2+fma", kFmaBatch});
#endif
  return out;
}

std::vector<float> run(const Build& build, Fn fn, const std::vector<float>& in) {
  std::vector<float> out(in.size());
  build.batch(fn, in.data(), out.data(), in.size());
  return out;
}

// What the test knows of one function: its long double reference, the interval where the
// reference is used (outside it the result is exact and given by `outside`), and the largest
// error allowed, in ulps, for results in the normal range.
struct Spec {
  Fn fn;
  const char* name;
  long double (*reference)(long double);
  float lo, hi;
  float (*outside)(float);
  double max_ulp;
};

const Spec kExp{Fn::kExp, "tiny_expf", [](long double x) { return expl(x); },
                -104.0f,  89.0f,       [](float x) { return x < 0 ? 0.0f : INFINITY; },
                1.0};
const Spec kErf{Fn::kErf, "tiny_erff", [](long double x) { return erfl(x); },
                -10.0f,   10.0f,       [](float x) { return std::copysign(1.0f, x); },
                1.5};
// Measured over every float in [0, 9.2]: tanh 0.999 ulp (at 0.8746, the end of the polynomial),
// erf 1.126 ulp (at 3.8495, in the far polynomial). PyTorch's SLEEF u10 tanh has the bound of
// 1 ulp; its vectorised erf is a polynomial of its own, without a stated bound.
const Spec kTanh{Fn::kTanh, "tiny_tanhf", [](long double x) { return tanhl(x); },
                 -10.0f,    10.0f,        [](float x) { return std::copysign(1.0f, x); },
                 1.0};
// log1p: from -1 (exclusive) to the largest float; expm1: from where it rounds to -1 to where it
// overflows. Measured over every 5th and 17th float: expm1 0.89 ulp, log1p 0.80 ulp.
const Spec kLog1p{Fn::kLog1p,
                  "tiny_log1pf",
                  [](long double x) { return log1pl(x); },
                  -0x1.fffffep-1f,
                  FLT_MAX,
                  [](float x) { return x == -1 ? -INFINITY : x == INFINITY ? INFINITY : NAN; },
                  1.0};
const Spec kExpm1{Fn::kExpm1, "tiny_expm1f", [](long double x) { return expm1l(x); },
                  -17.5f,     88.72283f,     [](float x) { return x < 0 ? -1.0f : INFINITY; },
                  1.0};
// log: every positive finite float, subnormals included, against logl; the rest is special.
const Spec kLog{Fn::kLog,
                "tiny_logf",
                [](long double x) { return logl(x); },
                0x1p-149f,
                FLT_MAX,
                [](float x) { return x == 0 ? -INFINITY : x == INFINITY ? INFINITY : NAN; },
                1.0};

// GELU's accuracy has a test of its own (the error is absolute below zero); this Spec serves
// the tests that run every function.
const Spec kGelu{
    Fn::kGelu, "tiny_geluf", [](long double x) { return 0.5L * x * erfcl(-x / sqrtl(2.0L)); },
    -5.42f,    5.42f,        [](float x) { return x < 0 ? x * 0.0f : x; },
    2.0};

// The value of the last place of the float nearest r (in the binade of |r|; 2^-149 among the
// subnormals).
long double ulp_of(long double r) {
  r = fabsl(r);
  if (r < 0x1p-126L) return 0x1p-149L;
  int e;
  frexpl(r, &e);  // r = m 2^e with 0.5 <= m < 1
  return ldexpl(1.0L, e - 24);
}

// Every 1021st float32 bit pattern from a seeded offset (2^22 values over the whole range, NaNs
// included, a different set each run), and every float within 2^12 places of the given points.
std::vector<float> samples(uint64_t seed, std::initializer_list<float> points) {
  std::vector<float> xs;
  xs.reserve((1u << 22) + 2 * 8193 * points.size());
  for (uint64_t u = seed % 1021; u < (1ull << 32); u += 1021) xs.push_back(from_bits(uint32_t(u)));
  for (float p : points)
    for (int sign = 0; sign < 2; ++sign)
      for (int64_t k = -4096; k <= 4096; ++k) {
        const int64_t u = int64_t(to_bits(p)) + k;
        if (u >= 0 && u < (int64_t(1) << 31))
          xs.push_back(from_bits(uint32_t(u) | uint32_t(sign) << 31));
      }
  return xs;
}

// Compares each build of `spec` with the reference on `xs`: within `max_ulp` for normal
// results, within one unit of 2^-149 for subnormal ones, exact outside the reference's interval
// and for NaN arguments. The reference is computed once per value for all builds.
void check_accuracy(const Spec& spec, const std::vector<float>& xs) {
  struct Result {
    Build build;
    std::vector<float> ys;
    double worst = 0, worst_subnormal = 0;
    float worst_x = 0, worst_subnormal_x = 0;
    int failures = 0;
  };
  std::vector<Result> results;
  for (const Build& build : builds()) results.push_back({build, run(build, spec.fn, xs)});
  for (size_t i = 0; i < xs.size(); ++i) {
    const float x = xs[i];
    const bool in_range = x >= spec.lo && x <= spec.hi;  // false for a NaN
    const long double ref = in_range ? spec.reference(x) : 0;
    for (Result& r : results) {
      const float y = r.ys[i];
      auto fail = [&](const std::string& want) {
        if (++r.failures <= 10)
          ADD_FAILURE() << spec.name << "(" << strprintf("%a", double(x))
                        << ") = " << strprintf("%a", double(y)) << ", want " << want << " ("
                        << r.build.name << ")";
      };
      if (std::isnan(x)) {
        if (!std::isnan(y)) fail("NaN");
      } else if (!in_range) {
        const float want = spec.outside(x);
        if (std::isnan(want) ? !std::isnan(y) : to_bits(y) != to_bits(want))
          fail(strprintf("%a", double(want)));
      } else if (std::isinf(float(ref))) {  // overflows when rounded to float
        if (y != float(ref)) fail(strprintf("%a", double(float(ref))));
      } else {
        const double err = double(fabsl(y - ref) / ulp_of(ref));
        if (!(err <= 1e30)) fail(strprintf("%La", ref));  // an infinity or NaN
        if (fabsl(ref) < 0x1p-126L) {
          if (err > r.worst_subnormal) {
            r.worst_subnormal = err;
            r.worst_subnormal_x = x;
          }
        } else if (err > r.worst) {
          r.worst = err;
          r.worst_x = x;
        }
      }
    }
  }
  for (const Result& r : results) {
    std::printf("%-10s %-10s max %.3f ulp at %a; subnormal results %.3f ulp at %a (%zu values)\n",
                spec.name, r.build.name.c_str(), r.worst, double(r.worst_x), r.worst_subnormal,
                double(r.worst_subnormal_x), xs.size());
    EXPECT_LE(r.worst, spec.max_ulp)
        << spec.name << " at " << strprintf("%a", double(r.worst_x)) << " (" << r.build.name << ")";
    EXPECT_LE(r.worst_subnormal, 1.0)
        << spec.name << " at " << strprintf("%a", double(r.worst_subnormal_x)) << " ("
        << r.build.name << ")";
  }
}

TEST(Ch09_FusedMath, ExpIsWithinOneUlp) {
  TINY_SEEDED(rng);
  // The overflow and underflow thresholds, the smallest normal result, and the switch of n.
  check_accuracy(kExp, samples(rng(), {88.72284f, -87.33655f, -103.97208f, 0.3466f, 1e-7f}));
}

TEST(Ch09_FusedMath, ErfIsWithinOneAndAHalfUlps) {
  TINY_SEEDED(rng);
  // The two polynomials' boundary, where the far one ends (3.92), where erf rounds to 1, and the
  // smallest values.
  check_accuracy(kErf, samples(rng(), {0.875f, 3.92f, 3.9192059f, 1e-30f, 0x1p-126f}));
}

TEST(Ch09_FusedMath, TanhIsWithinOneUlp) {
  TINY_SEEDED(rng);
  check_accuracy(kTanh, samples(rng(), {0.875f, 9.1f, 9.010913f, 1e-20f, 0x1p-126f}));
}

TEST(Ch09_FusedMath, Log1pIsWithinOneUlp) {
  TINY_SEEDED(rng);
  // Where 1 + x stops being exact, the edges of log's mantissa interval, near -1, tiny values.
  check_accuracy(kLog1p, samples(rng(), {0x1p-24f, -0.29289323f, 0.41421357f, -0.99999f, 1e-30f,
                                         1.0f}));
}

TEST(Ch09_FusedMath, Expm1IsWithinOneUlp) {
  TINY_SEEDED(rng);
  // The switches of n (at +-ln2/2 and +-3 ln2/2), where the result rounds to -1, overflow,
  // and the tiny arguments.
  check_accuracy(kExpm1, samples(rng(), {0.34657359f, 1.0397208f, 17.328680f, 88.72283f, 1e-7f,
                                         0x1p-25f}));
}

// GELU, x Phi(x), against 0.5 x erfc(-x / sqrt 2) in long double (erfc: no cancellation for
// negative x). For x > 0 the error is relative, in ulps. For x < 0 it is absolute: the result
// there is x/2 + x^2 P(x^2) with the two terms nearly cancelling, as x/2 (1 + erf(x / sqrt 2))
// cancels in PyTorch's formula, whose float32 error there reaches 1.8e-7 even with a correctly
// rounded erf. Beyond |x| = 5.42 the result is x, or x * 0.
TEST(Ch09_FusedMath, GeluIsWithinTwoUlpsAboveZeroAndNearlyExactBelow) {
  TINY_SEEDED(rng);
  const std::vector<float> xs =
      samples(rng(), {5.42f, 1.0f, 0.375f, 1.43f, 3.0f, 1e-30f, 0x1p-126f});
  for (const Build& build : builds()) {
    const std::vector<float> ys = run(build, Fn::kGelu, xs);
    double worst_ulp = 0, worst_abs = 0;
    float worst_ulp_x = 0, worst_abs_x = 0;
    int failures = 0;
    for (size_t i = 0; i < xs.size(); ++i) {
      const float x = xs[i], y = ys[i];
      auto fail = [&](const std::string& want) {
        if (++failures <= 10)
          ADD_FAILURE() << "tiny_geluf(" << strprintf("%a", double(x))
                        << ") = " << strprintf("%a", double(y)) << ", want " << want << " ("
                        << build.name << ")";
      };
      if (std::isnan(x)) {
        if (!std::isnan(y)) fail("NaN");
        continue;
      }
      if (x > kGelu.hi || x < kGelu.lo) {
        const float want = kGelu.outside(x);
        if (std::isnan(want) ? !std::isnan(y) : to_bits(y) != to_bits(want))
          fail(strprintf("%a", double(want)));
        continue;
      }
      const long double ref = kGelu.reference(x);
      const double ulps = double(fabsl(y - ref) / ulp_of(ref));
      if (x >= 0) {
        if (ulps > worst_ulp) worst_ulp = ulps, worst_ulp_x = x;
      } else if (double err = double(fabsl(y - ref)); err > worst_abs) {
        worst_abs = err, worst_abs_x = x;
      }
      // Near zero GELU(x) = x/2 + 0.4 x^2 to full relative precision, of either sign.
      if (x > -0.125f && ulps > 2) fail(strprintf("%La, within 2 ulps", ref));
    }
    std::printf("tiny_geluf %-10s x >= 0: max %.3f ulp at %a; x < 0: max error %.3g at %a\n",
                build.name.c_str(), worst_ulp, double(worst_ulp_x), worst_abs, double(worst_abs_x));
    EXPECT_LE(worst_ulp, kGelu.max_ulp) << build.name;
    EXPECT_LE(worst_abs, 3.5e-7) << build.name;
  }
}

// Compiled with FMA instructions or without them, every function gives the same bits: tiny_fma
// is fused in both (a call to fmaf where the instruction is not enabled). The eager kernels
// rely on this to give the generated kernels' results on every processor.
TEST(Ch09_FusedMath, EveryBuildGivesTheSameBits) {
  TINY_SEEDED(rng);
  const std::vector<float> xs = samples(rng(), {0.875f, 0.34657359f, 1.0f});
  const std::vector<Build> all = builds();
  if (all.size() < 2) GTEST_SKIP() << "only one build on this processor (no AVX2 and FMA)";
  for (Fn fn : {Fn::kExp, Fn::kErf, Fn::kTanh, Fn::kLog, Fn::kLog1p, Fn::kExpm1, Fn::kGelu}) {
    const std::vector<float> a = run(all[0], fn, xs), b = run(all[1], fn, xs);
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < xs.size(); ++i)
      if (to_bits(a[i]) != to_bits(b[i]) && !(std::isnan(a[i]) && std::isnan(b[i])) && bad++ == 0)
        first = i;
    EXPECT_EQ(bad, 0u) << "function " << static_cast<int>(fn) << " at "
                       << strprintf("%a", double(xs[first])) << ": " << all[0].name << " "
                       << strprintf("%a", double(a[first])) << ", " << all[1].name << " "
                       << strprintf("%a", double(b[first]));
  }
}

TEST(Ch09_FusedMath, LogIsWithinOneUlp) {
  TINY_SEEDED(rng);
  // 1 (where log is f itself), the edges of the mantissa's interval, the subnormals' start.
  check_accuracy(kLog, samples(rng(), {1.0f, 0.70710677f, 1.4142135f, 0x1p-126f, 2.0f}));
}

// Small arguments: erf(x) = 1.128 x and tanh(x) = x to full relative precision, down to the
// subnormals, so an absolute error bound alone would not do.
TEST(Ch09_FusedMath, SmallArgumentsKeepTheirRelativeAccuracy) {
  std::vector<float> xs;
  for (int e = -149; e <= -1; ++e) xs.push_back(std::ldexp(1.37f, e));
  for (const Build& build : builds()) {
    SCOPED_TRACE(build.name);
    const std::vector<float> erf = run(build, Fn::kErf, xs), tanh = run(build, Fn::kTanh, xs);
    for (size_t i = 0; i < xs.size(); ++i) {
      const long double x = xs[i];
      EXPECT_LE(fabsl(erf[i] - erfl(x)), 2 * ulp_of(erfl(x))) << strprintf("erf(%a)", xs[i]);
      EXPECT_LE(fabsl(tanh[i] - tanhl(x)), 2 * ulp_of(tanhl(x))) << strprintf("tanh(%a)", xs[i]);
    }
  }
}

// (argument, result) pairs that must come out exactly, bit for bit (any NaN for a NaN).
void check_exact(Fn fn, const char* name, const std::vector<std::pair<float, float>>& cases) {
  std::vector<float> xs(cases.size());
  for (size_t i = 0; i < cases.size(); ++i) xs[i] = cases[i].first;
  for (const Build& build : builds()) {
    const std::vector<float> ys = run(build, fn, xs);
    for (size_t i = 0; i < cases.size(); ++i) {
      const float want = cases[i].second;
      const bool ok = std::isnan(want) ? std::isnan(ys[i]) : to_bits(ys[i]) == to_bits(want);
      EXPECT_TRUE(ok) << name << "(" << strprintf("%a", double(xs[i]))
                      << ") = " << strprintf("%a", double(ys[i])) << ", want "
                      << strprintf("%a", double(want)) << " (" << build.name << ")";
    }
  }
}

const float kNaN = NAN, kInf = INFINITY;
const float kNegNaN = from_bits(0xffc00000u), kSignalingNaN = from_bits(0x7f800001u);

TEST(Ch09_FusedMath, ExpSpecialValues) {
  check_exact(Fn::kExp, "tiny_expf",
              {{kNaN, kNaN},
               {kNegNaN, kNaN},
               {kSignalingNaN, kNaN},
               {kInf, kInf},
               {-kInf, 0.0f},
               {0.0f, 1.0f},
               {-0.0f, 1.0f},
               {1000.0f, kInf},
               {-1000.0f, 0.0f},
               {FLT_MAX, kInf},
               {-FLT_MAX, 0.0f},
               // 0x1.62e42ep+6 is the largest argument with a finite result, e^x = 0x1.ffff08p+127
               {0x1.62e42ep+6f, 0x1.ffff08p+127f},
               {0x1.62e430p+6f, kInf},
               // the smallest subnormal result, 2^-149, and the first argument that gives 0
               {-103.9f, 0x1p-149f},
               {-103.973f, 0.0f},
               {-104.0f, 0.0f}});
}

TEST(Ch09_FusedMath, ErfSpecialValues) {
  check_exact(Fn::kErf, "tiny_erff",
              {{kNaN, kNaN},
               {kNegNaN, kNaN},
               {kSignalingNaN, kNaN},
               {kInf, 1.0f},
               {-kInf, -1.0f},
               {0.0f, 0.0f},
               {-0.0f, -0.0f},
               {4.0f, 1.0f},
               {-4.0f, -1.0f},
               {3.95f, 1.0f},
               {FLT_MAX, 1.0f},
               {-FLT_MAX, -1.0f},
               {0x1p-149f, 0x1p-149f},
               {-0x1p-149f, -0x1p-149f}});
}

TEST(Ch09_FusedMath, TanhSpecialValues) {
  check_exact(Fn::kTanh, "tiny_tanhf",
              {{kNaN, kNaN},
               {kNegNaN, kNaN},
               {kSignalingNaN, kNaN},
               {kInf, 1.0f},
               {-kInf, -1.0f},
               {0.0f, 0.0f},
               {-0.0f, -0.0f},
               {9.02f, 1.0f},
               {-9.1f, -1.0f},
               {20.0f, 1.0f},
               {FLT_MAX, 1.0f},
               {-FLT_MAX, -1.0f},
               {0x1p-149f, 0x1p-149f},
               {-1e-30f, -1e-30f}});
}

TEST(Ch09_FusedMath, Log1pSpecialValues) {
  check_exact(Fn::kLog1p, "tiny_log1pf",
              {{kNaN, kNaN},
               {kNegNaN, kNaN},
               {kInf, kInf},
               {-kInf, kNaN},
               {0.0f, 0.0f},
               {-0.0f, -0.0f},
               {-1.0f, -kInf},
               {-1.5f, kNaN},
               {0x1p-149f, 0x1p-149f},
               {-0x1p-149f, -0x1p-149f},
               {1e-30f, 1e-30f},
               {FLT_MAX, 0x1.62e430p+6f}});
}

TEST(Ch09_FusedMath, Expm1SpecialValues) {
  check_exact(Fn::kExpm1, "tiny_expm1f",
              {{kNaN, kNaN},
               {kNegNaN, kNaN},
               {kInf, kInf},
               {-kInf, -1.0f},
               {0.0f, 0.0f},
               {-0.0f, -0.0f},
               {0x1p-149f, 0x1p-149f},
               {-1e-30f, -1e-30f},
               {-18.0f, -1.0f},
               {-1000.0f, -1.0f},
               {89.0f, kInf},
               {FLT_MAX, kInf}});
}

TEST(Ch09_FusedMath, LogSpecialValues) {
  check_exact(Fn::kLog, "tiny_logf",
              {{kNaN, kNaN},
               {kNegNaN, kNaN},
               {kSignalingNaN, kNaN},
               {kInf, kInf},
               {-kInf, kNaN},
               {0.0f, -kInf},
               {-0.0f, -kInf},
               {-1.0f, kNaN},
               {-0x1p-149f, kNaN},
               {-FLT_MAX, kNaN},
               {1.0f, 0.0f},
               {2.0f, 0x1.62e43p-1f},
               {0x1p-149f, -0x1.9d1da0p+6f},
               {FLT_MAX, 0x1.62e430p+6f}});
}

TEST(Ch09_FusedMath, GeluSpecialValues) {
  check_exact(Fn::kGelu, "tiny_geluf",
              {{kNaN, kNaN},
               {kNegNaN, kNaN},
               {kInf, kInf},
               {-kInf, kNaN},  // -inf * 0, as x/2 (1 + erf(x / sqrt 2)) gives
               {0.0f, 0.0f},
               {-0.0f, -0.0f},
               {6.0f, 6.0f},
               {-6.0f, -0.0f},
               {FLT_MAX, FLT_MAX},
               {-FLT_MAX, -0.0f},
               // x/2 rounds to even: 2^-150 is halfway between 0 and 2^-149
               {0x1p-149f, 0.0f},
               {0x1p-148f, 0x1p-149f},
               {-0x1p-148f, -0x1p-149f}});
}

// A NaN, whatever its sign and payload, comes out a NaN: the bits of a NaN pass through the
// integer arithmetic of the range reductions, which must not turn them into a number. Every
// third payload of either sign (the step being odd, the low bits take every value).
TEST(Ch09_FusedMath, EveryNaNGivesNaN) {
  std::vector<float> xs;
  xs.reserve(size_t(1) << 23);
  for (uint32_t payload = 1; payload < (1u << 23); payload += 3)
    for (uint32_t sign : {0u, 0x80000000u}) xs.push_back(from_bits(sign | 0x7f800000u | payload));
  for (const Build& build : builds())
    for (const Spec* spec : {&kExp, &kErf, &kTanh, &kLog, &kLog1p, &kExpm1, &kGelu}) {
      const std::vector<float> ys = run(build, spec->fn, xs);
      size_t bad = 0, first = 0;
      for (size_t i = 0; i < ys.size(); ++i)
        if (!std::isnan(ys[i]) && bad++ == 0) first = i;
      EXPECT_EQ(bad, 0u) << spec->name << " (" << build.name
                         << "): " << strprintf("%08x", to_bits(xs[first])) << " gives "
                         << strprintf("%a", double(ys[first]));
    }
}

// The library hands the code generator the text of the very file this test compiles.
TEST(Ch09_FusedMath, TheLibraryEmbedsTheFileThisTestCompiles) {
  const std::string file = read_bytes(TINY_SOURCE_DIR "/common/src/fusion/fused_math.inc");
  ASSERT_FALSE(file.empty());
  const std::string embedded = tiny::detail::fused_math_source();
  EXPECT_EQ(embedded, file) << "rerun cmake: the build embeds fused_math.inc when it configures";
  for (const char* name : {"tiny_expf", "tiny_erff", "tiny_geluf", "tiny_tanhf", "tiny_logf"})
    EXPECT_NE(embedded.find(std::string("inline float ") + name + "(float x)"), std::string::npos)
        << name;
  EXPECT_EQ(embedded.find("#include"), std::string::npos) << "the text must need no headers";
}

}  // namespace
}  // namespace tiny::testing::fused_math
