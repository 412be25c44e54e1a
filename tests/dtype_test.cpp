// dtypes: sizes, names, promotion, and the float16/bfloat16 conversions, every bit pattern.
#include <cfenv>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <typeinfo>
#include <vector>

#include "test_util.h"

using namespace tiny;
using namespace tiny::testing;

TEST(DType, SizesAndNames) {
  const std::pair<DType, std::pair<size_t, const char*>> expected[] = {
      {kFloat32, {4, "float32"}},   {kFloat64, {8, "float64"}}, {kFloat16, {2, "float16"}},
      {kBFloat16, {2, "bfloat16"}}, {kInt32, {4, "int32"}},     {kInt64, {8, "int64"}},
      {kBool, {1, "bool"}},         {kUInt8, {1, "uint8"}},     {kInt8, {1, "int8"}},
      {kInt16, {2, "int16"}}};
  for (const auto& [dt, info] : expected) {
    EXPECT_EQ(element_size(dt), info.first);
    EXPECT_STREQ(dtype_name(dt), info.second);
  }
}

// torch.promote_types, as PyTorch documents and computes it.
TEST(DType, PromotionMatchesPyTorch) {
  EXPECT_EQ(promote_types(kFloat16, kBFloat16), kFloat32);
  EXPECT_EQ(promote_types(kBFloat16, kFloat32), kFloat32);
  EXPECT_EQ(promote_types(kInt64, kFloat16), kFloat16);
  EXPECT_EQ(promote_types(kInt32, kInt64), kInt64);
  EXPECT_EQ(promote_types(kBool, kInt32), kInt32);
  EXPECT_EQ(promote_types(kFloat32, kFloat64), kFloat64);
  // The small integers: neither 8-bit type holds the other, and they meet in int16.
  EXPECT_EQ(promote_types(kUInt8, kInt8), kInt16);
  EXPECT_EQ(promote_types(kUInt8, kBool), kUInt8);
  EXPECT_EQ(promote_types(kUInt8, kInt16), kInt16);
  EXPECT_EQ(promote_types(kInt8, kInt32), kInt32);
  EXPECT_EQ(promote_types(kInt16, kFloat16), kFloat16);
  EXPECT_EQ(promote_types(kUInt8, kBFloat16), kBFloat16);
  for (DType a : kAllDTypes)
    for (DType b : kAllDTypes) EXPECT_EQ(promote_types(a, b), promote_types(b, a));
}

// Floats into the small integer types, as PyTorch 1.13 converts them on x86
// (torch.tensor([...]).to(torch.uint8) and so on): int8 and int16 through int32, uint8 through
// int64, then the low bits; out of the wide type's range is its minimum, whose low bits are 0.
TEST(DType, FloatsIntoSmallIntegersAsPyTorch) {
  const std::vector<double> v = {300.0, -1.0, -129.5, 1e10, -1e10, NAN, INFINITY, 70000.7,
                                 -40000.2, 255.9, 2147483905.0, -2147483905.0};
  const Tensor x = from_vector<double>(v, {12});
  auto as = [&](DType d) {
    const Tensor r = x.to(d).to(kInt64);
    return std::vector<int64_t>(r.data<int64_t>(), r.data<int64_t>() + 12);
  };
  EXPECT_EQ(as(kUInt8), (std::vector<int64_t>{44, 255, 127, 0, 0, 0, 0, 112, 192, 255, 1, 255}));
  EXPECT_EQ(as(kInt8), (std::vector<int64_t>{44, -1, 127, 0, 0, 0, 0, 112, -64, -1, 0, 0}));
  EXPECT_EQ(as(kInt16),
            (std::vector<int64_t>{300, -1, -129, 0, 0, 0, 0, 4464, 25536, 255, 0, 0}));
  // Between integer types the low bits are kept.
  const Tensor i = from_vector<int64_t>({300, -1, -129, 70000}, {4});
  EXPECT_TRUE(equal(i.to(kUInt8).to(kInt64), from_vector<int64_t>({44, 255, 127, 112}, {4})));
  EXPECT_TRUE(equal(i.to(kInt8).to(kInt64), from_vector<int64_t>({44, -1, 127, 112}, {4})));
}

