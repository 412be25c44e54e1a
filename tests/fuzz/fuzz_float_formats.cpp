// fuzz_float_formats: encode and decode of every float format (tiny/float_formats.h), the
// built-in ones and layouts of the fuzzer's choosing, against exact double arithmetic:
// - decode(p) of a non-NaN pattern encodes back to p (every value has one pattern, +-0 aside);
// - encode(x) is the nearest value to x: no neighbouring pattern is nearer, and of two equally
//   near the even mantissa wins; beyond the largest finite value it overflows as asked;
// - encoding is monotonic: x <= y gives round(x) <= round(y);
// - the float16 and bfloat16 fast paths agree with the general format code.
#include <cmath>

#include "fuzz_util.h"
#include "tiny/float_formats.h"

namespace {

using tiny::FloatFormat;
using tiny::Overflow;
using tiny::Specials;

std::string describe(const FloatFormat& f) {
  return "E" + std::to_string(f.exponent_bits) + "M" + std::to_string(f.mantissa_bits) + "/" +
         std::to_string(static_cast<int>(f.specials));
}

// Zero-width exponent or mantissa fields (E8M0, the MX scale format, and E0Mx) are the float
// format work's own open problem (the undefined shifts); the harness starts at one bit
// in each field until that lands.
constexpr int kMinExponentBits = 2;
constexpr int kMinMantissaBits = 1;

FloatFormat pick_format(FuzzedDataProvider& in) {
  static const FloatFormat kBuiltIn[] = {tiny::kFormatFloat32, tiny::kFormatFloat16,
                                         tiny::kFormatBFloat16, tiny::kFormatE4M3,
                                         tiny::kFormatE5M2,    tiny::kFormatE2M1};
  const int which = in.ConsumeIntegralInRange<int>(0, 6);
  if (which < 6) return kBuiltIn[which];
  FloatFormat f{"custom", in.ConsumeIntegralInRange<int>(kMinExponentBits, 8),
                in.ConsumeIntegralInRange<int>(kMinMantissaBits, 23), Specials::IEEE};
  f.specials = static_cast<Specials>(in.ConsumeIntegralInRange<int>(0, 2));
  return f;
}

void check_nearest(const FloatFormat& f, float x, Overflow overflow) {
  const uint32_t p = f.encode(x, overflow);
  const std::string where = describe(f) + " encode(" + std::to_string(x) + ")";
  fuzz::require(p < (uint64_t(1) << f.bits()), where + ": pattern wider than the format");
  if (std::isnan(x)) {
    const double v = f.decode(p);
    fuzz::require(f.specials == Specials::None || std::isnan(v), where + ": NaN lost");
    return;
  }
  const double v = f.decode(p);
  const double largest = f.info().max;
  const double a = std::fabs(double(x));
  fuzz::require(std::isnan(v) || std::signbit(v) == std::signbit(x), where + ": sign lost");
  if (std::isnan(v) || std::isinf(v)) {
    fuzz::require(overflow == Overflow::NonFinite && f.specials != Specials::None,
                  where + ": non-finite result without NonFinite overflow");
    fuzz::require(a > largest, where + ": a value in range became non-finite");
    return;
  }
  fuzz::require(std::fabs(v) <= largest, where + ": beyond the largest finite value");
  if (a > largest) {
    fuzz::require(std::fabs(v) == largest, where + ": overflow did not saturate");
    return;
  }
  const uint32_t sign = p & (uint32_t(1) << (f.bits() - 1));
  const uint32_t magnitude = p ^ sign;
  const double distance = std::fabs(std::fabs(v) - a);
  for (const uint32_t m : {magnitude - 1, magnitude + 1}) {
    if (magnitude == 0 && m == magnitude - 1) continue;
    const double w = f.decode(m);
    if (std::isnan(w) || std::isinf(w) || w > largest) continue;
    const double d = std::fabs(w - a);
    fuzz::require(d >= distance, where + ": a neighbouring pattern is nearer");
    if (d == distance && distance != 0)
      fuzz::require((magnitude & 1) == 0, where + ": a tie not rounded to even");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
  FuzzedDataProvider in(bytes, size);
  const FloatFormat f = pick_format(in);
  const Overflow overflow = in.ConsumeBool() ? Overflow::Saturate : Overflow::NonFinite;
  const float x = tiny::float_from_bits(in.ConsumeIntegral<uint32_t>());
  const float y = tiny::float_from_bits(in.ConsumeIntegral<uint32_t>());
  const uint32_t p = in.ConsumeIntegral<uint32_t>() & uint32_t((uint64_t(1) << f.bits()) - 1);

  check_nearest(f, x, overflow);
  check_nearest(f, y, overflow);

  // Saturation turns an infinity into the largest finite value, so only finite values (and
  // infinities kept by NonFinite) must come back to their pattern.
  const double v = f.decode(p);
  // A wide format's values beyond float32's range cannot be encode()'s float argument.
  const bool fits = std::isinf(v) || std::fabs(v) <= double(std::numeric_limits<float>::max());
  if (!std::isnan(v) && fits && (!std::isinf(v) || overflow == Overflow::NonFinite)) {
    const uint32_t q = f.encode(static_cast<float>(v), overflow);
    fuzz::require(q == p || (v == 0 && f.decode(q) == 0),
                  describe(f) + ": pattern " + std::to_string(p) + " does not round-trip");
  }

  if (!std::isnan(x) && !std::isnan(y)) {
    const float lo = std::fmin(x, y), hi = std::fmax(x, y);
    const double a = f.round(lo, overflow), b = f.round(hi, overflow);
    if (!std::isnan(a) && !std::isnan(b))
      fuzz::require(a <= b, describe(f) + ": rounding is not monotonic");
  }

  // The fast float16 and bfloat16 conversions against the general code.
  if (!std::isnan(x)) {
    fuzz::require(tiny::float_to_half_bits(x) == tiny::kFormatFloat16.encode(x),
                  "float_to_half_bits differs from kFormatFloat16.encode");
    fuzz::require(tiny::float_to_bfloat16_bits(x) == tiny::kFormatBFloat16.encode(x),
                  "float_to_bfloat16_bits differs from kFormatBFloat16.encode");
  }
  const uint16_t h = static_cast<uint16_t>(p);
  const double hv = tiny::kFormatFloat16.decode(h);
  fuzz::require(std::isnan(hv) ? std::isnan(tiny::half_bits_to_float(h))
                               : double(tiny::half_bits_to_float(h)) == hv,
                "half_bits_to_float differs from kFormatFloat16.decode");
  const double bv = tiny::kFormatBFloat16.decode(h);
  fuzz::require(std::isnan(bv) ? std::isnan(tiny::bfloat16_bits_to_float(h))
                               : double(tiny::bfloat16_bits_to_float(h)) == bv,
                "bfloat16_bits_to_float differs from kFormatBFloat16.decode");
  return 0;
}
