/// @file autograd.h
/// @brief The autograd tape: nodes recorded during the forward pass, walked backward.
///
/// Every differentiable op whose inputs require gradients records one Node: its name (PyTorch's,
/// such as MmBackward0), the edges to the nodes that produced its inputs, what it saved for the
/// backward pass, and its rule for turning the gradient of its output into gradients of its
/// inputs. backward() visits the nodes in topological order, without recursion, adding up the
/// gradients that reach a node along several paths, and ends at AccumulateGrad nodes, which add
/// into the leaves' .grad.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tiny/tensor.h"

namespace tiny {

class Node;

/// An edge of the graph: the node that receives a gradient. (PyTorch's edges also say which of
/// the node's outputs the gradient is for; every node here has one output.)
struct Edge {
  std::shared_ptr<Node> fn;  ///< the receiving node, or null when that input needs no gradient
};

/// One recorded operation (a grad_fn).
class Node {
 public:
  virtual ~Node();
  /// PyTorch's class name for this node: "MulBackward0", "AccumulateGrad", ...
  const std::string& name() const { return name_; }
  /// The nodes that produced this node's inputs, in input order (PyTorch's next_functions).
  const std::vector<Edge>& next_functions() const { return next_; }
  /// FLOPs of the forward computation this node recorded.
  double forward_flops() const { return forward_flops_; }
  /// FLOPs its backward rule spends on the input gradients that are needed.
  double backward_flops() const { return backward_flops_; }
  /// Turns the gradient of the output into one gradient per input (undefined where not needed).
  virtual std::vector<Tensor> apply(const Tensor& grad_output) = 0;
  /// Frees what the node saved for backward (after a backward pass without retain_graph).
  virtual void release_saved() {}
  /// Has backward store the gradient this node receives into `meta`'s .grad while the node is
  /// still that tensor's grad_fn (Tensor::retain_grad).
  void retain_grad_into(std::weak_ptr<AutogradMeta> meta) { retained_.push_back(std::move(meta)); }
  /// Adds `grad`, the gradient this node receives, into the .grad of each tensor that retains it.
  void store_retained_grad(const Tensor& grad);

 protected:
  /// A node with its name, its edges, and the FLOPs of its forward and backward computations.
  Node(std::string name, std::vector<Edge> next, double forward_flops, double backward_flops);

 private:
  std::string name_;
  std::vector<Edge> next_;
  double forward_flops_;
  double backward_flops_;
  std::vector<std::weak_ptr<AutogradMeta>> retained_;
};

/// Prints `<MulBackward0>`-style names, as PyTorch's repr does without the address.
std::ostream& operator<<(std::ostream& os, const Node& node);

/// True while operations are being recorded (the default); false inside a NoGradGuard.
bool grad_mode_enabled();

/// Turns recording off for its lifetime: ops record nothing and save nothing, as in
/// `with torch.no_grad():`. Nests; the previous mode comes back on destruction.
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

/// While alive, every tensor a node saves for backward passes through `pack` when saved and
/// `unpack` when used (torch.autograd.graph.saved_tensors_hooks): a way to count, move or
/// compress what the graph keeps.
class SavedTensorsHooks {
 public:
  /// A hook maps a tensor to a tensor.
  using Hook = std::function<Tensor(const Tensor&)>;
  /// Installs the pair until destruction.
  SavedTensorsHooks(Hook pack, Hook unpack);
  ~SavedTensorsHooks();
  SavedTensorsHooks(const SavedTensorsHooks&) = delete;
  SavedTensorsHooks& operator=(const SavedTensorsHooks&) = delete;
};

/// Computes the gradient of `root` with respect to every leaf that requires it and adds it into
/// their .grad. `gradient` may be omitted only for a one-element `root`. Without
/// `retain_graph`, the graph's saved tensors are freed, and a second pass raises.
void backward(const Tensor& root, const Tensor& gradient = Tensor(), bool retain_graph = false);

/// Clears the gradients of `params`: to undefined (set_to_none, the default of newer PyTorch
/// and of this library) or to zeros.
void zero_grad(const std::vector<Tensor>& params, bool set_to_none = true);

/// Walks the graph that produced `root` from its grad_fn backward, visiting every node once,
/// without recursion; returns them in the order visited (depth first, inputs in order).
std::vector<std::shared_ptr<Node>> graph_nodes(const Tensor& root);

}  // namespace tiny
