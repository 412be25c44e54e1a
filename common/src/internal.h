// internal.h: machinery shared by the library's source files, not part of the public API.
//
// - the strided loop every elementwise kernel is built on (for_each_row, its form split across
//   threads, parallel_for_each_row, and its GPU form),
// - element conversion between dtypes,
// - how a BLAS reads a strided matrix.
// Where an op runs is decided by the dispatcher (dispatch.h) and the backend table (backend.h).
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <type_traits>

#include "parallel.h"
#include "tiny/tensor.h"

namespace tiny::detail {

/// Float32 results of at least this many bytes are written with streaming (non-temporal) stores,
/// kStreamBlock elements at a time, each block computed into a buffer on the stack first: a
/// result this large does not stay in a core's caches anyway, and written around them, its lines
/// are not first read from memory only to be overwritten (an ordinary store's third pass over
/// memory, after the inputs' read and the result's write). glibc's memcpy does the same for
/// copies large against the last-level cache. The eager CPU loops (cpu/elementwise.h) and
/// chapter 09's generated kernels (fusion/codegen.cpp) both follow it.
constexpr int64_t kStreamBytes = int64_t(8) << 20;
/// The eager loops stream kStreamBlock elements at a time from each of kStreamParts places in a
/// row (cpu/elementwise.h, stream_blocks); the generated kernels' blocks are kFusedStreamBlock
/// (fusion/codegen.cpp), and they read four rows at a time.
constexpr int64_t kStreamBlock = 32;
constexpr int kStreamParts = 4;
/// A row is walked from kStreamParts places only where each part would be at least this many
/// elements (16 KiB of float32, four pages); a shorter row is walked from one place.
constexpr int64_t kStreamLongPart = 4096;

/// Converts one element between C++ element types the way PyTorch casts: through the source's
/// arithmetic type; to bool means "not zero". A float to an integer type truncates; NaN, the
/// infinities and values outside the type's range give its minimum, which is what x86's
/// conversion instruction (and so PyTorch on a PC) gives, where a C++ cast would be undefined.
/// Between integer types the low bits are kept (int64 300 is uint8 44), as in PyTorch.
template <typename D, typename S> TINY_HD inline D convert(S s) {
  using A = opmath_t<S>;
  if constexpr (std::is_same_v<D, S>) {
    return s;
  } else if constexpr (std::is_same_v<D, bool>) {
    return static_cast<A>(s) != A(0);
  } else if constexpr (std::is_same_v<D, Half> || std::is_same_v<D, BFloat16>) {
    return D(static_cast<float>(static_cast<A>(s)));
  } else if constexpr (std::is_integral_v<D> && sizeof(D) < 4 && std::is_floating_point_v<A>) {
    // PyTorch truncates a float to int8 and int16 through int32, and to uint8 through int64
    // (as NumPy does), then keeps the low bits: 300.0 is 44 in both 8-bit types, -1.0 is 255.
    using Wide = std::conditional_t<std::is_signed_v<D>, int32_t, int64_t>;
    return static_cast<D>(convert<Wide>(s));
  } else if constexpr (std::is_integral_v<D> && std::is_floating_point_v<A>) {
    const A a = static_cast<A>(s);
    constexpr D kMin = static_cast<D>(uint64_t(1) << (8 * sizeof(D) - 1));
    return truncation_fits<D>(a) ? static_cast<D>(a) : kMin;
  } else {
    return static_cast<D>(static_cast<A>(s));
  }
}

/// Strides of `t` broadcast to `shape` (0 where it is expanded); `t` must broadcast to it.
Strides broadcast_strides(const Tensor& t, const Shape& shape);

/// Whether t's elements fill a block of memory without gaps or overlaps, in some order of its
/// dimensions (PyTorch's is_non_overlapping_and_dense): sorted by stride, each dimension's
/// stride is the product of the sizes inside it. Dimensions of size 1 do not count.
bool non_overlapping_and_dense(const Tensor& t);

/// A loop over N operands reduced to its essentials: size-1 dimensions dropped, and neighbours
/// that are contiguous in every operand merged. `empty` when the shape holds no element.
template <size_t N> struct CoalescedLoop {
  // Small vectors, not std::vector: an op on a small tensor builds one of these per call, and
  // the heap would cost more than its loop.
  DimVector sizes;                               ///< the remaining dimensions, outermost first
  SmallVector<std::array<int64_t, N>, 6> steps;  ///< per dimension, each operand's stride
  bool empty = false;
};

template <size_t N>
CoalescedLoop<N> coalesce(const Shape& shape, const std::array<const Strides*, N>& strides) {
  CoalescedLoop<N> loop;
  auto& sizes = loop.sizes;
  auto& st = loop.steps;
  // Nothing to loop over when any size is 0; checked first, since beside a 0 the other sizes
  // and strides may be anything (their products could overflow below).
  for (int64_t size : shape)
    if (size == 0) {
      loop.empty = true;
      return loop;
    }
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    std::array<int64_t, N> s{};
    for (size_t k = 0; k < N; ++k) s[k] = (*strides[k])[d];
    if (!sizes.empty()) {
      bool mergeable = true;
      for (size_t k = 0; k < N; ++k) mergeable &= st.back()[k] == s[k] * shape[d];
      if (mergeable) {
        sizes.back() *= shape[d];
        st.back() = s;
        continue;
      }
    }
    sizes.push_back(shape[d]);
    st.push_back(s);
  }
  return loop;
}

