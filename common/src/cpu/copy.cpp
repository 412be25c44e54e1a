// cpu/copy.cpp: copies between CPU tensors of any dtypes and layouts.
//
// The conversions between float32 and the 16-bit floats are the hot loops of mixed precision, so
// contiguous rows of them get loops the compiler vectorises (F16C instructions where the
// processor has them, picked at run time); a transposed copy goes tile by tile. Large copies are
// split across the CPU threads (parallel.h), each writing its own part of the destination.
#include <algorithm>
#include <cstring>
#include <type_traits>
#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#endif

#include "../internal.h"
#include "cpu.h"

namespace tiny::detail::cpu {

namespace {
// The conversions between float32 and the 16-bit floats are the hot loops of mixed precision.
// Each is compiled twice, for AVX2 and for any x86-64, and the loader picks one at run time.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define TINY_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define TINY_CLONES
#endif
TINY_CLONES void convert_row_portable(Half* __restrict d, const float* __restrict s, int64_t n) {
  for (int64_t i = 0; i < n; ++i) d[i] = Half(s[i]);
}
TINY_CLONES void convert_row_portable(float* __restrict d, const Half* __restrict s, int64_t n) {
  for (int64_t i = 0; i < n; ++i) d[i] = float(s[i]);
}

#if defined(__x86_64__) && defined(__GNUC__)
// x86 processors since 2012 convert 8 floats to float16 in one instruction (F16C), with the same
// rounding (nearest, ties to even) and the same results except for NaN payloads.
__attribute__((target("avx,f16c"))) void convert_row_f16c(Half* d, const float* s, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(
        reinterpret_cast<__m128i*>(d + i),
        _mm256_cvtps_ph(_mm256_loadu_ps(s + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  for (; i < n; ++i) d[i] = Half(s[i]);
}
__attribute__((target("avx,f16c"))) void convert_row_f16c(float* d, const Half* s, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(d + i,
                     _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i))));
  for (; i < n; ++i) d[i] = float(s[i]);
}
// F16C is CPUID leaf 1, ECX bit 29; clang (14) does not know "f16c" in __builtin_cpu_supports.
bool have_f16c() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C) != 0 && __builtin_cpu_supports("avx");
}
const bool kHaveF16c = have_f16c();
#endif

}  // namespace

void convert_row(Half* d, const float* s, int64_t n) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (kHaveF16c) return convert_row_f16c(d, s, n);
#endif
  convert_row_portable(d, s, n);
}
void convert_row(float* d, const Half* s, int64_t n) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (kHaveF16c) return convert_row_f16c(d, s, n);
#endif
  convert_row_portable(d, s, n);
}
TINY_CLONES void convert_row(BFloat16* __restrict d, const float* __restrict s, int64_t n) {
  for (int64_t i = 0; i < n; ++i) d[i] = BFloat16(s[i]);
}
TINY_CLONES void convert_row(float* __restrict d, const BFloat16* __restrict s, int64_t n) {
  for (int64_t i = 0; i < n; ++i) d[i] = float(s[i]);
}

void copy(const Tensor& dst, const Tensor& src) {
  dispatch_dtype(dst.dtype(), [&]<typename D>() {
    dispatch_dtype(src.dtype(), [&]<typename S>() {
      D* d = static_cast<D*>(dst.data_ptr());
      const S* s = static_cast<const S*>(src.data_ptr());
      // A transpose (rows of dst are columns of src): copy square tiles, reading src along its
      // own rows, so that both sides touch few cache lines per tile; reading src column by
      // column instead costs a cache line per element. The tile is small (8 x 8) because the
      // rows of a power-of-two-wide matrix all fall into the same cache sets, and an 8-way
      // cache holds only 8 of them: on 4096 x 4096 float32, tiles of 8 take 23 ms, 16 take 53.
      const auto loop = coalesce<2>(dst.shape(), {&dst.strides(), &src.strides()});
      if (!loop.empty && loop.sizes.size() == 2 && loop.steps[1][0] == 1 && loop.steps[0][1] == 1 &&
          loop.steps[1][1] != 1) {
        const int64_t rows = loop.sizes[0], cols = loop.sizes[1];
        const int64_t drow = loop.steps[0][0], scol = loop.steps[1][1];
        constexpr int64_t kTile = 8;
        // Threads take bands of whole tile rows, so each writes its own rows of dst; a dst that
        // would be written twice (writes_each_location_once) is copied on one thread.
        const int64_t bands = (rows + kTile - 1) / kTile;
        const int64_t grain = writes_each_location_once(dst.shape(), dst.strides())
                                  ? std::max<int64_t>(1, kGrainSize / (kTile * cols))
                                  : bands;
        parallel_for(0, bands, grain, [&](int64_t b, int64_t e) {
          for (int64_t i0 = b * kTile; i0 < std::min(rows, e * kTile); i0 += kTile)
            for (int64_t j0 = 0; j0 < cols; j0 += kTile) {
              const int64_t i1 = std::min(rows, i0 + kTile), j1 = std::min(cols, j0 + kTile);
              for (int64_t j = j0; j < j1; ++j)
                for (int64_t i = i0; i < i1; ++i) d[i * drow + j] = convert<D>(s[i + j * scol]);
            }
        });
        return;
      }
      // Everything else row by row, split across threads (parallel_for_each_row).
      parallel_for_each_row<2>(dst.shape(), {&dst.strides(), &src.strides()},
                      [&](int64_t n, const auto& off, const auto& step) {
                        D* dp = d + off[0];
                        const S* sp = s + off[1];
                        if (step[0] == 1 && step[1] == 1) {
                          // The same dtype: memcpy, which writes a large block around the
                          // caches (no read of the lines it overwrites), the floor of a copy.
                          if constexpr (std::is_same_v<D, S>)
                            std::memcpy(dp, sp, static_cast<size_t>(n) * sizeof(D));
                          else if constexpr (requires { convert_row(dp, sp, n); })
                            convert_row(dp, sp, n);
                          else
                            for (int64_t i = 0; i < n; ++i) dp[i] = convert<D>(sp[i]);
                        } else {
                          for (int64_t i = 0; i < n; ++i)
                            dp[i * step[0]] = convert<D>(sp[i * step[1]]);
                        }
                      });
    });
  });
}

}  // namespace tiny::detail::cpu
