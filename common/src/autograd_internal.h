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
/// While kept, its storage counts as an activation (allocator.h) unless it has another role.
/// Copies share one record, so a rule's closure may copy it freely.
class SavedTensor {
 public:
  SavedTensor() = default;
  /// Saves `t` for the node `op` (PyTorch's node name, e.g. "MmBackward0"); an undefined `t`
  /// saves nothing.
  SavedTensor(const Tensor& t, const char* op);
  /// The saved tensor, through the unpack hook; RuntimeError if it was modified in place.
  Tensor unpack() const;

 private:
  struct Kept;
  std::shared_ptr<const Kept> kept_;
};

/// The name of the node whose tensor is being saved, while a pack hook runs (else null).
const char* saving_op();

/// What a checkpointed region (memory.h's checkpoint) does with the tensors its ops save:
/// instead of keeping them, it hands out an index and recomputes the tensor when backward asks.
class CheckpointFrame {
 public:
  virtual ~CheckpointFrame() = default;
  /// Called instead of keeping `t`; returns the index unpack() will be asked for.
  virtual int64_t pack(const Tensor& t) = 0;
  /// The tensor saved as `index`, recomputed if need be.
  virtual Tensor unpack(int64_t index) = 0;
};

/// While alive, tensors saved for backward go to `frame` (the innermost saved-tensor hooks win,
/// as with SavedTensorsHooks).
class CheckpointHooks {
 public:
  explicit CheckpointHooks(std::shared_ptr<CheckpointFrame> frame);
  ~CheckpointHooks();
  CheckpointHooks(const CheckpointHooks&) = delete;
  CheckpointHooks& operator=(const CheckpointHooks&) = delete;
};

/// Sets grad mode to `enabled` for its lifetime (torch.enable_grad when true).
class GradModeGuard {
 public:
  explicit GradModeGuard(bool enabled);
  ~GradModeGuard();
  GradModeGuard(const GradModeGuard&) = delete;
  GradModeGuard& operator=(const GradModeGuard&) = delete;

 private:
  bool previous_;
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

/// A fresh result `t` (nothing else holds it) viewed as `shape`, recorded as PyTorch records a
/// reshape of a product it made itself: its _unsafe_view (UnsafeViewBackward0), or the in-place
/// squeeze_(0) of 1-D @ 2-D (`node` SqueezeBackward4 in PyTorch 2.x, SqueezeBackward3 in 1.13).
/// Defined in matmul.cpp; linear's flattened batch uses it too.
Tensor unsafe_view(const Tensor& t, const Shape& shape, const char* node = "UnsafeViewBackward0");

}  // namespace tiny::detail
