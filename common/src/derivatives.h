// derivatives.h: the backward formulas of the elementwise ops, kept in one table beside the
// forward table, as PyTorch keeps derivatives.yaml beside native_functions.yaml. Not part of the
// public API.
//
// A formula receives the gradient of the op's output and what the op saved, and returns the
// gradient of each input (an undefined Tensor where none is needed). It may be written as the
// math reads: gradients whose shape is a broadcast of the input's are summed back to it, and
// converted to the input's dtype, by the tape.
#pragma once
#include <array>
#include <cstdint>
#include <string_view>

#include "elementwise_ops.h"
#include "tiny/tensor.h"

namespace tiny::detail {

/// What a formula sees.
struct BackwardArgs {
  Tensor grad;                  ///< the gradient of the op's output
  std::array<Tensor, 3> input;  ///< the saved inputs (undefined unless the row keeps them)
  Tensor result;                ///< the saved output (undefined unless the row keeps it)
  ops::Scalars scalars;         ///< the op's numbers
  std::array<bool, 3> needs{};  ///< which inputs need a gradient
};

/// A backward formula.
using BackwardFormula = std::array<Tensor, 3> (*)(const BackwardArgs& args);

/// When a row keeps a tensor for backward: never, always, or only if a given input needs a
/// gradient (mul keeps each input only for the other one's gradient).
enum Keep : uint8_t {
  kNever = 0,
  kIfInput0NeedsGrad = 1,
  kIfInput1NeedsGrad = 2,
  kIfInput2NeedsGrad = 4,
  kAlways = 0x80,
};

/// One row of the derivatives table.
struct Derivative {
  const char* op;               ///< the forward row's name
  std::array<uint8_t, 3> keep;  ///< per input: a Keep
  uint8_t keep_result;          ///< a Keep for the output
  BackwardFormula formula;
  /// FLOPs per element that the gradient of each input costs (backward_flops of the node).
  std::array<double, 3> flops;
};

/// The row for forward op `op`, or null when it has none (comparisons).
const Derivative* find_derivative(std::string_view op);

}  // namespace tiny::detail
