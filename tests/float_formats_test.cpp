// Float formats: every bit pattern of float16, bfloat16, both fp8 formats and fp4 decoded, and
// millions of float32 values encoded, compared with the CUDA toolkit's own host-side conversions
// (cuda_fp16.h, cuda_bf16.h, cuda_fp8.h, cuda_fp4.h compile and run on the CPU); finfo against
// PyTorch's values; NVFP4's block scaling.
#include <cstring>

#include "test_util.h"

#ifdef TINY_CUDA_HEADERS
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp4.h>
#include <cuda_fp8.h>
#endif

using namespace tiny;
using namespace tiny::testing;

namespace {

#define REQUIRE_CUDA_HEADERS()                                          \
  do {                                                                  \
    if (!kHaveCudaHeaders)                                              \
      GTEST_SKIP() << "the CUDA toolkit's headers were not found at "   \
                      "configure time; the reference is not available"; \
  } while (0)

#ifdef TINY_CUDA_HEADERS
constexpr bool kHaveCudaHeaders = true;
float cuda_half_to_float(uint16_t bits) {
  __half_raw r;
  r.x = bits;
  return __half2float(__half(r));
}
#else
constexpr bool kHaveCudaHeaders = false;
#endif

// float32 values that exercise every path: random bit patterns over the whole range and near a
// format's range, plus the edges (zeros, infinities, NaN, ties, overflow thresholds, subnormals).
std::vector<float> probe_values(std::mt19937_64& rng, const FloatFormat& f, int count) {
  std::vector<float> v = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN};
  const FInfo info = f.info();
  for (double base : {info.max, info.smallest_normal, info.smallest_subnormal, 1.0, 0.5}) {
    for (double k : {0.5, 0.75, 1.0, 1.0 + info.eps / 2, 1.0 + info.eps, 1.5, 1.0 + 0.75 * info.eps,
                     1.0 - info.eps / 4}) {
      v.push_back(static_cast<float>(base * k));
      v.push_back(static_cast<float>(-base * k));
    }
  }
  std::uniform_int_distribution<uint32_t> bits;
  const int emax = static_cast<int>(std::log2(info.max)) + 2,
            emin = static_cast<int>(std::log2(info.smallest_subnormal)) - 2;
  for (int i = 0; i < count; ++i) {
    uint32_t b = bits(rng);
    if (i % 2 == 0) {  // half of them near the format's range
      const int e = std::clamp(emin + static_cast<int>(b % static_cast<uint32_t>(emax - emin + 1)),
                               -149, 127);
      const uint32_t field = e < -126 ? 0 : static_cast<uint32_t>(e + 127);
      b = (b & 0x807fffffu) | (field << 23);
    }
    float f;
    std::memcpy(&f, &b, 4);
    v.push_back(f);
  }
  return v;
}

bool same_value(double a, double b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

}  // namespace

