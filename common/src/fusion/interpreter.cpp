// interpreter.cpp: a captured graph run without generated code, one tile of elements at a time.
//
// Where no compiler can be run, fusion still pays off: the interpreter walks the output in tiles
// small enough to stay in the L1/L2 cache (kTile elements), and for each tile evaluates the
// graph's values in order into tile-sized buffers, reading each input from memory once and
// writing each output once. The intermediates never leave the cache, which is the saving fusion
// is about. Each op runs over a whole tile in the loop the eager kernels run it in
// (cpu/elementwise.h: vectorised, with AVX2 and AVX-512 copies for the vector math), so what
// is lost against generated code is the traffic between the tile buffers and the cache, not
// vectorised arithmetic. Tiles are split across the library's threads. It computes exactly what
// the generated C++ computes: each op in its compute type (float for float32 and 16-bit floats,
// double for float64), with values kept as the generated code keeps them. Tiles hold float when
// every value fits one (a graph of float32, 16-bit floats and bool), else double.
#include "cpu/elementwise.h"
#include "elementwise_ops.h"
#include "fusion/graph.h"
#include "internal.h"
#include "parallel.h"
#include "tiny/float_formats.h"

namespace tiny::detail::fusion {

namespace {

constexpr int64_t kTile = 1024;

// Values are held as H (float or double) in the tiles; an op converts its arguments to its
// compute type T and its result back.
template <typename H> using Apply = void (*)(const H* const* in, H* out, int64_t n, ops::Scalars s);

template <typename H, typename Op, typename T>
void apply(const H* const* in, H* out, int64_t n, ops::Scalars s) {
  Op op;
  op.p = s;
  if constexpr (std::is_same_v<H, T>) {
    // Tiles of the op's own compute type: the eager kernels' row loop, vectorised.
    if constexpr (Op::arity == 1) cpu::row<T>(out, n, op, in[0]);
    else if constexpr (Op::arity == 2) cpu::row<T>(out, n, op, in[0], in[1]);
    else cpu::row<T>(out, n, op, in[0], in[1], in[2]);
  } else {
    for (int64_t i = 0; i < n; ++i) {
      if constexpr (Op::arity == 1) out[i] = static_cast<H>(op(static_cast<T>(in[0][i])));
      else if constexpr (Op::arity == 2)
        out[i] = static_cast<H>(op(static_cast<T>(in[0][i]), static_cast<T>(in[1][i])));
      else
        out[i] = static_cast<H>(
            op(static_cast<T>(in[0][i]), static_cast<T>(in[1][i]), static_cast<T>(in[2][i])));
    }
  }
}

// Per op-table row: its loop in float and in double.
template <typename H> struct Row {
  Apply<H> f32, f64;
};
template <typename H> const Row<H> kRows[] = {
#define TINY_INTERPRETER_ROW(NAME, OP, ...) {&apply<H, ops::OP, float>, &apply<H, ops::OP, double>},
    TINY_OP_ROWS(TINY_INTERPRETER_ROW)
#undef TINY_INTERPRETER_ROW
};

template <typename H> Apply<H> apply_for(const Value& v) {
  for (int i = 0; i < static_cast<int>(OpId::kCount); ++i)
    if (&op_entry(static_cast<OpId>(i)) == v.kernel)
      return v.compute == kFloat64 ? kRows<H>[i].f64 : kRows<H>[i].f32;
  throw RuntimeError(std::string("compile(): no interpreter loop for ") + v.kernel->info.name);
}

// A value rounded as the generated code's variable of its dtype would hold it: a cast's result
// is the element a store would write (2.7 held as int32 is 2; 300 held as uint8 is 44).
template <typename H> H as_held(H x, DType d) {
  if (d == kFloat64) return x;
  if (d == kFloat32 || d == kFloat16 || d == kBFloat16) return static_cast<H>(static_cast<float>(x));
  return dispatch_dtype(d, [&]<typename T>() { return static_cast<H>(convert<T>(x)); });
}

// `count` elements `stride` apart, converted to H.
template <typename H, typename T, typename Convert>
void load_run(const char* base, int64_t stride, int64_t count, H* out, Convert convert) {
  const T* p = reinterpret_cast<const T*>(base);
  if (stride == 1) {  // the common case, in a loop the compiler vectorises
    for (int64_t i = 0; i < count; ++i) out[i] = static_cast<H>(convert(p[i]));
    return;
  }
  for (int64_t i = 0; i < count; ++i) out[i] = static_cast<H>(convert(p[i * stride]));
}

template <typename H> void load(const char* base, DType d, int64_t stride, int64_t count, H* out) {
  auto same = [](auto x) { return x; };
  switch (d) {
    case DType::Float32: return load_run<H, float>(base, stride, count, out, same);
    case DType::Float64: return load_run<H, double>(base, stride, count, out, same);
    case DType::Float16:
      return load_run<H, uint16_t>(base, stride, count, out,
                                   [](uint16_t x) { return half_bits_to_float(x); });
    case DType::BFloat16:
      return load_run<H, uint16_t>(base, stride, count, out,
                                   [](uint16_t x) { return bfloat16_bits_to_float(x); });
    case DType::Int32: return load_run<H, int32_t>(base, stride, count, out, same);
    case DType::Int64: return load_run<H, int64_t>(base, stride, count, out, same);
    case DType::Int16: return load_run<H, int16_t>(base, stride, count, out, same);
    case DType::Int8: return load_run<H, int8_t>(base, stride, count, out, same);
    case DType::UInt8: return load_run<H, uint8_t>(base, stride, count, out, same);
    case DType::Bool:
      return load_run<H, bool>(base, stride, count, out, [](bool x) { return x ? 1 : 0; });
  }
}

template <typename T, typename H, typename Convert>
void store_run(char* base, int64_t count, const H* in, Convert convert) {
  T* p = reinterpret_cast<T*>(base);
  for (int64_t i = 0; i < count; ++i) p[i] = convert(in[i]);
}

template <typename H> void store(char* base, DType d, int64_t count, const H* in) {
  switch (d) {
    case DType::Float32: return store_run<float>(base, count, in, [](H x) { return float(x); });
    case DType::Float64: return store_run<double>(base, count, in, [](H x) { return double(x); });
    case DType::Float16:
      return store_run<uint16_t>(base, count, in,
                                 [](H x) { return float_to_half_bits(float(x)); });
    case DType::BFloat16:
      return store_run<uint16_t>(base, count, in,
                                 [](H x) { return float_to_bfloat16_bits(float(x)); });
    case DType::Bool: return store_run<bool>(base, count, in, [](H x) { return x != 0; });
    default:  // the integer types, converted as every cast in the library converts
      return dispatch_dtype(d, [&]<typename T>() {
        store_run<T>(base, count, in, [](H x) { return convert<T>(x); });
      });
  }
}

template <typename H>
void run_tiles(const Graph& g, const std::vector<Tensor>& args, const std::vector<Tensor>& outputs) {
  const Loop loop = make_loop(g);
  const int rank = static_cast<int>(loop.sizes.size());
  const int64_t inner = loop.sizes[rank - 1];
  int64_t rows = 1;  // runs of the innermost loop dimension
  for (int d = 0; d + 1 < rank; ++d) rows *= loop.sizes[d];
  if (rows == 0 || inner == 0) return;
  const size_t n = g.values.size();
  std::vector<Apply<H>> fns(n, nullptr);
  for (size_t id = 0; id < n; ++id)
    if (g.values[id].kind == Value::Kind::Op) fns[id] = apply_for<H>(g.values[id]);
  // The work is cut into tiles, kTile elements of one run each (the last of a run shorter);
  // threads take whole tiles, and a tile computes the same values whichever thread runs it.
  const int64_t tiles_per_row = (inner + kTile - 1) / kTile;
  std::vector<char> streamed(g.outputs.size());
  for (size_t k = 0; k < g.outputs.size(); ++k)
    streamed[k] = outputs[k].dtype() == kFloat32 &&
                  outputs[k].numel() >= kStreamBytes / static_cast<int64_t>(sizeof(float));
  parallel_for(0, rows * tiles_per_row, std::max<int64_t>(1, kGrainSize / kTile),
               [&](int64_t first, int64_t last) {
    std::vector<std::vector<H>> tile(n, std::vector<H>(kTile));
    for (size_t id = 0; id < n; ++id)
      if (g.values[id].kind == Value::Kind::Constant)
        std::fill(tile[id].begin(), tile[id].end(),
                  as_held(static_cast<H>(g.values[id].constant), g.values[id].dtype));
    std::vector<int64_t> index(rank, 0);  // the outer loop indices of the tile's run
    for (int64_t t = first; t < last; ++t) {
      const int64_t row = t / tiles_per_row;
      const int64_t start = t % tiles_per_row * kTile;
      const int64_t count = std::min(kTile, inner - start);
      for (int64_t d = rank - 2, r = row; d >= 0; --d) {
        index[d] = r % loop.sizes[d];
        r /= loop.sizes[d];
      }
      // The inputs: a strided run each, converted once.
      for (size_t id = 0; id < n; ++id) {
        const Value& v = g.values[id];
        if (v.kind != Value::Kind::Input) continue;
        int64_t offset = v.offset + start * loop.strides[id][rank - 1];
        for (int d = 0; d + 1 < rank; ++d) offset += index[d] * loop.strides[id][d];
        const char* base = static_cast<const char*>(args[v.arg].data_ptr()) +
                           offset * static_cast<int64_t>(element_size(v.dtype));
        load(base, v.dtype, loop.strides[id][rank - 1], count, tile[id].data());
      }
      // The ops, in order, each over the whole tile, in the cache.
      for (size_t id = 0; id < n; ++id) {
        const Value& v = g.values[id];
        H* out = tile[id].data();
        if (v.kind == Value::Kind::Cast) {
          const H* from = tile[v.args[0]].data();
          for (int64_t i = 0; i < count; ++i) out[i] = as_held(from[i], v.dtype);
        } else if (v.kind == Value::Kind::Where) {
          const H *c = tile[v.args[0]].data(), *a = tile[v.args[1]].data(),
                  *b = tile[v.args[2]].data();
          for (int64_t i = 0; i < count; ++i) out[i] = as_held(c[i] != 0 ? a[i] : b[i], v.dtype);
        } else if (v.kind == Value::Kind::Op) {
          const H* in[3] = {nullptr, nullptr, nullptr};
          for (int k = 0; k < v.op->info.arity; ++k) in[k] = tile[v.args[k]].data();
          fns[id](in, out, count, v.scalars);
          if (v.dtype != kFloat64 && v.dtype != kFloat32)
            for (int64_t i = 0; i < count; ++i) out[i] = as_held(out[i], v.dtype);
        }
      }
      // The outputs are contiguous in the loop's order: the tile starts at row * inner + start.
      // A large float32 output is written around the caches, as the eager kernels write theirs.
      for (size_t k = 0; k < g.outputs.size(); ++k) {
        const DType d = outputs[k].dtype();
        char* base = static_cast<char*>(outputs[k].data_ptr()) +
                     (row * inner + start) * static_cast<int64_t>(element_size(d));
        if constexpr (std::is_same_v<H, float>) {
          if (streamed[k]) {
            cpu::stream_floats(reinterpret_cast<float*>(base), tile[g.outputs[k]].data(), count);
            continue;
          }
        }
        store(base, d, count, tile[g.outputs[k]].data());
      }
    }
    cpu::stream_fence();
  });
}

}  // namespace

void interpret(const Graph& g, const std::vector<Tensor>& args,
               const std::vector<Tensor>& outputs) {
  // float holds every value of a graph without float64 or integers exactly (16-bit floats and
  // bool included); otherwise double, which also holds int32 exactly (and int64 up to 2^53).
  bool wide = false;
  for (const Value& v : g.values)
    wide = wide || v.dtype == kFloat64 || v.compute == kFloat64 || v.dtype == kInt32 ||
           v.dtype == kInt64;
  if (wide) run_tiles<double>(g, args, outputs);
  else run_tiles<float>(g, args, outputs);
}

}  // namespace tiny::detail::fusion
