// autograd.cpp: the tape's nodes, the backward engine, grad mode, and saved-tensor hooks.
#include "tiny/autograd.h"

#include <deque>
#include <unordered_map>
#include <unordered_set>

#include "autograd_internal.h"
#include "capture_internal.h"
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
    // copy's worth of memory is never needed. Later gradients are added into the .grad in
    // place, as PyTorch's AccumulateGrad does outside create_graph: a handle the program holds
    // (`g = x.grad()`, or the tensor it gave set_grad) sees the sum, and a CPUGraph's replays add
    // into the .grad they find, as each eager call does.
    if (meta->grad.defined()) {
      meta->grad.add_(grad);
    } else {
      // The engine's handle `g` and `grad` (when it is g) are the only holders allowed, and the
      // handle of the base a view keeps (a transposed product is a view of the product).
      const long holders = (grad.storage() == g.storage() ? 2 : 1) + (grad.is_view() ? 1 : 0);
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

// ---- views written in place ------------------------------------------------------------------
//
// A view and its base share memory, so a write through the view changes the base too, and
// autograd must see it in both. PyTorch's answer, followed here: the base's history gets a
// CopySlices node (the gradient of the base, with the in-place op's backward applied to the
// region the view covers), and the view's grad_fn becomes an AsStridedBackward0 that takes its
// gradient to that region of the base. Other views of the same base notice the write by the
// storage's version and get a new grad_fn the same way (Tensor::grad_fn).

// Where a view's elements lie inside a gradient laid out as its base: the base's sizes and
// strides, and the view's sizes, strides and offset counted from the base's first element.
struct ViewGeometry {
  Shape base_shape;
  Strides base_strides;
  Shape shape;
  Strides strides;
  int64_t offset;
};

ViewGeometry geometry_of(const Tensor& view, const Tensor& base) {
  return {base.shape(), base.strides(), view.shape(), view.strides(),
          view.storage_offset() - base.storage_offset()};
}

// A tensor with the base's sizes and strides in memory of its own (zeros): what the gradient of
// the base is built in, so that the view's strides find its region.
Tensor base_like(const ViewGeometry& v, DType dtype, Device device) {
  int64_t extent = 1;  // elements the base's layout reaches, as check_layout counts them
  for (size_t d = 0; d < v.base_shape.size(); ++d) {
    if (v.base_shape[d] == 0) extent = 0;
    if (extent > 0) extent += (v.base_shape[d] - 1) * v.base_strides[d];
  }
  const Tensor memory = zeros({extent}, dtype, device);
  return Tensor(memory.storage(), dtype, v.base_shape, v.base_strides, 0);
}

// The view's region of a tensor made by base_like.
Tensor region_of(const Tensor& like_base, const ViewGeometry& v) {
  return Tensor(like_base.storage(), like_base.dtype(), v.shape, v.strides, v.offset);
}

// The gradient of a view, taken to its base: zeros, with `g` in the view's region. Where the view
// reads one element several times (an expanded dimension), the gradients of those reads add up.
Tensor view_grad_to_base(const Tensor& g, const ViewGeometry& v) {
  Tensor sum = g;
  ViewGeometry once = v;
  for (size_t d = 0; d < v.shape.size(); ++d)
    if (v.strides[d] == 0 && v.shape[d] > 1) {
      sum = tiny::sum(sum, {static_cast<int64_t>(d)}, /*keepdim=*/true);
      once.shape[d] = 1;
    }
  Tensor out = base_like(v, g.dtype(), g.device());
  region_of(out, once).copy_(sum);
  return out;
}

// The grad_fn of a view whose memory was written in place: its gradient goes to the region of
// the base it covers, and from there along the base's history as it is now.
class AsStridedBackward : public Node {
 public:
  AsStridedBackward(ViewGeometry v, Edge base)
      : Node("AsStridedBackward0", {std::move(base)}, 0, 0), v_(std::move(v)) {}
  std::vector<Tensor> apply(const Tensor& g) override { return {view_grad_to_base(g, v_)}; }

 private:
  ViewGeometry v_;
};

// The base's grad_fn after an in-place op `fn` wrote through one of its views: the gradient of
// the base passes unchanged outside the view's region, and through fn's backward inside it.
// Its edges: the base's history before the write, then fn's other inputs.
class CopySlices : public Node {
 public:
  CopySlices(ViewGeometry v, std::shared_ptr<Node> fn, Edge base)
      : Node("CopySlices", edges(std::move(base), *fn), fn->forward_flops(), fn->backward_flops()),
        v_(std::move(v)),
        fn_(std::move(fn)) {}

  std::vector<Tensor> apply(const Tensor& g) override {
    Tensor result = base_like(v_, g.dtype(), g.device());
    result.copy_(g);
    Tensor slice = region_of(result, v_);
    std::vector<Tensor> grads = fn_->apply(slice.clone());
    if (!grads.empty() && grads[0].defined()) slice.copy_(grads[0]);
    else slice.zero_();  // the old values of the region were overwritten: no gradient reaches them
    grads.resize(std::max<size_t>(grads.size(), 1));
    grads[0] = result;
    return grads;
  }
  void release_saved() override { fn_->release_saved(); }

 private:
  static std::vector<Edge> edges(Edge base, const Node& fn) {
    std::vector<Edge> next = {std::move(base)};
    for (size_t i = 1; i < fn.next_functions().size(); ++i) next.push_back(fn.next_functions()[i]);
    return next;
  }
  ViewGeometry v_;
  std::shared_ptr<Node> fn_;
};

// The name of the node a saved tensor's producer has now (what PyTorch's error names for an
// input that was written in place after being saved): its grad_fn, or the AsStridedBackward0 a
// view written since gets.
std::string current_node_name(const AutogradMeta& meta, uint64_t version) {
  if (meta.view_base.defined() && version != meta.view_version && meta.view_base.requires_grad())
    return "AsStridedBackward0";
  return meta.grad_fn ? meta.grad_fn->name() : "";
}

}  // namespace

