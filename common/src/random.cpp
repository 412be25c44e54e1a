// random.cpp: PyTorch's CPU random number generation, step for step. random.h lists the
// recipes and what depends on the processor; this file follows PyTorch 2.x's
// aten/src/ATen/native/cpu/DistributionTemplates.h (the kernels), ATen/core/TransformationHelper.h
// (uniform and normal from draws) and avx_mathfun.h (the eight-wide log and sincos), checked
// against torch's own numbers by tests/random_test.cpp.
#include "tiny/random.h"

#include "tiny/autograd.h"  // NoGradGuard
#include "tiny/float_formats.h"  // finfo: the bounds uniform_ checks

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <memory>
#include <numbers>
#include <sstream>
#include <string_view>
#include <vector>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define TINY_RANDOM_AVX2 1
#endif

#include "autograd_internal.h"  // record_overwrite: an in-place fill on the tape
#include "dispatch.h"           // check_inplace_autograd: the autograd rule for in-place writes
#include "internal.h"  // detail::convert: PyTorch's casts between element types
#include "mul_add.h"   // detail::mul_add: a * b + c, fused or not, as PyTorch's kernels do it

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
  const double r = std::sqrt(-2.0 * std::log1p(-u2));
  const double theta = 2.0 * std::numbers::pi * u1;
  next_normal_ = r * std::sin(theta);
  return r * std::cos(theta);
}

Generator& default_generator() {
  static Generator gen;
  return gen;
}

void manual_seed(uint64_t seed) { default_generator().manual_seed(seed); }

// ---- which of PyTorch's kernel families to imitate -------------------------------------------

// ---- one element at a time --------------------------------------------------------------------