/// The same loop for a GPU, where each thread handles one element and must find its operands
/// without walking: the element's linear index (row-major over the coalesced sizes) is split
/// into one index per dimension by division, innermost first, and each operand's offset is the
/// sum of index times step. Plain arrays, so it travels to a kernel as an argument.
template <int N> struct LoopGeometry {
  static constexpr int kMaxDims = 16;  ///< dimensions left after coalescing
  int ndim = 0;
  int64_t sizes[kMaxDims] = {};
  int64_t steps[kMaxDims][N] = {};

  /// The geometry of a coalesced loop; RuntimeError beyond kMaxDims dimensions.
  static LoopGeometry from(const CoalescedLoop<N>& loop) {
    if (loop.sizes.size() > static_cast<size_t>(kMaxDims))
      throw RuntimeError("CUDA kernels take at most " + std::to_string(kMaxDims) +
                         " non-mergeable dimensions; this op has " +
                         std::to_string(loop.sizes.size()));
    LoopGeometry g;
    g.ndim = static_cast<int>(loop.sizes.size());
    for (int d = 0; d < g.ndim; ++d) {
      g.sizes[d] = loop.sizes[d];
      for (int k = 0; k < N; ++k) g.steps[d][k] = loop.steps[d][k];
    }
    return g;
  }

  /// Each operand's offset (in elements) for the element with row-major index `linear`.
  TINY_HD void offsets(int64_t linear, int64_t (&off)[N]) const {
    for (int k = 0; k < N; ++k) off[k] = 0;
    for (int d = ndim - 1; d >= 0; --d) {
      const int64_t idx = linear % sizes[d];
      linear /= sizes[d];
      for (int k = 0; k < N; ++k) off[k] += idx * steps[d][k];
    }
  }
};

/// Walks N operands that share one shape, row by row. Size-1 dimensions are dropped and
/// dimensions that are contiguous in every operand merged, so a contiguous op becomes one long
/// row. For each row, calls row(n, offsets, steps): n elements, each operand starting at
/// offsets[k] (elements) and advancing by steps[k].
template <size_t N, typename Row>
void for_each_row(const Shape& shape, const std::array<const Strides*, N>& strides, Row&& row) {
  const CoalescedLoop<N> loop = coalesce<N>(shape, strides);
  if (loop.empty) return;
  const auto& sizes = loop.sizes;
  const auto& st = loop.steps;
  if (sizes.empty()) {  // a single element
    std::array<int64_t, N> zero{};
    row(int64_t(1), zero, zero);
    return;
  }
  if (sizes.size() == 1) {  // one long row
    row(sizes[0], std::array<int64_t, N>{}, st[0]);
    return;
  }
  // The last two dimensions form a matrix of rows. If some operand walks its rows across memory
  // (a transposed input: large step along the row, step 1 down the column), reading it row by
  // row touches one element per cache line; going tile by tile keeps both layouts in cache.
  const size_t nd = sizes.size();
  const int64_t rows = sizes[nd - 2], inner = sizes[nd - 1];
  const std::array<int64_t, N> row_steps = st[nd - 2], inner_steps = st[nd - 1];
  bool crosses = false;
  for (size_t k = 0; k < N; ++k) crosses |= inner_steps[k] != 1 && row_steps[k] == 1;
  const int64_t tile_cols = crosses ? 128 : inner, tile_rows = crosses ? 128 : rows;
  auto matrix = [&](const std::array<int64_t, N>& base) {
    for (int64_t i0 = 0; i0 < rows; i0 += tile_rows) {
      const int64_t i1 = std::min(rows, i0 + tile_rows);
      for (int64_t j0 = 0; j0 < inner; j0 += tile_cols) {
        const int64_t n = std::min(tile_cols, inner - j0);
        for (int64_t i = i0; i < i1; ++i) {
          std::array<int64_t, N> off;
          for (size_t k = 0; k < N; ++k) off[k] = base[k] + i * row_steps[k] + j0 * inner_steps[k];
          row(n, off, inner_steps);
        }
      }
    }
  };
  // The dimensions before the last two, like an odometer.
  const size_t outer = nd - 2;
  DimVector counter(outer, 0);
  std::array<int64_t, N> offsets{};
  while (true) {
    matrix(offsets);
    size_t d = outer;
    while (true) {
      if (d == 0) return;
      --d;
      if (++counter[d] < sizes[d]) {
        for (size_t k = 0; k < N; ++k) offsets[k] += st[d][k];
        break;
      }
      for (size_t k = 0; k < N; ++k) offsets[k] -= st[d][k] * (sizes[d] - 1);
      counter[d] = 0;
    }
  }
}