namespace detail {

std::string op_name(std::string node) {
  const size_t at = node.rfind("Backward");
  if (at != std::string::npos && node.find_first_not_of("0123456789", at + 8) == std::string::npos)
    node.resize(at);
  return node;
}

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

}  // namespace detail

using detail::edge_for;

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
  if (!autograd_) {
    autograd_ = std::make_shared<AutogradMeta>();
    autograd_->self = autograd_;
  }
  return *autograd_;
}

bool Tensor::requires_grad() const {
  if (!autograd_) return false;
  // A view requires grad when its base does, even one made with grad mode off.
  return autograd_->requires_grad ||
         (autograd_->view_base.defined() && autograd_->view_base.requires_grad());
}

bool Tensor::is_view() const { return autograd_ && autograd_->view_base.defined(); }

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

Tensor Tensor::grad() const {
  if (!autograd_) return Tensor();
  if (!autograd_->grad.defined() && !is_leaf() && !autograd_->retains_grad)
    warn(
        "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. Its .grad "
        "attribute won't be populated during autograd.backward(). If you indeed want the .grad "
        "field to be populated for a non-leaf Tensor, use .retain_grad() on the non-leaf Tensor. "
        "If you access the non-leaf Tensor by mistake, make sure you access the leaf Tensor "
        "instead. See github.com/pytorch/pytorch/pull/30531 for more information.");
  return autograd_->grad;
}

void Tensor::retain_grad() const {
  if (!requires_grad())
    throw RuntimeError("can't retain_grad on Tensor that has requires_grad=False");
  if (is_leaf()) return;  // a leaf's .grad is kept anyway
  AutogradMeta& meta = ensure_autograd_meta();
  if (meta.retains_grad) return;
  meta.retains_grad = true;
  grad_fn()->retain_grad_into(meta.self);
}

bool Tensor::retains_grad() const { return autograd_ && autograd_->retains_grad && !is_leaf(); }

void Node::store_retained_grad(const Tensor& grad) {
  for (const auto& weak : retained_) {
    const std::shared_ptr<AutogradMeta> meta = weak.lock();
    // Only while this node is still the tensor's grad_fn: an in-place write since has moved
    // the duty to the node that made the new value.
    if (!meta || !meta->retains_grad || meta->grad_fn.get() != this) continue;
    meta->grad = meta->grad.defined() ? add(meta->grad, grad) : grad.clone();
  }
}

namespace detail {
void set_grad_fn(AutogradMeta& meta, std::shared_ptr<Node> fn) {
  meta.grad_fn = std::move(fn);
  if (meta.retains_grad && meta.grad_fn) meta.grad_fn->retain_grad_into(meta.self);
}
}  // namespace detail

