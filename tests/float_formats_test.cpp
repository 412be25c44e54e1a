// Float formats: every bit pattern of float16, bfloat16, both fp8 formats and fp4 decoded, and
// millions of float32 values encoded, compared with the CUDA toolkit's own host-side conversions
// (cuda_fp16.h, cuda_bf16.h, cuda_fp8.h, cuda_fp4.h compile and run on the CPU); finfo against
// PyTorch's values; NVFP4's block scaling.
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

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
  for (const FloatFormat& f : {kFormatFloat16, kFormatBFloat16, kFormatE4M3, kFormatE5M2,
                               kFormatE2M1, kFormatE8M0, FloatFormat{"e2m0", 2, 0, Specials::None},
                               FloatFormat{"e3m0fn", 3, 0, Specials::AllOnesIsNaN},
                               FloatFormat{"e1m2", 1, 2, Specials::None}}) {
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

// ml_dtypes (numpy's and JAX's implementation of the small formats) on every code of E8M0,
// E4M3, E5M2 and E2M1, and on float32 values at, beside and between all of their values
// (tests/fixtures/float8_ml_dtypes.py). Its casts overflow to infinity or NaN: Overflow::NonFinite.
TEST(Ch05_Floats, SmallFormatsMatchMlDtypesOnEveryCode) {
  std::ifstream in(std::string(TINY_SOURCE_DIR) + "/tests/fixtures/float8_ml_dtypes.txt");
  ASSERT_TRUE(in) << "tests/fixtures/float8_ml_dtypes.txt is missing";
  const std::map<std::string, FloatFormat> formats = {{"float8_e8m0fnu", kFormatE8M0},
                                                      {"float8_e4m3fn", kFormatE4M3},
                                                      {"float8_e5m2", kFormatE5M2},
                                                      {"float4_e2m1fn", kFormatE2M1}};
  const FloatFormat* f = nullptr;
  std::string line;
  int decoded = 0, encoded = 0;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string kind, a, b;
    fields >> kind >> a >> b;
    if (kind == "format") {
      ASSERT_TRUE(formats.count(a)) << line;
      f = &formats.at(a);
    } else if (kind == "decode") {
      ASSERT_NE(f, nullptr);
      const double ours = f->decode(static_cast<uint32_t>(std::stoul(a)));
      if (b == "nan") ASSERT_TRUE(std::isnan(ours)) << f->name << " code " << a;
      else
        ASSERT_EQ(ours, float_from_bits(static_cast<uint32_t>(std::stoul(b, nullptr, 16))))
            << f->name << " code " << a;
      ++decoded;
    } else if (kind == "encode") {
      ASSERT_NE(f, nullptr);
      const float x = float_from_bits(static_cast<uint32_t>(std::stoul(a, nullptr, 16)));
      const uint32_t theirs = static_cast<uint32_t>(std::stoul(b)), ours = f->encode(x);
      // E2M1 has no NaN: tiny sends NaN to the largest value, as the CUDA toolkit does
      // (Fp4MatchesTheCudaToolkit); ml_dtypes to -0. Any NaN pattern is NaN.
      if (std::isnan(x) && f == &formats.at("float4_e2m1fn")) continue;
      if (std::isnan(f->decode(theirs))) ASSERT_TRUE(std::isnan(f->decode(ours))) << repr(x);
      else ASSERT_EQ(ours, theirs) << f->name << " x = " << repr(x);
      ++encoded;
    }
  }
  EXPECT_EQ(decoded, 3 * 256 + 16);
  EXPECT_GT(encoded, 10000);
}

