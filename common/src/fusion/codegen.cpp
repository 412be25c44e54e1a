// codegen.cpp: a captured graph as C++ or CUDA source, one loop nest over the output's elements.
//
// Every value becomes one local variable per element: an input is loaded (and converted to the
// type the kernel computes in), a constant is a literal, an op is its op-table expression
// (OpInfo::source) applied to earlier variables. Only the outputs are stored. That is the whole
// idea of fusion: the intermediates live in registers, never in memory.
#include <algorithm>
#include <cstdio>
#include <sstream>

#include "fusion/fused_math.h"
#include "fusion/graph.h"
#include "internal.h"

namespace tiny::detail::fusion {

namespace {

// The elements of a row a generated kernel computes into its buffer before streaming them out
// (internal.h's kStreamBytes says when it streams). Short blocks let the streaming stores go out
// while the next block computes; long ones leave the memory idle during the arithmetic and then
// stall the core on a burst of stores. The GELU chain on 4096 x 4096 float32 (bench_fusion,
// Intel Xeon, medians of 3) took 5.72 / 5.06 / 4.76 / 4.87 ms on 2 threads with blocks of 256 /
// 64 / 32 / 16 elements, and 11.5 / 10.5 / 9.30 / 9.35 ms on 1; memory-bound chains (x*g+b+x) ran
// at the clone's speed with every size.
constexpr long long kFusedStreamBlock = 32;

// The C++ type a value of dtype `d` is held in while the kernel computes: 16-bit floats are
// computed in float32 (PyTorch's opmath type), and stay there between fused ops.
const char* math_type(DType d) {
  switch (d) {
    case DType::Float64: return "double";
    case DType::Int64: return "long long";
    case DType::Int32:
    case DType::Int16:
    case DType::Int8:
    case DType::UInt8: return "int";  // as C++ computes with them; stored back with their wrap
    case DType::Bool: return "bool";
    default: return "float";
  }
}

// `expr` converted to math_type(d). Written T(expr), a functional cast, where T is one word; C++
// does not accept "long long(expr)", so int64's conversion is a static_cast.
std::string to_math_type(DType d, const std::string& expr) {
  const std::string t = math_type(d);
  if (t.find(' ') != std::string::npos) return "static_cast<" + t + ">(" + expr + ")";
  return t + "(" + expr + ")";
}

// The C++ type of one element in memory.
const char* storage_type(DType d) {
  switch (d) {
    case DType::Float32: return "float";
    case DType::Float64: return "double";
    case DType::Float16:
    case DType::BFloat16: return "unsigned short";
    case DType::Int32: return "int";
    case DType::Int64: return "long long";
    case DType::Int16: return "short";
    case DType::Int8: return "signed char";
    case DType::UInt8: return "unsigned char";
    case DType::Bool: return "bool";
  }
  return "float";
}

// A double as a C++ literal that reads back exactly (hexadecimal floating point).
std::string literal(double v) {
  if (v != v) return "(0.0 / 0.0)";
  if (v == 1.0 / 0.0) return "(1.0 / 0.0)";
  if (v == -1.0 / 0.0) return "(-1.0 / 0.0)";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%a", v);
  return buf;
}

}  // namespace

Loop make_loop(const Graph& g) {
  const int rank = static_cast<int>(g.shape.size());
  Loop loop;
  loop.strides.resize(g.values.size());
  // Each input's stride along every output dimension; 0 where it is broadcast.
  for (size_t id = 0; id < g.values.size(); ++id) {
    const Value& v = g.values[id];
    if (v.kind != Value::Kind::Input) continue;
    std::vector<int64_t> s(rank, 0);
    const int lead = rank - static_cast<int>(v.shape.size());
    for (int d = 0; d < static_cast<int>(v.shape.size()); ++d)
      s[lead + d] = v.shape[d] == 1 ? 0 : v.strides[d];
    loop.strides[id] = s;
  }
  std::vector<int64_t> sizes(g.shape.begin(), g.shape.end());
  if (sizes.empty()) sizes.push_back(1);  // a 0-dim result: one element
  for (auto& s : loop.strides)
    if (!s.empty() || rank == 0) s.resize(sizes.size(), 0);
  // Merge dimension d into d + 1 (outer into inner) when every input allows it.
  std::vector<int64_t> merged_sizes;
  std::vector<std::vector<int64_t>> merged(g.values.size());
  for (size_t d = 0; d < sizes.size(); ++d) {
    bool can = !merged_sizes.empty();
    for (size_t id = 0; id < g.values.size() && can; ++id)
      if (g.values[id].kind == Value::Kind::Input)
        can = merged[id].back() == loop.strides[id][d] * sizes[d];
    if (can) {
      merged_sizes.back() *= sizes[d];
      for (size_t id = 0; id < g.values.size(); ++id)
        if (g.values[id].kind == Value::Kind::Input) merged[id].back() = loop.strides[id][d];
    } else {
      merged_sizes.push_back(sizes[d]);
      for (size_t id = 0; id < g.values.size(); ++id)
        if (g.values[id].kind == Value::Kind::Input) merged[id].push_back(loop.strides[id][d]);
    }
  }
  loop.sizes = merged_sizes;
  loop.strides = merged;
  return loop;
}

namespace {

// Input value `id`'s element at loop indices i0, i1, ...: "in3[i0 * 4096 + i1 * 1]".
std::string input_element(const Loop& loop, size_t id) {
  std::string index;
  for (size_t d = 0; d < loop.sizes.size(); ++d)
    if (loop.strides[id][d] != 0)
      index += (index.empty() ? "" : " + ") + std::string("i") + std::to_string(d) + " * " +
               std::to_string(loop.strides[id][d]);
  return "in" + std::to_string(id) + "[" + (index.empty() ? "0" : index) + "]";
}

// The variable holding value `id`. (Built with +=: GCC 12 warns, wrongly, about "v" + string.)
std::string variable(int id) {
  std::string v = "v";
  v += std::to_string(id);
  return v;
}

// The op functions the graph uses, each once: its op-table expression over a type T.
std::string op_functions(const Graph& g, const char* qualifier) {
  std::string out;
  std::vector<const OpEntry*> done;
  for (const Value& v : g.values) {
    if (v.kind != Value::Kind::Op) continue;
    if (std::find(done.begin(), done.end(), v.kernel) != done.end()) continue;
    done.push_back(v.kernel);
    out += std::string("template <typename T> ") + qualifier + " auto op_" + v.kernel->info.name +
           "(T x, T y, T z, T a, T b) {\n  (void)x; (void)y; (void)z; (void)a; (void)b;\n"
           "  return " + v.kernel->info.source + ";\n}\n";
  }
  return out;
}

// The per-element statements: one variable per value, then the stores. `load(id, index)` and
// `store(output, variable)` say how the backend reads and writes memory.
template <typename Load, typename Store>
std::string element_body(const Graph& g, const std::string& indent, Load load, Store store) {
  std::ostringstream s;
  for (size_t id = 0; id < g.values.size(); ++id) {
    const Value& v = g.values[id];
    s << indent << "const " << math_type(v.dtype) << " v" << id << " = ";
    if (v.kind == Value::Kind::Input) {
      s << load(id) << ";";
    } else if (v.kind == Value::Kind::Constant) {
      s << to_math_type(v.dtype, literal(v.constant)) << ";";
    } else if (v.kind == Value::Kind::Cast) {
      s << to_math_type(v.dtype, variable(v.args[0])) << ";";
    } else if (v.kind == Value::Kind::Where) {
      s << variable(v.args[0]) << " ? " << to_math_type(v.dtype, variable(v.args[1])) << " : "
        << to_math_type(v.dtype, variable(v.args[2])) << ";";
    } else {
      const DType t = v.compute;
      std::string call = "op_";
      call += v.kernel->info.name;
      call += std::string("<") + math_type(t) + ">(";
      for (int k = 0; k < 3; ++k)
        call += to_math_type(t, k < v.op->info.arity ? variable(v.args[k]) : "0") + ", ";
      call += to_math_type(t, literal(v.scalars.a)) + ", " + to_math_type(t, literal(v.scalars.b));
      s << to_math_type(v.dtype, call + ")") << ";";
    }
    const char* kinds[] = {"input", "constant", "", "to", "where"};
    s << "  // " << (v.kind == Value::Kind::Op ? v.op->info.name : kinds[static_cast<int>(v.kind)])
      << "\n";
  }
  for (size_t k = 0; k < g.outputs.size(); ++k)
    s << indent << store(k, variable(g.outputs[k])) << "\n";
  return s.str();
}

// The graph, as a comment at the top of the source (so a reader of the cache sees what it is).
std::string graph_comment(const Graph& g) {
  std::string out = "// Generated by tiny's compile() (common/src/fusion/codegen.cpp) from:\n";
  std::istringstream lines(g.str());
  for (std::string line; std::getline(lines, line);) out += "//   " + line + "\n";
  return out;
}

}  // namespace

std::string cpp_source(const Graph& g, const std::string& name) {
  const Loop loop = make_loop(g);
  const int rank = static_cast<int>(loop.sizes.size());
  std::ostringstream s;
  s << graph_comment(g) << "#include <cstdint>\n#include <cstring>\n"
    << detail::float_formats_source() << "\n";
  s << "namespace tiny_fused {\nconstexpr long long kBlock = " << kFusedStreamBlock << ";\n";
  // The math functions the op expressions call come with the prelude: float32 through the
  // library's vectorisable versions (fusion/fused_math.inc), so that the compiler can vectorise
  // the whole loop, and the eager kernels' bits.
  s << op_source_prelude() << "\n" << op_functions(g, "inline");
  s << "inline float load(const unsigned short* p, bool bf16) {\n"
       "  return bf16 ? tiny::bfloat16_bits_to_float(*p) : tiny::half_bits_to_float(*p);\n}\n";
  // Streaming stores: a result far larger than the caches is written around them, so that the
  // processor does not first read each line it is about to overwrite (a third pass over
  // memory). memcpy does the same for large copies, which is why x.clone() is the floor.
  s << R"(#if defined(__AVX512F__) || defined(__AVX__)
#if defined(__AVX512F__)
typedef float tiny_vec __attribute__((vector_size(64)));  // one cache line a store
#else
typedef float tiny_vec __attribute__((vector_size(32)));
#endif
inline void stream(float* out, const float* block, long long n) {
  constexpr long long lanes = sizeof(tiny_vec) / sizeof(float);
  if (n != kBlock || (reinterpret_cast<unsigned long long>(out) % sizeof(tiny_vec)) != 0) {
    for (long long j = 0; j < n; ++j) out[j] = block[j];
    return;
  }
  for (long long j = 0; j < kBlock; j += lanes) {
    tiny_vec v;
    __builtin_memcpy(&v, block + j, sizeof v);
#if defined(__clang__)
    __builtin_nontemporal_store(v, reinterpret_cast<tiny_vec*>(out + j));
#elif defined(__AVX512F__)
    __builtin_ia32_movntps512(out + j, v);
#else
    __builtin_ia32_movntps256(out + j, v);
#endif
  }
}
inline void stream_fence() { __builtin_ia32_sfence(); }
#else
inline void stream(float* out, const float* block, long long n) {
  for (long long j = 0; j < n; ++j) out[j] = block[j];
}
inline void stream_fence() {}
#endif
)";
  s << "}  // namespace tiny_fused\n\n";
  // The entry point computes the part of the output whose outermost loop index lies in
  // [begin, end), so that the caller can hand disjoint parts to different threads.
  s << "extern \"C\" void " << name
    << "(char* const* data, long long begin, long long end) {\n  using namespace tiny_fused;\n";
  for (size_t id = 0; id < g.values.size(); ++id) {
    const Value& v = g.values[id];
    if (v.kind != Value::Kind::Input) continue;
    s << "  const " << storage_type(v.dtype) << "* __restrict in" << id << " = reinterpret_cast<const "
      << storage_type(v.dtype) << "*>(data[" << v.arg << "]) + " << v.offset << ";\n";
  }
  for (size_t k = 0; k < g.outputs.size(); ++k) {
    const DType d = g.values[g.outputs[k]].dtype;
    s << "  " << storage_type(d) << "* __restrict out" << k << " = reinterpret_cast<"
      << storage_type(d) << "*>(data[" << g.num_args + static_cast<int>(k) << "]);\n";
  }
  // Streamed when every output is float32 and together they are far larger than the caches.
  double out_bytes = 0;
  bool all_float32 = true;
  for (int id : g.outputs) {
    all_float32 = all_float32 && g.values[id].dtype == kFloat32;
    double n = 4;
    for (int64_t d : g.shape) n *= static_cast<double>(d);
    out_bytes += n;
  }
  const bool streamed = all_float32 && out_bytes >= static_cast<double>(kStreamBytes);
  // The loops: the innermost one is where the vectoriser works; `o` counts output elements.
  // The outermost loop runs over [begin, end) instead of its whole size.
  int64_t below_outer = 1;  // output elements per step of the outermost loop
  for (int d = 1; d < rank; ++d) below_outer *= loop.sizes[d];
  s << "  long long o = ";
  if (rank > 1) s << "begin * " << below_outer;
  else s << "0";
  s << ";\n";
  // A streamed kernel with an operand broadcast along the rows (g and b in x * g + b: stride 0
  // on the row loop, not on the innermost) computes kSharedRows rows at a time, so that each
  // element of that operand is loaded once for all of them instead of once per row. Reloading
  // it per row kept a vector that no longer fits the first-level cache beside the rows (two
  // rows of 4096 floats are the whole of an AMD Zen 4's 32 KiB), and the misses it took held
  // back the reads of x. On an AMD EPYC (bench_fusion, one thread), fused x * g + b + x on
  // 4096 x 4096 took 1.4-1.5x the time of x.clone() one row at a time, and 1.1x four at a time.
  constexpr int kSharedRows = 4;
  bool shared_rows = false;
  for (size_t id = 0; id < g.values.size() && streamed && rank >= 2; ++id)
    shared_rows = shared_rows || (g.values[id].kind == Value::Kind::Input &&
                                  loop.strides[id][rank - 2] == 0 &&
                                  loop.strides[id][rank - 1] != 0);
  std::string indent = "  ";
  const int plain_loops = shared_rows ? rank - 2 : rank - 1;  // those stepping one at a time
  for (int d = 0; d < plain_loops; ++d) {
    s << indent << "for (long long i" << d << " = " << (d == 0 ? "begin" : "0") << "; i" << d
      << " < ";
    if (d == 0) s << "end";
    else s << loop.sizes[d];
    s << "; ++i" << d << ") {\n";
    indent += "  ";
  }
  const int64_t inner_size = loop.sizes[rank - 1];
  // With one loop, the innermost loop is the outermost one and takes the range.
  const std::string inner_begin = rank == 1 ? "begin" : "0";
  const std::string inner_end = rank == 1 ? "end" : std::to_string(inner_size);
  std::string inner = "i";
  inner += std::to_string(rank - 1);
  auto load = [&](size_t id) {
    const Value& v = g.values[id];
    const std::string at = input_element(loop, id);
    if (v.dtype == kFloat16) return "load(&" + at + ", false)";
    if (v.dtype == kBFloat16) return "load(&" + at + ", true)";
    return to_math_type(v.dtype, at);
  };
  const char* vectorize = "#if defined(__clang__)\n#pragma clang loop vectorize(enable)\n"
                          "#else\n#pragma GCC ivdep\n#endif\n";
  // A streamed loop: `head` opens the loop over the blocks' first element, `start`, and `n` is
  // the block's length. Each step computes `count` blocks side by side into buffers, vectorised
  // along j: the rows of a group, or the parts of a range, told apart by r, whose index the line
  // `index` declares (after the line `before`, outside the r loop). Block r then goes to memory
  // at out + `target`.
  auto blocks = [&](const std::string& at, const std::string& head, const std::string& n, int count,
                    const std::string& before, const std::string& index,
                    const std::string& target) {
    std::string in = at;
    s << in << head << " {\n";
    in += "  ";
    s << in << "const long long n = " << n << ";\n";
    for (size_t k = 0; k < g.outputs.size(); ++k)
      s << in << "float block" << k << "[" << count << "][kBlock];\n";
    s << vectorize << in << "for (long long j = 0; j < n; ++j) {\n";
    in += "  ";
    if (!before.empty()) s << in << before << "\n";
    s << "#if defined(__clang__)\n#pragma clang loop unroll(full)\n#else\n#pragma GCC unroll "
      << count << "\n#endif\n";
    s << in << "for (int r = 0; r < " << count << "; ++r) {\n";
    in += "  ";
    s << in << index << "\n";
    auto store = [&](size_t k, const std::string& var) {
      return "block" + std::to_string(k) + "[r][j] = " + var + ";";
    };
    s << element_body(g, in, load, store);
    for (int close = 0; close < 2; ++close) {
      in.resize(in.size() - 2);
      s << in << "}\n";
    }
    for (size_t k = 0; k < g.outputs.size(); ++k)
      s << in << "for (int r = 0; r < " << count << "; ++r) stream(out" << k << " + " << target
        << ", block" << k << "[r], n);\n";
    in.resize(in.size() - 2);
    s << in << "}\n";
  };
  if (shared_rows) {
    // The row loop steps kSharedRows rows at a time (one at a time for the last few): r counts
    // the group's first row, and each row's index is declared where the element code reads it.
    const std::string row = std::to_string(rank - 2);
    const std::string lo = rank == 2 ? "begin" : "0";
    const std::string hi = rank == 2 ? "end" : std::to_string(loop.sizes[rank - 2]);
    s << indent << "for (long long r" << row << " = " << lo << "; r" << row << " < " << hi
      << ";) {\n";
    indent += "  ";
    s << indent << "const long long rows = " << hi << " - r" << row << " >= " << kSharedRows
      << " ? " << kSharedRows << " : 1;\n";
    for (int rows : {kSharedRows, 1}) {
      s << indent << (rows == kSharedRows ? "if (rows == " + std::to_string(rows) + ") {\n"
                                          : "} else {\n");
      const std::string size = std::to_string(inner_size);
      blocks(indent + "  ", "for (long long start = 0; start < " + size + "; start += kBlock)",
             size + " - start < kBlock ? " + size + " - start : kBlock", rows,
             "const long long " + inner + " = start + j;",
             "const long long i" + row + " = r" + row + " + r;",
             "o + r * " + std::to_string(inner_size) + " + start");
    }
    s << indent << "}\n";
    s << indent << "r" << row << " += rows;\n" << indent << "o += rows * " << inner_size
      << ";\n";
    indent.resize(indent.size() - 2);
    s << indent << "}\n";
  } else {
    if (streamed) {
      // Blocks from kStreamParts places in the range side by side (`part` elements apart, whole
      // blocks each), as the eager loops do (cpu/elementwise.h, stream_blocks): one stream of
      // short blocks kept the memory waiting. The elements after the parts go a block at a time.
      s << indent << "const long long part = (" << inner_end << " - " << inner_begin << ") / ("
        << kStreamParts << " * kBlock) * kBlock;\n";
      const std::string index = "const long long " + inner + " = start + r * part + j;";
      blocks(indent,
             "for (long long start = " + inner_begin + "; start < " + inner_begin +
                 " + part; start += kBlock)",
             "kBlock", kStreamParts, "", index, "o + start + r * part");
      blocks(indent,
             "for (long long start = " + inner_begin + " + " + std::to_string(kStreamParts) +
                 " * part; start < " + inner_end + "; start += kBlock)",
             inner_end + " - start < kBlock ? " + inner_end + " - start : kBlock", 1, "", index,
             "o + start + r * part");
    } else {
      s << vectorize << indent << "for (long long " << inner << " = " << inner_begin << "; "
        << inner << " < " << inner_end << "; ++" << inner << ") {\n";
      indent += "  ";
      // Outputs are contiguous: element `o + innermost index`.
      auto store = [&](size_t k, const std::string& var) {
        const DType d = g.values[g.outputs[k]].dtype;
        const std::string at = "out" + std::to_string(k) + "[o + " + inner + "]";
        if (d == kFloat16) return at + " = tiny::float_to_half_bits(float(" + var + "));";
        if (d == kBFloat16) return at + " = tiny::float_to_bfloat16_bits(float(" + var + "));";
        return at + " = " + var + ";";
      };
      s << element_body(g, indent, load, store);
      indent.resize(indent.size() - 2);
      s << indent << "}\n";
    }
    s << indent << "o += " << inner_size << ";\n";
  }
  for (int d = plain_loops - 1; d >= 0; --d) {
    indent.resize(indent.size() - 2);
    s << indent << "}\n";
  }
  if (streamed) s << "  stream_fence();\n";
  s << "}\n";
  return s.str();
}

