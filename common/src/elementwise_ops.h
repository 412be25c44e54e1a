// elementwise_ops.h: what each elementwise op computes on one element, written once for every
// backend. Not part of the public API.
//
// Each op is a small struct. Its math is one expression in the inputs x, y, z and the scalars
// a, b (add's alpha, addcmul's value, clamp's bounds), over the compute type T (float for the
// 16-bit floats: opmath_t). The TINY_MATH macro turns that expression into two things at once:
// the TINY_HD function the CPU loops (common/src/cpu/) and the CUDA kernels (common/cuda/) call,
// and the same expression as text (`source`), which generated kernels paste into their source
// (chapter 09). Since both come from the same tokens they cannot drift; tests/op_table_test.cpp
// compiles every `source` against kSourcePrelude (op_table.cpp) and checks it agrees.
//
// The expression may call only the functions of namespace fn below; kSourcePrelude defines the
// same names for generated code. Where an integer or bool type needs other code (pow of two
// integers), the struct writes its own call operator and keeps `math` for the float types.
//
// Which op table entry uses which struct, with what dtype rule, autograd node and cost, is
// op_table.cpp's; this file is only the arithmetic.
#pragma once
#include <cmath>
#include <type_traits>

#include "tiny/config.h"
#include "tiny/dtype.h"

namespace tiny::ops {

/// An op's number in the compute type T. For an integer T a double cast would be undefined
/// for what the number can be here (clamp's missing bound is an infinity), so it saturates:
/// -inf and +inf become T's minimum and maximum, and NaN becomes 0.
template <typename T> TINY_HD inline T scalar_as(double v) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    constexpr T kMin = static_cast<T>(uint64_t(1) << (8 * sizeof(T) - 1));
    if (!truncation_fits<T>(v)) return v != v ? T(0) : v > 0 ? static_cast<T>(~kMin) : kMin;
  }
  return static_cast<T>(v);
}

/// The numbers an op takes besides its tensors; each op documents what `a` and `b` mean.
struct Scalars {
  double a = 0, b = 0;
};

/// Every op struct derives from this, so kernels can hand any op its scalars the same way.
struct OpBase {
  Scalars p;
  /// True for ops whose expression calls fma, itself or through the vector math (exp, log,
  /// ...): the CPU compiles their loops for AVX-512 and AVX2+FMA processors too, and picks one
  /// at run time (cpu/elementwise.h).
  static constexpr bool uses_fma = false;
};

/// The dtypes an op's kernels are compiled for; the dispatcher raises "not implemented" for the
/// others before any loop runs.
enum class Types { All, NoBool, Floating };

/// True when the kernels of op struct Op exist for element type T: the dispatcher refuses the
/// other dtypes with "not implemented for" before any kernel is looked for. (Every non-integral
/// element type, Half and BFloat16 included, is a float.)
template <typename Op, typename T>
inline constexpr bool kCompiledFor = Op::types == Types::All ||
                                     (Op::types == Types::NoBool && !std::is_same_v<T, bool>) ||
                                     !std::is_integral_v<T>;

#if !defined(__CUDA_ARCH__)
/// The vectorisable float32 math of chapter 09's fused kernels (common/src/fusion/fused_math.inc):
/// tiny_expf, tiny_logf, tiny_tanhf, tiny_erff, tiny_geluf, tiny_log1pf, tiny_expm1f. The eager
/// CPU loops call the same code as the generated kernels, so eager and fused results agree bit
/// for bit.
namespace vec {
#include "fusion/fused_math.inc"
}  // namespace vec
#endif

