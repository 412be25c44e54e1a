/// @file op_table.h
/// @brief The op table: every elementwise op as data (its name, inputs, autograd node, dtype
/// rule, autocast class, cost and per-element source), and the counter of what ops cost.
///
/// Every elementwise op in ops.h is one row of this table, run by one dispatcher
/// (common/src/dispatch.cpp) that checks devices, works out dtypes, applies autocast, takes or
/// allocates the output (out= and in-place forms), counts the cost, picks the backend's kernel
/// and records the autograd node. The table can be read by a program: chapter 09 pastes each
/// op's `source` into the kernels it generates.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "tiny/dtype.h"

namespace tiny {

/// How an op's result dtype follows from its inputs' (after PyTorch's promotion of the inputs,
/// in which a dimensioned tensor outranks a 0-dim one, which outranks a number, unless the
/// lower-ranked operand is of a higher kind: bool < integer < float).
enum class DTypeRule {
  Promote,         ///< the promoted dtype (add, mul, maximum, clamp)
  IntegerToFloat,  ///< the promoted dtype, float32 if that is an integer or bool (div, exp, sqrt)
  Compare,         ///< computed in the promoted dtype, the result is bool (eq, lt)
  FloatOnly,       ///< floating inputs only, no promotion from integers (gelu)
};

/// What autocast (chapter 08) does to an op's floating inputs while it is enabled. The table's
/// column is PyTorch's CUDA list; PyTorch's CPU list names no elementwise op, so on the CPU the
/// table's ops run in their inputs' dtypes (amp.h has the whole rule).
enum class AutocastClass {
  None,            ///< nothing: the op runs in its inputs' dtypes
  LowerPrecision,  ///< cast to the autocast dtype (float16 or bfloat16): matmul
  Float32,         ///< cast 16-bit floats up to float32, for range or accuracy: exp, log, pow
  Promote,         ///< cast every input to the widest of them: addcmul, addcdiv
};

/// One row of the op table.
struct OpInfo {
  const char* name;        ///< PyTorch's name: "add", "addcmul", "pow"
  int arity;               ///< tensor inputs
  const char* node;        ///< PyTorch's autograd node, "AddBackward0" (null: not differentiable)
  DTypeRule dtype_rule;    ///< how the result's dtype is chosen
  AutocastClass autocast;  ///< what autocast does to its inputs on CUDA
  double flops;            ///< FLOPs per output element (the convention: 1 per add or multiply)
  const char* source;      ///< the per-element expression: inputs x, y, z; scalars a, b; type T
  const char* scalars;     ///< what a and b mean, "alpha", "value", "min, max" ("" for none)
};

/// Every row, in table order.
std::vector<const OpInfo*> op_table();
/// The row named `name`; ValueError for a name that is not in the table.
const OpInfo& op_info(std::string_view name);
/// What generated source includes before an op's `source`: the functions it may call
/// (exp, fma, is_nan, ...) with the meaning the library's kernels give them.
const char* op_source_prelude();

/// While alive, adds up the FLOPs and bytes of every op run on this thread (elementwise ops,
/// reductions, matmuls), recorded or not: a cost model that needs no autograd. Bytes are those an
/// op must move at least: each input read once and the output written once. Counters nest; each
/// counts everything run while it lives.
class CostCounter {
 public:
  CostCounter();
  ~CostCounter();
  CostCounter(const CostCounter&) = delete;
  CostCounter& operator=(const CostCounter&) = delete;
  /// FLOPs counted so far.
  double flops() const { return flops_; }
  /// Bytes read and written so far.
  double bytes() const { return bytes_; }
  /// Ops run so far.
  int64_t ops() const { return ops_; }

 private:
  friend void count_op_cost(double flops, double bytes);
  double flops_ = 0, bytes_ = 0;
  int64_t ops_ = 0;
};

/// Adds one op's cost to every live CostCounter of this thread (the dispatcher calls it; a
/// hand-written kernel can too).
void count_op_cost(double flops, double bytes);

}  // namespace tiny
