// cpu/elementwise.h: the CPU loop every elementwise op runs in, for one, two or three inputs.
// Included by the files that instantiate it for each op (elementwise_*.cpp), so that the
// compiler works on them in parallel.
//
// The loop walks the broadcast shape row by row (detail::for_each_row: size-1 dimensions
// dropped, contiguous neighbours merged, tiles where an operand is read across its rows). Each
// row's inner loop is specialised for the common layouts (every operand contiguous; for two
// inputs, one of them a broadcast scalar) so that the compiler can vectorise it; the op's call
// operator is the same TINY_HD code the CUDA kernels run.
#pragma once
#include "../backend.h"
#include "../internal.h"
#include "isa.h"

#if defined(__x86_64__) && defined(__SSE2__)
#include <immintrin.h>
#endif

namespace tiny::detail::cpu {

/// True for a large input read across its rows (a transpose: stride 1 on an outer dimension,
/// not on the last), which is better first copied into row order by the tiled copy: one
/// cache-friendly pass, then a vectorised op, beats reading it column by column inside the op.
inline bool better_in_row_order(const Tensor& t) {
  if (t.numel() < (int64_t(1) << 15) || t.dim() < 2 || t.stride(-1) == 1 || t.is_contiguous())
    return false;
  bool outer_unit = false;
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (t.stride(d) == 0) return false;  // a broadcast: nothing to gain
    outer_unit |= t.stride(d) == 1 && t.size(d) > 1;
  }
  return outer_unit;
}

template <typename T> using M = opmath_t<T>;

// The inner loop over a row in which every operand steps by one element, which the compiler
// vectorises. The library is compiled for plain x86-64 (SSE2, no fused multiply-add), so an op
// whose expression calls fma, itself (lerp) or through the vector math of exp, log, tanh, erf,
// ... (elementwise_ops.h), gets two more copies of the loop: one for AVX2 with FMA and one for
// AVX-512, picked at run time by what the processor has (cpu_isa(), isa.h). Compiled for plain
// x86-64, each fma is a library call per element (lerp_ on 2048 x 2048 float32: 15.9 ms, against
// 2.9 ms for add_), and the vector math runs four lanes wide at best. Every copy computes the
// same bits: the math's fused multiply-adds are fused in each (a call to fmaf in the plain
// one), and these files are compiled with -ffp-contract=off, so that no copy fuses a multiply
// and an add the others round separately (CMakeLists.txt).
template <typename In, typename Out, typename Op, typename... P>
inline void contiguous_row(Out* o, int64_t n, const Op& op, const P*... p) {
  for (int64_t i = 0; i < n; ++i) o[i] = Out(op(M<In>(p[i])...));
}
#if defined(__x86_64__) && defined(__GNUC__)
template <typename In, typename Out, typename Op, typename... P>
__attribute__((target("avx2,fma"))) void contiguous_row_avx2(Out* o, int64_t n, const Op& op,
                                                             const P*... p) {
  for (int64_t i = 0; i < n; ++i) o[i] = Out(op(M<In>(p[i])...));
}
// GCC's default tuning prefers 256-bit vectors even where AVX-512 is enabled; the vector math
// is bound by arithmetic, not memory, so the full width is asked for.
#if defined(__clang__)
#define TINY_AVX512_TARGET "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma"
#else
#define TINY_AVX512_TARGET "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma,prefer-vector-width=512"
#endif
template <typename In, typename Out, typename Op, typename... P>
__attribute__((target(TINY_AVX512_TARGET))) void contiguous_row_avx512(Out* o, int64_t n,
                                                                        const Op& op,
                                                                        const P*... p) {
  for (int64_t i = 0; i < n; ++i) o[i] = Out(op(M<In>(p[i])...));
}
#endif
template <typename In, typename Out, typename Op, typename... P>
inline void row(Out* o, int64_t n, const Op& op, const P*... p) {
#if defined(__x86_64__) && defined(__GNUC__)
  if constexpr (Op::uses_fma) {
    const Isa isa = cpu_isa();
    if (isa == Isa::Avx512) return contiguous_row_avx512<In, Out>(o, n, op, p...);
    if (isa == Isa::Avx2) return contiguous_row_avx2<In, Out>(o, n, op, p...);
  }
#endif
  contiguous_row<In, Out>(o, n, op, p...);
}