void Tensor::set_grad(const Tensor& grad) const {
  // PyTorch's checks when Python assigns .grad, in its order and words (2.x's: its text names a
  // grad_dtype attribute, which lets a gradient differ in dtype; the library has none, so a
  // gradient always has its tensor's dtype).
  // The same tensor is a handle sharing this one's autograd record (t.detach() is another
  // tensor over the same memory, which PyTorch allows).
  if (grad.defined() && autograd_ && grad.autograd_meta() == autograd_)
    throw RuntimeError("can't assign Variable as its own grad");
  if (grad.defined() && grad.dtype() != dtype_)
    throw RuntimeError(
        std::string("attempting to assign a gradient with dtype '") +
        detail::type_meta_name(grad.dtype()) + "' to a tensor with grad_dtype '" +
        dtype_legacy_name(dtype_) +
        "'. The gradient must match the tensor's grad_dtype (defaults to the tensor's dtype). "
        "You can set the tensor's grad_dtype attribute with a specific dtype, or None to allow "
        "any dtype. Set grad_dtype with caution. Diverging the dtypes of a tensor and its "
        "gradient may break downstream systems that assume they match.");
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

std::shared_ptr<Node> Tensor::grad_fn() const {
  if (!autograd_) return nullptr;
  AutogradMeta& meta = *autograd_;
  // A view whose memory was written since its node was set (through itself, its base or another
  // view): the old node would take its gradient to the base's history before the write, so it
  // gets a new one, to the base as it is now.
  if (meta.view_base.defined() && storage_ && storage_->version() != meta.view_version) {
    meta.view_version = storage_->version();
    if (meta.view_base.requires_grad())
      detail::set_grad_fn(meta, std::make_shared<AsStridedBackward>(
                                    geometry_of(*this, meta.view_base), edge_for(meta.view_base)));
  }
  return meta.grad_fn;
}

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
  // The op that computed the tensor ("" for a leaf or a plain tensor), for the error if it was
  // modified: an output's producer is the op that saved it; an input's is looked up in its
  // autograd record (`source`) when the error is raised, since an in-place op may have
  // replaced it since.
  std::string producer;
  std::weak_ptr<AutogradMeta> source;

  // The graph keeps `packed` for backward: its storage counts as an activation while it does.
  void mark() const {
    if (packed.defined()) packed.storage()->add_saved(1);
  }
  ~Kept() {
    if (packed.defined()) packed.storage()->add_saved(-1);
  }
};

const char* saving_op() { return t_saving_op; }