/// The functions an op's expression may call: the C++ library's own, and three small helpers
/// with the meaning PyTorch's kernels give them.
/// The C++ library's functions an expression may call (op_source_prelude() declares the same).
#define TINY_MATH_FUNCTIONS(X) X(fabs) X(fma) X(pow) X(sqrt)
/// The transcendental functions, which on float32 are fused_math.inc's on the host (the C
/// library's are scalar calls: GELU on 4096 x 4096 float32 took 42 times a memcpy through
/// erff) and CUDA's own on the device; float64 keeps the C library's everywhere.
#define TINY_VECTOR_MATH_FUNCTIONS(X) X(erf) X(exp) X(expm1) X(log) X(log1p) X(tanh)
#if defined(__CUDA_ARCH__)
#define TINY_HOST_OR_DEVICE(HOST, DEVICE) DEVICE
#else
#define TINY_HOST_OR_DEVICE(HOST, DEVICE) HOST
#endif
// The float versions are always inlined, as fused_math.inc's functions are: a call that is not
// inlined into the AVX2 or AVX-512 copy of a loop runs the plain x86-64 code per element.
namespace fn {
/// `r` computed from `x`, with the sign of an invalid result's NaN cleared (log(-1) is NaN): the
/// C library gives x86's default NaN, whose sign bit is set, where PyTorch's CPU kernels (SLEEF)
/// give a positive one. A NaN that came in goes out as it came.
template <typename X, typename R> TINY_HD inline R positive_nan(X x, R r) {
  return r != r && x == x ? R(std::fabs(r)) : r;
}
#define TINY_USING_STD(F) using std::F;
TINY_MATH_FUNCTIONS(TINY_USING_STD)
#undef TINY_USING_STD
#define TINY_VECTOR_FN(F)                                                              \
  TINY_HD __attribute__((always_inline)) inline float F(float x) {                     \
    return TINY_HOST_OR_DEVICE(vec::tiny_##F##f(x), std::F(x));                        \
  }                                                                                    \
  TINY_HD inline double F(double x) { return positive_nan(x, std::F(x)); }
TINY_VECTOR_MATH_FUNCTIONS(TINY_VECTOR_FN)
#undef TINY_VECTOR_FN
/// GELU, x Phi(x) with Phi(x) = (1 + erf(x / sqrt 2)) / 2: PyTorch's formula on the device and
/// in float64; on the host in float32, fused_math.inc's one polynomial, about half the work.
template <typename T> TINY_HD T gelu_formula(T x) {
  return x * T(0.5) * (T(1) + erf(x * T(0.70710678118654752440)));
}
TINY_HD __attribute__((always_inline)) inline float gelu(float x) {
  return TINY_HOST_OR_DEVICE(vec::tiny_geluf(x), gelu_formula(x));
}
TINY_HD inline double gelu(double x) { return gelu_formula(x); }
/// True for NaN (always false for integers and bool).
template <typename T> TINY_HD bool is_nan(T x) {
  if constexpr (std::is_floating_point_v<T>) return x != x;
  else return false;
}
/// std::max's rule: `y` when x < y, else x.
template <typename T> TINY_HD T max_of(T x, T y) { return x < y ? y : x; }
/// std::min's rule: `y` when y < x, else x.
template <typename T> TINY_HD T min_of(T x, T y) { return y < x ? y : x; }
}  // namespace fn

/// Forces a function inline wherever it is called. The CPU loops' AVX2 and AVX-512 copies
/// (cpu/elementwise.h) compile an op's math for their instruction set only when it is inlined
/// into them; left as a call, it runs the plain x86-64 code per element, with every fused
/// multiply-add a call to fmaf (eager exp took 40 times a memcpy so).
#define TINY_INLINE __attribute__((always_inline)) inline

/// Declares an op's arity, its `math` and its `source` from one expression; the call operator
/// the loops use forwards to `math`.
#define TINY_MATH(ARITY, EXPR)                                                         \
  TINY_MATH_ONLY(ARITY, EXPR)                                                          \
  template <typename T, typename... R>                                                 \
  TINY_HD TINY_INLINE auto operator()(T x, R... rest) const {                          \
    return math(x, rest...);                                                           \
  }

/// TINY_MATH without the call operator, for ops that write their own.
#define TINY_MATH_ONLY(ARITY, EXPR)                                                      \
  static constexpr int arity = ARITY;                                                    \
  static constexpr const char* source = #EXPR;                                           \
  template <typename T>                                                                  \
  TINY_HD TINY_INLINE auto math(T x, [[maybe_unused]] T y = T(),                        \
                                [[maybe_unused]] T z = T()) const {                      \
    using namespace ::tiny::ops::fn;                                                     \
    [[maybe_unused]] const T a = scalar_as<T>(p.a), b = scalar_as<T>(p.b);               \
    return EXPR;                                                                         \
  }

// The ops are laid out by hand: a formatter would read `x * y` in a macro argument as a pointer
// declaration and change the source text.
// clang-format off

// ---- one input --------------------------------------------------------------------------------

/// The value itself: with different input and output dtypes, the conversion kernel of copies
/// (not an op table row).
struct Identity : OpBase {
  static constexpr Types types = Types::All;
  TINY_MATH(1, x)
};
struct Neg : OpBase {
  static constexpr Types types = Types::NoBool;
  TINY_MATH(1, -x)
};
/// `+ T(0)` turns -0.0 into +0.0 (and leaves every other value alone), as fabs would. -x > x is
/// x < 0 for floats and signed integers, and false for an unsigned type, whose -x is a negative
/// int (nvcc calls x < 0 on an unsigned type a pointless comparison).
struct Abs : OpBase {
  static constexpr Types types = Types::NoBool;
  TINY_MATH(1, -x > x ? -x : x + T(0))
};
/// NaN > 0 is false, so a plain comparison would turn NaN into 0; PyTorch's relu keeps NaN.
struct Relu : OpBase {
  static constexpr Types types = Types::NoBool;
  TINY_MATH(1, max_of(x, T(0)))  // NaN and -0.0 pass through (x < 0 is false), as in PyTorch
};
struct Sqrt : OpBase {
  static constexpr Types types = Types::Floating;
  TINY_MATH(1, sqrt(x))
};
struct Rsqrt : OpBase {
  static constexpr Types types = Types::Floating;
  TINY_MATH(1, T(1) / sqrt(x))
};
struct Exp : OpBase {
  static constexpr Types types = Types::Floating;
  static constexpr bool uses_fma = true;
  TINY_MATH(1, exp(x))
};
struct Log : OpBase {
  static constexpr Types types = Types::Floating;
  static constexpr bool uses_fma = true;
  TINY_MATH(1, log(x))
};
/// log(1 + x), accurate for small x, where 1 + x would round most of x away.
struct Log1p : OpBase {
  static constexpr Types types = Types::Floating;
  static constexpr bool uses_fma = true;
  TINY_MATH(1, log1p(x))
};
/// e^x - 1, accurate for small x, where e^x is close to 1.
struct Expm1 : OpBase {
  static constexpr Types types = Types::Floating;
  static constexpr bool uses_fma = true;
  TINY_MATH(1, expm1(x))
};
struct Erf : OpBase {
  static constexpr Types types = Types::Floating;
  static constexpr bool uses_fma = true;
  TINY_MATH(1, erf(x))
};
struct Sigmoid : OpBase {
  static constexpr Types types = Types::Floating;
  static constexpr bool uses_fma = true;
  TINY_MATH(1, T(1) / (T(1) + exp(-x)))
};
struct Tanh : OpBase {
  static constexpr Types types = Types::Floating;
  static constexpr bool uses_fma = true;
  TINY_MATH(1, tanh(x))
};
/// x * Phi(x), Phi the standard normal CDF: 0.5 * (1 + erf(x / sqrt(2))).
struct Gelu : OpBase {
  static constexpr Types types = Types::Floating;
  static constexpr bool uses_fma = true;
  TINY_MATH(1, gelu(x))
};
// x.pow(e) for the common fixed exponents: a multiply costs far less than std::pow.
struct Square : OpBase {
  static constexpr Types types = Types::NoBool;
  TINY_MATH(1, x * x)
};
struct Cube : OpBase {
  static constexpr Types types = Types::Floating;
  TINY_MATH(1, x * x * x)
};
struct Reciprocal : OpBase {
  static constexpr Types types = Types::Floating;
  TINY_MATH(1, T(1) / x)
};
/// clamp(x, min = a, max = b): NaN stays NaN; with a > b every element becomes b, as in PyTorch.
struct Clamp : OpBase {
  static constexpr Types types = Types::NoBool;
  TINY_MATH(1, is_nan(x) ? x : min_of(max_of(x, a), b))
};
/// clamp_min(x, a).
struct ClampMin : OpBase {
  static constexpr Types types = Types::NoBool;
  TINY_MATH(1, is_nan(x) ? x : max_of(x, a))
};
/// clamp_max(x, b): clamp's scalars are always (min, max), so the upper bound is b.
struct ClampMax : OpBase {
  static constexpr Types types = Types::NoBool;
  TINY_MATH(1, is_nan(x) ? x : min_of(x, b))
};

// ---- two inputs -------------------------------------------------------------------------------

/// x + alpha * y (alpha = a, 1 for plain addition; bool + bool is a logical or).
struct Add : OpBase {
  static constexpr Types types = Types::All;
  TINY_MATH(2, x + a * y)
};
/// x - alpha * y (alpha = a).
struct Sub : OpBase {
  static constexpr Types types = Types::All;
  TINY_MATH(2, x - a * y)
};
/// y - alpha * x (alpha = a): `2 - t` is rsub(t, 2), as PyTorch computes a number minus a tensor.
struct Rsub : OpBase {
  static constexpr Types types = Types::All;
  TINY_MATH(2, y - a * x)
};
struct Mul : OpBase {
  static constexpr Types types = Types::All;
  TINY_MATH(2, x * y)
};
/// True division; integers are promoted to float32 before it runs.
struct Div : OpBase {
  static constexpr Types types = Types::Floating;
  TINY_MATH(2, x / y)
};
struct Pow : OpBase {
  static constexpr Types types = Types::NoBool;
  // A negative base to a fractional power is NaN, positive as PyTorch's (see positive_nan).
  TINY_MATH_ONLY(2, is_nan(y) ? pow(x, y) : positive_nan(x, pow(x, y)))
  template <typename T> TINY_HD TINY_INLINE T operator()(T base, T exponent) const {
    if constexpr (std::is_integral_v<T>) {
      // A negative power of an integer is 0 (1 / base truncated), except for 1 and -1, as in
      // PyTorch; pow with a negative number as the exponent was refused before.
      if constexpr (std::is_signed_v<T>) {
        if (exponent < 0) {
          if (base == T(1)) return T(1);
          if (base == T(-1)) return (exponent & 1) ? T(-1) : T(1);
          return T(0);
        }
      }
      // Square and multiply, wrapping as PyTorch's integers wrap: in an unsigned type at least
      // as wide as int, where overflow is defined (the signed type's is undefined, and a
      // narrower unsigned type would be promoted to int, whose 65529 * 65529 overflows). Only
      // the low bits are kept, and those wrap the same in the wider type.
      using U = std::conditional_t<sizeof(T) <= sizeof(uint32_t), uint32_t, uint64_t>;
      U result = 1, b = static_cast<U>(base);
      for (U e = static_cast<U>(exponent); e != 0; e >>= 1) {
        if (e & 1) result *= b;
        b *= b;
      }
      return static_cast<T>(result);
    } else {
      return math(base, exponent);
    }
  }
};
/// Elementwise max; a NaN in either input gives NaN.
struct Maximum : OpBase {
  static constexpr Types types = Types::All;
  TINY_MATH(2, is_nan(x) || is_nan(y) ? x + y : (x > y ? x : y))
};
/// Elementwise min; a NaN in either input gives NaN.
struct Minimum : OpBase {
  static constexpr Types types = Types::All;
  TINY_MATH(2, is_nan(x) || is_nan(y) ? x + y : (x < y ? x : y))
};
/// gelu's backward, as one kernel: x (the gradient of gelu's output) times d/dy y Phi(y) =
/// Phi(y) + y phi(y), phi the standard normal density, y gelu's input.
struct GeluBackward : OpBase {
  static constexpr Types types = Types::Floating;
  static constexpr bool uses_fma = true;
  TINY_MATH(2, x * (T(0.5) * (T(1) + erf(y * T(0.70710678118654752440))) +
                    y * (exp(T(-0.5) * y * y) * T(0.39894228040143267794))))
};
/// x + weight * (y - x), weight = a. PyTorch computes it as one fused multiply-add, from x for
/// small weights and from y for large ones, so that lerp(x, y, 1) is exactly y.
struct LerpScalar : OpBase {
  static constexpr Types types = Types::Floating;
  static constexpr bool uses_fma = true;
  TINY_MATH(2, fabs(a) < T(0.5) ? fma(a, y - x, x) : fma(a - T(1), y - x, y))
};

// Comparisons return bool, whatever they compare.
struct Eq : OpBase {
  static constexpr Types types = Types::All;
  TINY_MATH(2, x == y)
};
struct Ne : OpBase {
  static constexpr Types types = Types::All;
  TINY_MATH(2, x != y)
};
struct Lt : OpBase {
  static constexpr Types types = Types::All;
  TINY_MATH(2, x < y)
};
struct Le : OpBase {
  static constexpr Types types = Types::All;
  TINY_MATH(2, x <= y)
};
struct Gt : OpBase {
  static constexpr Types types = Types::All;
  TINY_MATH(2, x > y)
};
struct Ge : OpBase {
  static constexpr Types types = Types::All;
  TINY_MATH(2, x >= y)
};

// ---- three inputs -----------------------------------------------------------------------------

/// lerp with a tensor of weights: x + z * (y - x), computed as LerpScalar computes it.
struct Lerp : OpBase {
  static constexpr Types types = Types::Floating;
  static constexpr bool uses_fma = true;
  TINY_MATH(3, fabs(z) < T(0.5) ? fma(z, y - x, x) : fma(z - T(1), y - x, y))
};
/// x + value * y * z (value = a), in PyTorch's order of operations.
struct Addcmul : OpBase {
  static constexpr Types types = Types::NoBool;
  TINY_MATH(3, x + a * y * z)
};
/// x + value * y / z (value = a), in PyTorch's order of operations.
struct Addcdiv : OpBase {
  static constexpr Types types = Types::Floating;
  TINY_MATH(3, x + a * y / z)
};

}  // namespace tiny::ops

