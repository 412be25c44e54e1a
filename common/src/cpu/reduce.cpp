// cpu/reduce.cpp: sums and maxima on the CPU.
//
// A sum accumulates in float64 (integers and bools in int64) into an output of the kept shape,
// whose strides are 0 along the reduced dimensions. Three layouts cover nearly every sum a
// program asks for, and each has a loop of its own:
// - everything reduced into one number: the input is cut into FIXED blocks of 32,768 elements,
//   each summed on its own, and the block sums are added in order, so the result is the same
//   bits whichever thread summed which block, and however many threads there are;
// - each row reduced into its own slot (a sum over the last dimensions): rows are split across
//   threads, and each row is summed along memory by 16 independent accumulators, which the
//   compiler keeps in vector registers;
// - rows added into a vector (a sum over the leading dimensions): each thread owns a range of
//   the output's columns and adds the rows into it one after another, so every slot still sees
//   its terms in row order.
// Anything else (several non-adjacent dimensions reduced) walks the input once in memory order on
// one thread. Within one row the order of additions is fixed by the row alone, never by the
// threads.
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "../internal.h"
#include "cpu.h"
#include "isa.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

namespace tiny::detail::cpu {

namespace {

// Independent partial sums per row: enough to hide the latency of a vector add, few enough to
// stay in registers (8 SSE registers of two doubles).
constexpr int64_t kLanes = 16;
// The fixed block of a whole-tensor sum (elements).
constexpr int64_t kSumBlock = 32768;
// 16-bit floats are widened to float32 in pieces of this many elements (on the stack), by the
// SIMD conversions of copy.cpp, before they are added.
constexpr int64_t kWiden = 1024;

template <typename T> constexpr bool kWidened = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

// The two inner loops, written once and compiled three times: for any x86-64 (SSE2, two doubles
// per instruction), for AVX2 (four) and for AVX-512 (eight), picked at run time by cpu_isa()
// (isa.h), as the elementwise loops are. Every copy adds the same terms in the same order into
// the same 16 lanes, so all three give the same bits. Widening float32 to float64 costs an
// instruction per pair of elements in SSE2, which is enough to fall behind memory on a sum over
// the last dimension of 4096 x 4096 float32 (9.9 ms against 8.0 for a float32 read).
#if defined(__GNUC__)
#define TINY_ALWAYS_INLINE __attribute__((always_inline)) inline
#else
#define TINY_ALWAYS_INLINE inline
#endif

// How the loop asks for its data ahead (sum_prefetch(), isa.h) depends on the processor's maker;
// the answer changes the time, never the bits. Measured on the sum over the last dimension of
// 4096 x 4096 float32 (bench_libtorch, one thread, in turns with the other build):
// - On an Intel Xeon with a 480 MiB L3 (the input in the cache), a line 4 KiB ahead of every
//   line added made the sum about 12% faster: 1.13 to 0.99 times libtorch's time on one thread,
//   1.14 to 0.97 on two, medians of five.
// - On an AMD EPYC (Zen 4), that made the whole-tensor sum 10-35% slower and the last-dimension
//   sum 5-15% slower. But the hardware prefetcher there stops at each 4 KiB page, and a row of
//   4096 floats spans four: asking once per page for the first line of the next page (the
//   address 4 KiB ahead is always in the next page) let it start the next page sooner. With
//   the AVX2 loop below, it took the last-dimension sum from 1.11-1.19 to 0.99-1.03 times
//   libtorch's time on one thread while the machine was quiet, and the whole-tensor sum from
//   1.10-1.18 to 0.95-0.98. With other work on the host, both builds fell behind libtorch,
//   whose float32 loop has fewer instructions per byte: 1.20-1.36 before, 1.07-1.32 after.
// - On the same EPYC with large blocks on huge pages (TINY_HUGE_PAGES=1, cpu.h), where a pass
//   over the input no longer walks the page tables, asking once per page made the last-dimension
//   sum slower: 1.35-1.41 times libtorch's time (libtorch on huge pages too), against 1.12-1.25
//   without asking, three rounds. So there the loop asks for nothing (SumPrefetch::None).
constexpr int64_t kPrefetchBytes = 4096;

// Asks for the line kPrefetchBytes past x[i], as policy P says, where i is a multiple of kLanes.
// The address is only a hint: it may lie past the end of the tensor, so it is formed as an
// integer, never as a pointer into memory the tensor does not own.
template <SumPrefetch P, typename T>
TINY_ALWAYS_INLINE void prefetch_for_sum(const T* x, int64_t i) {
  const auto ahead =
      reinterpret_cast<const void*>(reinterpret_cast<uintptr_t>(x + i) + kPrefetchBytes);
  if constexpr (P == SumPrefetch::EveryLine) {
    __builtin_prefetch(ahead);
  } else if constexpr (P == SumPrefetch::NextPage) {
    if (i * static_cast<int64_t>(sizeof(T)) % kPrefetchBytes == 0) __builtin_prefetch(ahead);
  }
}

// acc[k] += x[i + k] for k < 16, over n elements (a multiple of 16).
template <bool Prefetch, SumPrefetch P, typename Acc, typename T>
TINY_ALWAYS_INLINE void add_lanes_body(Acc (&acc)[kLanes], const T* x, int64_t n) {
  for (int64_t i = 0; i < n; i += kLanes) {
    if constexpr (Prefetch) prefetch_for_sum<P>(x, i);
    for (int64_t k = 0; k < kLanes; ++k)
      acc[k] += static_cast<Acc>(static_cast<opmath_t<T>>(x[i + k]));
  }
}

// s[j] += x[0][j], then += x[1][j], ... for `rows` rows `row_step` apart: the rows are added in
// order, as one row at a time would add them, but each s[j] is loaded and stored once per group.
template <typename Acc, typename T>
TINY_ALWAYS_INLINE void add_rows_body(Acc* s, const T* x, int64_t row_step, int64_t rows,
                                      int64_t n) {
  for (int64_t r = 0; r < rows; r += 4) {
    const T* x0 = x + r * row_step;
    if (rows - r >= 4) {
      const T* x1 = x0 + row_step;
      const T* x2 = x1 + row_step;
      const T* x3 = x2 + row_step;
      for (int64_t j = 0; j < n; ++j) {
        Acc v = s[j];
        v += static_cast<Acc>(static_cast<opmath_t<T>>(x0[j]));
        v += static_cast<Acc>(static_cast<opmath_t<T>>(x1[j]));
        v += static_cast<Acc>(static_cast<opmath_t<T>>(x2[j]));
        v += static_cast<Acc>(static_cast<opmath_t<T>>(x3[j]));
        s[j] = v;
      }
    } else {
      for (int64_t q = r; q < rows; ++q, x0 += row_step)
        for (int64_t j = 0; j < n; ++j) s[j] += static_cast<Acc>(static_cast<opmath_t<T>>(x0[j]));
    }
  }
}

template <typename Acc, typename T>
void add_lanes_portable(Acc (&acc)[kLanes], const T* x, int64_t n) {
  add_lanes_body<false, SumPrefetch::None>(acc, x, n);
}
template <typename Acc, typename T>
void add_rows_portable(Acc* s, const T* x, int64_t row_step, int64_t rows, int64_t n) {
  add_rows_body(s, x, row_step, rows, n);
}
#if defined(__x86_64__) && defined(__GNUC__)
template <SumPrefetch P, typename Acc, typename T>
__attribute__((target("avx2"))) void add_lanes_avx2(Acc (&acc)[kLanes], const T* x, int64_t n) {
  add_lanes_body<true, P>(acc, x, n);
}
// float32 into float64 lanes, the loop of every float32 sum, written out for AVX2: the lanes
// are four vectors of four doubles, and each takes its four floats straight from memory
// (vcvtps2pd ymm, m128). From the loop above the compiler loads eight floats at a time and
// splits them, an extra instruction per eight that cost 5% of the time of a row loop here (AMD
// EPYC, medians of 100 rounds in turns). Same lanes, same order, same bits.
template <SumPrefetch P>
__attribute__((target("avx2"))) void add_float_lanes_avx2(double (&acc)[kLanes], const float* x,
                                                          int64_t n) {
  __m256d a0 = _mm256_loadu_pd(acc), a1 = _mm256_loadu_pd(acc + 4);
  __m256d a2 = _mm256_loadu_pd(acc + 8), a3 = _mm256_loadu_pd(acc + 12);
  for (int64_t i = 0; i < n; i += kLanes) {
    prefetch_for_sum<P>(x, i);
    a0 = _mm256_add_pd(a0, _mm256_cvtps_pd(_mm_loadu_ps(x + i)));
    a1 = _mm256_add_pd(a1, _mm256_cvtps_pd(_mm_loadu_ps(x + i + 4)));
    a2 = _mm256_add_pd(a2, _mm256_cvtps_pd(_mm_loadu_ps(x + i + 8)));
    a3 = _mm256_add_pd(a3, _mm256_cvtps_pd(_mm_loadu_ps(x + i + 12)));
  }
  _mm256_storeu_pd(acc, a0);
  _mm256_storeu_pd(acc + 4, a1);
  _mm256_storeu_pd(acc + 8, a2);
  _mm256_storeu_pd(acc + 12, a3);
}
template <typename Acc, typename T>
__attribute__((target("avx2"))) void add_rows_avx2(Acc* s, const T* x, int64_t row_step,
                                                   int64_t rows, int64_t n) {
  add_rows_body(s, x, row_step, rows, n);
}
#if defined(__clang__)
#define TINY_AVX512_TARGET "avx512f,avx512dq,avx512bw,avx512vl,avx2"
#else
#define TINY_AVX512_TARGET "avx512f,avx512dq,avx512bw,avx512vl,avx2,prefer-vector-width=512"
#endif
template <SumPrefetch P, typename Acc, typename T>
__attribute__((target(TINY_AVX512_TARGET))) void add_lanes_avx512(Acc (&acc)[kLanes], const T* x,
                                                                  int64_t n) {
  add_lanes_body<true, P>(acc, x, n);
}
template <typename Acc, typename T>
__attribute__((target(TINY_AVX512_TARGET))) void add_rows_avx512(Acc* s, const T* x,
                                                                  int64_t row_step, int64_t rows,
                                                                  int64_t n) {
  add_rows_body(s, x, row_step, rows, n);
}
#undef TINY_AVX512_TARGET
#endif

// The copy of the lane loop for the instruction set the processor runs, asking ahead as P says.
template <SumPrefetch P, typename Acc, typename T>
void add_lanes_prefetching(Acc (&acc)[kLanes], const T* x, int64_t n) {
#if defined(__x86_64__) && defined(__GNUC__)
  const Isa isa = cpu_isa();
  if (isa == Isa::Avx512) return add_lanes_avx512<P>(acc, x, n);
  if (isa == Isa::Avx2) {
    if constexpr (std::is_same_v<Acc, double> && std::is_same_v<T, float>)
      return add_float_lanes_avx2<P>(acc, x, n);
    else return add_lanes_avx2<P>(acc, x, n);
  }
#endif
  add_lanes_portable(acc, x, n);
}
template <typename Acc, typename T> void add_lanes(Acc (&acc)[kLanes], const T* x, int64_t n) {
  switch (sum_prefetch()) {
    case SumPrefetch::EveryLine: return add_lanes_prefetching<SumPrefetch::EveryLine>(acc, x, n);
    case SumPrefetch::NextPage: return add_lanes_prefetching<SumPrefetch::NextPage>(acc, x, n);
    case SumPrefetch::None: return add_lanes_prefetching<SumPrefetch::None>(acc, x, n);
  }
}
template <typename Acc, typename T>
void add_rows(Acc* s, const T* x, int64_t row_step, int64_t rows, int64_t n) {
#if defined(__x86_64__) && defined(__GNUC__)
  const Isa isa = cpu_isa();
  if (isa == Isa::Avx512) return add_rows_avx512(s, x, row_step, rows, n);
  if (isa == Isa::Avx2) return add_rows_avx2(s, x, row_step, rows, n);
#endif
  add_rows_portable(s, x, row_step, rows, n);
}

// The sum of n elements, step apart. Contiguous: 16 lanes, then the rest in order, then the
// lanes added pairwise; strided: in order.
template <typename Acc, typename T> Acc row_sum(const T* x, int64_t n, int64_t step) {
  Acc total = 0;
  if (step != 1) {
    for (int64_t i = 0; i < n; ++i) total += static_cast<Acc>(static_cast<opmath_t<T>>(x[i * step]));
    return total;
  }
  Acc acc[kLanes] = {};
  const int64_t full = n / kLanes * kLanes;
  if constexpr (kWidened<T>) {
    float wide[kWiden];
    for (int64_t i = 0; i < full; i += kWiden) {
      const int64_t m = std::min(kWiden, full - i);
      convert_row(wide, x + i, m);
      add_lanes(acc, wide, m);
    }
  } else {
    add_lanes(acc, x, full);
  }
  for (int64_t i = full; i < n; ++i) total += static_cast<Acc>(static_cast<opmath_t<T>>(x[i]));
  for (int64_t w = kLanes / 2; w > 0; w /= 2)
    for (int64_t k = 0; k < w; ++k) acc[k] += acc[k + w];
  return acc[0] + total;
}

// s[j * ss] += x[r * rs + j * xs] for every row r < rows in order, j < n: rows added into a
// vector of sums. 16-bit floats are widened a piece of a row at a time.
template <typename Acc, typename T>
void add_rows_into(Acc* s, int64_t ss, const T* x, int64_t rs, int64_t xs, int64_t rows,
                   int64_t n) {
  if (ss == 1 && xs == 1) {
    if constexpr (kWidened<T>) {
      float wide[kWiden];
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t i = 0; i < n; i += kWiden) {
          const int64_t m = std::min(kWiden, n - i);
          convert_row(wide, x + r * rs + i, m);
          add_rows(s + i, wide, 0, 1, m);
        }
    } else {
      add_rows(s, x, rs, rows, n);
    }
    return;
  }
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < n; ++j)
      s[j * ss] += static_cast<Acc>(static_cast<opmath_t<T>>(x[r * rs + j * xs]));
}

