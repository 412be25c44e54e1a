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
  /// saves nothing. `is_output` marks the op's own result: if it is later written in place,
  /// the error names `op` as its producer, where for an input it names the node that produced
  /// the input when the error is raised (PyTorch's two cases). `for_node` is false for a tensor
  /// kept by something other than the next node recorded (a checkpoint's inputs), so that the
  /// node does not count it among its own.
  SavedTensor(const Tensor& t, const char* op, bool is_output = false, bool for_node = true);
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

/// The op a node is for, as PyTorch 2.x's messages name it: the node's name without its
/// "Backward<N>" ("ExpBackward0" -> "Exp"; "CopySlices" stays).
std::string op_name(std::string node);

/// The edge a gradient for `t` takes: its grad_fn, the AccumulateGrad of a leaf that requires
/// grad, or none.
Edge edge_for(const Tensor& t);

/// A new node called `name` whose inputs were `inputs` (their edges taken now), not yet attached
/// to any tensor.
std::shared_ptr<Node> make_node(const char* name, const std::vector<Tensor>& inputs,
                                BackwardFn backward, double forward_flops, double backward_flops);
/// The same with the inputs' edges taken earlier: an in-place op takes them before it writes.
std::shared_ptr<Node> make_node(const char* name, std::vector<Edge> edges,
                                const std::vector<Tensor>& inputs, BackwardFn backward,
                                double forward_flops, double backward_flops);

/// Makes `fn` the tensor's grad_fn; a tensor that retains its gradient (retain_grad) has the new
/// node store it from now on, as PyTorch moves its retains_grad hook to the new grad_fn.
void set_grad_fn(AutogradMeta& meta, std::shared_ptr<Node> fn);

/// Makes `out` the output of a new node called `name` with `inputs` as its inputs.
void record(Tensor& out, const char* name, const std::vector<Tensor>& inputs, BackwardFn backward,
            double forward_flops, double backward_flops);

/// Makes `fn`, the node of an in-place op that wrote into `self`, the newest step of self's
/// history. For a tensor that is not a view, fn becomes its grad_fn. For a view, fn becomes part
/// of its base's history instead: the base's grad_fn becomes a CopySlices node (the gradient of
/// the base, with fn applied to the viewed region), and the view's an AsStridedBackward0 of it.
void rebase_history(const Tensor& self, std::shared_ptr<Node> fn);

/// Records an in-place op that replaced every element of `self` by values that do not depend on
/// the old ones (fill_, zero_, the random fills), as node `name`: the old values get a zero
/// gradient. `old` is self's edge, taken before the write.
void record_overwrite(const Tensor& self, Edge old, const char* name);

/// Finishes `out`, a view of `in`, when it needs no autograd record and returns true (an integer
/// view, or one made with grad mode off from a tensor that needs no gradient); false otherwise.
bool view_without_record(Tensor& out, const Tensor& in);
/// record_view's second half, for a view that needs its record.
Tensor record_view_node(Tensor out, const Tensor& in, const char* name,
                        std::function<Tensor(const Tensor&)> back);
/// Makes `out`, a view of `in` (the same memory), part of the graph when `in` is: `back` maps
/// the gradient of `out` to the gradient of `in`. Also records that `out` views `in`'s base, so
/// that writes through it reach the base's history. Returns `out`. A template, so that a view
/// that needs no record (loading a batch under no_grad) never builds the std::function.
template <typename Back>
Tensor record_view(Tensor out, const Tensor& in, const char* name, Back&& back) {
  if (view_without_record(out, in)) return out;
  return record_view_node(std::move(out), in, name,
                          std::function<Tensor(const Tensor&)>(std::forward<Back>(back)));
}
/// The same for `out` computed from `in` into memory of its own (clone, a conversion).
Tensor record_copy(Tensor out, const Tensor& in, const char* name,
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
