/// @file random.h
/// @brief Seedable random numbers that match PyTorch's CPU generator value for value.
///
/// PyTorch's CPU generator is a 32-bit Mersenne Twister (mt19937). rand() keeps the low 24 bits
/// of one draw (float32) or 53 bits of two draws (float64); randn() uses the Box-Muller
/// transform, serially for fewer than 16 elements and in blocks of 16 from 16 on; randint()
/// takes a draw modulo the range. Following the same steps gives the same numbers:
/// after manual_seed(0), rand({3}) is [0.4963, 0.7682, 0.0885].
#pragma once
#include <cstdint>
#include <optional>
#include <random>

#include "tiny/tensor.h"

namespace tiny {

/// A random number generator with PyTorch's CPU semantics.
class Generator {
 public:
  /// Seeded with PyTorch's default seed (67280421310721).
  Generator();
  /// Seeded with `seed`.
  explicit Generator(uint64_t seed);
  /// Restarts the sequence from `seed` (and forgets a cached normal sample).
  void manual_seed(uint64_t seed);
  /// The seed last set.
  uint64_t initial_seed() const { return seed_; }
  /// One 32-bit draw.
  uint32_t random() { return engine_(); }
  /// Two draws as one 64-bit number, the first draw in the high half.
  uint64_t random64();
  /// A float32 in [0, 1) from one draw's low 24 bits.
  float uniform_float();
  /// A float64 in [0, 1) from 53 bits of two draws.
  double uniform_double();
  /// One standard normal float64 (Box-Muller; the second value of each pair is cached).
  double normal_double();

 private:
  std::mt19937 engine_;
  uint64_t seed_ = 0;
  std::optional<double> next_normal_;
};

/// The generator used when none is passed (torch.default_generator).
Generator& default_generator();
/// Seeds the default generator (torch.manual_seed).
void manual_seed(uint64_t seed);

/// Uniform numbers in [0, 1) (torch.rand).
Tensor rand(const Shape& shape, DType dtype = kFloat32, Generator& gen = default_generator());
/// Standard normal numbers (torch.randn).
Tensor randn(const Shape& shape, DType dtype = kFloat32, Generator& gen = default_generator());
/// Integers in [0, high) (torch.randint(high, shape)).
Tensor randint(int64_t high, const Shape& shape, Generator& gen = default_generator());
/// Integers in [low, high) (torch.randint(low, high, shape)).
Tensor randint(int64_t low, int64_t high, const Shape& shape, Generator& gen = default_generator());

}  // namespace tiny