SavedTensor::SavedTensor(const Tensor& t, const char* op, bool is_output, bool for_node) {
  if (!t.defined()) return;
  if (for_node) ++t_saves_pending;
  auto kept = std::make_shared<Kept>();
  kept->storage = t.storage();
  kept->version = t.storage()->version();
  kept->shape = t.shape();
  kept->dtype = t.dtype();
  kept->device = t.device();
  if (is_output) {
    kept->producer = detail::op_name(op);
  } else {
    if (t.grad_fn()) kept->producer = detail::op_name(t.grad_fn()->name());
    kept->source = t.autograd_meta();
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
  if (auto storage = k.storage.lock(); storage && storage->version() != k.version) {
    std::string producer = k.producer;
    if (auto meta = k.source.lock())
      producer = op_name(current_node_name(*meta, storage->version()));
    // PyTorch names the tensor by its legacy type (torch.FloatTensor, torch.cuda.HalfTensor) and
    // the op that made it, if any.
    throw RuntimeError(
        "one of the variables needed for gradient computation has been modified "
        "by an inplace operation: [torch." +
        std::string(k.device.is_cpu() ? "" : "cuda.") + dtype_legacy_name(k.dtype) + "Tensor " +
        shape_str(k.shape) + "]" +
        (producer.empty() ? "" : ", which is output 0 of " + producer + ",") + " is at version " +
        std::to_string(storage->version()) + "; expected version " + std::to_string(k.version) +
        " instead. Hint: enable anomaly detection to find the operation that failed to compute "
        "its gradient, with torch.autograd.set_detect_anomaly(True, check_nan=False).");
  }
  if (k.frame) return k.frame->unpack(k.index);
  return k.unpack_hook ? k.unpack_hook(k.packed) : k.packed;
}

CheckpointHooks::CheckpointHooks(std::shared_ptr<CheckpointFrame> frame) {
  t_hooks.push_back({nullptr, nullptr, std::move(frame)});
}
CheckpointHooks::~CheckpointHooks() { t_hooks.pop_back(); }

GradModeGuard::GradModeGuard(bool enabled) : previous_(t_grad_mode) { t_grad_mode = enabled; }
GradModeGuard::~GradModeGuard() { t_grad_mode = previous_; }

std::shared_ptr<Node> make_node(const char* name, std::vector<Edge> edges,
                                const std::vector<Tensor>& inputs, BackwardFn backward,
                                double forward_flops, double backward_flops) {
  std::vector<Shape> shapes;
  std::vector<DType> dtypes;
  for (const Tensor& t : inputs) {
    shapes.push_back(t.shape());
    dtypes.push_back(t.dtype());
  }
  auto node = std::make_shared<FunctionNode>(name, std::move(edges), forward_flops, backward_flops,
                                             std::move(backward), std::move(shapes),
                                             std::move(dtypes), t_saves_pending > 0);
  t_saves_pending = 0;
  timeline_sample(name);
  return node;
}

std::shared_ptr<Node> make_node(const char* name, const std::vector<Tensor>& inputs,
                                BackwardFn backward, double forward_flops, double backward_flops) {
  std::vector<Edge> edges;
  edges.reserve(inputs.size());
  for (const Tensor& t : inputs) edges.push_back(edge_for(t));
  return make_node(name, std::move(edges), inputs, std::move(backward), forward_flops,
                   backward_flops);
}

void record(Tensor& out, const char* name, const std::vector<Tensor>& inputs, BackwardFn backward,
            double forward_flops, double backward_flops) {
  AutogradMeta& meta = out.ensure_autograd_meta();
  meta.requires_grad = true;
  set_grad_fn(meta, make_node(name, inputs, std::move(backward), forward_flops, backward_flops));
}

void rebase_history(const Tensor& self, std::shared_ptr<Node> fn) {
  AutogradMeta& meta = self.ensure_autograd_meta();
  meta.requires_grad = true;
  if (!meta.view_base.defined()) {
    set_grad_fn(meta, std::move(fn));
    return;
  }
  const Tensor base = meta.view_base;
  const ViewGeometry v = geometry_of(self, base);
  auto copy_slices = std::make_shared<CopySlices>(v, std::move(fn), edge_for(base));
  AutogradMeta& base_meta = base.ensure_autograd_meta();
  base_meta.requires_grad = true;
  set_grad_fn(base_meta, copy_slices);
  set_grad_fn(meta, std::make_shared<AsStridedBackward>(v, Edge{copy_slices}));
  meta.view_version = self.storage()->version();
}

void record_overwrite(const Tensor& self, Edge old, const char* name) {
  rebase_history(self, make_node(
                           name, {std::move(old)}, {self},
                           [](const Tensor& g) {
                             return std::vector<Tensor>{zeros(g.shape(), g.dtype(), g.device())};
                           },
                           0, 0));
}

namespace {
bool made_without_grad_mode(const Tensor& in) {
  return !t_grad_mode || in.made_without_grad() ||
         (in.is_view() && in.autograd_meta()->view_made_without_grad);
}
}  // namespace

bool view_without_record(Tensor& out, const Tensor& in) {
  // Integer and bool views carry no gradient, and PyTorch does not track them as views.
  if (!is_floating(out.dtype())) return true;
  // Made with grad mode off from a tensor that needs no gradient: a write into it with grad mode
  // on is refused, and nothing else about it concerns autograd, so it keeps only a mark (most of
  // backward's and the optimizers' views are of this kind, and make no autograd record).
  if (made_without_grad_mode(in) && !in.requires_grad()) {
    out.mark_made_without_grad();
    return true;
  }
  return false;
}

Tensor record_view_node(Tensor out, const Tensor& in, const char* name,
                        std::function<Tensor(const Tensor&)> back) {
  const bool without_grad = made_without_grad_mode(in);
  const Tensor& base = in.is_view() ? in.autograd_meta()->view_base : in;
  base.ensure_autograd_meta();  // one record, shared by the base's handle and the view's
  AutogradMeta& meta = out.ensure_autograd_meta();
  meta.view_base = base;
  meta.view_version = out.storage()->version();
  // A view of a view made with grad mode off is refused writes as its source is.
  meta.view_made_without_grad = without_grad;
  return record_copy(std::move(out), in, name, std::move(back));
}

Tensor record_copy(Tensor out, const Tensor& in, const char* name,
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
      n->store_retained_grad(g);
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