TEST(Ch05_Floats, E8M0IsPowersOfTwoWithoutSignOrZero) {
  // OCP MX v1.0, section 5.4.1: E8M0 is 2^(e - 127) for e = 0..254, and 0xFF is NaN.
  EXPECT_EQ(kFormatE8M0.bits(), 8);
  EXPECT_EQ(kFormatE8M0.decode(127), 1.0);
  EXPECT_EQ(kFormatE8M0.decode(0), std::ldexp(1.0, -127));
  EXPECT_EQ(kFormatE8M0.decode(254), std::ldexp(1.0, 127));
  EXPECT_TRUE(std::isnan(kFormatE8M0.decode(255)));
  EXPECT_EQ(kFormatE8M0.encode(1.5f), 128u);  // a tie goes up: 2 is the even multiple of 1
  EXPECT_EQ(kFormatE8M0.encode(1.4f), 127u);
  EXPECT_EQ(kFormatE8M0.encode(0.0f), 255u);   // no zero
  EXPECT_EQ(kFormatE8M0.encode(-2.0f), 255u);  // no sign
  EXPECT_EQ(kFormatE8M0.encode(1e-45f), 0u);   // nothing below 2^-127
  EXPECT_EQ(kFormatE8M0.encode(3e38f), 255u);
  EXPECT_EQ(kFormatE8M0.encode(3e38f, Overflow::Saturate), 254u);
  EXPECT_EQ(kFormatE8M0.encode(INFINITY, Overflow::Saturate), 254u);
  const FInfo i = kFormatE8M0.info();  // ml_dtypes.finfo(float8_e8m0fnu)
  EXPECT_EQ(i.max, std::ldexp(1.0, 127));
  EXPECT_EQ(i.smallest_normal, std::ldexp(1.0, -127));
  EXPECT_EQ(i.smallest_subnormal, std::ldexp(1.0, -127));
  EXPECT_EQ(i.eps, 1.0);
  EXPECT_FALSE(i.has_inf);
  EXPECT_TRUE(i.has_nan);
}

