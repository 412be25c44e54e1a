// autograd.cpp: the tape's nodes, the backward engine, grad mode, and saved-tensor hooks.
#include "tiny/autograd.h"

#include <deque>
#include <unordered_map>
#include <unordered_set>

#include "autograd_internal.h"
#include "dispatch.h"
#include "internal.h"
#include "memory_internal.h"
#include "tiny/memory.h"

namespace tiny {

namespace {

thread_local bool t_grad_mode = true;

// One entry of the saved-tensor hooks stack: a user's pack/unpack pair, or a checkpoint frame.
struct HookPair {
  SavedTensorsHooks::Hook pack, unpack;
  std::shared_ptr<detail::CheckpointFrame> frame;
};
thread_local std::vector<HookPair> t_hooks;
thread_local const char* t_saving_op = nullptr;
// Tensors saved since the last node was recorded: an op saves its tensors just before it
// records its node, so record() learns from this whether the node keeps any.
thread_local int t_saves_pending = 0;

const char* kBackwardTwice =
    "Trying to backward through the graph a second time (or directly access saved tensors after "
    "they have already been freed). Saved intermediate values of the graph are freed when you "
    "call .backward() or autograd.grad(). Specify retain_graph=True if you need to backward "
    "through the graph a second time or if you need to access saved tensors after calling "
    "backward.";

// A node made by an op: its backward rule, plus what the tape needs to shape the gradients.
class FunctionNode : public Node {
 public:
  FunctionNode(std::string name, std::vector<Edge> next, double fwd, double bwd,
               detail::BackwardFn fn, std::vector<Shape> shapes, std::vector<DType> dtypes,
               bool saves_tensors)
      : Node(std::move(name), std::move(next), fwd, bwd),
        saves_tensors_(saves_tensors),
        fn_(std::move(fn)),
        shapes_(std::move(shapes)),
        dtypes_(std::move(dtypes)) {}

  std::vector<Tensor> apply(const Tensor& grad_output) override {
    if (!fn_) throw RuntimeError(kBackwardTwice);
    std::vector<Tensor> grads = fn_(grad_output);
    grads.resize(shapes_.size());
    for (size_t i = 0; i < grads.size(); ++i) {
      if (!grads[i].defined() || !next_functions()[i].fn) {
        grads[i] = Tensor();
        continue;
      }
      if (grads[i].shape() != shapes_[i]) grads[i] = detail::sum_to(grads[i], shapes_[i]);
      grads[i] = grads[i].to(dtypes_[i]);
    }
    return grads;
  }

  // Dropping the rule drops every tensor its closure saved. A rule that saved no tensor (a
  // transpose's, a sum's) is kept: as in PyTorch, a second backward through it is allowed.
  void release_saved() override {
    if (saves_tensors_) fn_ = nullptr;
  }

 private:
  bool saves_tensors_;
  detail::BackwardFn fn_;
  std::vector<Shape> shapes_;
  std::vector<DType> dtypes_;
};

// The end of every path: adds the gradient into the leaf's .grad.
class AccumulateGrad : public Node {
 public:
  explicit AccumulateGrad(const std::shared_ptr<AutogradMeta>& leaf, Shape shape, DType dtype)
      : Node("AccumulateGrad", {}, 0, 0), leaf_(leaf), shape_(std::move(shape)), dtype_(dtype) {}

  std::vector<Tensor> apply(const Tensor& g) override {
    auto meta = leaf_.lock();
    if (!meta) return {};  // the leaf is gone; nobody can read its gradient
    Tensor grad = g.shape() == shape_ ? g : detail::sum_to(g, shape_);
    grad = grad.to(dtype_);
    // No other tensor may share the memory of a .grad. The first gradient is therefore copied,
    // unless nothing else can see it (as PyTorch does): then the leaf takes it over and a
    // copy's worth of memory is never needed. Later gradients are added out of place.
    if (meta->grad.defined()) {
      meta->grad = add(meta->grad, grad);
    } else {
      // The engine's handle `g` and `grad` (when it is g) are the only holders allowed.
      const long holders = grad.storage() == g.storage() ? 2 : 1;
      const bool alone = grad.storage().use_count() <= holders && !grad.storage()->external() &&
                         grad.is_contiguous() && grad.storage_offset() == 0 &&
                         static_cast<size_t>(grad.nbytes()) == grad.storage()->nbytes();
      meta->grad = alone ? grad.detach() : grad.clone();
    }
    meta->grad.storage()->set_role(MemoryCategory::gradients);
    // A hook may add more hooks or be the one that drops the parameter: run a copy.
    const auto hooks = meta->post_accumulate_grad_hooks;
    for (const auto& hook : hooks) hook(meta->grad);
    return {};
  }

