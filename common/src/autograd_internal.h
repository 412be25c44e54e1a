// autograd_internal.h: how ops record themselves on the tape. Not part of the public API.
//
// An op computes its result as usual, then, if recording is on and an input requires a
// gradient, calls record() with its backward rule. The rule receives the gradient of the output
// and returns one gradient per input (an undefined Tensor where none is needed); gradients whose
// shape is a broadcast of the input's are summed back to it (unbroadcast) and converted to the
// input's dtype by the tape, so rules can be written as the math reads.
#pragma once
#include <functional>
#include <initializer_list>
#include <vector>

#include "tiny/autograd.h"
#include "tiny/ops.h"

namespace tiny::detail {

/// True when recording is on and at least one input requires a gradient.
bool should_record(std::initializer_list<const Tensor*> inputs);

/// A tensor kept for the backward pass: detached (so the graph has no cycles), passed through
/// the saved-tensor hooks, and checked on use against in-place changes since it was saved.
class SavedTensor {
 public:
  SavedTensor() = default;
  /// Saves `t` (an undefined `t` saves nothing).
  explicit SavedTensor(const Tensor& t);
  /// The saved tensor, through the unpack hook; RuntimeError if it was modified in place.
  Tensor unpack() const;

 private:
  Tensor packed_;
  std::function<Tensor(const Tensor&)> unpack_hook_;
  std::shared_ptr<Storage> storage_;
  uint64_t version_ = 0;
  Shape shape_;
  DType dtype_ = kFloat32;
};

/// A backward rule: gradient of the output -> gradient of each input.
using BackwardFn = std::function<std::vector<Tensor>(const Tensor& grad_output)>;

/// Makes `out` the output of a new node called `name` with `inputs` as its inputs.
void record(Tensor& out, const char* name, const std::vector<Tensor>& inputs, BackwardFn backward,
            double forward_flops, double backward_flops);

/// Makes `out` (a view or copy of `in`) part of the graph when `in` is: `back` maps the gradient
/// of `out` to the gradient of `in`. Returns `out`.
Tensor record_view(Tensor out, const Tensor& in, const char* name,
                   std::function<Tensor(const Tensor&)> back);

/// Sums `g` down to `shape` (the inverse of broadcasting `shape` up to g's shape).
Tensor sum_to(const Tensor& g, const Shape& shape);

/// The gradient with respect to a view's base: zeros of `base_shape` with `g` written into the
/// region `view_of` selects from them.
Tensor scatter_into_zeros(const Tensor& g, const Shape& base_shape, DType dtype,
                          const std::function<Tensor(const Tensor&)>& view_of);

}  // namespace tiny::detail
