// dispatch.h: the op table's rows as the library sees them, and the one dispatcher that runs
// them. Not part of the public API (op_table.h is the public view of the table).
//
// An elementwise op is called as, for example,
//   static const OpEntry& op = op_entry("add");
//   return run({.op = &op, .inputs = {&a, &b}, .scalars = {alpha}});
// and run() does every step in one place, in this order:
//   1. devices: all inputs on one device (a 0-dim CPU tensor may join any: it is a number);
//   2. autocast: casts the inputs as the op's autocast class asks, when a guard is on;
//   3. dtypes: PyTorch's promotion over the inputs, then the op's DTypeRule; "not implemented"
//      for dtypes its kernels do not exist for;
//   4. the output: a new tensor, or the out= tensor, or the input itself for an in-place form,
//      each checked as PyTorch checks it (shape, castable dtype, overlapping memory, autograd);
//   5. the cost, into every live CostCounter;
//   6. the kernel of the device's backend, from the op's row;
//   7. the autograd node, from the op's derivative (derivatives.cpp), unless nothing needs it.
#pragma once
#include <array>
#include <initializer_list>
#include <optional>
#include <string_view>
#include <vector>

#include "backend.h"
#include "op_list.h"
#include "tiny/op_table.h"
#include "tiny/tensor.h"

namespace tiny::detail {

struct Derivative;

/// One row of the op table: what op_table.h shows, and what the dispatcher needs besides.
struct OpEntry {
  OpInfo info;
  ops::Types types;                      ///< the dtypes its kernels are compiled for
  const char* kernel_name;               ///< the name in "not implemented for" errors
  const char* bool_error;                ///< raised (RuntimeError) for bool inputs, or null
  ElementwiseKernel kernels[kBackends];  ///< per backend (Device::Type)
  const Derivative* derivative;          ///< its backward formula; null when not differentiable
};

/// Each row's index in the table, named as the row is: OpId::add, OpId::lerp_scalar, ...
enum class OpId : uint8_t {
#define TINY_OP_ID(NAME, ...) NAME,
  TINY_OP_ROWS(TINY_OP_ID)
#undef TINY_OP_ID
      kCount
};

/// The row with id `id` (an array index: this is on every op's path).
const OpEntry& op_entry(OpId id);
/// The row named `name`, or null.
const OpEntry* find_op_entry(std::string_view name);

/// One call of an elementwise op.
struct Call {
  const OpEntry* op;                      ///< what is computed, counted and recorded
  std::array<const Tensor*, 3> inputs{};  ///< the first op->info.arity are used
  ops::Scalars scalars{};                 ///< the op's numbers (see elementwise_ops.h)
  /// Numbers that take part in dtype promotion as Python numbers do (clamp's bounds).
  std::array<std::optional<Scalar>, 2> numbers{};
  const Tensor* out = nullptr;      ///< write here (out=), or into inputs[0] (in-place)
  bool inplace = false;             ///< the out tensor is inputs[0]
  const OpEntry* kernel = nullptr;  ///< a cheaper op whose kernel gives the same values
};

/// Runs one call (the steps above) and returns the result: a new tensor, or the out= tensor; for
/// an in-place call, an undefined tensor (the caller holds the one it wrote).
Tensor run(const Call& call);

/// The device an op runs on: all tensor inputs must share one, except that a 0-dim CPU tensor
/// may join tensors on any device (it is a number, passed to the kernel by value). RuntimeError
/// with PyTorch's message for two devices, or for an undefined tensor.
Device op_device(const char* op, std::initializer_list<const Tensor*> inputs);

/// The dtype PyTorch's promotion gives these operands together (torch.result_type).
DType result_type(std::initializer_list<const Tensor*> tensors,
                  std::initializer_list<std::optional<Scalar>> numbers = {});

/// True when a value of dtype `from` may be written into a tensor of dtype `to` by an in-place
/// or out= op (PyTorch's canCast: no float into an integer, nothing but bool into bool).
bool can_cast(DType from, DType to);

/// PyTorch's rules for an in-place write into `self` of values computed from the `n` tensors
/// `sources`: RuntimeError, with PyTorch's text, for a leaf that requires grad, a view of one, or
/// a view made with grad mode off. Returns true when the tape must record the write (grad mode
/// on, and `self` or a source requires grad); the op then calls rebase_history (autograd_internal.h).
bool check_inplace_autograd(const Tensor& self, const Tensor* const* sources, int n);

/// Refuses an in-place write into memory that several elements share (an expanded tensor).
void check_no_internal_overlap(const Tensor& self);

/// Refuses a write into `out` computed from an input that shares some of its memory in another
/// arrangement (`x[1:].add_(x[:-1])`, `x.copy_(x.T)`), with PyTorch's text: the result would
/// depend on the order the elements are visited. The same elements in the same layout (`x.add_(x)`)
/// are fine, and so, as in PyTorch, is any pair of which one is not dense (too costly to decide).
void check_no_partial_overlap(const Tensor& out, const Tensor& input);

/// What autocast does to an op's floating inputs on each device type. PyTorch keeps one list per
/// device type, and the CPU's is short: there, matrix products run in the lower precision and
/// losses in float32, and everything else (exp, softmax, sum ...) in its inputs' dtype. The op
/// table's column is the CUDA list; on the CPU its rows are never cast.
struct AutocastPolicy {
  AutocastClass cpu, cuda;
};
/// matmul, addmm, linear: the lower precision on both.
inline constexpr AutocastPolicy kAutocastLowerPrecision{AutocastClass::LowerPrecision,
                                                        AutocastClass::LowerPrecision};
/// The losses: float32 on both.
inline constexpr AutocastPolicy kAutocastFloat32{AutocastClass::Float32, AutocastClass::Float32};
/// sum, softmax, log_softmax: float32 on CUDA, their inputs' dtype on the CPU.
inline constexpr AutocastPolicy kAutocastFloat32OnCuda{AutocastClass::None,
                                                       AutocastClass::Float32};

/// `t` as autocast would give it to an op with `policy` on its device: cast (a recorded op; a
/// float32 weight's lower-precision copy comes from the scope's cache) when a guard is on and `t`
/// is eligible, else `t` itself. For the ops that do not go through run() (reductions, matmul,
/// the losses).
Tensor autocast(const Tensor& t, AutocastPolicy policy);
/// The same for several inputs of one op (an undefined one, such as a missing bias, stays so).
std::vector<Tensor> autocast(std::initializer_list<const Tensor*> inputs, AutocastPolicy policy);

/// Turns autocast off on every device type for its lifetime, without touching the cache: what an
/// op that autocast has already cast runs under, so that the ops it is made of are not cast again
/// (PyTorch excludes its autocast dispatch key while the op runs), and what backward runs under.
class AutocastOff {
 public:
  AutocastOff();
  ~AutocastOff();
  AutocastOff(const AutocastOff&) = delete;
  AutocastOff& operator=(const AutocastOff&) = delete;

 private:
  bool saved_[kBackends];
};

}  // namespace tiny::detail