namespace {

constexpr double kTwoPi = 2.0 * std::numbers::pi;

// A uniform number in [0, 1) in T's arithmetic type: float64 draws 53 bits, every other type a
// float32's 24 (PyTorch 2.x draws float16 and bfloat16 in float32 too, and rounds the result).
template <typename T> inline opmath_t<T> unit_uniform(Generator& g) {
  if constexpr (std::is_same_v<T, double>) return g.uniform_double();
  else return g.uniform_float();
}

// uniform_'s value: x * (to - from) + from in T's arithmetic type, with from and to in that type,
// then rounded to T. A value that rounds up to `to` itself (in float32 near the top of a wide
// range, or in the 16-bit types) becomes `from`, so that the result stays in [from, to).
template <bool kFused, typename T> struct UniformValue {
  using M = opmath_t<T>;
  M from, to;
  T from_t, to_t;
  T operator()(Generator& g) const {
    const T v = T(detail::mul_add<kFused>(unit_uniform<T>(g), to - from, from));
    return static_cast<M>(v) == static_cast<M>(to_t) ? from_t : v;
  }
};

// Box-Muller on one block of 16 uniforms in M, float or double (PyTorch's NormalFill16):
// element j (< 8) and element j + 8 make the pair, and become radius * cos and radius * sin.
// The angle is computed in float64 (PyTorch writes `2.0f * pi<double> * u2`) and rounded to M;
// mean and std are applied with one fused multiply-add in every build.
template <typename M> void box_muller_block(M* data, M mean, M std) {
  for (int j = 0; j < 8; ++j) {
    const M u1 = M(1) - data[j];  // (0, 1], so the log is finite
    const M u2 = data[j + 8];
    const M radius = std::sqrt(M(-2) * std::log(u1));
    const M theta = static_cast<M>(kTwoPi * static_cast<double>(u2));
    data[j] = std::fma(radius * std::cos(theta), std, mean);
    data[j + 8] = std::fma(radius * std::sin(theta), std, mean);
  }
}

#ifdef TINY_RANDOM_AVX2
// ---- PyTorch's AVX2 kernel for float32 normals ------------------------------------------------
//
// Eight logs, sines and cosines at a time, by the Cephes single-precision polynomials (the
// coefficients below are Cephes'), as PyTorch's avx_mathfun.h computes them. Its source is
// written with separate multiplies and adds, which GCC fuses into FMA instructions wherever a
// product's only use is an addition; where an addition adds two products, the product computed
// first is the one fused. The _mm256_fmadd_ps calls below are exactly those fusions (checked
// against torch: any other choice changes a few values in a thousand), and nothing else here is
// a product feeding an addition, so the compiler has nothing more to fuse.

#define TINY_V8(x) _mm256_set1_ps(x)

// ln(x) for x > 0: x = m * 2^e with m in [sqrt(1/2), sqrt(2)), then ln(m) from a degree-9
// polynomial in m - 1, then e * ln(2) added in two parts (0.693359375 - 2.12194440e-4).
__attribute__((target("avx2,fma"))) inline __m256 log8(__m256 x) {
  const __m256 one = TINY_V8(1.0f);
  const __m256 invalid = _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LE_OS);  // log(<= 0): NaN
  x = _mm256_max_ps(x, _mm256_castsi256_ps(_mm256_set1_epi32(0x00800000)));  // no subnormals
  __m256i exponent = _mm256_srli_epi32(_mm256_castps_si256(x), 23);
  x = _mm256_and_ps(x, _mm256_castsi256_ps(_mm256_set1_epi32(~0x7f800000)));
  x = _mm256_or_ps(x, TINY_V8(0.5f));  // the significand, as a number in [0.5, 1)
  exponent = _mm256_sub_epi32(exponent, _mm256_set1_epi32(0x7f));
  __m256 e = _mm256_add_ps(_mm256_cvtepi32_ps(exponent), one);
  // Below sqrt(1/2), use 2m - 1 and e - 1 instead, so the polynomial's argument stays small.
  const __m256 small = _mm256_cmp_ps(x, TINY_V8(0.707106781186547524f), _CMP_LT_OS);
  const __m256 extra = _mm256_and_ps(x, small);
  x = _mm256_sub_ps(x, one);
  e = _mm256_sub_ps(e, _mm256_and_ps(one, small));
  x = _mm256_add_ps(x, extra);
  const __m256 z = _mm256_mul_ps(x, x);
  __m256 y = TINY_V8(7.0376836292E-2f);
  y = _mm256_fmadd_ps(y, x, TINY_V8(-1.1514610310E-1f));
  y = _mm256_fmadd_ps(y, x, TINY_V8(1.1676998740E-1f));
  y = _mm256_fmadd_ps(y, x, TINY_V8(-1.2420140846E-1f));
  y = _mm256_fmadd_ps(y, x, TINY_V8(1.4249322787E-1f));
  y = _mm256_fmadd_ps(y, x, TINY_V8(-1.6668057665E-1f));
  y = _mm256_fmadd_ps(y, x, TINY_V8(2.0000714765E-1f));
  y = _mm256_fmadd_ps(y, x, TINY_V8(-2.4999993993E-1f));
  y = _mm256_fmadd_ps(y, x, TINY_V8(3.3333331174E-1f));
  y = _mm256_mul_ps(y, x);
  // y * z + e * (-2.12194440e-4): the first product (y * z) is the fused one.
  y = _mm256_fmadd_ps(y, z, _mm256_mul_ps(e, TINY_V8(-2.12194440e-4f)));
  y = _mm256_fnmadd_ps(z, TINY_V8(0.5f), y);  // y - z / 2
  x = _mm256_fmadd_ps(e, TINY_V8(0.693359375f), _mm256_add_ps(x, y));
  return _mm256_or_ps(x, invalid);
}