// acc (the kept shape, contiguous) = the sum of `a` over the flagged dimensions.
template <typename Acc>
void accumulate(const Tensor& acc, const Tensor& a, const std::vector<bool>& reduce) {
  Acc* pacc = acc.data<Acc>();
  std::fill_n(pacc, acc.numel(), Acc(0));
  Strides acc_strides = acc.strides();
  for (int64_t d = 0; d < a.dim(); ++d)
    if (reduce[d]) acc_strides[d] = 0;  // every element along d lands in the same slot
  const CoalescedLoop<2> loop = coalesce<2>(a.shape(), {&a.strides(), &acc_strides});
  if (loop.empty) return;
  const auto& sizes = loop.sizes;
  const auto& st = loop.steps;  // st[d][0]: the input's step, st[d][1]: the output's
  dispatch_dtype(a.dtype(), [&]<typename T>() {
    const T* px = static_cast<const T*>(a.data_ptr());
    if (sizes.size() == 1 && st[0][1] == 0) {
      // Everything into one slot: fixed blocks, each summed on its own, then added in order.
      const int64_t n = sizes[0], step = st[0][0];
      const int64_t blocks = (n + kSumBlock - 1) / kSumBlock;
      std::vector<Acc> partial(static_cast<size_t>(blocks));
      parallel_for(0, blocks, 1, [&](int64_t b, int64_t e) {
        for (int64_t k = b; k < e; ++k) {
          const int64_t i0 = k * kSumBlock, m = std::min(kSumBlock, n - i0);
          partial[static_cast<size_t>(k)] = row_sum<Acc>(px + i0 * step, m, step);
        }
      });
      Acc total = 0;
      for (Acc p : partial) total += p;
      *pacc += total;
    } else if (sizes.size() == 2 && st[1][1] == 0 && st[0][1] != 0) {
      // Row r into slot r: rows across threads, each summed along the row.
      const int64_t rows = sizes[0], n = sizes[1];
      parallel_for(0, rows, std::max<int64_t>(1, kGrainSize / n), [&](int64_t b, int64_t e) {
        for (int64_t r = b; r < e; ++r) pacc[r * st[0][1]] += row_sum<Acc>(px + r * st[0][0], n, st[1][0]);
      });
    } else if (sizes.size() == 2 && st[0][1] == 0 && st[1][1] != 0) {
      // Every row into the same vector: columns across threads (in blocks of 64, so that no two
      // threads write one cache line), rows in order within each.
      const int64_t rows = sizes[0], n = sizes[1];
      constexpr int64_t kCols = 64;
      const int64_t blocks = (n + kCols - 1) / kCols;
      parallel_for(0, blocks, std::max<int64_t>(1, kGrainSize / (rows * kCols)),
                   [&](int64_t b, int64_t e) {
                     const int64_t j0 = b * kCols, m = std::min(n, e * kCols) - j0;
                     add_rows_into(pacc + j0 * st[1][1], st[1][1], px + j0 * st[1][0], st[0][0],
                                   st[1][0], rows, m);
                   });
    } else {
      for_each_row<2>(a.shape(), {&a.strides(), &acc_strides},
                      [&](int64_t n, const auto& off, const auto& step) {
                        const T* x = px + off[0];
                        Acc* s = pacc + off[1];
                        if (step[1] == 0) *s += row_sum<Acc>(x, n, step[0]);
                        else add_rows_into(s, step[1], x, 0, step[0], 1, n);
                      });
    }
  });
}

