// elementwise_ops.h: what each elementwise op computes on one element, written once for both
// backends. Each op is a small struct whose call operator takes values in their arithmetic type
// (opmath_t: float for the 16-bit floats) and is TINY_HD, so the CPU loops in ops.cpp and the
// CUDA kernels in common/cuda/elementwise.cu run the very same code. The struct's type is also
// how the CPU side names an op to the CUDA side (cuda_backend.h).
//
// `floating_only` ops are instantiated for the four float types alone; the others for every
// dtype, with `if constexpr` keeping meaningless cases (the negative of a bool) compilable.
#pragma once
#include <cmath>
#include <type_traits>

#include "tiny/config.h"

namespace tiny::ops {

// ---- binary -----------------------------------------------------------------------------------

struct Add {
  static constexpr bool floating_only = false;
  template <typename T> TINY_HD T operator()(T x, T y) const { return x + y; }
};
struct Sub {
  static constexpr bool floating_only = false;
  template <typename T> TINY_HD T operator()(T x, T y) const { return x - y; }
};
struct Mul {
  static constexpr bool floating_only = false;
  template <typename T> TINY_HD T operator()(T x, T y) const {
    if constexpr (std::is_same_v<T, bool>) return x && y;
    else return x * y;
  }
};
struct Div {
  static constexpr bool floating_only = false;  // integers are promoted to float32 before
  template <typename T> TINY_HD T operator()(T x, T y) const {
    if constexpr (std::is_same_v<T, bool>) return x;  // never reached: bools divide as float32
    else return x / y;
  }
};
struct Pow {
  static constexpr bool floating_only = false;
  template <typename T> TINY_HD T operator()(T base, T exp) const {
    if constexpr (std::is_same_v<T, bool>) {
      return base;  // rejected before any loop runs
    } else if constexpr (std::is_integral_v<T>) {
      T result = 1;
      while (exp > 0) {  // square and multiply
        if (exp & 1) result *= base;
        base *= base;
        exp >>= 1;
      }
      return result;
    } else {
      return std::pow(base, exp);
    }
  }
};
struct Maximum {
  static constexpr bool floating_only = false;
  template <typename T> TINY_HD T operator()(T x, T y) const {
    if constexpr (std::is_floating_point_v<T>)
      if (std::isnan(x) || std::isnan(y)) return x + y;  // NaN propagates
    return x > y ? x : y;
  }
};
struct Minimum {
  static constexpr bool floating_only = false;
  template <typename T> TINY_HD T operator()(T x, T y) const {
    if constexpr (std::is_floating_point_v<T>)
      if (std::isnan(x) || std::isnan(y)) return x + y;
    return x < y ? x : y;
  }
};

// Comparisons return bool, whatever they compare.
struct Eq {
  static constexpr bool floating_only = false;
  template <typename T> TINY_HD bool operator()(T x, T y) const { return x == y; }
};
struct Ne {
  static constexpr bool floating_only = false;
  template <typename T> TINY_HD bool operator()(T x, T y) const { return x != y; }
};
struct Lt {
  static constexpr bool floating_only = false;
  template <typename T> TINY_HD bool operator()(T x, T y) const { return x < y; }
};
struct Le {
  static constexpr bool floating_only = false;
  template <typename T> TINY_HD bool operator()(T x, T y) const { return x <= y; }
};
struct Gt {
  static constexpr bool floating_only = false;
  template <typename T> TINY_HD bool operator()(T x, T y) const { return x > y; }
};
struct Ge {
  static constexpr bool floating_only = false;
  template <typename T> TINY_HD bool operator()(T x, T y) const { return x >= y; }
};

// ---- unary ------------------------------------------------------------------------------------

/// The value itself: with different input and output dtypes, this is the conversion kernel.
struct Identity {
  static constexpr bool floating_only = false;
  template <typename T> TINY_HD T operator()(T x) const { return x; }
};
struct Neg {
  static constexpr bool floating_only = false;
  template <typename T> TINY_HD T operator()(T x) const {
    if constexpr (std::is_same_v<T, bool>) return x;  // rejected before any loop runs
    else return -x;
  }
};
struct Abs {
  static constexpr bool floating_only = false;
  template <typename T> TINY_HD T operator()(T x) const {
    if constexpr (std::is_same_v<T, bool>) return x;  // rejected before any loop runs
    else return x < T(0) ? -x : x;
  }
};
struct Relu {
  static constexpr bool floating_only = false;
  template <typename T> TINY_HD T operator()(T x) const {
    // NaN > 0 is false, so a plain comparison would turn NaN into 0; PyTorch's relu keeps NaN.
    if constexpr (std::is_floating_point_v<T>)
      if (std::isnan(x)) return x;
    return x > T(0) ? x : T(0);
  }
};
struct Sqrt {
  static constexpr bool floating_only = true;
  template <typename T> TINY_HD T operator()(T x) const { return std::sqrt(x); }
};
struct Rsqrt {
  static constexpr bool floating_only = true;
  template <typename T> TINY_HD T operator()(T x) const { return T(1) / std::sqrt(x); }
};
struct Exp {
  static constexpr bool floating_only = true;
  template <typename T> TINY_HD T operator()(T x) const { return std::exp(x); }
};
struct Log {
  static constexpr bool floating_only = true;
  template <typename T> TINY_HD T operator()(T x) const { return std::log(x); }
};
struct Sigmoid {
  static constexpr bool floating_only = true;
  template <typename T> TINY_HD T operator()(T x) const { return T(1) / (T(1) + std::exp(-x)); }
};
struct Tanh {
  static constexpr bool floating_only = true;
  template <typename T> TINY_HD T operator()(T x) const { return std::tanh(x); }
};
/// x * Phi(x), Phi the standard normal CDF: 0.5 * (1 + erf(x / sqrt(2))).
struct Gelu {
  static constexpr bool floating_only = true;
  template <typename T> TINY_HD T operator()(T x) const {
    return x * T(0.5) * (T(1) + std::erf(x * T(0.70710678118654752440)));
  }
};
/// d/dx x Phi(x) = Phi(x) + x phi(x), phi the standard normal density.
struct GeluBackward {
  static constexpr bool floating_only = true;
  template <typename T> TINY_HD T operator()(T x) const {
    const T cdf = T(0.5) * (T(1) + std::erf(x * T(0.70710678118654752440)));
    const T pdf = std::exp(T(-0.5) * x * x) * T(0.39894228040143267794);
    return cdf + x * pdf;
  }
};
// x.pow(e) for the common fixed exponents: a multiply costs far less than std::pow.
struct Square {
  static constexpr bool floating_only = true;
  template <typename T> TINY_HD T operator()(T x) const { return x * x; }
};
struct Cube {
  static constexpr bool floating_only = true;
  template <typename T> TINY_HD T operator()(T x) const { return x * x * x; }
};
struct Reciprocal {
  static constexpr bool floating_only = true;
  template <typename T> TINY_HD T operator()(T x) const { return T(1) / x; }
};

}  // namespace tiny::ops

/// Every binary op, for the explicit instantiations of the CUDA entry points.
#define TINY_BINARY_OPS(X) \
  X(Add) X(Sub) X(Mul) X(Div) X(Pow) X(Maximum) X(Minimum) X(Eq) X(Ne) X(Lt) X(Le) X(Gt) X(Ge)
/// Every unary op, likewise.
#define TINY_UNARY_OPS(X)                                                                    \
  X(Identity) X(Neg) X(Abs) X(Relu) X(Sqrt) X(Rsqrt) X(Exp) X(Log) X(Sigmoid) X(Tanh) X(Gelu) \
  X(GeluBackward) X(Square) X(Cube) X(Reciprocal)