// sin(x) and cos(x) together: reduce x by a multiple j of pi/4 (pi/4 in three parts, so the
// reduction is nearly exact), evaluate the sine and cosine polynomials on the remainder, and
// pick and sign them by j's low bits.
__attribute__((target("avx2,fma"))) inline void sincos8(__m256 x, __m256* sin_out,
                                                        __m256* cos_out) {
  const __m256 sign_bit = _mm256_castsi256_ps(_mm256_set1_epi32(static_cast<int>(0x80000000u)));
  __m256 sin_sign = _mm256_and_ps(x, sign_bit);
  x = _mm256_andnot_ps(sign_bit, x);                                              // |x|
  __m256i j = _mm256_cvttps_epi32(_mm256_mul_ps(x, TINY_V8(1.27323954473516f)));  // 4 / pi
  j = _mm256_and_si256(_mm256_add_epi32(j, _mm256_set1_epi32(1)), _mm256_set1_epi32(~1));
  const __m256 y = _mm256_cvtepi32_ps(j);  // j rounded up to even
  const __m256i four = _mm256_set1_epi32(4), two = _mm256_set1_epi32(2);
  const __m256 sin_flip = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_and_si256(j, four), 29));
  const __m256 use_cos_poly_for_cos =
      _mm256_castsi256_ps(_mm256_cmpeq_epi32(_mm256_and_si256(j, two), _mm256_setzero_si256()));
  x = _mm256_fmadd_ps(y, TINY_V8(-0.78515625f), x);
  x = _mm256_fmadd_ps(y, TINY_V8(-2.4187564849853515625e-4f), x);
  x = _mm256_fmadd_ps(y, TINY_V8(-3.77489497744594108e-8f), x);
  const __m256 cos_sign = _mm256_castsi256_ps(
      _mm256_slli_epi32(_mm256_andnot_si256(_mm256_sub_epi32(j, two), four), 29));
  sin_sign = _mm256_xor_ps(sin_sign, sin_flip);
  const __m256 z = _mm256_mul_ps(x, x);
  // The cosine polynomial: 1 - z/2 + z^2 (c2 + z (c1 + z c0)).
  __m256 cos_poly = TINY_V8(2.443315711809948E-005f);
  cos_poly = _mm256_fmadd_ps(cos_poly, z, TINY_V8(-1.388731625493765E-003f));
  cos_poly = _mm256_fmadd_ps(cos_poly, z, TINY_V8(4.166664568298827E-002f));
  cos_poly = _mm256_mul_ps(cos_poly, z);
  // cos_poly * z - z * 0.5: the first product is the fused one.
  cos_poly = _mm256_fmsub_ps(cos_poly, z, _mm256_mul_ps(z, TINY_V8(0.5f)));
  cos_poly = _mm256_add_ps(cos_poly, TINY_V8(1.0f));
  // The sine polynomial: x + x z (s2 + z (s1 + z s0)).
  __m256 sin_poly = TINY_V8(-1.9515295891E-4f);
  sin_poly = _mm256_fmadd_ps(sin_poly, z, TINY_V8(8.3321608736E-3f));
  sin_poly = _mm256_fmadd_ps(sin_poly, z, TINY_V8(-1.6666654611E-1f));
  sin_poly = _mm256_mul_ps(sin_poly, z);
  sin_poly = _mm256_fmadd_ps(sin_poly, x, x);
  // Where j mod 4 is 0 the sine is the sine polynomial and the cosine the cosine polynomial;
  // where it is 2 they swap. PyTorch selects by masking and subtracting, bit for bit as here.
  const __m256 sin_from_sin = _mm256_and_ps(use_cos_poly_for_cos, sin_poly);
  const __m256 sin_from_cos = _mm256_andnot_ps(use_cos_poly_for_cos, cos_poly);
  const __m256 cos_from_sin = _mm256_sub_ps(sin_poly, sin_from_sin);
  const __m256 cos_from_cos = _mm256_sub_ps(cos_poly, sin_from_cos);
  *sin_out = _mm256_xor_ps(_mm256_add_ps(sin_from_cos, sin_from_sin), sin_sign);
  *cos_out = _mm256_xor_ps(_mm256_add_ps(cos_from_cos, cos_from_sin), cos_sign);
}

// PyTorch's normal_fill_16_AVX2: Box-Muller on 16 float32 uniforms, the first 8 paired with the
// last 8; mean and std are applied with one explicit FMA.
__attribute__((target("avx2,fma"))) void box_muller_block_avx2(float* data, float mean, float std) {
  const __m256 u1 = _mm256_sub_ps(TINY_V8(1.0f), _mm256_loadu_ps(data));
  const __m256 u2 = _mm256_loadu_ps(data + 8);
  const __m256 radius = _mm256_sqrt_ps(_mm256_mul_ps(TINY_V8(-2.0f), log8(u1)));
  const __m256 theta = _mm256_mul_ps(TINY_V8(static_cast<float>(kTwoPi)), u2);
  __m256 sin_theta, cos_theta;
  sincos8(theta, &sin_theta, &cos_theta);
  const __m256 n1 = _mm256_mul_ps(radius, cos_theta);
  const __m256 n2 = _mm256_mul_ps(radius, sin_theta);
  _mm256_storeu_ps(data, _mm256_fmadd_ps(n1, TINY_V8(std), TINY_V8(mean)));
  _mm256_storeu_ps(data + 8, _mm256_fmadd_ps(n2, TINY_V8(std), TINY_V8(mean)));
}