 private:
  std::weak_ptr<AutogradMeta> leaf_;
  Shape shape_;
  DType dtype_;
};

// The node that receives a gradient for `t`: its grad_fn, or (for a leaf that requires a
// gradient) its AccumulateGrad, created once and shared by every use of the leaf.
Edge edge_for(const Tensor& t) {
  if (!t.requires_grad()) return {};
  if (auto fn = t.grad_fn()) return {fn};
  AutogradMeta& meta = t.ensure_autograd_meta();
  auto acc = meta.grad_accumulator.lock();
  if (!acc) {
    acc = std::make_shared<AccumulateGrad>(t.autograd_meta(), t.shape(), t.dtype());
    meta.grad_accumulator = acc;
  }
  return {acc};
}

}  // namespace

// ---- Node ---------------------------------------------------------------------------------------

Node::Node(std::string name, std::vector<Edge> next, double forward_flops, double backward_flops)
    : name_(std::move(name)),
      next_(std::move(next)),
      forward_flops_(forward_flops),
      backward_flops_(backward_flops) {}

// Destroying the head of a long chain would destroy the next node from inside this destructor,
// and so on, one stack frame per node: 100,000 ops would overflow the stack. Instead, take over
// the edges of every node that is about to die with us and release them one at a time.
Node::~Node() {
  std::vector<std::shared_ptr<Node>> pending;
  for (Edge& e : next_)
    if (e.fn) pending.push_back(std::move(e.fn));
  next_.clear();
  while (!pending.empty()) {
    std::shared_ptr<Node> n = std::move(pending.back());
    pending.pop_back();
    if (n.use_count() == 1) {  // we hold the last reference: it dies at the end of this loop
      for (Edge& e : n->next_)
        if (e.fn) pending.push_back(std::move(e.fn));
      n->next_.clear();
    }
  }
}

std::ostream& operator<<(std::ostream& os, const Node& node) {
  return os << "<" << node.name() << ">";
}

// ---- grad mode and hooks -------------------------------------------------------------------------

bool grad_mode_enabled() { return t_grad_mode; }
NoGradGuard::NoGradGuard() : previous_(t_grad_mode) { t_grad_mode = false; }
NoGradGuard::~NoGradGuard() { t_grad_mode = previous_; }

SavedTensorsHooks::SavedTensorsHooks(Hook pack, Hook unpack) {
  if (!pack || !unpack) throw ValueError("saved_tensors_hooks: pack and unpack must be callables");
  t_hooks.push_back({std::move(pack), std::move(unpack), nullptr});
}
SavedTensorsHooks::~SavedTensorsHooks() { t_hooks.pop_back(); }

// ---- Tensor's autograd methods ----------------------------------------------------------------

AutogradMeta& Tensor::ensure_autograd_meta() const {
  if (!autograd_) autograd_ = std::make_shared<AutogradMeta>();
  return *autograd_;
}

bool Tensor::requires_grad() const { return autograd_ && autograd_->requires_grad; }

Tensor& Tensor::requires_grad_(bool flag) {
  if (!is_leaf())
    throw RuntimeError(
        "you can only change requires_grad flags of leaf variables. If you want to use a computed "
        "variable in a subgraph that doesn't require differentiation use var_no_grad = "
        "var.detach().");
  if (flag && !is_floating(dtype_))
    throw RuntimeError("only Tensors of floating point dtype can require gradients");
  ensure_autograd_meta().requires_grad = flag;
  return *this;
}

Tensor Tensor::grad() const { return autograd_ ? autograd_->grad : Tensor(); }

void Tensor::set_grad(const Tensor& grad) const {
  if (grad.defined() && grad.shape() != shape_)
    throw RuntimeError("attempting to assign a gradient of size '" + detail::shape_str(grad.shape()) +
                       "' to a tensor of size '" + detail::shape_str(shape_) +
                       "'. Please ensure that the gradient and the tensor are the same size");
  AutogradMeta& meta = ensure_autograd_meta();
  // The old gradient, if anything else still holds it, is no longer one.
  if (meta.grad.defined() && meta.grad.storage()->category() == MemoryCategory::gradients)
    meta.grad.storage()->set_role(MemoryCategory::temporaries);
  meta.grad = grad;
  if (grad.defined()) grad.storage()->set_role(MemoryCategory::gradients);
}

void Tensor::register_post_accumulate_grad_hook(std::function<void(const Tensor&)> hook) const {
  if (!requires_grad())
    throw RuntimeError("cannot register a hook on a tensor that doesn't require gradient");
  if (!is_leaf())
    throw RuntimeError("post accumulate grad hooks cannot be registered on non-leaf tensors");
  if (!hook) throw ValueError("register_post_accumulate_grad_hook: the hook is empty");
  ensure_autograd_meta().post_accumulate_grad_hooks.push_back(std::move(hook));
}

std::shared_ptr<Node> Tensor::grad_fn() const { return autograd_ ? autograd_->grad_fn : nullptr; }

void Tensor::backward() const { tiny::backward(*this); }

void Tensor::backward(const Tensor& gradient, bool retain_graph) const {
  tiny::backward(*this, gradient, retain_graph);
}

Tensor Tensor::detach() const { return Tensor(storage_, dtype_, shape_, strides_, offset_); }

// ---- recording ---------------------------------------------------------------------------------

namespace detail {

bool should_record(std::initializer_list<const Tensor*> inputs) {
  if (!t_grad_mode) return false;
  for (const Tensor* t : inputs)
    if (t->requires_grad()) return true;
  return false;
}

// What one saved tensor keeps. The storage it was saved from is held weakly: when a pack hook
// replaced the tensor (moved it, or a checkpoint dropped it), the original memory must be free
// to go, and memory nobody holds cannot be modified in place.
struct SavedTensor::Kept {
  Tensor packed;  // what the hook returned (the detached tensor itself without hooks)
  SavedTensorsHooks::Hook unpack_hook;
  std::shared_ptr<CheckpointFrame> frame;  // set instead of `packed` inside a checkpoint
  int64_t index = 0;
  std::weak_ptr<Storage> storage;
  uint64_t version = 0;
  Shape shape;
  DType dtype = kFloat32;
  Device device = Device::cpu();
  std::string producer;  // the op that computed the tensor ("" for a leaf or a plain tensor)

