// float_formats.cpp: any binary float format, encoded and decoded from its layout alone.
#include "tiny/float_formats.h"

#include <cmath>
#include <limits>
#include <string>

#include "tiny/error.h"  // ValueError, and the exercises' NotImplementedError in a starter copy

namespace tiny {

namespace {
// Refuses a layout that is not a float format, so that no shift below is undefined: an exponent
// field is needed for a bias (with none, the format is fixed point), IEEE's infinity and NaN
// differ only in the mantissa, and a format that cannot hold zero or negatives needs a NaN for
// them. `codec`: encode and decode hold patterns in 32 bits.
void check_layout(const FloatFormat& f, bool codec) {
  std::string why;
  if (f.exponent_bits < 1 || f.exponent_bits > 11)
    why = "needs 1 to 11 exponent bits (double's range holds its values)";
  else if (f.mantissa_bits < 0 || f.mantissa_bits > 52) why = "needs 0 to 52 mantissa bits";
  else if (f.specials == Specials::IEEE && f.mantissa_bits == 0)
    why = "has IEEE specials but no mantissa bit to tell NaN from infinity";
  else if (f.specials == Specials::None && (!f.has_sign || !f.has_subnormals))
    why = "has no NaN for the values it cannot hold (no sign or no zero)";
  else if (codec && f.bits() > 32) why = "is wider than the 32 bits encode() and decode() handle";
  if (why.empty()) return;
  std::string message("float format '");
  message += f.name ? f.name : "(unnamed)";
  message += "' (E";
  message += std::to_string(f.exponent_bits);
  message += 'M';
  message += std::to_string(f.mantissa_bits);
  message += ") ";
  message += why;
  throw ValueError(message);
}
}  // namespace

int FloatFormat::bias() const {
  check_layout(*this, false);
  return (1 << (exponent_bits - 1)) - 1;
}

namespace {
// Whether the whole all-ones exponent is special (IEEE's infinities and NaNs; E8M0's NaN, which
// has no mantissa to spare), rather than only its all-ones mantissa ("fn").
bool top_binade_is_special(const FloatFormat& f) {
  return f.specials == Specials::IEEE ||
         (f.specials == Specials::AllOnesIsNaN && f.mantissa_bits == 0);
}
// The largest exponent a finite value may have, and the largest mantissa at that exponent.
int max_exponent(const FloatFormat& f) {
  const int all_ones = (1 << f.exponent_bits) - 1;
  return (top_binade_is_special(f) ? all_ones - 1 : all_ones) - f.bias();
}
uint32_t max_mantissa_at_top(const FloatFormat& f) {
  const uint32_t all_ones = (1u << f.mantissa_bits) - 1;
  // 1.111 is NaN in "fn"; a format whose whole top binade is special keeps all ones below it.
  return f.specials == Specials::AllOnesIsNaN && !top_binade_is_special(f) ? all_ones - 1
                                                                           : all_ones;
}
uint32_t sign_bit(const FloatFormat& f) { return f.has_sign ? 1u << (f.bits() - 1) : 0; }
// The smallest exponent a value may have: that of the subnormals and the first normal binade,
// or, without subnormals, that of the exponent field 0.
int min_exponent(const FloatFormat& f) { return f.has_subnormals ? 1 - f.bias() : -f.bias(); }
}  // namespace

double FloatFormat::decode(uint32_t pattern) const {
  check_layout(*this, true);
  if (bits() < 32 && pattern >> bits()) {
    std::string message("float format '");
    message += name ? name : "(unnamed)";
    message += "' has ";
    message += std::to_string(bits());
    message += " bits; pattern ";
    message += std::to_string(pattern);
    message += " does not fit";
    throw ValueError(message);
  }
  const uint32_t mant_mask = (1u << mantissa_bits) - 1, exp_mask = (1u << exponent_bits) - 1;
  const bool negative = pattern & sign_bit(*this);
  const uint32_t e = (pattern >> mantissa_bits) & exp_mask, m = pattern & mant_mask;
  // BEGIN SOLUTION ch05 float_decode
  double v;
  if (specials == Specials::IEEE && e == exp_mask) {
    v = m ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  } else if (specials == Specials::AllOnesIsNaN && e == exp_mask && m == mant_mask) {
    v = std::numeric_limits<double>::quiet_NaN();
  } else if (e == 0 && has_subnormals) {  // subnormal: no hidden 1, the smallest exponent
    v = std::ldexp(static_cast<double>(m), 1 - bias() - mantissa_bits);
  } else {
    v = std::ldexp(static_cast<double>(m | (1u << mantissa_bits)),
                   static_cast<int>(e) - bias() - mantissa_bits);
  }
  return negative ? -v : v;
  // END SOLUTION ch05 float_decode
}

uint32_t FloatFormat::encode(float x, Overflow overflow) const {
  check_layout(*this, true);
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
  // Without a sign bit, a negative number is NaN; so is zero where the format has none.
  if (!has_sign && std::signbit(x) && !(x == 0 && has_subnormals)) return nan_pattern;
  if (!has_subnormals && x == 0) return nan_pattern;
  const double a = std::fabs(static_cast<double>(x));  // exact: float -> double
  auto beyond = [&] {
    if (overflow == Overflow::Saturate || specials == Specials::None) return sign | max_pattern;
    return specials == Specials::IEEE ? sign | inf_pattern : sign | nan_pattern;
  };
  if (std::isinf(a)) return beyond();
  // BEGIN SOLUTION ch05 float_encode
  // Round to a multiple of the spacing at x's binade (at least the smallest binade's spacing),
  // with the FPU's default mode, round to nearest, ties to even: one exact rounding.
  int e;
  std::frexp(a, &e);  // a = f * 2^e, f in [0.5, 1): a's leading bit is worth 2^(e - 1)
  const int emin = min_exponent(*this);
  const int exponent = std::max(e - 1, emin);
  const double quantum = std::ldexp(1.0, exponent - mantissa_bits);
  const double q = std::nearbyint(a / quantum);  // a / quantum is exact: a power-of-2 division
  const double rounded = q * quantum;
  if (rounded > decode(max_pattern)) return beyond();
  // Without subnormals nothing lies below 2^emin: smaller values become the smallest value.
  if (!has_subnormals && rounded < std::ldexp(1.0, emin)) return sign;
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
  check_layout(*this, false);
  FInfo f{};
  f.bits = bits();
  f.eps = std::ldexp(1.0, -mantissa_bits);
  // The largest mantissa is all ones (2 - eps), or one less where all ones means NaN (2 - 2 eps).
  // (E8M0, without a mantissa, has one value per binade: 2 - eps = 1.)
  const bool all_ones_is_nan = specials == Specials::AllOnesIsNaN && !top_binade_is_special(*this);
  const double top = 2.0 - (all_ones_is_nan ? 2 : 1) * f.eps;
  f.max = std::ldexp(top, max_exponent(*this));
  f.smallest_normal = std::ldexp(1.0, min_exponent(*this));
  // Without subnormals (E8M0), the smallest value is the smallest normal, as numpy reports it.
  f.smallest_subnormal = has_subnormals ? f.smallest_normal * f.eps : f.smallest_normal;
  // Decimal digits that survive: floor(-log10(eps)); the resolution is 10 to minus that.
  f.resolution = std::pow(10.0, -std::floor(-std::log10(f.eps)));
  f.has_inf = specials == Specials::IEEE;
  f.has_nan = specials != Specials::None;
  return f;
}

}  // namespace tiny