// Many blocks per call, so the processor's AVX2 state is set up once per tensor.
__attribute__((target("avx2,fma"))) void box_muller_blocks_avx2(float* data, int64_t blocks,
                                                                float mean, float std) {
  for (int64_t b = 0; b < blocks; ++b) box_muller_block_avx2(data + 16 * b, mean, std);
}
#undef TINY_V8
#endif  // TINY_RANDOM_AVX2

// ---- whole tensors ----------------------------------------------------------------------------

// Visits every element of a CPU tensor in the order PyTorch's TensorIterator walks a tensor
// written alone, which is the order the serial kernels hand out draws in: memory order. The
// dimensions are sorted by stride, smallest innermost (PyTorch's reorder_dimensions: an
// insertion sort over the dimensions, last first; equal strides put the smaller size inside),
// and walked like an odometer. A contiguous tensor is simply walked element by element.
class MemoryOrderWalk {
 public:
  explicit MemoryOrderWalk(const Tensor& t);
  /// The element offset (from the data pointer) of the element after the current one.
  int64_t next();

 private:
  const Tensor& t_;
  std::vector<int64_t> order_;  // order_[0]: the innermost dimension
  std::vector<int64_t> index_;
  int64_t offset_ = 0;
};

[[gnu::noinline]] MemoryOrderWalk::MemoryOrderWalk(const Tensor& t)
    : t_(t), order_(static_cast<size_t>(t.dim())), index_(static_cast<size_t>(t.dim()), 0) {
  const int64_t nd = t.dim();
  for (int64_t k = 0; k < nd; ++k) order_[k] = nd - 1 - k;
  auto compare = [&](int64_t d0, int64_t d1) {  // > 0: d1 belongs inside d0
    const int64_t s0 = t.stride(d0), s1 = t.stride(d1);
    if (s0 == 0 || s1 == 0) return 0;
    if (s0 != s1) return s0 < s1 ? -1 : 1;
    return t.size(d0) > t.size(d1) ? 1 : 0;
  };
  for (int64_t i = 1; i < nd; ++i) {
    int64_t moving = i;
    for (int64_t k = i - 1; k >= 0; --k) {
      const int c = compare(order_[k], order_[moving]);
      if (c > 0) {
        std::swap(order_[k], order_[moving]);
        moving = k;
      } else if (c < 0) {
        break;
      }
    }
  }
}

[[gnu::noinline]] int64_t MemoryOrderWalk::next() {
  for (size_t k = 0; k < order_.size(); ++k) {  // advance the odometer, innermost first
    const int64_t d = order_[k];
    offset_ += t_.stride(d);
    if (++index_[d] < t_.size(d)) break;
    offset_ -= t_.stride(d) * t_.size(d);
    index_[d] = 0;
  }
  return offset_;
}

template <typename T, typename F> void for_each_in_memory_order(const Tensor& t, F&& visit) {
  T* base = static_cast<T*>(t.data_ptr());
  const int64_t n = t.numel();
  if (t.is_contiguous()) {
    for (int64_t i = 0; i < n; ++i) visit(base[i]);
    return;
  }
  if (n == 0) return;
  MemoryOrderWalk walk(t);
  visit(base[0]);
  for (int64_t count = 1; count < n; ++count) visit(base[walk.next()]);
}

// Runs `fill` on `t` if it is on the CPU; otherwise on a CPU tensor with t's shape, strides and
// offset (so every element gets the number it would get on the CPU), copied over afterwards.
template <typename Fill> void fill_on_cpu(Tensor& t, Fill&& fill) {
  if (t.device().is_cpu()) {
    fill(t);
    return;
  }
  auto storage = std::make_shared<Storage>(t.storage()->nbytes(), Device::cpu());
  Tensor host(storage, t.dtype(), t.shape(), t.strides(), t.storage_offset());
  fill(host);
  NoGradGuard no_grad;
  t.copy_(host);
}

// What every in-place random fill does first and last: PyTorch's autograd rule for in-place
// writes, and a new version for the storage (autograd checks it on saved tensors).
// `node` is PyTorch's name for the op's node when the tape records it (the new values do not
// depend on the old ones, which get a zero gradient).
template <typename Fill> Tensor& in_place_fill(const char* node, Tensor& t, Fill&& fill) {
  // An expanded tensor would get one draw per memory location, not per element; PyTorch refuses.
  detail::check_no_internal_overlap(t);
  const bool record = detail::check_inplace_autograd(t, nullptr, 0);
  const Edge old = record ? detail::edge_for(t) : Edge{};
  fill_on_cpu(t, fill);
  t.storage()->bump_version();
  if (record) detail::record_overwrite(t, old, node);
  return t;
}