/// True when no two indices of `shape` reach the same element through `strides`: sorted by
/// stride, each dimension's stride exceeds the farthest the smaller ones reach. A tensor that
/// fails it (an expanded one, or an odd as_strided view) is written on one thread, in order.
inline bool writes_each_location_once(const Shape& shape, const Strides& strides) {
  std::vector<std::pair<int64_t, int64_t>> dims;  // (|stride|, size) of dimensions longer than 1
  for (size_t d = 0; d < shape.size(); ++d)
    if (shape[d] > 1) dims.emplace_back(strides[d] < 0 ? -strides[d] : strides[d], shape[d]);
  std::sort(dims.begin(), dims.end());
  int64_t reach = 0;  // the largest offset the dimensions so far can add up to
  for (const auto& [stride, size] : dims) {
    if (stride <= reach) return false;
    reach += stride * (size - 1);
  }
  return true;
}

/// for_each_row, split across the CPU threads (parallel.h) when the loop has more than `grain`
/// elements. Operand 0 is the one written; the split never gives one element to two threads:
/// - a single row is cut into runs of whole 64-element blocks (cut points a multiple of 64 from
///   the row's start, so a vectorised row loop sees the same alignment either way);
/// - rows are handed out in the same blocks, a chunk beginning and ending at a block boundary;
/// - tiled matrices (an operand read across its rows) are handed out in bands of 128 rows,
///   each band walked tile by tile as for_each_row walks it.
/// Which thread runs a row does not change what the row computes, so results do not depend on
/// the number of threads. An operand 0 whose layout writes some element twice (writes_each_
/// location_once) runs serially, in for_each_row's order.
template <size_t N, typename Row>
void parallel_for_each_row(const Shape& shape, const std::array<const Strides*, N>& strides,
                           Row&& row, int64_t grain = kGrainSize) {
  int64_t numel = 1;
  for (int64_t s : shape) numel *= s;
  if (numel <= grain || get_num_threads() == 1 || in_parallel_region() ||
      !writes_each_location_once(shape, *strides[0])) {
    for_each_row<N>(shape, strides, row);
    return;
  }
  const CoalescedLoop<N> loop = coalesce<N>(shape, strides);
  const auto& sizes = loop.sizes;
  const auto& st = loop.steps;
  constexpr int64_t kBlock = 64;
  const size_t nd = sizes.size();
  const int64_t inner = sizes[nd - 1];
  const std::array<int64_t, N> inner_steps = st[nd - 1];
  // Operand offsets at the start of row r of the dimensions before the last (r row-major).
  auto row_start = [&](int64_t r) {
    std::array<int64_t, N> off{};
    for (size_t d = nd - 1; d-- > 0;) {
      const int64_t i = r % sizes[d];
      r /= sizes[d];
      for (size_t k = 0; k < N; ++k) off[k] += i * st[d][k];
    }
    return off;
  };
  if (nd == 1) {
    const int64_t blocks = (inner + kBlock - 1) / kBlock;
    parallel_for(0, blocks, grain / kBlock, [&](int64_t b, int64_t e) {
      const int64_t i0 = b * kBlock, i1 = std::min(inner, e * kBlock);
      std::array<int64_t, N> off;
      for (size_t k = 0; k < N; ++k) off[k] = i0 * inner_steps[k];
      row(i1 - i0, off, inner_steps);
    });
    return;
  }
  const int64_t rows = sizes[nd - 2];
  const std::array<int64_t, N> row_steps = st[nd - 2];
  bool crosses = false;
  for (size_t k = 0; k < N; ++k) crosses |= inner_steps[k] != 1 && row_steps[k] == 1;
  if (crosses) {
    constexpr int64_t kTile = 128;  // for_each_row's tile
    const int64_t bands = (rows + kTile - 1) / kTile;
    const int64_t matrices = numel / (rows * inner);
    parallel_for(0, matrices * bands, std::max<int64_t>(1, grain / (kTile * inner)),
                 [&](int64_t b, int64_t e) {
                   for (int64_t u = b; u < e; ++u) {
                     const std::array<int64_t, N> base = row_start(u / bands * rows);
                     const int64_t i0 = u % bands * kTile, i1 = std::min(rows, i0 + kTile);
                     for (int64_t j0 = 0; j0 < inner; j0 += kTile) {
                       const int64_t n = std::min(kTile, inner - j0);
                       for (int64_t i = i0; i < i1; ++i) {
                         std::array<int64_t, N> off;
                         for (size_t k = 0; k < N; ++k)
                           off[k] = base[k] + i * row_steps[k] + j0 * inner_steps[k];
                         row(n, off, inner_steps);
                       }
                     }
                   }
                 });
    return;
  }
  // Blocks of up to 64 elements, row by row: block u is row u / per_row, from column
  // (u % per_row) * 64.
  const int64_t per_row = (inner + kBlock - 1) / kBlock;
  const int64_t all_rows = numel / inner;
  const int64_t block_grain = std::max<int64_t>(1, grain / std::min(inner, kBlock));
  parallel_for(0, all_rows * per_row, block_grain, [&](int64_t b, int64_t e) {
    int64_t r = b / per_row, j0 = b % per_row * kBlock;
    const int64_t r_end = e / per_row, j_end = e % per_row * kBlock;  // stop before (r_end, j_end)
    std::array<int64_t, N> start = row_start(r);
    while (r < r_end || (r == r_end && j0 < j_end)) {
      const int64_t j1 = r < r_end ? inner : j_end;
      std::array<int64_t, N> off;
      for (size_t k = 0; k < N; ++k) off[k] = start[k] + j0 * inner_steps[k];
      row(j1 - j0, off, inner_steps);
      j0 = 0;
      if (++r <= r_end && r < all_rows) start = row_start(r);
    }
  });
}