  // The graph keeps `packed` for backward: its storage counts as an activation while it does.
  void mark() const {
    if (packed.defined()) packed.storage()->add_saved(1);
  }
  ~Kept() {
    if (packed.defined()) packed.storage()->add_saved(-1);
  }
};

const char* saving_op() { return t_saving_op; }

SavedTensor::SavedTensor(const Tensor& t, const char* op) {
  if (!t.defined()) return;
  ++t_saves_pending;
  auto kept = std::make_shared<Kept>();
  kept->storage = t.storage();
  kept->version = t.storage()->version();
  kept->shape = t.shape();
  kept->dtype = t.dtype();
  kept->device = t.device();
  if (t.grad_fn()) {
    // PyTorch 2.x names the op, the node's name without its "Backward<N>" (1.13: the node).
    std::string name = t.grad_fn()->name();
    const size_t at = name.rfind("Backward");
    if (at != std::string::npos &&
        name.find_first_not_of("0123456789", at + 8) == std::string::npos)
      name.resize(at);
    kept->producer = name;
  }
  Tensor detached = t.detach();
  if (t_hooks.empty()) {
    kept->packed = std::move(detached);
  } else if (const HookPair& hooks = t_hooks.back(); hooks.frame) {
    kept->frame = hooks.frame;
    kept->index = hooks.frame->pack(detached);
  } else {
    // The hook may save the tensor anywhere, or throw; the op name is there for it to read.
    struct Naming {
      const char* previous = t_saving_op;
      explicit Naming(const char* name) { t_saving_op = name; }
      ~Naming() { t_saving_op = previous; }
    } naming(op);
    kept->packed = hooks.pack(detached);
    kept->unpack_hook = hooks.unpack;
  }
  kept->mark();
  kept_ = std::move(kept);
}

Tensor SavedTensor::unpack() const {
  if (!kept_) return Tensor();
  const Kept& k = *kept_;
  if (auto storage = k.storage.lock(); storage && storage->version() != k.version)
    // PyTorch names the tensor by its legacy type (torch.FloatTensor, torch.cuda.HalfTensor) and
    // the op that made it, if any.
    throw RuntimeError(
        "one of the variables needed for gradient computation has been modified "
        "by an inplace operation: [torch." +
        std::string(k.device.is_cpu() ? "" : "cuda.") + dtype_legacy_name(k.dtype) + "Tensor " +
        shape_str(k.shape) + "]" +
        (k.producer.empty() ? "" : ", which is output 0 of " + k.producer + ",") +
        " is at version " + std::to_string(storage->version()) + "; expected version " +
        std::to_string(k.version) +
        " instead. Hint: enable anomaly detection to find the operation that failed to compute "
        "its gradient, with torch.autograd.set_detect_anomaly(True, check_nan=False).");
  if (k.frame) return k.frame->unpack(k.index);
  return k.unpack_hook ? k.unpack_hook(k.packed) : k.packed;
}

CheckpointHooks::CheckpointHooks(std::shared_ptr<CheckpointFrame> frame) {
  t_hooks.push_back({nullptr, nullptr, std::move(frame)});
}
CheckpointHooks::~CheckpointHooks() { t_hooks.pop_back(); }

GradModeGuard::GradModeGuard(bool enabled) : previous_(t_grad_mode) { t_grad_mode = enabled; }
GradModeGuard::~GradModeGuard() { t_grad_mode = previous_; }

void record(Tensor& out, const char* name, const std::vector<Tensor>& inputs, BackwardFn backward,
            double forward_flops, double backward_flops) {
  std::vector<Edge> next;
  std::vector<Shape> shapes;
  std::vector<DType> dtypes;
  for (const Tensor& t : inputs) {
    next.push_back(edge_for(t));
    shapes.push_back(t.shape());
    dtypes.push_back(t.dtype());
  }
  AutogradMeta& meta = out.ensure_autograd_meta();
  meta.requires_grad = true;
  meta.grad_fn =
      std::make_shared<FunctionNode>(name, std::move(next), forward_flops, backward_flops,
                                     std::move(backward), std::move(shapes), std::move(dtypes),
                                     t_saves_pending > 0);
  t_saves_pending = 0;
  timeline_sample(name);
}

Tensor record_view(Tensor out, const Tensor& in, const char* name,
                   std::function<Tensor(const Tensor&)> back) {
  if (should_record({&in}))
    record(
        out, name, {in},
        [back = std::move(back)](const Tensor& g) { return std::vector<Tensor>{back(g)}; }, 0, 0);
  return out;
}

Tensor sum_to(const Tensor& g, const Shape& shape) {
  const int64_t lead = g.dim() - static_cast<int64_t>(shape.size());
  if (lead < 0)
    throw RuntimeError("sum_to: gradient of shape " + shape_str(g.shape()) +
                       " cannot be summed to " + shape_str(shape));
  // BEGIN SOLUTION ch03 unbroadcast
  // Sum the leading dimensions broadcasting added, and those it stretched from size 1.
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < g.dim(); ++d)
    if (d < lead || (shape[d - lead] == 1 && g.size(d) != 1)) dims.push_back(d);
  Tensor r = dims.empty() ? g : sum(g, dims, /*keepdim=*/true);
  return r.reshape(shape);
  // END SOLUTION ch03 unbroadcast
}

Tensor scatter_into_zeros(const Tensor& g, const Shape& base_shape, DType dtype,
                          const std::function<Tensor(const Tensor&)>& view_of) {
  Tensor base = zeros(base_shape, dtype, g.device());
  view_of(base).copy_(g);
  return base;
}

}  // namespace detail