std::string number_str(double x) {  // as PyTorch's messages print a double (6 digits)
  std::ostringstream s;
  s << x;
  return s.str();
}

template <bool kFused, typename T>
void uniform_fill(const Tensor& t, double from, double to, Generator& g) {
  using M = opmath_t<T>;
  const UniformValue<kFused, T> value{static_cast<M>(from), static_cast<M>(to),
                                      detail::convert<T>(from), detail::convert<T>(to)};
  for_each_in_memory_order<T>(t, [&](T& x) { x = value(g); });
}

// Box-Muller on `count` blocks of 16 in M, with PyTorch's AVX2 kernel where it would run one.
template <bool kFused, typename M> void box_muller_blocks(M* at, int64_t count, M mean, M std) {
#ifdef TINY_RANDOM_AVX2
  if constexpr (kFused && std::is_same_v<M, float>) return box_muller_blocks_avx2(at, count, mean, std);
#endif
  for (int64_t b = 0; b < count; ++b) box_muller_block(at + 16 * b, mean, std);
}

template <bool kFused, typename T>
void normal_fill(const Tensor& t, double mean, double std, Generator& g) {
  using M = opmath_t<T>;
  const int64_t n = t.numel();
  if (n < 16 || !t.is_contiguous()) {
    // The serial kernel: float64 Box-Muller with the cached second value, mean and std applied
    // in float64, then one cast to T.
    for_each_in_memory_order<T>(t, [&](T& x) {
      x = detail::convert<T>(detail::mul_add<kFused>(g.normal_double(), std, mean));
    });
    return;
  }
  T* p = static_cast<T*>(t.data_ptr());
  const M mean_m = static_cast<M>(mean), std_m = static_cast<M>(std);
  if constexpr (std::is_same_v<T, M>) {
    // float32 and float64: every uniform first, in place, then the blocks; a tail that is not a
    // multiple of 16 takes 16 fresh uniforms and redoes the last 16 elements.
    for (int64_t i = 0; i < n; ++i) p[i] = unit_uniform<T>(g);
    box_muller_blocks<kFused>(p, n / 16, mean_m, std_m);
    if (n % 16 != 0) {
      T* tail = p + n - 16;
      for (int i = 0; i < 16; ++i) tail[i] = unit_uniform<T>(g);
      box_muller_blocks<kFused>(tail, 1, mean_m, std_m);
    }
  } else {
    // float16 and bfloat16: each block's 16 uniforms are drawn and transformed in float32, then
    // rounded to T. Only whole blocks draw, so the tail's 16 fresh uniforms follow the last
    // whole block's directly (the float32 kernel draws n + 16 numbers, this one 16 per block).
    constexpr int64_t kChunk = 64;  // blocks per buffer: the same draws, fewer calls
    std::vector<float> buf(static_cast<size_t>(16 * kChunk));
    auto fill = [&](T* out, int64_t blocks) {
      for (int64_t i = 0; i < 16 * blocks; ++i) buf[i] = g.uniform_float();
      box_muller_blocks<kFused>(buf.data(), blocks, mean_m, std_m);
      for (int64_t i = 0; i < 16 * blocks; ++i) out[i] = T(buf[i]);
    };
    const int64_t whole = n / 16;
    for (int64_t b = 0; b < whole; b += kChunk) fill(p + 16 * b, std::min(kChunk, whole - b));
    if (n % 16 != 0) fill(p + n - 16, 1);
  }
}

}  // namespace

Tensor& uniform_(Tensor& t, double from, double to, Generator& gen) {
  dispatch_floating(t.dtype(), "check_uniform_bounds", []<typename T>() {});
  // PyTorch's checks, in its order: both ends finite numbers of the dtype (a NaN fails too),
  // in order, and not so far apart that to - from overflows it.
  const double max = finfo(t.dtype()).max;
  const std::string type = detail::convert_type_name(t.dtype());
  if (!(from >= -max && from <= max)) throw RuntimeError("from is out of bounds for " + type);
  if (!(to >= -max && to <= max)) throw RuntimeError("to is out of bounds for " + type);
  if (from > to)
    throw RuntimeError("uniform_ expects to return a [from, to) range, but found from=" +
                       number_str(from) + " > to=" + number_str(to));
  if (!(to - from <= max))
    throw RuntimeError("uniform_ expects to-from <= std::numeric_limits<" +
                       std::string(dtype_legacy_name(t.dtype())) + ">::max(), but found to=" +
                       number_str(to) + " and from=" + number_str(from) +
                       " which result in to-from to exceed the limit");
  return in_place_fill("UniformBackward0", t, [&](const Tensor& cpu) {
    dispatch_floating(cpu.dtype(), "uniform_", [&]<typename T>() {
      if (cpu_capability() == CpuCapability::Avx2) uniform_fill<true, T>(cpu, from, to, gen);
      else uniform_fill<false, T>(cpu, from, to, gen);
    });
  });
}