/// Every elementwise op struct by arity, for the explicit instantiations of each backend's
/// kernels: an op added above is added here too. The CPU backend compiles the lists' parts in
/// separate files (cpu/elementwise_*.cpp), so that a build on several cores compiles them at once:
/// the transcendental ones, three copies of each loop (elementwise.h), are the slow part.
#define TINY_UNARY_SIMPLE_OPS(X) X(Neg) X(Abs) X(Relu) X(Sqrt) X(Rsqrt)
/// The unary ops whose math is the library's vectorised transcendental functions.
#define TINY_UNARY_MATH_OPS(X) \
  X(Exp) X(Log) X(Log1p) X(Expm1) X(Erf) X(Sigmoid) X(Tanh) X(Gelu)
/// The rest of the unary ops.
#define TINY_UNARY_ALGEBRA_OPS(X) \
  X(Square) X(Cube) X(Reciprocal) X(Clamp) X(ClampMin) X(ClampMax)
/// Every op with one input.
#define TINY_UNARY_OPS(X) TINY_UNARY_SIMPLE_OPS(X) TINY_UNARY_MATH_OPS(X) TINY_UNARY_ALGEBRA_OPS(X)
/// The binary ops that compute a number.
#define TINY_BINARY_ARITHMETIC_OPS(X) \
  X(Add) X(Sub) X(Rsub) X(Mul) X(Div) X(Pow) X(Maximum) X(Minimum) X(LerpScalar) X(GeluBackward)
/// The binary ops that compare, giving bool.
#define TINY_COMPARISON_OPS(X) X(Eq) X(Ne) X(Lt) X(Le) X(Gt) X(Ge)
/// Every op with two inputs.
#define TINY_BINARY_OPS(X) TINY_BINARY_ARITHMETIC_OPS(X) TINY_COMPARISON_OPS(X)
/// Likewise for three inputs.
#define TINY_TERNARY_OPS(X) X(Lerp) X(Addcmul) X(Addcdiv)
/// Every op.
#define TINY_ELEMENTWISE_OPS(X) TINY_UNARY_OPS(X) TINY_BINARY_OPS(X) TINY_TERNARY_OPS(X)
// clang-format on
