/// @file dtype.h
/// @brief Data types: what one element is, how many bytes it takes, and how types promote.
#pragma once
#include <cstddef>
#include <cstdint>
#include <limits>
#include <ostream>
#include <string>
#include <type_traits>

#include "tiny/error.h"
#include "tiny/float_formats.h"

namespace tiny {

/// Every dtype, in one list: X(Name, C++ type, PyTorch's name, PyTorch's legacy name, promotion
/// rank). Everything below that depends on the set of dtypes (the enum, names, sizes, the C++
/// type of each, dispatch, promotion) is generated from it, so adding a storage dtype is one line
/// here plus, where it needs one, a conversion. The rank orders the types for promotion: a
/// higher rank holds every value of a lower one, except within the two ranks that hold two types
/// each: neither of uint8 and int8 holds the other (they meet in int16), nor do float16 and
/// bfloat16 (they meet in float32).
// clang-format off
#define TINY_FORALL_DTYPES(X)                     \
  X(Float32, float, "float32", "Float", 6)        \
  X(Float64, double, "float64", "Double", 7)      \
  X(Float16, Half, "float16", "Half", 5)          \
  X(BFloat16, BFloat16, "bfloat16", "BFloat16", 5) \
  X(Int32, int32_t, "int32", "Int", 3)            \
  X(Int64, int64_t, "int64", "Long", 4)           \
  X(Bool, bool, "bool", "Bool", 0)                \
  X(UInt8, uint8_t, "uint8", "Byte", 1)           \
  X(Int8, int8_t, "int8", "Char", 1)              \
  X(Int16, int16_t, "int16", "Short", 2)
// clang-format on

/// \cond INTERNAL
#define TINY_DTYPE_ENUM(NAME, CPP, STR, LEGACY, RANK) NAME,
/// \endcond
/// The element types a tensor can hold.
enum class DType : uint8_t { TINY_FORALL_DTYPES(TINY_DTYPE_ENUM) };
#undef TINY_DTYPE_ENUM

inline constexpr DType kFloat32 = DType::Float32;    ///< torch.float32, the default float type
inline constexpr DType kFloat64 = DType::Float64;    ///< torch.float64
inline constexpr DType kFloat16 = DType::Float16;    ///< torch.float16 (half)
inline constexpr DType kBFloat16 = DType::BFloat16;  ///< torch.bfloat16
inline constexpr DType kInt32 = DType::Int32;        ///< torch.int32
inline constexpr DType kInt64 = DType::Int64;        ///< torch.int64, the default integer type
inline constexpr DType kBool = DType::Bool;          ///< torch.bool
inline constexpr DType kUInt8 = DType::UInt8;        ///< torch.uint8 (images, packed formats)
inline constexpr DType kInt8 = DType::Int8;          ///< torch.int8 (quantised weights)
inline constexpr DType kInt16 = DType::Int16;        ///< torch.int16

/// \cond INTERNAL
#define TINY_DTYPE_VALUE(NAME, CPP, STR, LEGACY, RANK) DType::NAME,
/// \endcond
/// Every dtype, in declaration order (for tables and tests).
inline constexpr DType kAllDTypes[] = {TINY_FORALL_DTYPES(TINY_DTYPE_VALUE)};
#undef TINY_DTYPE_VALUE

/// Bytes per element: 4, 8, 2, 2, 4, 8, 1, 1, 1, 2.
size_t element_size(DType dtype);
/// PyTorch's short name: "float32", "bfloat16", "int64", "bool", ...
const char* dtype_name(DType dtype);
/// PyTorch's Python name for error messages: "Float", "Half", "BFloat16", "Long", "Bool", ...
const char* dtype_legacy_name(DType dtype);
/// True for the four floating-point types.
bool is_floating(DType dtype);
/// True for the five integer types, uint8 to int64 (bool is its own category).
bool is_integral(DType dtype);
/// The smallest type both can be converted to without losing range (torch.promote_types).
DType promote_types(DType a, DType b);
/// The bit layout of a floating dtype; TypeError for the others.
FloatFormat float_format(DType dtype);
/// torch.finfo(dtype): the limits of a floating dtype, derived from its bit layout.
FInfo finfo(DType dtype);

/// Prints "torch.float32" and so on, as Python prints a dtype.
std::ostream& operator<<(std::ostream& os, DType dtype);

/// The C++ type that stores one element of each dtype: `dtype_cpp<kFloat16>::type` is Half.
template <DType D> struct dtype_cpp;
/// The dtype whose elements are the C++ type T (undefined for other types).
template <typename T> struct dtype_of_cpp;
/// \cond INTERNAL
#define TINY_DTYPE_CPP(NAME, CPP, STR, LEGACY, RANK)               \
  template <> struct dtype_cpp<DType::NAME> { using type = CPP; }; \
  template <> struct dtype_of_cpp<CPP> { static constexpr DType value = DType::NAME; };
TINY_FORALL_DTYPES(TINY_DTYPE_CPP)
#undef TINY_DTYPE_CPP
/// \endcond

/// The dtype whose elements are the C++ type T: `dtype_of<float>()` is kFloat32.
template <typename T> constexpr DType dtype_of() { return dtype_of_cpp<T>::value; }

/// The type arithmetic on T is done in: float for the 16-bit floats, T itself otherwise.
template <typename T>
using opmath_t =
    std::conditional_t<std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>, float, T>;

/// Calls `f.template operator()<T>()` with T the C++ element type of `dtype`: the one place
/// where a runtime dtype becomes a compile-time type.
/// \cond INTERNAL
#define TINY_DTYPE_CASE(NAME, CPP, STR, LEGACY, RANK) \
  case DType::NAME: return f.template operator()<CPP>();
/// \endcond
template <typename F> decltype(auto) dispatch_dtype(DType dtype, F&& f) {
  switch (dtype) { TINY_FORALL_DTYPES(TINY_DTYPE_CASE) }
  throw RuntimeError("unknown dtype");
}
#undef TINY_DTYPE_CASE

/// PyTorch's error for a kernel that has no code for a dtype: "\"pow\" not implemented for
/// 'Bool'" (a NotImplementedError in PyTorch 2.x, a RuntimeError in 1.13).
inline NotImplementedError not_implemented_for(const char* kernel, DType dtype) {
  return NotImplementedError(std::string("\"") + kernel + "\" not implemented for '" +
                             dtype_legacy_name(dtype) + "'");
}

/// dispatch_dtype for ops defined only on floating-point types: instantiates `f` for the four
/// float types alone, and raises NotImplementedError for the others (PyTorch's "not implemented
/// for").
template <typename F> decltype(auto) dispatch_floating(DType dtype, const char* op, F&& f) {
  switch (dtype) {
    case DType::Float32: return f.template operator()<float>();
    case DType::Float64: return f.template operator()<double>();
    case DType::Float16: return f.template operator()<Half>();
    case DType::BFloat16: return f.template operator()<BFloat16>();
    default: break;
  }
  throw not_implemented_for(op, dtype);
}

/// True when truncating the float `v` toward zero gives a value the integer type I holds: v in
/// (min - 1, max + 1) (-2147483648.5 truncates to int32's minimum); false for NaN and the
/// infinities. A C++ cast of any other float to I is undefined behaviour, so every
/// float-to-integer conversion in the library asks this first. F is float or double.
template <typename I, typename F> TINY_HD constexpr bool truncation_fits(F v) {
  static_assert(std::is_integral_v<I> && (std::is_same_v<F, float> || std::is_same_v<F, double>));
  // max + 1 and -min are powers of two, exact in every float type. (Spelled with shifts, not
  // numeric_limits, whose members CUDA device code may not call.)
  constexpr int kValueBits = 8 * int(sizeof(I)) - (std::is_signed_v<I> ? 1 : 0);
  constexpr F kTop = F(2) * static_cast<F>(uint64_t(1) << (kValueBits - 1));
  if constexpr (!std::is_signed_v<I>) {
    return v > F(-1) && v < kTop;
  } else {
    // min - 1 is exact only when F has more significant bits than I has value bits; when it
    // has fewer, no F lies strictly between min - 1 and min, and v >= min says the same.
    constexpr int kDigits = std::is_same_v<F, float> ? 24 : 53;
    if constexpr (kDigits > kValueBits) return v > -kTop - F(1) && v < kTop;
    else return v >= -kTop && v < kTop;
  }
}

/// `v` truncated to the integer type I, or PyTorch's RuntimeError "value cannot be converted to
/// type <type_name> without overflow" when it does not fit. PyTorch (c10::checked_convert) tests
/// the value itself against I's limits, before truncating: 2147483647.5 does not fit an int32.
/// truncation_fits as well keeps out 2^63, which that test lets through for int64.
template <typename I> I truncate_checked(double v, const char* type_name) {
  constexpr double kMin = static_cast<double>(std::numeric_limits<I>::min());
  constexpr double kMax = static_cast<double>(std::numeric_limits<I>::max());
  if (!(truncation_fits<I>(v) && v >= kMin && v <= kMax))
    throw RuntimeError(std::string("value cannot be converted to type ") + type_name +
                       " without overflow");
  return static_cast<I>(v);
}

}  // namespace tiny