TEST(Ch05_Floats, FinfoIsComputedFromTheLayoutAndMatchesPyTorch) {
  // tests/fixtures/pytorch_facts.txt, section 4 (torch.finfo, measured).
  const FInfo f32 = finfo(kFloat32), f16 = finfo(kFloat16), bf = finfo(kBFloat16),
              f64 = finfo(kFloat64);
  EXPECT_EQ(f32.max, 3.4028234663852886e+38);
  EXPECT_EQ(f32.smallest_normal, 1.1754943508222875e-38);
  EXPECT_EQ(f32.smallest_subnormal, 1.401298464324817e-45);
  EXPECT_EQ(f32.eps, 1.1920928955078125e-07);
  EXPECT_EQ(f16.max, 65504.0);
  EXPECT_EQ(f16.smallest_normal, 6.103515625e-05);
  EXPECT_EQ(f16.smallest_subnormal, 5.960464477539063e-08);
  EXPECT_EQ(f16.eps, 0.0009765625);
  EXPECT_EQ(bf.max, 3.3895313892515355e+38);
  EXPECT_EQ(bf.smallest_subnormal, 9.183549615799121e-41);
  EXPECT_EQ(bf.eps, 0.0078125);
  EXPECT_EQ(f64.max, 1.7976931348623157e+308);
  EXPECT_EQ(f64.eps, 2.220446049250313e-16);
  EXPECT_EQ(f16.resolution, 0.001);
  EXPECT_EQ(bf.resolution, 0.01);
  EXPECT_NEAR(f32.resolution, 1e-6, 1e-21);
  EXPECT_TRUE(throws_with<TypeError>([] { finfo(kInt64); },
                                     "torch.finfo() requires a floating point input type"));
  // The small formats (section 4's computed table).
  const FInfo e4 = kFormatE4M3.info(), e5 = kFormatE5M2.info(), e2 = kFormatE2M1.info();
  EXPECT_EQ(e4.max, 448.0);
  EXPECT_EQ(e4.eps, 0.125);
  EXPECT_EQ(e4.smallest_normal, 0.015625);
  EXPECT_EQ(e4.smallest_subnormal, 0.001953125);
  EXPECT_EQ(e4.resolution, 1.0);
  EXPECT_FALSE(e4.has_inf);
  EXPECT_EQ(e5.max, 57344.0);
  EXPECT_EQ(e5.eps, 0.25);
  EXPECT_EQ(e5.smallest_normal, 6.103515625e-05);
  EXPECT_EQ(e5.smallest_subnormal, 1.52587890625e-05);
  EXPECT_TRUE(e5.has_inf);
  EXPECT_EQ(e2.max, 6.0);
  EXPECT_EQ(e2.smallest_normal, 1.0);
  EXPECT_EQ(e2.smallest_subnormal, 0.5);
  EXPECT_FALSE(e2.has_nan);
}

TEST(Ch05_Floats, Fp4HasTheSixteenValuesOfNvfp4) {  // seed document 004, section 3.3.1
  std::vector<double> values;
  for (uint32_t p = 0; p < 16; ++p) values.push_back(kFormatE2M1.decode(p));
  EXPECT_EQ(values, (std::vector<double>{0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3,
                                         -4, -6}));
}

TEST(Ch05_Floats, Fp8MatchesPyTorchsCasts) {  // c10's Float8_e4m3fn.h / Float8_e5m2.h casts
  // (computed from c10's conversion code, not measured: torch 1.13, which measured
  // tests/fixtures/pytorch_facts.txt, has no float8 dtypes, so its section 4 has none)
  const std::tuple<float, double, double> cases[] = {
      {0.1f, 0.1015625, 0.09375}, {1.1f, 1.125, 1.0},   {3.14159f, 3.25, 3.0},
      {240.0f, 240.0, 256.0},     {500.0f, NAN, 512.0}, {57344.0f, NAN, 57344.0},
      {70000.0f, NAN, INFINITY},  {1e-8f, 0.0, 0.0},    {464.0f, 448.0, 448.0},
      {470.0f, NAN, 448.0}};
  for (const auto& [x, e4m3, e5m2] : cases) {
    EXPECT_TRUE(same_value(kFormatE4M3.round(x), e4m3))
        << repr(x) << " -> " << repr(kFormatE4M3.round(x));
    EXPECT_TRUE(same_value(kFormatE5M2.round(x), e5m2))
        << repr(x) << " -> " << repr(kFormatE5M2.round(x));
  }
  EXPECT_EQ(kFormatE4M3.encode(0.1f), 0x1Du);
  EXPECT_EQ(kFormatE5M2.encode(0.1f), 0x2Eu);
  EXPECT_EQ(kFormatE4M3.round(500.0f, Overflow::Saturate), 448.0);
  EXPECT_EQ(kFormatE5M2.round(70000.0f, Overflow::Saturate), 57344.0);
}

TEST(Ch05_Floats, EveryPatternRoundTrips) {
  // Decoding then encoding any non-NaN pattern gives it back, in every format: the codec is a
  // bijection on the representable values.
  for (const FloatFormat& f :
       {kFormatFloat16, kFormatBFloat16, kFormatE4M3, kFormatE5M2, kFormatE2M1}) {
    for (uint32_t p = 0; p < (1u << f.bits()); ++p) {
      const double v = f.decode(p);
      if (std::isnan(v)) continue;
      ASSERT_EQ(f.encode(static_cast<float>(v)), p) << f.name << " pattern " << p;
    }
  }
}