// o[i] = from[i] for i < n, written with streaming stores (whole lines go to memory without
// being read into the cache first) from the first 16-byte boundary of `o` on; the elements
// before it are written plainly. The caller fences the stores (stream_fence) before it reports
// the work done.
inline void stream_floats(float* o, const float* from, int64_t n) {
#if defined(__x86_64__) && defined(__SSE2__)
  const auto address = reinterpret_cast<uintptr_t>(o);
  int64_t i = std::min<int64_t>(n, static_cast<int64_t>((16 - address % 16) % 16 / 4));
  for (int64_t j = 0; j < i; ++j) o[j] = from[j];
  for (; i + 4 <= n; i += 4) _mm_stream_ps(o + i, _mm_loadu_ps(from + i));
  for (; i < n; ++i) o[i] = from[i];
#else
  std::copy(from, from + n, o);
#endif
}
#if defined(__x86_64__) && defined(__GNUC__)
// stream_floats with 32-byte stores, for the AVX2 and AVX-512 copies of the block loop
// (streamed_row says why).
__attribute__((target("avx2"))) inline void stream_floats_avx(float* o, const float* from,
                                                              int64_t n) {
  const auto address = reinterpret_cast<uintptr_t>(o);
  int64_t i = std::min<int64_t>(n, static_cast<int64_t>((32 - address % 32) % 32 / 4));
  for (int64_t j = 0; j < i; ++j) o[j] = from[j];
  for (; i + 8 <= n; i += 8) _mm256_stream_ps(o + i, _mm256_loadu_ps(from + i));
  for (; i < n; ++i) o[i] = from[i];
}
#endif
inline void stream_fence() {
#if defined(__x86_64__) && defined(__SSE2__)
  _mm_sfence();
#endif
}

// The block loop of streamed_row. The n elements are cut into kStreamParts equal parts, each a
// whole number of blocks of kStreamBlock elements, and the parts are walked side by side: one
// block of each part is computed into a buffer, then the blocks are streamed out, and so on
// (the elements after the last whole blocks are written plainly). Reading several places at
// once keeps more of memory's latency covered than one stream does, and short blocks let the
// streamed stores go out while the next blocks compute; the generated kernels of chapter 09,
// which read four rows at a time, showed it first. On 4096 x 4096 float32, one thread (Intel
// Xeon), a standalone loop for GELU took 15.5 ms with ordinary stores, 18.3 ms streaming blocks
// of 32 from one place, 14.7 ms blocks of 256, and 9.5 ms blocks of 32 from four places; add
// 15.6, 12.2, 14.0 and 11.0 ms. The loop is compiled into each instruction set's copy below, as
// the row loops are, so that an op's constants (an erf's thirty coefficients) are set up once
// per row rather than once per block.
//
// A short row (a row of a broadcast, such as x * g with g a row of 4096 floats) is walked from
// one place instead: its kStreamParts blocks side by side are consecutive. Cut into four parts,
// a row of 4096 floats is four streams a page long each, and a hardware prefetcher that stops
// at every 4 KiB page (AMD's Zen 4) never gets going on any of them: on 4096 x 4096, one thread,
// x * g took 1.17-1.25 times libtorch's time that way, and 0.91-1.01 from one place
// (bench_libtorch, in turns with a build of the four-place loop).
template <bool Wide, typename In, typename Op, typename... P>
__attribute__((always_inline)) inline void stream_blocks(float* o, int64_t n, const Op& op,
                                                         const P*... p) {
  constexpr int kParts = kStreamParts;
  alignas(64) float block[kParts][kStreamBlock];
  // Part k's block at i starts at element k * stride + i, for i < end in steps of `step`.
  const bool long_row = n >= kParts * kStreamLongPart;
  const int64_t part = n / (kParts * kStreamBlock) * kStreamBlock;
  const int64_t stride = long_row ? part : kStreamBlock;
  const int64_t step = long_row ? kStreamBlock : kParts * kStreamBlock;
  const int64_t end = long_row ? part : kParts * part;
  for (int64_t i = 0; i < end; i += step) {
    for (int64_t j = 0; j < kStreamBlock; ++j) {
#pragma GCC unroll 4
      for (int k = 0; k < kParts; ++k) block[k][j] = float(op(M<In>(p[k * stride + i + j])...));
    }
    for (int k = 0; k < kParts; ++k) {
#if defined(__x86_64__) && defined(__GNUC__)
      if constexpr (Wide) {
        stream_floats_avx(o + k * stride + i, block[k], kStreamBlock);
        continue;
      }
#endif
      stream_floats(o + k * stride + i, block[k], kStreamBlock);
    }
  }
  for (int64_t i = kParts * part; i < n; ++i) o[i] = float(op(M<In>(p[i])...));
}
template <typename In, typename Op, typename... P>
void stream_blocks_plain(float* o, int64_t n, const Op& op, const P*... p) {
  stream_blocks<false, In>(o, n, op, p...);
}
#if defined(__x86_64__) && defined(__GNUC__)
template <typename In, typename Op, typename... P>
__attribute__((target("avx2,fma"))) void stream_blocks_avx2(float* o, int64_t n, const Op& op,
                                                            const P*... p) {
  stream_blocks<true, In>(o, n, op, p...);
}
template <typename In, typename Op, typename... P>
__attribute__((target(TINY_AVX512_TARGET))) void stream_blocks_avx512(float* o, int64_t n,
                                                                      const Op& op, const P*... p) {
  stream_blocks<true, In>(o, n, op, p...);
}
#undef TINY_AVX512_TARGET
#endif

