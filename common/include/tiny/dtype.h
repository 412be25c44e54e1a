/// @file dtype.h
/// @brief Data types: what one element is, how many bytes it takes, and how types promote.
#pragma once
#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string>
#include <type_traits>

#include "tiny/error.h"
#include "tiny/float_formats.h"

namespace tiny {

/// The element types a tensor can hold.
enum class DType : uint8_t { Float32, Float64, Float16, BFloat16, Int32, Int64, Bool };

inline constexpr DType kFloat32 = DType::Float32;    ///< torch.float32, the default float type
inline constexpr DType kFloat64 = DType::Float64;    ///< torch.float64
inline constexpr DType kFloat16 = DType::Float16;    ///< torch.float16 (half)
inline constexpr DType kBFloat16 = DType::BFloat16;  ///< torch.bfloat16
inline constexpr DType kInt32 = DType::Int32;        ///< torch.int32
inline constexpr DType kInt64 = DType::Int64;        ///< torch.int64, the default integer type
inline constexpr DType kBool = DType::Bool;          ///< torch.bool

/// Every dtype, in declaration order (for tables and tests).
inline constexpr DType kAllDTypes[] = {kFloat32, kFloat64, kFloat16, kBFloat16,
                                       kInt32,   kInt64,   kBool};

/// Bytes per element: 4, 8, 2, 2, 4, 8, 1.
size_t element_size(DType dtype);
/// PyTorch's short name: "float32", "bfloat16", "int64", "bool", ...
const char* dtype_name(DType dtype);
/// PyTorch's Python name for error messages: "Float", "Half", "BFloat16", "Long", "Bool", ...
const char* dtype_legacy_name(DType dtype);
/// True for the four floating-point types.
bool is_floating(DType dtype);
/// True for int32 and int64 (bool is its own category).
bool is_integral(DType dtype);
/// The smallest type both can be converted to without losing range (torch.promote_types).
DType promote_types(DType a, DType b);
/// The bit layout of a floating dtype; TypeError for the others.
FloatFormat float_format(DType dtype);
/// torch.finfo(dtype): the limits of a floating dtype, derived from its bit layout.
FInfo finfo(DType dtype);

/// Prints "torch.float32" and so on, as Python prints a dtype.
std::ostream& operator<<(std::ostream& os, DType dtype);

/// The C++ type that stores one element of each dtype.
template <DType D> struct dtype_cpp;
/// Float32 elements are stored as `float`.
template <> struct dtype_cpp<DType::Float32> { using type = float; /**< the C++ type */ };
/// Float64 elements are stored as `double`.
template <> struct dtype_cpp<DType::Float64> { using type = double; /**< the C++ type */ };
/// Float16 elements are stored as `Half`.
template <> struct dtype_cpp<DType::Float16> { using type = Half; /**< the C++ type */ };
/// BFloat16 elements are stored as `BFloat16`.
template <> struct dtype_cpp<DType::BFloat16> { using type = BFloat16; /**< the C++ type */ };
/// Int32 elements are stored as `int32_t`.
template <> struct dtype_cpp<DType::Int32> { using type = int32_t; /**< the C++ type */ };
/// Int64 elements are stored as `int64_t`.
template <> struct dtype_cpp<DType::Int64> { using type = int64_t; /**< the C++ type */ };
/// Bool elements are stored as `bool`.
template <> struct dtype_cpp<DType::Bool> { using type = bool; /**< the C++ type */ };

/// The dtype whose elements are the C++ type T.
template <typename T> constexpr DType dtype_of() {
  if constexpr (std::is_same_v<T, float>) return kFloat32;
  else if constexpr (std::is_same_v<T, double>) return kFloat64;
  else if constexpr (std::is_same_v<T, Half>) return kFloat16;
  else if constexpr (std::is_same_v<T, BFloat16>) return kBFloat16;
  else if constexpr (std::is_same_v<T, int32_t>) return kInt32;
  else if constexpr (std::is_same_v<T, int64_t>) return kInt64;
  else if constexpr (std::is_same_v<T, bool>) return kBool;
  else static_assert(sizeof(T) == 0, "no dtype for this C++ type");
}

/// The type arithmetic on T is done in: float for the 16-bit floats, T itself otherwise.
template <typename T>
using opmath_t = std::conditional_t<std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>, float, T>;

/// Calls `f.template operator()<T>()` with T the C++ element type of `dtype`: the one place
/// where a runtime dtype becomes a compile-time type.
template <typename F> decltype(auto) dispatch_dtype(DType dtype, F&& f) {
  switch (dtype) {
    case DType::Float32: return f.template operator()<float>();
    case DType::Float64: return f.template operator()<double>();
    case DType::Float16: return f.template operator()<Half>();
    case DType::BFloat16: return f.template operator()<BFloat16>();
    case DType::Int32: return f.template operator()<int32_t>();
    case DType::Int64: return f.template operator()<int64_t>();
    case DType::Bool: return f.template operator()<bool>();
  }
  throw RuntimeError("unknown dtype");
}

/// dispatch_dtype for ops defined only on floating-point types: instantiates `f` for the four
/// float types alone, and raises TypeError for the others.
template <typename F> decltype(auto) dispatch_floating(DType dtype, const char* op, F&& f) {
  switch (dtype) {
    case DType::Float32: return f.template operator()<float>();
    case DType::Float64: return f.template operator()<double>();
    case DType::Float16: return f.template operator()<Half>();
    case DType::BFloat16: return f.template operator()<BFloat16>();
    default: break;
  }
  throw TypeError(std::string("\"") + op + "\" not implemented for '" + dtype_legacy_name(dtype) + "'");
}

}  // namespace tiny