// a > b for max's purposes: NaN beats everything, so it propagates.
template <typename M> bool beats(M candidate, M best) {
  if constexpr (std::is_floating_point_v<M>)
    if (std::isnan(candidate)) return !std::isnan(best);
  return candidate > best;
}

}  // namespace

void sum(const Tensor& out, const Tensor& a, const std::vector<bool>& reduce, double divisor) {
  if (!is_floating(a.dtype())) return accumulate<int64_t>(out, a, reduce);  // integers, bool: int64
  accumulate<double>(out, a, reduce);
  if (divisor != 1) {
    // The mean of no elements is 0 / 0 = NaN, as in PyTorch.
    double* p = out.data<double>();
    for (int64_t i = 0; i < out.numel(); ++i) p[i] /= divisor;
  }
}

void max_rows(const Tensor& values, const Tensor& indices, const Tensor& rows) {
  dispatch_dtype(rows.dtype(), [&]<typename T>() {
    const T* p = rows.data<T>();
    T* vals = values.data<T>();
    int64_t* idx = indices.data<int64_t>();
    const int64_t m = rows.size(0), n = rows.size(1);
    for (int64_t row = 0; row < m; ++row) {
      const T* v = p + row * n;
      int64_t best = 0;
      for (int64_t i = 1; i < n; ++i)
        if (beats(static_cast<opmath_t<T>>(v[i]), static_cast<opmath_t<T>>(v[best]))) best = i;
      vals[row] = v[best];
      idx[row] = best;
    }
  });
}

}  // namespace tiny::detail::cpu
