// random.cpp: PyTorch's CPU random number generation, step for step.
#include "tiny/random.h"

#include <cmath>
#include <numbers>

#include "internal.h"

namespace tiny {

namespace {
constexpr uint64_t kDefaultSeed = 67280421310721ULL;  // torch's default_rng_seed_val
}

Generator::Generator() : Generator(kDefaultSeed) {}
Generator::Generator(uint64_t seed) { manual_seed(seed); }

void Generator::manual_seed(uint64_t seed) {
  seed_ = seed;
  engine_.seed(static_cast<uint32_t>(seed));  // the Mersenne Twister takes 32 bits of the seed
  next_normal_.reset();
}

uint64_t Generator::random64() {
  const uint64_t hi = engine_();
  const uint64_t lo = engine_();
  return (hi << 32) | lo;
}

float Generator::uniform_float() {
  return static_cast<float>(random() & ((1u << 24) - 1)) * (1.0f / (1u << 24));
}

double Generator::uniform_double() {
  return static_cast<double>(random64() & ((1ULL << 53) - 1)) * (1.0 / (1ULL << 53));
}

double Generator::normal_double() {
  if (next_normal_) {
    const double cached = *next_normal_;
    next_normal_.reset();
    return cached;
  }
  // Box-Muller: two uniforms make two independent normals; keep the second for the next call.
  const double u1 = uniform_double();
  const double u2 = uniform_double();
  const double r = std::sqrt(-2.0 * std::log(1.0 - u2));
  const double theta = 2.0 * std::numbers::pi * u1;
  next_normal_ = r * std::sin(theta);
  return r * std::cos(theta);
}

Generator& default_generator() {
  static Generator gen;
  return gen;
}

void manual_seed(uint64_t seed) { default_generator().manual_seed(seed); }

namespace {

void require_floating(const char* op, DType dtype) {
  if (!is_floating(dtype))
    throw TypeError(std::string("\"") + op + "\" not implemented for '" + dtype_legacy_name(dtype) +
                    "'");
}

// Box-Muller over a block of 16 uniforms, in the element type: the first 8 are paired with the
// last 8, giving 8 cosines and 8 sines (PyTorch's normal_fill_16).
template <typename T> void box_muller_16(T* data) {
  for (int j = 0; j < 8; ++j) {
    const T u1 = T(1) - data[j];  // (0, 1], so the log is finite
    const T u2 = data[j + 8];
    const T radius = std::sqrt(T(-2) * std::log(u1));
    const T theta = T(2) * static_cast<T>(std::numbers::pi) * u2;
    data[j] = radius * std::cos(theta);
    data[j + 8] = radius * std::sin(theta);
  }
}

}  // namespace

Tensor rand(const Shape& shape, DType dtype, Generator& gen) {
  require_floating("uniform_", dtype);
  Tensor out = empty(shape, dtype);
  dispatch_dtype(dtype, [&]<typename T>() {
    T* p = static_cast<T*>(out.data_ptr());
    for (int64_t i = 0; i < out.numel(); ++i) {
      if constexpr (std::is_same_v<T, double>) p[i] = gen.uniform_double();
      else if constexpr (std::is_same_v<T, float>) p[i] = gen.uniform_float();
      else if constexpr (std::is_same_v<T, Half>) {  // 11 significant bits for half
        p[i] = T(static_cast<float>(gen.random() & ((1u << 11) - 1)) * (1.0f / (1u << 11)));
      } else if constexpr (std::is_same_v<T, BFloat16>) {  // 8 for bfloat16
        p[i] = T(static_cast<float>(gen.random() & ((1u << 8) - 1)) * (1.0f / (1u << 8)));
      }
    }
  });
  return out;
}

Tensor randn(const Shape& shape, DType dtype, Generator& gen) {
  require_floating("normal_", dtype);
  const int64_t n = shape_numel(shape);
  if (n >= 16 && (dtype == kFloat32 || dtype == kFloat64)) {
    // From 16 elements on, PyTorch fills uniforms and transforms them 16 at a time; a tail that
    // is not a multiple of 16 redoes the last 16 elements with fresh uniforms.
    Tensor out = empty(shape, dtype);
    dispatch_dtype(dtype, [&]<typename T>() {
      if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
        T* p = out.data<T>();
        auto uniform = [&] {
          if constexpr (std::is_same_v<T, float>) return gen.uniform_float();
          else return gen.uniform_double();
        };
        for (int64_t i = 0; i < n; ++i) p[i] = uniform();
        for (int64_t i = 0; i + 16 <= n; i += 16) box_muller_16(p + i);
        if (n % 16 != 0) {
          T* tail = p + n - 16;
          for (int i = 0; i < 16; ++i) tail[i] = uniform();
          box_muller_16(tail);
        }
      }
    });
    return out;
  }
  // Fewer than 16 elements: one float64 normal per element, as PyTorch draws them. (For the
  // 16-bit types this path is used at every size, so their long sequences differ from PyTorch's.)
  Tensor out = empty(shape, dtype);
  dispatch_dtype(dtype, [&]<typename T>() {
    if constexpr (!std::is_integral_v<T>) {
      T* p = static_cast<T*>(out.data_ptr());
      for (int64_t i = 0; i < n; ++i) p[i] = detail::convert<T>(gen.normal_double());
    }
  });
  return out;
}

Tensor randint(int64_t high, const Shape& shape, Generator& gen) {
  return randint(0, high, shape, gen);
}

Tensor randint(int64_t low, int64_t high, const Shape& shape, Generator& gen) {
  if (low >= high)
    throw RuntimeError("random_ expects 'from' to be less than 'to', but got from=" +
                       std::to_string(low) + " >= to=" + std::to_string(high));
  Tensor out = empty(shape, kInt64);
  int64_t* p = out.data<int64_t>();
  const uint64_t range = static_cast<uint64_t>(high) - static_cast<uint64_t>(low);
  for (int64_t i = 0; i < out.numel(); ++i) {
    // PyTorch draws 64 bits only when the range needs them.
    const uint64_t draw = range >= (1ULL << 32) ? gen.random64() : gen.random();
    p[i] = static_cast<int64_t>(draw % range) + low;
  }
  return out;
}

}  // namespace tiny