// ---- the engine --------------------------------------------------------------------------------

std::vector<std::shared_ptr<Node>> graph_nodes(const Tensor& root) {
  std::vector<std::shared_ptr<Node>> order;
  if (!root.grad_fn()) return order;
  std::unordered_set<Node*> seen;
  // Depth first with an explicit stack; children pushed in reverse so they pop in order.
  std::vector<std::shared_ptr<Node>> stack = {root.grad_fn()};
  while (!stack.empty()) {
    auto n = std::move(stack.back());
    stack.pop_back();
    if (!seen.insert(n.get()).second) continue;
    order.push_back(n);
    const auto& next = n->next_functions();
    for (auto it = next.rbegin(); it != next.rend(); ++it)
      if (it->fn && !seen.count(it->fn.get())) stack.push_back(it->fn);
  }
  return order;
}

void backward(const Tensor& root, const Tensor& gradient, bool retain_graph) {
  if (!root.requires_grad())
    throw RuntimeError("element 0 of tensors does not require grad and does not have a grad_fn");
  Tensor seed = gradient;
  if (!seed.defined()) {
    if (root.numel() != 1)
      throw RuntimeError("grad can be implicitly created only for scalar outputs");
    seed = ones(root.shape(), root.dtype(), root.device());
  } else if (seed.shape() != root.shape()) {
    throw RuntimeError("Mismatch in shape: grad_output[0] has a shape of " +
                       detail::torch_size_str(seed.shape()) + " and output[0] has a shape of " +
                       detail::torch_size_str(root.shape()) + ".");
  }
  NoGradGuard no_grad;  // the backward pass itself is not recorded
  // Backward's ops run in the dtypes of the forward pass they mirror, even when backward() is
  // called inside an autocast scope: casting them again would change what the casts recorded.
  const detail::AutocastOff no_autocast;
  MemoryPhase phase("backward");
  const Edge start = edge_for(root);

  // Count, for every node reachable from the root, how many edges lead into it; a node may run
  // once all of them have delivered their gradient (Kahn's topological order, no recursion).
  std::unordered_map<Node*, int> pending;
  std::vector<Node*> stack = {start.fn.get()};
  std::unordered_set<Node*> seen = {start.fn.get()};
  std::vector<Node*> visited;
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    visited.push_back(n);
    for (const Edge& e : n->next_functions()) {
      if (!e.fn) continue;
      ++pending[e.fn.get()];
      if (seen.insert(e.fn.get()).second) stack.push_back(e.fn.get());
    }
  }

  std::unordered_map<Node*, Tensor> grads = {{start.fn.get(), seed}};
  std::deque<Node*> ready = {start.fn.get()};
  while (!ready.empty()) {
    Node* n = ready.front();
    ready.pop_front();
    auto found = grads.find(n);
    // A node that no gradient reached (every path into it gave none) still passes "none" on,
    // so that the nodes after it are not left waiting.
    std::vector<Tensor> input_grads;
    if (found != grads.end()) {
      const Tensor g = std::move(found->second);
      grads.erase(found);
      input_grads = n->apply(g);
    }
    // What the node saved is freed as soon as it has run, as in PyTorch: activations leave
    // memory one by one as backward walks back through the forward pass.
    if (!retain_graph) n->release_saved();
    const auto& next = n->next_functions();
    for (size_t i = 0; i < next.size(); ++i) {
      Node* child = next[i].fn.get();
      if (!child) continue;
      if (i < input_grads.size() && input_grads[i].defined()) {
        // A tensor used in several places receives a gradient from each: they add up.
        auto it = grads.find(child);
        if (it == grads.end()) grads.emplace(child, input_grads[i]);
        else it->second = add(it->second, input_grads[i]);
      }
      if (--pending[child] == 0) ready.push_back(child);
    }
    input_grads.clear();
    detail::timeline_sample(n->name().c_str());
  }
  if (!retain_graph)
    for (Node* n : visited) n->release_saved();
}

void zero_grad(const std::vector<Tensor>& params, bool set_to_none) {
  MemoryPhase phase("zero_grad");
  for (const Tensor& p : params) {
    if (!p.grad().defined()) continue;
    if (set_to_none) {
      p.set_grad(Tensor());
    } else {
      NoGradGuard no_grad;
      p.grad().zero_();
    }
  }
  detail::timeline_sample("zero_grad");
}

}  // namespace tiny
