// interpreter.cpp: a captured graph run without generated code, one tile of elements at a time.
//
// Where no compiler can be run, fusion still pays off: the interpreter walks the output in tiles
// small enough to stay in the L1/L2 cache (kTile elements), and for each tile evaluates the
// graph's values in order into tile-sized buffers, reading each input from memory once and
// writing each output once. The intermediates never leave the cache, which is the saving fusion
// is about; what is lost against generated code is vectorised arithmetic and the dispatch of
// every value through a function pointer. It computes exactly what the generated C++ computes:
// each op in its compute type (float for float32 and 16-bit floats, double for float64), with
// values kept as the generated code keeps them.
#include "elementwise_ops.h"
#include "fusion/graph.h"
#include "tiny/float_formats.h"

namespace tiny::detail::fusion {

namespace {

constexpr int64_t kTile = 1024;

// Values are held as double, which represents every float, bool and int32 exactly; an op
// converts its arguments to its compute type T and its result back.
using Apply = void (*)(const double* const* in, double* out, int64_t n, ops::Scalars s);

template <typename Op, typename T>
void apply(const double* const* in, double* out, int64_t n, ops::Scalars s) {
  Op op;
  op.p = s;
  for (int64_t i = 0; i < n; ++i) {
    if constexpr (Op::arity == 1) out[i] = static_cast<double>(op(static_cast<T>(in[0][i])));
    else if constexpr (Op::arity == 2)
      out[i] = static_cast<double>(op(static_cast<T>(in[0][i]), static_cast<T>(in[1][i])));
    else
      out[i] = static_cast<double>(
          op(static_cast<T>(in[0][i]), static_cast<T>(in[1][i]), static_cast<T>(in[2][i])));
  }
}

// Per op-table row: its loop in float and in double.
struct Row {
  Apply f32, f64;
};
const Row kRows[] = {
#define TINY_INTERPRETER_ROW(NAME, OP, ...) {&apply<ops::OP, float>, &apply<ops::OP, double>},
    TINY_OP_ROWS(TINY_INTERPRETER_ROW)
#undef TINY_INTERPRETER_ROW
};

Apply apply_for(const Value& v) {
  for (int i = 0; i < static_cast<int>(OpId::kCount); ++i)
    if (&op_entry(static_cast<OpId>(i)) == v.kernel)
      return v.compute == kFloat64 ? kRows[i].f64 : kRows[i].f32;
  throw RuntimeError(std::string("compile(): no interpreter loop for ") + v.kernel->info.name);
}

// A value rounded as the generated code's variable of its dtype would hold it.
double as_held(double x, DType d) {
  if (d == kFloat64) return x;
  if (d == kBool) return x != 0 ? 1.0 : 0.0;
  if (d == kInt32 || d == kInt64) return x;
  return static_cast<double>(static_cast<float>(x));
}

// `count` elements `stride` apart, converted to double and held as the value's dtype holds them.
template <typename T, typename Convert>
void load_run(const char* base, int64_t stride, int64_t count, double* out, Convert convert) {
  const T* p = reinterpret_cast<const T*>(base);
  for (int64_t i = 0; i < count; ++i) out[i] = convert(p[i * stride]);
}

void load(const char* base, DType d, int64_t stride, int64_t count, double* out) {
  switch (d) {
    case DType::Float32:
      return load_run<float>(base, stride, count, out, [](float x) { return double(x); });
    case DType::Float64:
      return load_run<double>(base, stride, count, out, [](double x) { return x; });
    case DType::Float16:
      return load_run<uint16_t>(base, stride, count, out,
                                [](uint16_t x) { return double(half_bits_to_float(x)); });
    case DType::BFloat16:
      return load_run<uint16_t>(base, stride, count, out,
                                [](uint16_t x) { return double(bfloat16_bits_to_float(x)); });
    case DType::Int32:
      return load_run<int32_t>(base, stride, count, out, [](int32_t x) { return double(x); });
    case DType::Int64:
      return load_run<int64_t>(base, stride, count, out, [](int64_t x) { return double(x); });
    case DType::Bool:
      return load_run<bool>(base, stride, count, out, [](bool x) { return x ? 1.0 : 0.0; });
  }
}

template <typename T, typename Convert>
void store_run(char* base, int64_t count, const double* in, Convert convert) {
  T* p = reinterpret_cast<T*>(base);
  for (int64_t i = 0; i < count; ++i) p[i] = convert(in[i]);
}

void store(char* base, DType d, int64_t count, const double* in) {
  switch (d) {
    case DType::Float32:
      return store_run<float>(base, count, in, [](double x) { return float(x); });
    case DType::Float64:
      return store_run<double>(base, count, in, [](double x) { return x; });
    case DType::Float16:
      return store_run<uint16_t>(base, count, in,
                                 [](double x) { return float_to_half_bits(float(x)); });
    case DType::BFloat16:
      return store_run<uint16_t>(base, count, in,
                                 [](double x) { return float_to_bfloat16_bits(float(x)); });
    case DType::Int32:
      return store_run<int32_t>(base, count, in, [](double x) { return int32_t(x); });
    case DType::Int64:
      return store_run<int64_t>(base, count, in, [](double x) { return int64_t(x); });
    case DType::Bool:
      return store_run<bool>(base, count, in, [](double x) { return x != 0; });
  }
}

}  // namespace

void interpret(const Graph& g, const std::vector<Tensor>& args,
               const std::vector<Tensor>& outputs) {
  const Loop loop = make_loop(g);
  const int rank = static_cast<int>(loop.sizes.size());
  const int64_t inner = loop.sizes[rank - 1];
  int64_t rows = 1;  // runs of the innermost loop dimension
  for (int d = 0; d + 1 < rank; ++d) rows *= loop.sizes[d];
  const size_t n = g.values.size();
  std::vector<Apply> fns(n, nullptr);
  for (size_t id = 0; id < n; ++id)
    if (g.values[id].kind == Value::Kind::Op) fns[id] = apply_for(g.values[id]);
  std::vector<std::vector<double>> tile(n, std::vector<double>(kTile));
  for (size_t id = 0; id < n; ++id)
    if (g.values[id].kind == Value::Kind::Constant)
      std::fill(tile[id].begin(), tile[id].end(), as_held(g.values[id].constant, g.values[id].dtype));
  std::vector<int64_t> index(rank, 0);  // the outer loop indices of the current run
  int64_t o = 0;                        // the output element the run starts at
  for (int64_t row = 0; row < rows; ++row) {
    for (int64_t start = 0; start < inner; start += kTile) {
      const int64_t count = std::min(kTile, inner - start);
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
        if (v.kind == Value::Kind::Cast) {
          const std::vector<double>& from = tile[v.args[0]];
          for (int64_t i = 0; i < count; ++i) tile[id][i] = as_held(from[i], v.dtype);
          continue;
        }
        if (v.kind == Value::Kind::Where) {
          const std::vector<double>&c = tile[v.args[0]], &a = tile[v.args[1]], &b = tile[v.args[2]];
          for (int64_t i = 0; i < count; ++i) tile[id][i] = as_held(c[i] != 0 ? a[i] : b[i], v.dtype);
          continue;
        }
        if (v.kind != Value::Kind::Op) continue;
        const double* in[3] = {nullptr, nullptr, nullptr};
        for (int k = 0; k < v.op->info.arity; ++k) in[k] = tile[v.args[k]].data();
        fns[id](in, tile[id].data(), count, v.scalars);
        if (v.dtype != kFloat64)
          for (int64_t i = 0; i < count; ++i) tile[id][i] = as_held(tile[id][i], v.dtype);
      }
      for (size_t k = 0; k < g.outputs.size(); ++k) {
        const DType d = outputs[k].dtype();
        char* base = static_cast<char*>(outputs[k].data_ptr()) +
                     (o + start) * static_cast<int64_t>(element_size(d));
        store(base, d, count, tile[g.outputs[k]].data());
      }
    }
    o += inner;
    for (int d = rank - 2; d >= 0; --d) {
      if (++index[d] < loop.sizes[d]) break;
      index[d] = 0;
    }
  }
}

}  // namespace tiny::detail::fusion