Tensor& normal_(Tensor& t, double mean, double std, Generator& gen) {
  dispatch_floating(t.dtype(), "normal_kernel_cpu", []<typename T>() {});
  if (!(std >= 0.0))
    throw RuntimeError("normal expects std >= 0.0, but found std " + number_str(std));
  return in_place_fill("NormalBackward0", t, [&](const Tensor& cpu) {
    dispatch_floating(cpu.dtype(), "normal_", [&]<typename T>() {
      if (cpu_capability() == CpuCapability::Avx2) normal_fill<true, T>(cpu, mean, std, gen);
      else normal_fill<false, T>(cpu, mean, std, gen);
    });
  });
}

Tensor rand(const Shape& shape, DType dtype, Generator& gen) {
  dispatch_floating(dtype, "check_uniform_bounds", []<typename T>() {});
  Tensor out = empty(shape, dtype);
  uniform_(out, 0, 1, gen);
  return out;
}

Tensor randn(const Shape& shape, DType dtype, Generator& gen) {
  dispatch_floating(dtype, "normal_kernel_cpu", []<typename T>() {});
  Tensor out = empty(shape, dtype);
  normal_(out, 0, 1, gen);
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

Tensor randperm(int64_t n, DType dtype, Generator& gen) {
  if (n < 0)
    throw RuntimeError("Trying to create tensor with negative dimension " + std::to_string(n) +
                       ": [" + std::to_string(n) + "]");
  // The largest n whose values n - 1 every element of the dtype holds exactly (PyTorch's
  // check_supported_max_int_with_precision).
  if (dtype == kFloat16 && n > (int64_t(1) << 11) + 1)
    throw RuntimeError("n cannot be greater than 2049 for Half type.");
  if (dtype == kFloat32 && n > (int64_t(1) << 24) + 1)
    throw RuntimeError("n cannot be greater than 2^24+1 for Float type.");
  // An integer dtype must hold n - 1, or the values would wrap: PyTorch 2.x checks it as it
  // checks any number it stores (1.13 said "n is too large for result tensor type" for int32).
  if (n > 0 && dtype != kBool && !is_floating(dtype))
    dispatch_dtype(dtype, [&]<typename T>() {
      if constexpr (std::is_integral_v<T>)
        truncate_checked<T>(static_cast<double>(n - 1), detail::convert_type_name(dtype));
    });
  // PyTorch fills bfloat16 past its exact integers (257 becomes 256) without a word; the
  // library refuses that, in the words of the Half check.
  if (dtype == kBFloat16 && n > (int64_t(1) << 8) + 1)
    throw RuntimeError("n cannot be greater than 257 for BFloat16 type.");
  if (dtype == kBool)
    throw not_implemented_for("randperm", dtype);
  // Fisher-Yates in the int64 identity, then one conversion: every value is an integer below
  // n, which the checks above made exact in the dtype. The identity is a tensor, so that an n
  // too large for memory gets the allocator's "CPU out of memory" error.
  const Tensor identity = empty({n}, kInt64);
  int64_t* perm = identity.data<int64_t>();
  for (int64_t i = 0; i < n; ++i) perm[i] = i;
  for (int64_t i = 0; i + 1 < n; ++i) {
    const int64_t z = static_cast<int64_t>(gen.random() % static_cast<uint64_t>(n - i));
    std::swap(perm[i], perm[i + z]);
  }
  if (dtype == kInt64) return identity;
  Tensor out = empty({n}, dtype);
  dispatch_dtype(dtype, [&]<typename T>() {
    if constexpr (!std::is_same_v<T, bool>) {
      T* p = static_cast<T*>(out.data_ptr());
      for (int64_t i = 0; i < n; ++i) p[i] = detail::convert<T>(perm[i]);
    }
  });
  return out;
}

}  // namespace tiny
