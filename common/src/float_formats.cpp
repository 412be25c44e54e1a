// float_formats.cpp: any binary float format, encoded and decoded from its layout alone.
#include "tiny/float_formats.h"

#include <cmath>
#include <limits>

#include "tiny/error.h"  // the exercises' NotImplementedError in a starter copy

namespace tiny {

namespace {
// The largest exponent a finite value may have, and the largest mantissa at that exponent.
int max_exponent(const FloatFormat& f) {
  const int all_ones = (1 << f.exponent_bits) - 1;
  return (f.specials == Specials::IEEE ? all_ones - 1 : all_ones) - f.bias();
}
uint32_t max_mantissa_at_top(const FloatFormat& f) {
  const uint32_t all_ones = (1u << f.mantissa_bits) - 1;
  return f.specials == Specials::AllOnesIsNaN ? all_ones - 1 : all_ones;  // 1.111 is NaN in "fn"
}
uint32_t sign_bit(const FloatFormat& f) { return 1u << (f.bits() - 1); }
}  // namespace

double FloatFormat::decode(uint32_t pattern) const {
  const uint32_t mant_mask = (1u << mantissa_bits) - 1, exp_mask = (1u << exponent_bits) - 1;
  const bool negative = pattern & sign_bit(*this);
  const uint32_t e = (pattern >> mantissa_bits) & exp_mask, m = pattern & mant_mask;
  // BEGIN SOLUTION ch05 float_decode
  double v;
  if (specials == Specials::IEEE && e == exp_mask) {
    v = m ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  } else if (specials == Specials::AllOnesIsNaN && e == exp_mask && m == mant_mask) {
    v = std::numeric_limits<double>::quiet_NaN();
  } else if (e == 0) {  // subnormal: no hidden 1, the smallest exponent
    v = std::ldexp(static_cast<double>(m), 1 - bias() - mantissa_bits);
  } else {
    v = std::ldexp(static_cast<double>(m | (1u << mantissa_bits)),
                   static_cast<int>(e) - bias() - mantissa_bits);
  }
  return negative ? -v : v;
  // END SOLUTION ch05 float_decode
}

uint32_t FloatFormat::encode(float x, Overflow overflow) const {
  const uint32_t sign = std::signbit(x) ? sign_bit(*this) : 0;
  const uint32_t exp_all_ones = (1u << exponent_bits) - 1;
  const uint32_t max_pattern =
      (static_cast<uint32_t>(max_exponent(*this) + bias()) << mantissa_bits) |
      max_mantissa_at_top(*this);
  const uint32_t inf_pattern = exp_all_ones << mantissa_bits;
  const uint32_t nan_pattern = specials == Specials::IEEE
                                   ? inf_pattern | (1u << (mantissa_bits - 1))
                                   : (exp_all_ones << mantissa_bits) | ((1u << mantissa_bits) - 1);
  if (std::isnan(x)) return specials == Specials::None ? max_pattern : nan_pattern;  // FP4: no NaN
  const double a = std::fabs(static_cast<double>(x));  // exact: float -> double
  auto beyond = [&] {
    if (overflow == Overflow::Saturate || specials == Specials::None) return sign | max_pattern;
    return specials == Specials::IEEE ? sign | inf_pattern : sign | nan_pattern;
  };
  if (std::isinf(a)) return beyond();
  // BEGIN SOLUTION ch05 float_encode
  // Round to a multiple of the spacing at x's binade (at least the subnormal spacing), with the
  // FPU's default mode, round to nearest, ties to even: one exact rounding.
  int e;
  std::frexp(a, &e);  // a = f * 2^e, f in [0.5, 1): a's leading bit is worth 2^(e - 1)
  const int emin = 1 - bias();
  const int exponent = std::max(e - 1, emin);
  const double quantum = std::ldexp(1.0, exponent - mantissa_bits);
  const double q = std::nearbyint(a / quantum);  // a / quantum is exact: a power-of-2 division
  const double rounded = q * quantum;
  if (rounded > decode(max_pattern)) return beyond();
  // Build the pattern of the (representable) rounded value.
  if (rounded == 0) return sign;
  int re;
  std::frexp(rounded, &re);
  const int rexp = std::max(re - 1, emin);
  const uint32_t scaled = static_cast<uint32_t>(std::ldexp(rounded, mantissa_bits - rexp));
  const uint32_t field = scaled >= (1u << mantissa_bits) ? static_cast<uint32_t>(rexp + bias()) : 0;
  return sign | (field << mantissa_bits) | (scaled & ((1u << mantissa_bits) - 1));
  // END SOLUTION ch05 float_encode
}

FInfo FloatFormat::info() const {
  FInfo f{};
  f.bits = bits();
  f.eps = std::ldexp(1.0, -mantissa_bits);
  // The largest mantissa is all ones (2 - eps), or one less where all ones means NaN (2 - 2 eps).
  const double top = 2.0 - (specials == Specials::AllOnesIsNaN ? 2 : 1) * f.eps;
  f.max = std::ldexp(top, max_exponent(*this));
  f.smallest_normal = std::ldexp(1.0, 1 - bias());
  f.smallest_subnormal = f.smallest_normal * f.eps;
  // Decimal digits that survive: floor(-log10(eps)); the resolution is 10 to minus that.
  f.resolution = std::pow(10.0, -std::floor(-std::log10(f.eps)));
  f.has_inf = specials == Specials::IEEE;
  f.has_nan = specials != Specials::None;
  return f;
}

}  // namespace tiny