// row(), for a float32 output at least kStreamBytes large (internal.h): the row is computed a
// block at a time and each block goes to memory with streaming stores, which write whole cache
// lines without first reading them (stream_blocks). The elements before the first 64-byte
// boundary are written as row() writes them. The stores are fenced at the end, so that the row
// is in memory before the thread reports it done.
//
// Every op's block loop, not only the vector math's, runs in the copy for the processor's
// instructions, for its 32-byte streaming stores (the plain x86-64 copy has 16-byte ones). On
// an AMD EPYC (Zen 4, AVX2 exposed), 4096 x 4096, one thread, in turns with libtorch
// (bench_libtorch), the plain copy made x * g with g a row take 1.15-1.33 times libtorch's
// time, and the chain x * g + b + x 1.19-1.23; the AVX2 copy 1.05-1.09 and 0.98-1.02. On two
// threads the chain went from 1.00-1.01 to 0.89-0.93, and x + y from 0.87-0.94 to 0.81-0.88.
template <typename In, typename Out, typename Op, typename... P>
inline void streamed_row(Out* o, int64_t n, const Op& op, const P*... p) {
#if defined(__x86_64__) && defined(__SSE2__)
  if constexpr (std::is_same_v<Out, float>) {
    // A float is 4-byte aligned, so `head` floats reach the next 64-byte boundary.
    const auto address = reinterpret_cast<uintptr_t>(o);
    const int64_t head = std::min<int64_t>(n, static_cast<int64_t>((64 - address % 64) % 64 / 4));
    row<In>(o, head, op, p...);
    o += head;
    n -= head;
#if defined(__GNUC__)
    const Isa isa = cpu_isa();
    if (isa == Isa::Avx512) stream_blocks_avx512<In>(o, n, op, (p + head)...);
    else if (isa == Isa::Avx2) stream_blocks_avx2<In>(o, n, op, (p + head)...);
    else stream_blocks_plain<In>(o, n, op, (p + head)...);
#else
    stream_blocks_plain<In>(o, n, op, (p + head)...);
#endif
    stream_fence();
    return;
  }
#endif
  row<In>(o, n, op, p...);
}

// A matrix op with a transposed input (x.T + y): is `t` a large `rows` x `cols` matrix stored by
// columns (stride 1 down a column), the layout transposed_tiles() reads through a small buffer?
inline bool stored_by_columns(const Tensor& t, const Tensor& out) {
  return t.shape() == out.shape() && t.dim() == 2 && better_in_row_order(t) && t.stride(0) == 1 &&
         t.stride(1) >= t.size(0);
}