TEST(Ch05_Floats, GenericCodecAgreesWithTheFastHalfAndBFloat16Paths) {
  TINY_SEEDED(rng);
  for (float x : probe_values(rng, kFormatFloat16, 200000)) {
    if (std::isnan(x)) continue;
    ASSERT_EQ(kFormatFloat16.encode(x), float_to_half_bits(x)) << repr(x);
  }
  for (float x : probe_values(rng, kFormatBFloat16, 200000)) {
    if (std::isnan(x)) continue;
    ASSERT_EQ(kFormatBFloat16.encode(x), float_to_bfloat16_bits(x)) << repr(x);
  }
}

TEST(Ch05_Floats, HalfAndBFloat16MatchTheCudaToolkit) {
  REQUIRE_CUDA_HEADERS();
#ifdef TINY_CUDA_HEADERS
  for (uint32_t p = 0; p < 65536; ++p) {
    const uint16_t b = static_cast<uint16_t>(p);
    ASSERT_TRUE(same_value(half_bits_to_float(b), cuda_half_to_float(b))) << p;
    __nv_bfloat16_raw r;
    r.x = b;
    ASSERT_TRUE(same_value(bfloat16_bits_to_float(b), __bfloat162float(__nv_bfloat16(r)))) << p;
  }
  TINY_SEEDED(rng);
  for (float x : probe_values(rng, kFormatFloat16, 2000000)) {
    if (std::isnan(x))
      continue;  // NaN payloads differ by implementation; NaN-ness is checked above
    ASSERT_EQ(float_to_half_bits(x), static_cast<__half_raw>(__float2half_rn(x)).x) << repr(x);
  }
  for (float x : probe_values(rng, kFormatBFloat16, 2000000)) {
    if (std::isnan(x)) continue;
    ASSERT_EQ(float_to_bfloat16_bits(x), static_cast<__nv_bfloat16_raw>(__float2bfloat16_rn(x)).x)
        << repr(x);
  }
#endif
}

TEST(Ch05_Floats, Fp8MatchesTheCudaToolkitInBothOverflowModes) {
  REQUIRE_CUDA_HEADERS();
#ifdef TINY_CUDA_HEADERS
  const std::pair<FloatFormat, __nv_fp8_interpretation_t> formats[] = {{kFormatE4M3, __NV_E4M3},
                                                                       {kFormatE5M2, __NV_E5M2}};
  TINY_SEEDED(rng);
  for (const auto& [f, kind] : formats) {
    for (uint32_t p = 0; p < 256; ++p) {
      const float cuda =
          cuda_half_to_float(__nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(p), kind).x);
      ASSERT_TRUE(same_value(f.decode(p), cuda)) << f.name << " pattern " << p;
    }
    for (float x : probe_values(rng, f, 1000000)) {
      for (auto [mode, sat] : {std::pair{Overflow::Saturate, __NV_SATFINITE},
                               std::pair{Overflow::NonFinite, __NV_NOSAT}}) {
        const uint32_t ours = f.encode(x, mode), theirs = __nv_cvt_float_to_fp8(x, sat, kind);
        if (std::isnan(x)) ASSERT_TRUE(std::isnan(f.decode(ours)) && std::isnan(f.decode(theirs)));
        else
          ASSERT_EQ(ours, theirs) << f.name << " x = " << repr(x)
                                  << (mode == Overflow::Saturate ? " saturating" : "");
      }
    }
  }
#endif
}

TEST(Ch05_Floats, Fp4MatchesTheCudaToolkit) {
  REQUIRE_CUDA_HEADERS();
#ifdef TINY_CUDA_HEADERS
  for (uint32_t p = 0; p < 16; ++p)
    ASSERT_EQ(kFormatE2M1.decode(p),
              cuda_half_to_float(
                  __nv_cvt_fp4_to_halfraw(static_cast<__nv_fp4_storage_t>(p), __NV_E2M1).x))
        << p;
  TINY_SEEDED(rng);
  for (float x : probe_values(rng, kFormatE2M1, 1000000)) {
    const uint32_t theirs = __nv_cvt_float_to_fp4(x, __NV_E2M1, cudaRoundNearest);
    ASSERT_EQ(kFormatE2M1.encode(x, Overflow::Saturate), theirs) << "x = " << repr(x);
  }
#endif
}