/// How a BLAS can read a row-major `rows` x `cols` matrix whose element (i, j) is at
/// i * rs + j * cs: as stored (`transposed` false: rows contiguous, leading dimension rs), or as
/// the transpose of a matrix stored the other way (`transposed` true: columns contiguous, leading
/// dimension cs). Nothing when neither holds; the caller packs the matrix first. A size-1
/// dimension is never stepped along, so its stride is taken to be what a packed layout has.
///
/// The same answer serves OpenBLAS's row-major interface and cuBLAS's column-major one: cuBLAS
/// sees a row-major matrix as its transpose, so C = A B is asked of it as C^T = B^T A^T, with the
/// operands swapped and each one's flag and leading dimension exactly as computed here.
struct BlasLayout {
  bool transposed = false;
  int64_t ld = 1;
};
inline std::optional<BlasLayout> blas_layout(int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
  if (rows == 1) rs = std::max<int64_t>(cols, 1);
  if (cols == 1) cs = 1;
  if (cs == 1 && rs >= std::max<int64_t>(cols, 1)) return BlasLayout{false, rs};
  if (rs == 1 && cs >= std::max<int64_t>(rows, 1)) return BlasLayout{true, cs};
  return std::nullopt;
}

/// a * b in `out`; true when the product overflows int64 (`out` is then meaningless). Every
/// size, byte count, stride and offset the library computes from a user's numbers goes
/// through this, so an overflow becomes PyTorch's error instead of a wrapped number.
inline bool mul_overflows(int64_t a, int64_t b, int64_t* out) {
  return __builtin_mul_overflow(a, b, out);
}

/// The C++ type PyTorch's "value cannot be converted to type <type> without overflow" names for
/// a dtype's element (c10::checked_convert): "int8_t", "int" for int32, "c10::Half".
const char* convert_type_name(DType dt);
/// The C++ name PyTorch's messages give a dtype when they print its caffe2::TypeMeta ("float",
/// "long int", "c10::Half").
const char* type_meta_name(DType d);

/// A 0-dim CPU tensor holding `s` as a `dtype` number (scalar_tensor's check of its range), for
/// the numbers the library itself passes to ops (a wrapped Python number, a loss's zero) and
/// never writes into: unlike scalar_tensor's, a CPUGraph does not restore them at each replay.
/// With `check_floats` false a float dtype takes any number, rounding one beyond its range to
/// infinity, as PyTorch casts the number beside a tensor in `x * 1e300` (integer dtypes are
/// always checked).
Tensor number_tensor(Scalar s, DType dtype, bool check_floats = true);

/// "[2, 3]": a shape as PyTorch's C++ messages print it.
std::string shape_str(const Shape& shape);

/// "torch.Size([2, 3])": a shape as PyTorch's messages print it where Python formats them
/// (load_state_dict, backward's shape check, einops).
inline std::string torch_size_str(const Shape& shape) {
  std::string s = "torch.Size(";
  s += shape_str(shape);
  return s += ")";
}

}  // namespace tiny::detail