// out = op(inputs...) for a row-major matrix out with some inputs stored by columns: the output
// is walked in bands of 16 rows and tiles of 128 columns, and each input stored by columns is
// first transposed tile by tile into a buffer on the stack (reading it down its columns, 16
// consecutive elements at a time, and writing the buffer along its rows, which stays in the
// first-level cache), so that the op's row loop then runs exactly as it does on row-major
// inputs. This is the tiled copy fused with the op: the transposed input is read once and no
// row-order copy of it goes to memory and back (x.T + y on 4096 x 4096 float32 moves 192 MiB
// instead of 320). Bands are split across threads. Returns false, doing nothing, for any other
// layout.
template <typename In, typename Out, typename Op>
bool transposed_tiles(const Tensor& out, const Tensor* const* inputs, const Op& op) {
  constexpr int A = Op::arity;
  if (out.dim() != 2 || out.stride(1) != 1 || out.stride(0) < out.size(1)) return false;
  std::array<bool, A> by_columns{};
  bool any = false;
  for (int k = 0; k < A; ++k) {
    by_columns[k] = stored_by_columns(*inputs[k], out);
    any = any || by_columns[k];
  }
  if (!any) return false;
  constexpr int64_t kRows = 16, kCols = 128;
  const int64_t rows = out.size(0), cols = out.size(1), out_row = out.stride(0);
  Out* po = static_cast<Out*>(out.data_ptr());
  std::array<const In*, A> p;
  std::array<Strides, A> s;  // (row step, column step) of each input, broadcast to out's shape
  for (int k = 0; k < A; ++k) {
    p[k] = static_cast<const In*>(inputs[k]->data_ptr());
    s[k] = broadcast_strides(*inputs[k], out.shape());
  }
  auto band = [&](int64_t b, int64_t e) {
    In tile[A][kRows * kCols];  // the transposed inputs' tiles, row-major (unused for the others)
    for (int64_t i0 = b * kRows; i0 < std::min(rows, e * kRows); i0 += kRows) {
      const int64_t m = std::min(kRows, rows - i0);
      for (int64_t j0 = 0; j0 < cols; j0 += kCols) {
        const int64_t n = std::min(kCols, cols - j0);
        for (int k = 0; k < A; ++k)
          if (by_columns[k])
            for (int64_t j = 0; j < n; ++j) {
              const In* column = p[k] + i0 + (j0 + j) * s[k][1];
              for (int64_t i = 0; i < m; ++i) tile[k][i * kCols + j] = column[i];
            }
        for (int64_t i = 0; i < m; ++i) {
          std::array<const In*, A> q;
          std::array<int64_t, A> step;
          bool unit = true;
          for (int k = 0; k < A; ++k) {
            q[k] = by_columns[k] ? tile[k] + i * kCols : p[k] + (i0 + i) * s[k][0] + j0 * s[k][1];
            step[k] = by_columns[k] ? 1 : s[k][1];
            unit &= step[k] == 1;
          }
          Out* o = po + (i0 + i) * out_row + j0;
          [&]<size_t... K>(std::index_sequence<K...>) {
            if (unit) row<In>(o, n, op, q[K]...);
            else
              for (int64_t j = 0; j < n; ++j) o[j] = Out(op(M<In>(q[K][j * step[K]])...));
          }(std::make_index_sequence<A>{});
        }
      }
    }
  };
  const int64_t bands = (rows + kRows - 1) / kRows;
  parallel_for(0, bands, std::max<int64_t>(1, kGrainSize / (kRows * cols)), band);
  return true;
}