TEST(Ch05_Floats, TensorsConvertAndComputeInFloat32) {
  // 16-bit arithmetic: computed in float32, rounded once (tests/fixtures/pytorch_facts.txt,
  // section 6).
  Tensor w = scalar_tensor(1.0, kBFloat16);
  const Tensor step = scalar_tensor(1e-4, kBFloat16);
  for (int i = 0; i < 10000; ++i) w = w + step;
  EXPECT_EQ(w.item(), 1.0);
  EXPECT_EQ(round_to_format(tensor({0.1, 500.0}), kFormatE4M3, Overflow::Saturate).tolist(),
            (std::vector<double>{0.1015625, 448.0}));
  EXPECT_TRUE(throws_with<TypeError>([] { round_to_format(tensor({1}), kFormatE4M3); },
                                     "not implemented for 'Long'"));
}

TEST(Ch05_Floats, Nvfp4BlockScalesFollowEachBlock) {
  TINY_SEEDED(rng);
  // Blocks of very different magnitudes: one scale for all flushes the small blocks to zero,
  // a scale per block keeps every block to E2M1's relative precision.
  std::vector<float> v(256);
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<float>(std::ldexp(std::uniform_real_distribution<double>(-1, 1)(rng),
                                         static_cast<int>(i / 16) - 8));
  const Tensor x = from_vector(v, {16, 16});
  const NvFp4Tensor q = nvfp4_quantize(x);
  EXPECT_EQ(q.codes.size(), 256u);
  EXPECT_EQ(q.block_scales.size(), 16u);
  EXPECT_EQ(q.storage_bytes(), 128 + 16 + 4);
  const Tensor back = nvfp4_dequantize(q);
  EXPECT_EQ(back.shape(), x.shape());
  // Each value is within half an E2M1 step of the block's grid: |error| <= scale * 1 (the
  // largest gap between E2M1 values is 2, at 4..6) / 2, and scale <= block amax / 6 rounded
  // up by at most one E4M3 step (12.5%).
  for (int64_t b = 0; b < 16; ++b) {
    double amax = 0;
    for (int64_t i = 0; i < 16; ++i) amax = std::max(amax, std::fabs(x.at({b, i})));
    for (int64_t i = 0; i < 16; ++i)
      ASSERT_LE(std::fabs(back.at({b, i}) - x.at({b, i})), amax / 6 * 1.125 + 1e-30)
          << b << "," << i;
  }
  const Tensor single = fp4_single_scale(x);
  EXPECT_GT(sum(single == 0.0).item(), 100);  // most of the small blocks vanish
  EXPECT_LT(sum(back == 0.0).item(), sum(single == 0.0).item());
}

// Tensor conversions take vectorised paths (F16C instructions where the processor has them,
// AVX2 or portable loops otherwise); they must agree bit for bit with the scalar routines above.
TEST(Ch05_Floats, TensorConversionsAgreeWithTheScalarRoutines) {
  TINY_SEEDED(rng);
  std::vector<float> values;
  for (float v : probe_values(rng, kFormatFloat16, 300000))
    if (!std::isnan(v)) values.push_back(v);  // NaN payloads may differ; NaN-ness is checked below
  const Tensor x = from_vector(values, {static_cast<int64_t>(values.size())});
  const Tensor h = x.to(kFloat16), b = x.to(kBFloat16);
  const Half* ph = h.data<Half>();
  const BFloat16* pb = b.data<BFloat16>();
  for (size_t i = 0; i < values.size(); ++i) {
    ASSERT_EQ(ph[i].bits, float_to_half_bits(values[i])) << repr(values[i]);
    ASSERT_EQ(pb[i].bits, float_to_bfloat16_bits(values[i])) << repr(values[i]);
  }
  const Tensor hb = h.to(kFloat32), bb = b.to(kFloat32);
  for (size_t i = 0; i < values.size(); ++i) {
    ASSERT_EQ(hb.data<float>()[i], half_bits_to_float(ph[i].bits));
    ASSERT_EQ(bb.data<float>()[i], bfloat16_bits_to_float(pb[i].bits));
  }
  const Tensor nans = full({64}, NAN).to(kFloat16).to(kFloat32);
  EXPECT_TRUE(std::isnan(nans.tolist()[63]));
}