// truncation_fits against its definition, checked in long double (which holds every value
// below exactly): truncating v toward zero lands in [min, max]. Probed at the floats nearest
// each limit (both sides), at the limits themselves, at NaN, the infinities and random values.
template <typename I, typename F> static void check_truncation_fits() {
  const long double lo = static_cast<long double>(std::numeric_limits<I>::min());
  const long double hi = static_cast<long double>(std::numeric_limits<I>::max());
  auto expected = [&](F v) {
    if (std::isnan(v)) return false;
    const long double t = std::trunc(static_cast<long double>(v));
    return t >= lo && t <= hi;
  };
  std::vector<F> probes = {F(0),
                           F(-0.0),
                           F(0.5),
                           F(-0.5),
                           F(-0.99),
                           F(-1),
                           F(1),
                           std::numeric_limits<F>::infinity(),
                           -std::numeric_limits<F>::infinity(),
                           std::numeric_limits<F>::quiet_NaN(),
                           std::numeric_limits<F>::max(),
                           std::numeric_limits<F>::lowest()};
  for (long double limit : {lo, hi, lo - 1, hi + 1}) {
    F v = static_cast<F>(limit);
    for (int i = 0; i < 4; ++i) v = std::nextafter(v, -std::numeric_limits<F>::infinity());
    for (int i = 0; i < 9; ++i, v = std::nextafter(v, std::numeric_limits<F>::infinity()))
      probes.push_back(v);
  }
  TINY_SEEDED(rng);
  std::uniform_real_distribution<double> exponent(-4, 70);
  for (int i = 0; i < 2000; ++i)
    probes.push_back(static_cast<F>((i % 2 ? 1 : -1) * std::exp2(exponent(rng))));
  for (F v : probes)
    EXPECT_EQ(truncation_fits<I>(v), expected(v)) << double(v) << " as " << typeid(I).name();
}

TEST(DType, TruncationFitsIsWhereAFloatToIntegerCastIsDefined) {
  check_truncation_fits<int64_t, double>();
  check_truncation_fits<int64_t, float>();
  check_truncation_fits<int32_t, double>();
  check_truncation_fits<int32_t, float>();
  check_truncation_fits<int16_t, float>();
  check_truncation_fits<uint8_t, float>();
  check_truncation_fits<uint64_t, double>();
  EXPECT_TRUE(truncation_fits<int32_t>(-2147483648.5));  // truncates to the minimum
  EXPECT_FALSE(truncation_fits<int32_t>(-2147483649.0));
  EXPECT_FALSE(truncation_fits<int64_t>(0x1p63));
  EXPECT_TRUE(truncation_fits<int64_t>(-0x1p63));
  // And the throwing form, with PyTorch's words: it compares the value itself with the limits.
  EXPECT_EQ(truncate_checked<int64_t>(-2.9, "int64_t"), -2);
  for (double v : {0x1p31, -2147483648.5, 2147483647.5})
    EXPECT_TRUE(
        throws_with<RuntimeError>([&] { truncate_checked<int32_t>(v, "int"); },
                                  "value cannot be converted to type int without overflow"));
}

// An independent float16 decoder: sign * 2^(e - 15) * (1 + m / 1024), or the subnormal and
// special cases, computed with ldexp in double.
static double decode_half_reference(uint16_t h) {
  const int sign = h >> 15, e = (h >> 10) & 0x1f, m = h & 0x3ff;
  double v;
  if (e == 0x1f) v = m ? NAN : INFINITY;
  else if (e == 0) v = std::ldexp(m, -24);
  else v = std::ldexp(1024 + m, e - 25);
  return sign ? -v : v;
}

TEST(Float16, EveryBitPatternDecodes) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const double ref = decode_half_reference(static_cast<uint16_t>(h));
    const float got = half_bits_to_float(static_cast<uint16_t>(h));
    if (std::isnan(ref)) EXPECT_TRUE(std::isnan(got)) << h;
    else ASSERT_EQ(static_cast<double>(got), ref) << "pattern 0x" << std::hex << h;
    // Every float16 survives the round trip (NaN payloads become the quiet NaN).
    if (!std::isnan(ref)) {
      ASSERT_EQ(float_to_half_bits(got), h) << std::hex << h;
    }
  }
}

TEST(BFloat16, EveryBitPatternDecodes) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const float got = bfloat16_bits_to_float(static_cast<uint16_t>(b));
    uint32_t bits;
    std::memcpy(&bits, &got, 4);
    ASSERT_EQ(bits, b << 16);  // bfloat16 is float32's upper half
    if (!std::isnan(got)) {
      ASSERT_EQ(float_to_bfloat16_bits(got), b) << std::hex << b;
    }
  }
}

// The reference encoder: round x to the nearest representable value by brute force on the
// decoded table of all finite patterns, breaking ties towards the even pattern.
template <typename Decode>
static uint16_t encode_reference(float x, Decode decode, uint16_t max_finite, uint16_t inf) {
  if (std::isnan(x)) return 0;  // not used for NaN
  const double ax = std::fabs(static_cast<double>(x));
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  // Binary search over the positive patterns, which decode in increasing order.
  uint32_t lo = 0, hi = max_finite;
  if (ax >= decode(max_finite)) {
    // Past the largest finite value: rounds to it unless at or past the halfway point to the
    // next power of two (the value "one ulp further", which would be infinity).
    const double next = decode(max_finite) + (decode(max_finite) - decode(max_finite - 1));
    const double half = (decode(max_finite) + next) / 2;
    if (ax < half) return sign | max_finite;
    return sign | inf;
  }
  while (hi - lo > 1) {
    const uint32_t mid = (lo + hi) / 2;
    if (decode(static_cast<uint16_t>(mid)) <= ax) lo = mid;
    else hi = mid;
  }
  const double dl = ax - decode(static_cast<uint16_t>(lo)),
               dh = decode(static_cast<uint16_t>(hi)) - ax;
  uint32_t pick = dl < dh ? lo : dh < dl ? hi : (lo % 2 == 0 ? lo : hi);
  return static_cast<uint16_t>(sign | pick);
}