std::string cuda_source(const Graph& g, const std::string& name) {
  const Loop loop = make_loop(g);
  const int rank = static_cast<int>(loop.sizes.size());
  std::ostringstream s;
  s << graph_comment(g);
  // NVRTC compiles without the standard headers: the few conversions needed are written here,
  // with PTX's own conversion instructions for float16.
  s << "__device__ inline float load_half(unsigned short h) {\n"
       "  float f; asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(f) : \"h\"(h)); return f;\n}\n"
       "__device__ inline unsigned short store_half(float f) {\n"
       "  unsigned short h; asm(\"cvt.rn.f16.f32 %0, %1;\" : \"=h\"(h) : \"f\"(f)); return h;\n}\n"
       "__device__ inline float load_bf16(unsigned short b) {\n"
       "  return __uint_as_float(static_cast<unsigned>(b) << 16);\n}\n"
       "__device__ inline unsigned short store_bf16(float f) {\n"
       "  const unsigned x = __float_as_uint(f);\n"
       "  if ((x & 0x7fffffffu) > 0x7f800000u) return 0x7fc0u;\n"
       "  return static_cast<unsigned short>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);\n}\n";
  s << op_source_prelude() << "\n" << op_functions(g, "__device__ inline");
  s << "struct Pointers { char* data[" << g.num_args + static_cast<int>(g.outputs.size())
    << "]; };\n\n";
  long long total = 1;
  for (int64_t n : loop.sizes) total *= n;
  s << "extern \"C\" __global__ void " << name << "(const Pointers p) {\n";
  s << "  for (long long o = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; o < "
    << total << "; o += static_cast<long long>(gridDim.x) * blockDim.x) {\n";
  // The loop indices of element o (sizes are constants, so the divisions are cheap).
  s << "    long long rest = o;\n";
  for (int d = rank - 1; d >= 0; --d)
    s << "    const long long i" << d << " = rest % " << loop.sizes[d] << "; rest /= "
      << loop.sizes[d] << ";\n";
  s << "    (void)rest;\n";
  for (size_t id = 0; id < g.values.size(); ++id) {
    const Value& v = g.values[id];
    if (v.kind != Value::Kind::Input) continue;
    s << "    const " << storage_type(v.dtype) << "* in" << id << " = reinterpret_cast<const "
      << storage_type(v.dtype) << "*>(p.data[" << v.arg << "]) + " << v.offset << ";\n";
  }
  auto load = [&](size_t id) {
    const Value& v = g.values[id];
    const std::string at = input_element(loop, id);
    if (v.dtype == kFloat16) return "load_half(" + at + ")";
    if (v.dtype == kBFloat16) return "load_bf16(" + at + ")";
    return to_math_type(v.dtype, at);
  };
  auto store = [&](size_t k, const std::string& var) {
    const DType d = g.values[g.outputs[k]].dtype;
    const std::string at = "reinterpret_cast<" + std::string(storage_type(d)) + "*>(p.data[" +
                           std::to_string(g.num_args + static_cast<int>(k)) + "])[o]";
    if (d == kFloat16) return at + " = store_half(float(" + var + "));";
    if (d == kBFloat16) return at + " = store_bf16(float(" + var + "));";
    return at + " = " + var + ";";
  };
  s << element_body(g, "    ", load, store);
  s << "  }\n}\n";
  return s.str();
}

}  // namespace tiny::detail::fusion
