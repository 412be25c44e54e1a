/// @file random.h
/// @brief Seedable random numbers equal, bit for bit, to PyTorch's CPU generator.
///
/// PyTorch's CPU generator is a 32-bit Mersenne Twister (mt19937) seeded with the low 32 bits of
/// the seed. Every distribution is a fixed recipe on top of its draws, and following the recipes
/// step for step, rounding where PyTorch rounds, gives the same bits:
///
/// - uniform: one draw masked to 24 bits (float32, and float16 and bfloat16, which are drawn in
///   float32) or two draws as 64 bits masked to 53 (float64), scaled into [0, 1); then
///   `x * (to - from) + from` in float32 or float64, rounded to the element type; a value that
///   rounds up to `to` becomes `from`.
/// - normal, fewer than 16 elements or a non-contiguous tensor: Box-Muller in float64, one value
///   per element, the sine of each pair kept for the next call (torch's cached sample).
/// - normal, 16 elements or more and contiguous: Box-Muller on blocks of 16 uniforms (the first
///   8 paired with the last 8), in float64 for float64 and in float32 for the rest, then
///   rounded; a tail that is not a multiple of 16 draws 16 fresh uniforms and redoes the last
///   16 elements. (float32 and float64 draw all their uniforms first, the 16-bit types 16 per
///   block, which changes which draws the tail gets.)
/// - randint: a draw (two when the range needs 64 bits) modulo the range.
/// - randperm: the identity, then Fisher-Yates swaps of element i with i + draw % (n - i).
///
/// These are PyTorch 2.x's recipes (checked against 2.15). 1.13 drew float16 and bfloat16
/// uniforms from 11 and 8 bits and rounded every step of their Box-Muller to 16 bits.
///
/// **What depends on the processor.** PyTorch compiles its CPU kernels several times, for plain
/// x86-64 ("default") and for AVX2 processors, and picks one at run time: AVX2 when the
/// processor has both AVX2 and FMA (its AVX-512 build has no random kernels of its own and uses
/// the AVX2 ones). The two compilations give different bits in three places. (1) Box-Muller
/// blocks computed in float32 (float32, float16 and bfloat16 normals with 16 or more
/// elements): the AVX2 kernel computes log, sin and cos with its own eight-wide polynomials
/// (Cephes' coefficients, from avx_mathfun.h; not SLEEF), the default kernel calls the C
/// library's logf, sinf and cosf. (2) Where PyTorch's source says `a * b + c` (uniform's
/// `x * (to - from) + from`, the one-at-a-time normal's `z * std + mean`), the compiler fuses
/// the AVX2 copy into one FMA instruction, rounded once, and leaves the default copy rounded
/// twice; so uniform_ with to - from not a power of two and one-at-a-time normal_ with std other
/// than a power of two differ in the last bit (measured on 5000 values: uniform_(-2, 5) a third
/// of them, float64 normal_(3, 0.7) on a transposed tensor 7%). (3) Anything that calls the C
/// library (log, sin, cos) is as the C library on the machine computes it. This library follows
/// the same rule at run time, so on one machine it gives what PyTorch gives there. Equal in both
/// families: randint, randperm, rand and uniform_(0, 1), and randn in float64. Set
/// TINY_CPU_CAPABILITY=default (PyTorch's ATEN_CPU_CAPABILITY=default) or call
/// set_cpu_capability() to get the default kernels on an AVX2 machine.
///
/// Tensors on a GPU are filled on the CPU with the same stream and copied, so a seed gives the
/// same numbers on every device (PyTorch's CUDA generator, Philox, gives other numbers).
///
/// After manual_seed(0), rand({3}) is [0.4963, 0.7682, 0.0885] and randn({3}) is
/// [1.5410, -0.2934, -2.1788], as in PyTorch.
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


/// Fills `t` with uniform numbers in [from, to), in place (torch.Tensor.uniform_). Any floating
/// dtype and layout; returns `t`.
Tensor& uniform_(Tensor& t, double from = 0, double to = 1, Generator& gen = default_generator());
/// Fills `t` with normal numbers of mean `mean` and standard deviation `std`, in place
/// (torch.Tensor.normal_). Any floating dtype and layout; returns `t`.
Tensor& normal_(Tensor& t, double mean = 0, double std = 1, Generator& gen = default_generator());

/// Uniform numbers in [0, 1) (torch.rand).
Tensor rand(const Shape& shape, DType dtype = kFloat32, Generator& gen = default_generator());
/// Standard normal numbers (torch.randn).
Tensor randn(const Shape& shape, DType dtype = kFloat32, Generator& gen = default_generator());
/// Integers in [0, high) (torch.randint(high, shape)).
Tensor randint(int64_t high, const Shape& shape, Generator& gen = default_generator());
/// Integers in [low, high) (torch.randint(low, high, shape)).
Tensor randint(int64_t low, int64_t high, const Shape& shape, Generator& gen = default_generator());
/// A random permutation of 0, ..., n - 1 (torch.randperm): int64 by default; the other integer
/// and float types as PyTorch allows them, each up to the n whose values it holds exactly
/// (RuntimeError beyond: "value cannot be converted to type int8_t without overflow").
Tensor randperm(int64_t n, DType dtype = kInt64, Generator& gen = default_generator());

}  // namespace tiny