TEST(Float16, EncodingRoundsToNearestEven) {
  TINY_SEEDED(rng);
  auto decode = [](uint16_t h) { return decode_half_reference(h); };
  std::uniform_int_distribution<uint32_t> bits;
  std::vector<float> values = {0.0f,
                               -0.0f,
                               65504.0f,
                               65519.99f,
                               65520.0f,
                               70000.0f,
                               -70000.0f,
                               1e-8f,
                               2e-7f,
                               1e-4f,
                               0.1f,
                               1.001f,
                               1.00048828125f,
                               1.00146484375f,
                               5.960464477539063e-08f,
                               2.98e-8f,
                               3e-8f,
                               2.9802322387695312e-08f,
                               6.103515625e-05f,
                               6.1e-05f};
  // Random float32 bit patterns, restricted to float16's range and around it.
  for (int i = 0; i < 2'000'000; ++i) {
    uint32_t b = bits(rng);
    b = (b & 0x807fffffu) | ((100u + b % 50u) << 23);  // exponents 2^-27 .. 2^22
    float f;
    std::memcpy(&f, &b, 4);
    values.push_back(f);
  }
  for (float f : values) {
    ASSERT_EQ(float_to_half_bits(f), encode_reference(f, decode, 0x7bff, 0x7c00))
        << "x = " << repr(f);
  }
  EXPECT_EQ(float_to_half_bits(NAN) & 0x7fff, 0x7e00);
  EXPECT_EQ(float_to_half_bits(INFINITY), 0x7c00);
  EXPECT_EQ(float_to_half_bits(-INFINITY), 0xfc00);
}

TEST(BFloat16, EncodingRoundsToNearestEven) {
  TINY_SEEDED(rng);
  auto decode = [](uint16_t b) { return static_cast<double>(bfloat16_bits_to_float(b)); };
  std::uniform_int_distribution<uint32_t> bits;
  std::vector<float> values = {0.0f,        -0.0f,       1e-8f,    70000.0f, 1.001f,
                               1.00390625f, 1.01171875f, 65504.0f, 3.4e38f,  1e-40f};
  for (int i = 0; i < 2'000'000; ++i) {
    uint32_t b = bits(rng);
    if (((b >> 23) & 0xff) == 0xff) continue;  // NaN and inf are checked below
    float f;
    std::memcpy(&f, &b, 4);
    values.push_back(f);
  }
  for (float f : values)
    ASSERT_EQ(float_to_bfloat16_bits(f), encode_reference(f, decode, 0x7f7f, 0x7f80))
        << "x = " << repr(f);
  EXPECT_EQ(float_to_bfloat16_bits(NAN), 0x7fc0);
}

// The conversions PyTorch prints (tests/fixtures/pytorch_facts.txt, section 5).
TEST(Float16, MatchesPyTorchsTable) {
  const std::tuple<float, uint16_t, uint16_t> table[] = {
      {1e-8f, 0x0000, 0x322C},          {2e-7f, 0x0003, 0x3457},
      {1e-4f, 0x068E, 0x38D2},          {0.1f, 0x2E66, 0x3DCD},
      {1.001f, 0x3C01, 0x3F80},         {1.00048828125f, 0x3C00, 0x3F80},
      {1.00146484375f, 0x3C02, 0x3F80}, {1.00390625f, 0x3C04, 0x3F80},
      {1.01171875f, 0x3C0C, 0x3F82},    {65504.0f, 0x7BFF, 0x4780},
      {65519.99f, 0x7BFF, 0x4780},      {65520.0f, 0x7C00, 0x4780},
      {70000.0f, 0x7C00, 0x4789},       {-70000.0f, 0xFC00, 0xC789},
      {3.4e38f, 0x7C00, 0x7F80}};
  for (const auto& [v, half, bf16] : table) {
    EXPECT_EQ(float_to_half_bits(v), half) << repr(v);
    EXPECT_EQ(float_to_bfloat16_bits(v), bf16) << repr(v);
  }
  // Through tensors: .to(dtype) uses the same conversion.
  Tensor t = tensor({1e-8, 70000.0, 1.001});
  EXPECT_EQ(t.to(kFloat16).tolist(), (std::vector<double>{0.0, INFINITY, 1.0009765625}));
  EXPECT_EQ(t.to(kBFloat16).tolist(), (std::vector<double>{1.0011717677116394e-08, 70144.0, 1.0}));
}
