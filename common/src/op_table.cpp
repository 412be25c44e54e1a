// op_table.cpp: the rows of the op table, built from op_list.h, and its public view.
#include <cstring>

#include "derivatives.h"
#include "dispatch.h"
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
  // The same helpers as elementwise_ops.h's namespace fn, for code compiled on its own: by the
  // host compiler (after <cmath>, or after a fused kernel's own math functions when
  // TINY_FUSED_MATH is defined) or by NVRTC (whose device math needs no header).
#define TINY_USING_STD_TEXT(F) "using std::" #F ";\n"
  return "#ifdef __CUDACC_RTC__\n"
         "#define TINY_GENERATED_FN __device__ inline\n"
         "#elif defined(TINY_FUSED_MATH)\n"
         "#define TINY_GENERATED_FN inline\n"  // fused kernels bring their own (fusion/codegen.cpp)
         "#else\n"
         "#define TINY_GENERATED_FN inline\n" TINY_MATH_FUNCTIONS(TINY_USING_STD_TEXT) "#endif\n"
         R"(template <typename T> TINY_GENERATED_FN bool is_nan(T x) { return x != x; }
template <typename T> TINY_GENERATED_FN T max_of(T x, T y) { return x < y ? y : x; }
template <typename T> TINY_GENERATED_FN T min_of(T x, T y) { return y < x ? y : x; }
)";
#undef TINY_USING_STD_TEXT
}

}  // namespace tiny
