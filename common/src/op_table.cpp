// op_table.cpp: the rows of the op table, built from op_list.h, and its public view.
#include <cstring>
#include <string>

#include "derivatives.h"
#include "dispatch.h"
#include "elementwise_ops.h"
#include "fusion/fused_math.h"
#include "tiny/op_table.h"

namespace tiny {

namespace detail {

namespace {

// The row of op struct Op: its info, and its kernel on every backend.
template <typename Op>
OpEntry make_row(const char* name, const char* node, DTypeRule rule, AutocastClass autocast,
                 double flops, const char* scalars) {
  OpEntry row{};
  row.info = OpInfo{name, Op::arity, node, rule, autocast, flops, Op::source, scalars};
  row.types = Op::types;
  row.kernel_name = name;
  row.bool_error = nullptr;
  row.kernels[static_cast<int>(Device::Type::CPU)] = &cpu::elementwise<Op>;
  row.kernels[static_cast<int>(Device::Type::CUDA)] = &cuda::elementwise<Op>;
  row.derivative = node ? find_derivative(name) : nullptr;
  if (node && !row.derivative)
    throw RuntimeError(std::string("op table: '") + name +
                       "' names an autograd node but has no derivative");
  return row;
}

struct Table {
  OpEntry rows[static_cast<int>(OpId::kCount)];

  Table() {
#define TINY_OP_ROW(NAME, OP, NODE, RULE, AUTOCAST, FLOPS, SCALARS) \
  rows[static_cast<int>(OpId::NAME)] =                              \
      make_row<ops::OP>(#NAME, NODE, DTypeRule::RULE, AutocastClass::AUTOCAST, FLOPS, SCALARS);
    TINY_OP_ROWS(TINY_OP_ROW)
#undef TINY_OP_ROW
    // Where PyTorch's messages name something else than the op.
    rows[static_cast<int>(OpId::gelu)].kernel_name = "GeluKernelImpl";
    rows[static_cast<int>(OpId::square)].kernel_name = "pow";
    rows[static_cast<int>(OpId::pow_scalar)].kernel_name = "pow";
    rows[static_cast<int>(OpId::neg)].bool_error =
        "Negation, the `-` operator, on a bool tensor is not supported. If you are trying to "
        "invert a mask, use the `~` or `logical_not()` operator instead.";
  }
};

const Table& table() {
  static const Table t;
  return t;
}

}  // namespace

const OpEntry& op_entry(OpId id) { return table().rows[static_cast<int>(id)]; }

const OpEntry* find_op_entry(std::string_view name) {
  for (const OpEntry& row : table().rows)
    if (name == row.info.name) return &row;
  return nullptr;
}

}  // namespace detail

std::vector<const OpInfo*> op_table() {
  std::vector<const OpInfo*> out;
  for (const detail::OpEntry& row : detail::table().rows) out.push_back(&row.info);
  return out;
}

const OpInfo& op_info(std::string_view name) {
  if (const detail::OpEntry* row = detail::find_op_entry(name)) return row->info;
  throw ValueError("no op named '" + std::string(name) + "' in the op table");
}

const char* op_source_prelude() {
  // The same functions as elementwise_ops.h's namespace fn, for code compiled on its own. NVRTC
  // (CUDA) has its own device math and needs nothing. Host code gets what the library's eager
  // CPU kernels call: for float32, fused_math.inc's vectorisable functions, pasted in (so that
  // a generated kernel and the eager one give the same bits), and for float64 the C library's,
  // as builtins (so that the code needs no header: fused kernels include none).
  static const std::string prelude = [] {
#define TINY_BUILTIN_TEXT(F)                                        \
  "inline float " #F "(float x) { return __builtin_" #F "f(x); }\n" \
  "inline double " #F "(double x) { return __builtin_" #F "(x); }\n"
#define TINY_VECTOR_TEXT(F)                                          \
  "inline float " #F "(float x) { return tiny_" #F "f(x); }\n"      \
  "inline double " #F "(double x) { return positive_nan(x, __builtin_" #F "(x)); }\n"
    std::string s =
        "#ifdef __CUDACC_RTC__\n#define TINY_GENERATED_FN __device__ inline\n"
        "#define TINY_GENERATED_FABS fabs\n#else\n#define TINY_GENERATED_FN inline\n"
        "#define TINY_GENERATED_FABS __builtin_fabs\n#endif\n"
        "template <typename X, typename R> TINY_GENERATED_FN R positive_nan(X x, R r) {\n"
        "  return r != r && x == x ? R(TINY_GENERATED_FABS(r)) : r;\n}\n"
        "#ifndef __CUDACC_RTC__\n";
    s += detail::fused_math_source();
    s += "\n" TINY_VECTOR_MATH_FUNCTIONS(TINY_VECTOR_TEXT) TINY_BUILTIN_TEXT(fabs)
        TINY_BUILTIN_TEXT(sqrt)
        "inline float fma(float x, float y, float z) { return __builtin_fmaf(x, y, z); }\n"
        "inline double fma(double x, double y, double z) { return __builtin_fma(x, y, z); }\n"
        "inline float pow(float x, float y) { return __builtin_powf(x, y); }\n"
        "inline double pow(double x, double y) { return __builtin_pow(x, y); }\n"
        "#endif\n";
    // GELU: PyTorch's formula in float64 and on the device, fused_math.inc's in float32 on the
    // host (the erf it calls is declared above, or is CUDA's own).
    s += R"(template <typename T> TINY_GENERATED_FN T gelu_formula(T x) {
  return x * T(0.5) * (T(1) + erf(x * T(0.70710678118654752440)));
}
#ifdef __CUDACC_RTC__
TINY_GENERATED_FN float gelu(float x) { return gelu_formula(x); }
#else
inline float gelu(float x) { return tiny_geluf(x); }
#endif
TINY_GENERATED_FN double gelu(double x) { return gelu_formula(x); }
)";
    s += R"(template <typename T> TINY_GENERATED_FN bool is_nan(T x) { return x != x; }
template <typename T> TINY_GENERATED_FN T max_of(T x, T y) { return x < y ? y : x; }
template <typename T> TINY_GENERATED_FN T min_of(T x, T y) { return y < x ? y : x; }
)";
#undef TINY_BUILTIN_TEXT
#undef TINY_VECTOR_TEXT
    return s;
  }();
  return prelude.c_str();
}

}  // namespace tiny