// out[i] = op(x[i], ...) for In-typed inputs and an Out-typed output, all broadcast to out's shape.
// Large loops are split across threads by rows and 64-element blocks (parallel_for_each_row).
// A transposed input of a matrix op is transposed tile by tile on the way (transposed_tiles);
// any other input worth reading in row order is copied here, before the threads start, since
// they must not allocate.
template <typename In, typename Out, typename Op>
void loop(const Tensor& out, const Tensor* const* inputs, const Op& op) {
  constexpr int A = Op::arity;
  if (transposed_tiles<In, Out>(out, inputs, op)) return;
  Out* po = static_cast<Out*>(out.data_ptr());
  // Large float32 results go to memory around the caches (streamed_row). The vector math (exp,
  // erf, tanh, ...), bound by its arithmetic, is streamed from four places at once in short
  // blocks so that its stores overlap its arithmetic; that is a win on Intel's cores and a
  // small loss on AMD's, so there the processor's maker decides (vector_math_streams(), isa.h).
  // On 4096 x 4096, one thread:
  // - Intel Xeon (bench_elementwise): eager GELU went from 15.3 to 9.4 ms, add from 13.7 to 11.9;
  // - AMD EPYC, Zen 4 with AVX2 exposed (bench_elementwise, medians of 3, two runs each):
  //   streaming made exp take 13.2-13.4 ms against 12.3 with ordinary stores, and GELU 14.0-14.5
  //   against 13.1; in turns with libtorch (bench_libtorch), GELU 0.87-0.90 of its time against
  //   0.85-0.86, and exp 1.06-1.09 against 1.03-1.05.
  const bool streamed = (!Op::uses_fma || vector_math_streams()) && std::is_same_v<Out, float> &&
                        out.is_contiguous() &&
                        out.numel() >= kStreamBytes / static_cast<int64_t>(sizeof(float));
  std::array<Tensor, A> copies;  // only for inputs copied into row order
  std::array<Strides, A> s;
  std::array<const In*, A> p;
  for (int k = 0; k < A; ++k) {
    const Tensor* x = inputs[k];
    if (better_in_row_order(*x)) x = &(copies[k] = x->contiguous());
    s[k] = broadcast_strides(*x, out.shape());
    p[k] = static_cast<const In*>(x->data_ptr());
  }
  if constexpr (A == 1) {
    parallel_for_each_row<2>(out.shape(), {&out.strides(), &s[0]},
                    [&](int64_t n, const auto& off, const auto& st) {
                      Out* o = po + off[0];
                      const In* a = p[0] + off[1];
                      if (st[0] == 1 && st[1] == 1) {
                        streamed ? streamed_row<In>(o, n, op, a) : row<In>(o, n, op, a);
                      } else {
                        for (int64_t i = 0; i < n; ++i) o[i * st[0]] = Out(op(M<In>(a[i * st[1]])));
                      }
                    });
  } else if constexpr (A == 2) {
    parallel_for_each_row<3>(out.shape(), {&out.strides(), &s[0], &s[1]},
                    [&](int64_t n, const auto& off, const auto& st) {
                      Out* o = po + off[0];
                      const In* a = p[0] + off[1];
                      const In* b = p[1] + off[2];
                      if (st[0] == 1 && st[1] == 1 && st[2] == 1) {
                        streamed ? streamed_row<In>(o, n, op, a, b) : row<In>(o, n, op, a, b);
                      } else if (st[0] == 1 && st[1] == 1 && st[2] == 0) {
                        const M<In> bv = M<In>(*b);
                        for (int64_t i = 0; i < n; ++i) o[i] = Out(op(M<In>(a[i]), bv));
                      } else if (st[0] == 1 && st[1] == 0 && st[2] == 1) {
                        const M<In> av = M<In>(*a);
                        for (int64_t i = 0; i < n; ++i) o[i] = Out(op(av, M<In>(b[i])));
                      } else {
                        for (int64_t i = 0; i < n; ++i)
                          o[i * st[0]] = Out(op(M<In>(a[i * st[1]]), M<In>(b[i * st[2]])));
                      }
                    });
  } else {
    static_assert(A == 3, "elementwise ops take one, two or three inputs");
    parallel_for_each_row<4>(
        out.shape(), {&out.strides(), &s[0], &s[1], &s[2]},
        [&](int64_t n, const auto& off, const auto& st) {
          Out* o = po + off[0];
          const In* a = p[0] + off[1];
          const In* b = p[1] + off[2];
          const In* c = p[2] + off[3];
          if (st[0] == 1 && st[1] == 1 && st[2] == 1 && st[3] == 1) {
            streamed ? streamed_row<In>(o, n, op, a, b, c) : row<In>(o, n, op, a, b, c);
          } else {
            for (int64_t i = 0; i < n; ++i)
              o[i * st[0]] = Out(op(M<In>(a[i * st[1]]), M<In>(b[i * st[2]]), M<In>(c[i * st[3]])));
          }
        });
  }
}

template <typename Op>
void elementwise(const Tensor& out, const Tensor* const* inputs, const ops::Scalars& scalars) {
  Op op{};
  op.p = scalars;
  dispatch_dtype(inputs[0]->dtype(), [&]<typename T>() {
    if constexpr (ops::kCompiledFor<Op, T>) {
      // Comparisons give bool; everything else keeps the compute dtype.
      using Out = std::conditional_t<std::is_same_v<decltype(op.math(M<T>{})), bool>, bool, T>;
      if (out.dtype() != dtype_of<Out>())
        throw RuntimeError("elementwise kernel: unexpected output dtype");
      loop<T, Out>(out, inputs, op);
    } else {
      throw RuntimeError(std::string("elementwise kernel not compiled for '") +
                      dtype_legacy_name(dtype_of<T>()) + "'");
    }
  });
}

}  // namespace tiny::detail::cpu

/// Instantiates the CPU kernel of op struct NAME.
#define TINY_CPU_INSTANTIATE(NAME) \
  template void elementwise<ops::NAME>(const Tensor&, const Tensor* const*, const ops::Scalars&);