TEST(Ch05_Floats, ImpossibleLayoutsAreRefused) {
  const FloatFormat e0m3{"e0m3", 0, 3, Specials::None};
  EXPECT_TRUE(throws_with<ValueError>(
      [&] { e0m3.decode(1); },
      "float format 'e0m3' (E0M3) needs 1 to 11 exponent bits (double's range holds its values)"));
  EXPECT_TRUE(throws_with<ValueError>([&] { e0m3.encode(1.0f); }, "(E0M3) needs 1 to 11"));
  EXPECT_TRUE(throws_with<ValueError>([&] { e0m3.info(); }, "(E0M3) needs 1 to 11"));
  // bias() too: a shift by -1 (or by 31 and more) would be undefined.
  EXPECT_TRUE(throws_with<ValueError>([&] { e0m3.bias(); }, "(E0M3) needs 1 to 11"));
  EXPECT_TRUE(throws_with<ValueError>([] { FloatFormat{"e32", 32, 3, Specials::None}.bias(); },
                                      "(E32M3) needs 1 to 11"));
  EXPECT_EQ(kFormatFloat16.bias(), 15);
  EXPECT_EQ(kFormatFloat32.bias(), 127);
  EXPECT_TRUE(throws_with<ValueError>(
      [] {
        FloatFormat{"ieee_e8m0", 8, 0, Specials::IEEE}.info();
      },
      "float format 'ieee_e8m0' (E8M0) has IEEE specials but no mantissa bit to tell NaN from "
      "infinity"));
  EXPECT_TRUE(throws_with<ValueError>(
      [] {
        FloatFormat{"ue4m3", 4, 3, Specials::None, false}.encode(1.0f);
      },
      "float format 'ue4m3' (E4M3) has no NaN for the values it cannot hold (no sign or no zero)"));
  EXPECT_TRUE(throws_with<ValueError>(
      [] {
        FloatFormat{"m-1", 4, -1, Specials::None}.info();
      },
      "(E4M-1) needs 0 to 52 mantissa"));
  EXPECT_TRUE(throws_with<ValueError>(
      [] {
        FloatFormat{"float64", 11, 52, Specials::IEEE}.decode(0);
      },
      "float format 'float64' (E11M52) is wider than the 32 bits encode() and decode() handle"));
  EXPECT_EQ(FloatFormat({"float64", 11, 52, Specials::IEEE}).info().max,
            std::numeric_limits<double>::max());
  EXPECT_TRUE(throws_with<ValueError>([] { kFormatE4M3.decode(256); },
                                      "float format 'float8_e4m3fn' has 8 bits; pattern 256 does "
                                      "not fit"));
  EXPECT_TRUE(throws_with<ValueError>([] { kFormatE8M0.decode(256); }, "pattern 256 does not fit"));
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
  EXPECT_TRUE(throws_with<RuntimeError>([] { round_to_format(tensor({1}), kFormatE4M3); },
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

// An NvFp4Tensor is a struct anyone can fill: each field that disagrees with the others, or
// holds a code or scale the format does not define, is named instead of read out of bounds.
TEST(Ch05_Floats, Nvfp4DequantizeChecksEveryField) {
  const NvFp4Tensor good = nvfp4_quantize(arange(20.0).to(kFloat32).reshape({4, 5}));
  ASSERT_EQ(good.block_scales.size(), 2u);  // 20 values: a block of 16 and one of 4
  EXPECT_EQ(nvfp4_dequantize(good).shape(), (Shape{4, 5}));
  auto refused = [&](auto change, const std::string& message) {
    NvFp4Tensor q = good;
    change(q);
    return throws_with<ValueError>([&] { nvfp4_dequantize(q); }, "nvfp4_dequantize: " + message);
  };
  EXPECT_TRUE(refused([](NvFp4Tensor& q) { q.codes.pop_back(); },
                      "codes has 19 values but shape [4, 5] has 20 elements"));
  EXPECT_TRUE(refused([](NvFp4Tensor& q) { q.shape = {1000000}; },
                      "codes has 20 values but shape [1000000] has 1000000 elements"));
  EXPECT_TRUE(refused(
      [](NvFp4Tensor& q) {
        q.shape = {-4, -5};
      },
      "shape [-4, -5] has a negative size"));
  EXPECT_TRUE(refused(
      [](NvFp4Tensor& q) {
        q.shape = {int64_t(1) << 62, 8};
      },
      "shape [4611686018427387904, 8] has more elements than int64 holds"));
  EXPECT_TRUE(refused([](NvFp4Tensor& q) { q.block_scales.pop_back(); },
                      "block_scales has 1 scales but 20 values in blocks of 16 need 2"));
  EXPECT_TRUE(refused([](NvFp4Tensor& q) { q.block_scales.push_back(56); },
                      "block_scales has 3 scales but 20 values in blocks of 16 need 2"));
  EXPECT_TRUE(refused([](NvFp4Tensor& q) { q.codes[7] = 16; },
                      "code 16 at index 7 is not a 4-bit E2M1 code (0 to 15)"));
  EXPECT_TRUE(refused([](NvFp4Tensor& q) { q.block_scales[1] = 0x7F; },
                      "block scale 127 of block 1 is NaN; block scales are non-negative E4M3 "
                      "values (0 to 126)"));
  EXPECT_TRUE(refused([](NvFp4Tensor& q) { q.block_scales[0] = 0x80 | 56; },
                      "block scale 184 of block 0 has the sign bit set"));
  EXPECT_TRUE(refused([](NvFp4Tensor& q) { q.tensor_scale = NAN; },
                      "tensor_scale must be finite and not negative, got nan"));
  EXPECT_TRUE(refused([](NvFp4Tensor& q) { q.tensor_scale = -1; },
                      "tensor_scale must be finite and not negative, got -1.0"));
}

TEST(Ch05_Floats, Nvfp4QuantizeInputsBehaveAsDocumented) {
  // Empty: no blocks, tensor scale 1; it comes back empty with its shape.
  const NvFp4Tensor empty_q = nvfp4_quantize(zeros({0, 3}));
  EXPECT_TRUE(empty_q.codes.empty() && empty_q.block_scales.empty());
  EXPECT_EQ(empty_q.tensor_scale, 1.0f);
  EXPECT_EQ(nvfp4_dequantize(empty_q).shape(), (Shape{0, 3}));
  // 17 values: a last block of one value, scaled for that value alone, so that a value 2^-12
  // times the others keeps E2M1's precision (one scale for all would flush it to zero).
  std::vector<float> v(17, 6.0f);
  v[16] = std::ldexp(0.5f, -11);
  const NvFp4Tensor q = nvfp4_quantize(from_vector(v, {17}));
  EXPECT_EQ(q.block_scales.size(), 2u);
  const Tensor back = nvfp4_dequantize(q);
  for (int64_t i = 0; i < 17; ++i)  // E2M1's half step (1/4 relative at worst) times E4M3's
    EXPECT_NEAR(back.at({i}), v[i], std::fabs(v[i]) * 0.25 * 1.125) << i;
  EXPECT_EQ(fp4_single_scale(from_vector(v, {17})).at({16}), 0.0);
  // NaN and infinity have no E2M1 code; the integers are not floating point.
  for (const char* op : {"nvfp4_quantize", "fp4_single_scale"}) {
    auto run = [&](const Tensor& x) {
      if (std::string(op) == "nvfp4_quantize") nvfp4_quantize(x);
      else fp4_single_scale(x);
    };
    EXPECT_TRUE(throws_with<ValueError>(
        [&] {
          run(tensor({1.0, NAN}));
        },
        std::string(op) + ": the input has a non-finite value "
                          "(nan at index 1), which FP4 (E2M1) cannot represent"));
    EXPECT_TRUE(throws_with<ValueError>([&] { run(tensor({-INFINITY})); }, "(-inf at index 0)"));
    EXPECT_TRUE(throws_with<RuntimeError>(
        [&] { run(tensor({1})); }, std::string("\"") + op + "\" not implemented for 'Long'"));
  }
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
