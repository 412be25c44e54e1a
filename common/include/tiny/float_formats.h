/// @file float_formats.h
/// @brief Floating-point formats bit by bit: float16 and bfloat16 as storage types, and every
/// format (down to fp8 and fp4) described by its layout, with exact conversions and limits.
///
/// float16 (1 sign, 5 exponent, 10 mantissa bits) and bfloat16 (1 sign, 8 exponent, 7 mantissa
/// bits) are stored as 16-bit patterns. Arithmetic on them converts to float32, computes, and
/// rounds the result back once, as PyTorch does on the CPU.
///
/// The 8-bit and 4-bit formats are storage formats: FloatFormat encodes a float32 into their
/// bits (round to nearest, ties to even, subnormals included) and decodes bits back exactly.
#pragma once
#include <cstdint>
#include <cstring>

#include "tiny/config.h"

namespace tiny {

/// The bits of a float32, without undefined behaviour.
TINY_HD inline uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

/// The float32 whose bits are `u`.
TINY_HD inline float float_from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

/// float32 -> float16 bits, round to nearest, ties to even; overflow gives +-inf, NaN stays NaN.
/// Every path is computed and the right one selected, without branches, so that a loop of
/// conversions vectorises.
TINY_HD inline uint16_t float_to_half_bits(float f) {
  uint32_t x = bits_of(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  x &= 0x7fffffffu;
  // Normal results: rebias the exponent (127 -> 15), add just under half an ulp plus the lowest
  // kept bit (ties to even), and drop 13 mantissa bits. A carry rounds 65520 and above to inf.
  const uint32_t normal = (x + 0xc8000fffu + ((x >> 13) & 1u)) >> 13;
  // Below float16's smallest normal (2^-14) the result is subnormal: adding 0.5 lines the
  // float16 subnormal grid up with float32's last mantissa bits, and the FPU's own rounding
  // (nearest, ties to even) does the work. Subtracting 0.5's bits leaves the half pattern.
  const uint32_t subnormal = bits_of(float_from_bits(x) + 0.5f) - 0x3f000000u;
  // From 65536 up, and for inf: inf; NaN stays a (quiet) NaN.
  const uint32_t special = x > 0x7f800000u ? 0x7e00u : 0x7c00u;
  uint32_t r = x < 0x38800000u ? subnormal : normal;
  r = x >= 0x47800000u ? special : r;
  return static_cast<uint16_t>(sign | r);
}

/// float16 bits -> float32 (exact: every float16 is a float32), without branches.
TINY_HD inline float half_bits_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t em = h & 0x7fffu;
  const uint32_t normal = (em << 13) + (112u << 23);             // rebias 15 -> 127
  const uint32_t special = 0x7f800000u | ((em & 0x3ffu) << 13);  // inf and NaN
  // Subnormal: the mantissa counts units of 2^-24, which float32 holds exactly.
  const uint32_t subnormal = bits_of(static_cast<float>(em) * 5.9604644775390625e-08f);
  uint32_t r = em >= 0x0400u ? normal : subnormal;
  r = em >= 0x7c00u ? special : r;
  return float_from_bits(sign | r);
}

/// float32 -> bfloat16 bits, round to nearest, ties to even (PyTorch rounds; it does not truncate).
TINY_HD inline uint16_t float_to_bfloat16_bits(float f) {
  const uint32_t x = bits_of(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return 0x7fc0u;  // every NaN becomes the quiet NaN
  const uint32_t lowest_kept = (x >> 16) & 1u;
  return static_cast<uint16_t>((x + 0x7fffu + lowest_kept) >> 16);
}

/// bfloat16 bits -> float32 (exact: bfloat16 is float32's top half).
TINY_HD inline float bfloat16_bits_to_float(uint16_t b) {
  return float_from_bits(static_cast<uint32_t>(b) << 16);
}

/// A float16 value in memory. Converts to and from float32; arithmetic happens in float32.
struct Half {
  uint16_t bits = 0;  ///< the 16-bit pattern
  Half() = default;   ///< +0
  /// Rounds a float32 to the nearest value (ties to even).
  TINY_HD Half(float f) : bits(float_to_half_bits(f)) {}  // NOLINT: implicit, like a float type
  /// The exact float32 value.
  TINY_HD operator float() const { return half_bits_to_float(bits); }
  /// The value with bit pattern `b`.
  TINY_HD static Half from_bits(uint16_t b) {
    Half h;
    h.bits = b;
    return h;
  }
};

/// A bfloat16 value in memory. Converts to and from float32; arithmetic happens in float32.
struct BFloat16 {
  uint16_t bits = 0;     ///< the 16-bit pattern
  BFloat16() = default;  ///< +0
  /// Rounds a float32 to the nearest value (ties to even).
  TINY_HD BFloat16(float f) : bits(float_to_bfloat16_bits(f)) {}  // NOLINT
  /// The exact float32 value.
  TINY_HD operator float() const { return bfloat16_bits_to_float(bits); }
  /// The value with bit pattern `b`.
  TINY_HD static BFloat16 from_bits(uint16_t b) {
    BFloat16 h;
    h.bits = b;
    return h;
  }
};

// ---- every format, from its layout ---------------------------------------------------------------

/// What happens to a finite value beyond a format's largest finite number.
enum class Overflow {
  /// Clamp to +-largest finite (the CUDA toolkit's __NV_SATFINITE; the only choice for FP4).
  Saturate,
  /// Become +-infinity where the format has it, else NaN (PyTorch's float8 casts, __NV_NOSAT).
  NonFinite,
};

/// How a format spends its all-ones exponent.
enum class Specials {
  IEEE,          ///< all-ones exponent: infinity (mantissa 0) or NaN (float32/16, bf16, E5M2)
  AllOnesIsNaN,  ///< only the all-ones pattern is NaN, no infinity ("fn": float8_e4m3fn)
  None,          ///< every pattern is a finite number (FP4 E2M1)
};

/// The limits of a format, as torch.finfo reports them, all derived from the bit layout.
struct FInfo {
  int bits;                   ///< total bits
  double max;                 ///< largest finite value (min is -max)
  double smallest_normal;     ///< 2^(1 - bias), torch's "tiny"
  double smallest_subnormal;  ///< smallest_normal * eps: the last bit below the normals
  double eps;                 ///< step from 1.0 to the next value: 2^-mantissa_bits
  double resolution;          ///< 10^-(decimal digits of precision), numpy's and torch's
  bool has_inf;               ///< infinities exist
  bool has_nan;               ///< a NaN pattern exists
};

/// A binary floating-point format: a sign bit (unless `has_sign` is false), `exponent_bits`,
/// `mantissa_bits`, an exponent bias of 2^(exponent_bits - 1) - 1, and a rule for its special
/// values. encode() and decode() handle formats of up to 32 bits; info() any. A layout that
/// cannot be a float format (no exponent bits, an IEEE format without a mantissa to tell
/// infinity from NaN, a format with no NaN for the values it cannot hold) raises ValueError.
struct FloatFormat {
  const char* name;   ///< "float8_e4m3fn", ...
  int exponent_bits;  ///< width of the exponent field (at least 1)
  int mantissa_bits;  ///< width of the mantissa (fraction) field (0 for E8M0)
  Specials specials;  ///< what the all-ones exponent means
  /// false: no sign bit; negative numbers become NaN (E8M0: "u" for unsigned in fnu).
  bool has_sign = true;
  /// false: an exponent field of 0 is a binade like the others (2^-bias), so there is no zero
  /// and no subnormal; values below the smallest become the smallest, zero becomes NaN (E8M0).
  bool has_subnormals = true;

  /// The exponent bias; ValueError for a layout that cannot be a float format (as info()).
  int bias() const;
  /// Bits per value, sign included.
  int bits() const { return (has_sign ? 1 : 0) + exponent_bits + mantissa_bits; }
  /// The value of a bit pattern (exact); a pattern wider than the format raises ValueError.
  double decode(uint32_t pattern) const;
  /// The pattern nearest to `x` (ties to even), with `overflow` deciding out-of-range values.
  uint32_t encode(float x, Overflow overflow = Overflow::NonFinite) const;
  /// decode(encode(x)): `x` as this format would store it.
  double round(float x, Overflow overflow = Overflow::NonFinite) const {
    return decode(encode(x, overflow));
  }
  /// The format's limits.
  FInfo info() const;
};

inline constexpr FloatFormat kFormatFloat32{"float32", 8, 23, Specials::IEEE};   ///< IEEE single
inline constexpr FloatFormat kFormatFloat16{"float16", 5, 10, Specials::IEEE};   ///< IEEE half
inline constexpr FloatFormat kFormatBFloat16{"bfloat16", 8, 7, Specials::IEEE};  ///< brain float
inline constexpr FloatFormat kFormatE4M3{"float8_e4m3fn", 4, 3,
                                         Specials::AllOnesIsNaN};  ///< fp8, more precision
inline constexpr FloatFormat kFormatE5M2{"float8_e5m2", 5, 2, Specials::IEEE};  ///< fp8, more range
inline constexpr FloatFormat kFormatE2M1{"float4_e2m1", 2, 1,
                                         Specials::None};  ///< fp4 (NVFP4's values)
/// The OCP MX block scale (ml_dtypes' float8_e8m0fnu): 8 exponent bits and nothing else, a power
/// of two 2^(e - 127) for e = 0..254, and NaN at 0xFF. No sign, no zero, no infinity.
inline constexpr FloatFormat kFormatE8M0{"float8_e8m0fnu", 8, 0, Specials::AllOnesIsNaN,
                                         /*has_sign=*/false, /*has_subnormals=*/false};

}  // namespace tiny
