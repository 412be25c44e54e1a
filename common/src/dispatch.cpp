// dispatch.cpp: the one dispatcher of elementwise ops (see dispatch.h for its steps), type
// promotion, the checks of in-place and out= writes, autocast's state, and the cost counters.
#include "dispatch.h"

#include <algorithm>
#include <memory>
#include <unordered_map>
#include <vector>

#include "autograd_internal.h"
#include "capture_internal.h"
#include "derivatives.h"
#include "fusion/graph.h"
#include "internal.h"
#include "tiny/amp.h"
#include "tiny/ops.h"

namespace tiny {

// ---- cost counters ------------------------------------------------------------------------------

namespace {
thread_local std::vector<CostCounter*> t_counters;
}  // namespace

CostCounter::CostCounter() { t_counters.push_back(this); }
CostCounter::~CostCounter() { std::erase(t_counters, this); }

void count_op_cost(double flops, double bytes) {
  for (CostCounter* c : t_counters) {
    c->flops_ += flops;
    c->bytes_ += bytes;
    ++c->ops_;
  }
}

// ---- autocast -----------------------------------------------------------------------------------

namespace {
struct AutocastState {
  bool enabled = false;
  DType dtype;
};
// Per device type (CPU, CUDA), with PyTorch's default dtypes.
thread_local AutocastState t_autocast[detail::kBackends] = {{false, kBFloat16}, {false, kFloat16}};
// How many AutocastGuards are alive on this thread, and whether they keep casts of weights.
thread_local int t_autocast_nesting = 0;
thread_local bool t_autocast_cache_enabled = true;

// The weight-cast cache. Inside an autocast scope every matrix product that uses a float32
// weight needs the same 16-bit copy of it; the first one makes it, the others reuse it, and the
// outermost guard drops them all on exit (PyTorch keeps the same cache, for the same reason).
// Only leaves that require grad are kept: model weights, which do not change during a forward
// pass. An entry is found by the weight's autograd record, and holds a weak reference to it so
// that a record freed and reallocated at the same address is never mistaken for the old one.
struct CachedCast {
  std::weak_ptr<AutogradMeta> source;
  Tensor cast;
};
thread_local std::unordered_map<const AutogradMeta*, CachedCast> t_cast_cache;
}  // namespace

AutocastGuard::AutocastGuard(Device::Type device, DType dtype, bool enabled, bool cache_enabled)
    : device_(device) {
  if (dtype != kFloat16 && dtype != kBFloat16)
    throw ValueError(std::string("autocast runs ops in float16 or bfloat16, not ") +
                     dtype_name(dtype));
  AutocastState& s = t_autocast[static_cast<int>(device)];
  previous_enabled_ = s.enabled;
  previous_dtype_ = s.dtype;
  previous_cache_enabled_ = t_autocast_cache_enabled;
  s = {enabled, dtype};
  t_autocast_cache_enabled = cache_enabled;
  ++t_autocast_nesting;
}

AutocastGuard::~AutocastGuard() {
  t_autocast[static_cast<int>(device_)] = {previous_enabled_, previous_dtype_};
  t_autocast_cache_enabled = previous_cache_enabled_;
  if (--t_autocast_nesting == 0) t_cast_cache.clear();
}

bool autocast_enabled(Device::Type device) { return t_autocast[static_cast<int>(device)].enabled; }
DType autocast_dtype(Device::Type device) { return t_autocast[static_cast<int>(device)].dtype; }
size_t autocast_cached_casts() {
  size_t live = 0;
  for (const auto& [key, entry] : t_cast_cache) live += !entry.source.expired();
  return live;
}

namespace detail {

// ---- devices and dtypes -------------------------------------------------------------------------

namespace {

Device common_device(const char* op, const Tensor* const* inputs, int n) {
  const Tensor* first = nullptr;
  for (int k = 0; k < n; ++k) {
    const Tensor* t = inputs[k];
    if (!t->defined()) throw RuntimeError(std::string(op) + "(): got an undefined tensor");
    if (t->dim() == 0 && t->device().is_cpu() && n > 1) continue;  // a number
    if (first && !(first->device() == t->device()))
      throw RuntimeError(
          "Expected all tensors to be on the same device, but found at least two devices, " +
          first->device().str() + " and " + t->device().str() + "!");
    if (!first) first = t;
  }
  return first ? first->device() : Device::cpu();
}

// PyTorch's ResultTypeState: the best dtype among dimensioned tensors, among 0-dim tensors, and
// among plain numbers.
struct Promotion {
  std::optional<DType> dim_result, zero_result, number_result;

  static void update(std::optional<DType>& slot, DType d) {
    slot = slot ? promote_types(*slot, d) : d;
  }
  void add(const Tensor& t) { update(t.dim() > 0 ? dim_result : zero_result, t.dtype()); }
  void add(const Scalar& s) { update(number_result, s.default_dtype()); }

  static int category(DType d) { return d == kBool ? 0 : is_integral(d) ? 1 : 2; }
  // A lower-priority operand changes the result only if it is of a higher category (a float
  // number makes an integer tensor float, but a float64 number leaves float16 alone).
  static std::optional<DType> combine(std::optional<DType> higher, std::optional<DType> lower) {
    if (!higher) return lower;
    if (!lower) return higher;
    if (category(*lower) > category(*higher)) return promote_types(*higher, *lower);
    return higher;
  }
  DType result() const {
    return combine(dim_result, combine(zero_result, number_result)).value_or(kFloat32);
  }
};

// True when two tensors read exactly the same elements in the same order (an in-place op's
// `self` passed as another input too): then reading and writing element by element is safe.
bool same_view(const Tensor& a, const Tensor& b) {
  return a.storage() == b.storage() && a.storage_offset() == b.storage_offset() &&
         a.shape() == b.shape() && a.strides() == b.strides();
}

// The class autocast gives an op on `device`: PyTorch keeps one list per device type.
AutocastClass class_on(AutocastPolicy policy, Device::Type device) {
  return device == Device::Type::CUDA ? policy.cuda : policy.cpu;
}

// One input cast to `target` for autocast: a recorded op, so gradients flow back through it in
// the input's own dtype. A float32 weight cast to the lower precision comes from the cache.
Tensor autocast_cast(const Tensor& t, DType target, DType lower) {
  const bool cacheable = target == lower && t.dtype() == kFloat32 && t.requires_grad() &&
                         t.is_leaf() && t_autocast_cache_enabled;
  if (!cacheable) return t.to(target);
  const std::shared_ptr<AutogradMeta>& meta = t.autograd_meta();
  auto it = t_cast_cache.find(meta.get());
  if (it != t_cast_cache.end() && it->second.source.lock() == meta &&
      it->second.cast.dtype() == target)
    return it->second.cast;
  Tensor cast = t.to(target);
  t_cast_cache[meta.get()] = CachedCast{meta, cast};
  return cast;
}

// Autocast's casts of an op's inputs, as its class asks. Float64 is never cast, as in PyTorch.
void apply_autocast(AutocastPolicy policy, Device device, std::array<Tensor, 3>& cast,
                    std::array<const Tensor*, 3>& in, int n) {
  const AutocastState& s = t_autocast[static_cast<int>(device.type)];
  const AutocastClass cls = class_on(policy, device.type);
  if (cls == AutocastClass::None || !s.enabled) return;
  auto eligible = [](const Tensor& t) { return is_floating(t.dtype()) && t.dtype() != kFloat64; };
  std::optional<DType> target;
  if (cls == AutocastClass::LowerPrecision) target = s.dtype;
  if (cls == AutocastClass::Float32) target = kFloat32;
  if (cls == AutocastClass::Promote)
    for (int k = 0; k < n; ++k)
      if (in[k]->defined() && eligible(*in[k]))
        target = target ? promote_types(*target, in[k]->dtype()) : in[k]->dtype();
  if (!target) return;
  for (int k = 0; k < n; ++k) {
    if (!in[k]->defined() || !eligible(*in[k]) || in[k]->dtype() == *target) continue;
    cast[k] = autocast_cast(*in[k], *target, s.dtype);
    in[k] = &cast[k];
  }
}

// What the node of an op needs from its inputs, taken from its row in the derivatives table:
// their edges, and the tensors its formula keeps. An in-place op takes them before it writes,
// since it overwrites its first input; if the formula needs that input's old value, it keeps a
// copy of it (PyTorch's original_self).
struct NodeInputs {
  std::vector<Edge> edges;
  std::vector<Tensor> inputs;  // for their shapes and dtypes
  std::array<SavedTensor, 3> saved;
  std::array<bool, 3> needs{};  // which inputs need a gradient, and the same as bits
  uint8_t mask = 0;
};

NodeInputs take_node_inputs(const OpEntry& op, const std::array<const Tensor*, 3>& in, int n,
                            bool inplace) {
  const Derivative& d = *op.derivative;
  NodeInputs r;
  for (int k = 0; k < n; ++k) {
    r.needs[k] = in[k]->requires_grad();
    r.mask |= static_cast<uint8_t>(r.needs[k]) << k;
  }
  auto kept = [&r](uint8_t keep) { return (keep & kAlways) || (keep & r.mask); };
  for (int k = 0; k < n; ++k)
    if (kept(d.keep[k]))
      r.saved[k] = SavedTensor(inplace && k == 0 ? in[0]->detach().clone() : *in[k], op.info.node);
  r.edges.reserve(n);
  r.inputs.reserve(n);
  for (int k = 0; k < n; ++k) {
    r.edges.push_back(edge_for(*in[k]));
    r.inputs.push_back(*in[k]);
  }
  return r;
}

// Records the node of an op whose inputs need gradients, from its row in the derivatives table:
// a new grad_fn for `out`, or, for an in-place op, the newest step of the history of the tensor
// it wrote.
void record_from_table(const Tensor& out, const OpEntry& op, NodeInputs r,
                       const ops::Scalars& scalars, bool inplace) {
  const Derivative& d = *op.derivative;
  const bool keep_result = (d.keep_result & kAlways) || (d.keep_result & r.mask);
  SavedTensor saved_result(keep_result ? out : Tensor(), op.info.node, /*is_output=*/true);
  const double numel = static_cast<double>(out.numel());
  const int n = static_cast<int>(r.inputs.size());
  double backward_flops = 0;
  for (int k = 0; k < n; ++k) backward_flops += r.needs[k] ? d.flops[k] * numel : 0;
  std::shared_ptr<Node> node = make_node(
      op.info.node, std::move(r.edges), r.inputs,
      [saved = std::move(r.saved), saved_result = std::move(saved_result), scalars, needs = r.needs,
       n, formula = d.formula](const Tensor& g) {
        BackwardArgs args{g,
                          {saved[0].unpack(), saved[1].unpack(), saved[2].unpack()},
                          saved_result.unpack(),
                          scalars,
                          needs};
        const std::array<Tensor, 3> grads = formula(args);
        return std::vector<Tensor>(grads.begin(), grads.begin() + n);
      },
      op.info.flops * numel, backward_flops);
  if (inplace) {
    rebase_history(out, std::move(node));
  } else {
    AutogradMeta& meta = out.ensure_autograd_meta();
    meta.requires_grad = true;
    detail::set_grad_fn(meta, std::move(node));
  }
}

}  // namespace

Device op_device(const char* op, std::initializer_list<const Tensor*> inputs) {
  return common_device(op, inputs.begin(), static_cast<int>(inputs.size()));
}

DType result_type(std::initializer_list<const Tensor*> tensors,
                  std::initializer_list<std::optional<Scalar>> numbers) {
  Promotion p;
  for (const Tensor* t : tensors) p.add(*t);
  for (const auto& s : numbers)
    if (s) p.add(*s);
  return p.result();
}

bool can_cast(DType from, DType to) {
  if (is_floating(from) && !is_floating(to)) return false;  // a float into an integer or bool
  if (from != kBool && to == kBool) return false;           // a number into bool
  return true;
}

bool check_inplace_autograd(const Tensor& self, const Tensor* const* sources, int n) {
  if (!grad_mode_enabled()) return false;
  bool requires_grad = self.requires_grad();
  for (int k = 0; k < n; ++k) requires_grad |= sources[k]->requires_grad();
  if (!requires_grad) return false;
  // PyTorch's checks, in its order: a view made with grad mode off, a view of a leaf that
  // requires grad, and the leaf itself (an optimizer's update runs with grad mode off instead).
  // PyTorch names a view recorded in grad mode (of a view made with it off) by its node.
  auto made_without_grad = [](const Node* fn) {
    return RuntimeError(
        (fn ? "Output 0 of " + op_name(fn->name()) + " is a view of a view which was created in"
            : std::string("A view was created in")) +
        " no_grad mode and is being modified inplace with grad mode enabled. Given that this "
        "use case is ambiguous and error-prone, it is forbidden. You can clarify your code by "
        "moving both the view and the inplace either both inside the no_grad block (if you "
        "don't want the inplace to be tracked) or both outside (if you want the inplace to be "
        "tracked).");
  };
  if (self.made_without_grad()) throw made_without_grad(nullptr);
  if (self.is_view()) {
    const AutogradMeta& view = *self.autograd_meta();
    if (view.view_made_without_grad) throw made_without_grad(view.grad_fn.get());
    if (self.requires_grad() && view.view_base.is_leaf())
      throw RuntimeError(
          "a view of a leaf Variable that requires grad is being used in an in-place operation.");
  }
  if (self.requires_grad() && self.is_leaf())
    throw RuntimeError(
        "a leaf Variable that requires grad is being used in an in-place operation.");
  return true;
}

void check_no_internal_overlap(const Tensor& self) {
  for (int64_t d = 0; d < self.dim(); ++d)
    if (self.stride(d) == 0 && self.size(d) > 1)
      throw RuntimeError(
          "unsupported operation: more than one element of the written-to tensor refers to a "
          "single memory location. Please clone() the tensor before performing the operation.");
}

bool non_overlapping_and_dense(const Tensor& t) {
  DimVector dims;
  for (int64_t d = 0; d < t.dim(); ++d)
    if (t.size(d) != 1) dims.push_back(d);
  std::sort(dims.begin(), dims.end(),
            [&](int64_t x, int64_t y) { return t.stride(x) < t.stride(y); });
  int64_t expected = 1;
  for (int64_t d : dims) {
    if (t.stride(d) != expected) return false;
    expected *= t.size(d);
  }
  return true;
}

void check_no_partial_overlap(const Tensor& out, const Tensor& input) {
  // Cheapest first: most inputs share nothing, and an in-place op's own tensor is the same view.
  if (!out.shares_storage_with(input) || same_view(out, input)) return;
  if (out.numel() == 0 || input.numel() == 0) return;
  if (!non_overlapping_and_dense(out) || !non_overlapping_and_dense(input)) return;
  // The byte ranges the two cover (dense: from the offset, nbytes long).
  const int64_t a = out.storage_offset() * out.element_size(), a_end = a + out.nbytes();
  const int64_t b = input.storage_offset() * input.element_size(), b_end = b + input.nbytes();
  const bool same = a == b && a_end == b_end && out.strides() == input.strides();
  if (!same && a < b_end && b < a_end)
    throw RuntimeError(
        "unsupported operation: some elements of the input tensor and the written-to tensor "
        "refer to a single memory location. Please clone() the tensor before performing the "
        "operation.");
}

Tensor autocast(const Tensor& t, AutocastPolicy policy) {
  std::array<Tensor, 3> cast;
  std::array<const Tensor*, 3> in = {&t, nullptr, nullptr};
  apply_autocast(policy, t.device(), cast, in, 1);
  return *in[0];
}

std::vector<Tensor> autocast(std::initializer_list<const Tensor*> inputs, AutocastPolicy policy) {
  std::vector<Tensor> out;
  out.reserve(inputs.size());
  for (const Tensor* t : inputs) out.push_back(t->defined() ? autocast(*t, policy) : Tensor());
  return out;
}

AutocastOff::AutocastOff() {
  for (int d = 0; d < kBackends; ++d) {
    saved_[d] = t_autocast[d].enabled;
    t_autocast[d].enabled = false;
  }
}

AutocastOff::~AutocastOff() {
  for (int d = 0; d < kBackends; ++d) t_autocast[d].enabled = saved_[d];
}

// ---- the dispatcher -----------------------------------------------------------------------------

Tensor run(const Call& c) {
  const OpEntry& op = *c.op;
  const int n = op.info.arity;
  const char* name = op.info.name;

  // 1. Devices: the inputs' and the destination's.
  std::array<const Tensor*, 4> all = {c.inputs[0], c.inputs[1], c.inputs[2], nullptr};
  int with_out = n;
  if (c.out && !c.inplace) all[with_out++] = c.out;
  const Device device = common_device(name, all.data(), with_out);

  // 2. Autocast.
  std::array<const Tensor*, 3> in = c.inputs;
  std::array<Tensor, 3> cast;
  apply_autocast({AutocastClass::None, op.info.autocast}, device, cast, in, n);

  // 3. Dtypes.
  Promotion promotion;
  for (int k = 0; k < n; ++k) promotion.add(*in[k]);
  for (const auto& s : c.numbers)
    if (s) promotion.add(*s);
  DType compute = promotion.result();
  const DTypeRule rule = op.info.dtype_rule;
  if (rule == DTypeRule::IntegerToFloat && !is_floating(compute)) compute = kFloat32;
  if (compute == kBool && op.bool_error) throw NotImplementedError(op.bool_error);
  const OpEntry& kernel = c.kernel ? *c.kernel : op;
  for (const OpEntry* e : {&op, &kernel}) {
    const bool ok = e->types == ops::Types::All ||
                    (e->types == ops::Types::NoBool && compute != kBool) || is_floating(compute);
    if (!ok) throw not_implemented_for(op.kernel_name, compute);
  }
  const DType result = rule == DTypeRule::Compare ? kBool : compute;

  // 4. The destination.
  Shape broadcast;
  const Shape* shape_of_result = &in[0]->shape();
  for (int k = 1; k < n; ++k)
    if (in[k]->shape() != *shape_of_result)
      shape_of_result = &(broadcast = broadcast_shapes(*shape_of_result, in[k]->shape()));
  const Shape& shape = *shape_of_result;
  Tensor fresh;  // the result, when it needs memory of its own
  const Tensor* dst = &fresh;
  std::optional<NodeInputs> inplace_node;  // an in-place write the tape must follow
  if (c.out) {
    const Tensor& o = *c.out;
    // A 0-dim CPU destination is not a number: it must be where the op runs.
    if (!(o.device() == device))
      throw RuntimeError(
          "Expected all tensors to be on the same device, but found at least two devices, " +
          device.str() + " and " + o.device().str() + "!");
    if (o.shape() != shape) {
      if (c.inplace)
        throw RuntimeError("output with shape " + shape_str(o.shape()) +
                           " doesn't match the broadcast shape " + shape_str(shape));
      throw RuntimeError(std::string(name) + "(): the out= tensor has shape " +
                         shape_str(o.shape()) + ", but the result has shape " + shape_str(shape) +
                         " (this library does not resize out= tensors)");
    }
    if (!can_cast(result, o.dtype()))
      throw RuntimeError(std::string("result type ") + dtype_legacy_name(result) +
                         " can't be cast to the desired output type " +
                         dtype_legacy_name(o.dtype()));
    bool record_inplace = false;
    if (c.inplace) {
      record_inplace = check_inplace_autograd(o, in.data() + 1, n - 1);
      if (record_inplace && !op.derivative)
        throw RuntimeError(std::string("the derivative for '") + name + "' is not implemented.");
    } else if (grad_mode_enabled()) {
      bool any = o.requires_grad();
      for (int k = 0; k < n; ++k) any |= in[k]->requires_grad();
      if (any)
        throw RuntimeError(std::string(name) +
                           "(): functions with out=... arguments don't support automatic "
                           "differentiation, but one of the arguments requires grad.");
    }
    check_no_internal_overlap(o);
    for (int k = 0; k < n; ++k)  // (an in-place op's own tensor is `o` itself: nothing to check)
      if (in[k] != &o) check_no_partial_overlap(o, *in[k]);
    if (record_inplace) inplace_node = take_node_inputs(op, in, n, /*inplace=*/true);
    o.storage()->bump_version();
    if (o.dtype() == result) dst = &o;
    else fresh = empty(shape, result, device);
  } else {
    fresh = empty(shape, result, device);
  }

  // 5. The cost: each input read once, the output written once.
  if (!t_counters.empty()) {
    double bytes = static_cast<double>(dst->nbytes());
    for (int k = 0; k < n; ++k) bytes += static_cast<double>(in[k]->nbytes());
    count_op_cost(op.info.flops * static_cast<double>(dst->numel()), bytes);
  }

  // 6. The kernel, on inputs in the compute dtype. An input that shares memory with the
  // destination in another layout is copied first, so no element is overwritten before it is read.
  {
    NoGradGuard plain;  // the conversions are not part of the graph; the op is, below
    const fusion::Tracer::Pause part_of_the_op;  // nor of a traced one
    std::array<Tensor, 3> converted;
    std::array<const Tensor*, 3> args = in;
    for (int k = 0; k < n; ++k) {
      if (in[k]->dtype() != compute) args[k] = &(converted[k] = in[k]->to(compute));
      if (c.out && args[k]->shares_storage_with(*dst) && !same_view(*args[k], *dst))
        args[k] = &(converted[k] = args[k]->clone());
    }
    const ElementwiseKernel run = kernel.kernels[static_cast<int>(device.type)];
    if (recording()) [[unlikely]] {
      // A CPUGraph keeps the kernel with its own handles to the tensors it reads and writes.
      std::array<Tensor, 3> kept;
      for (int k = 0; k < n; ++k) kept[k] = *args[k];
      record_kernel(device, [run, out = *dst, kept, scalars = c.scalars] {
        const std::array<const Tensor*, 3> inputs{&kept[0], &kept[1], &kept[2]};
        run(out, inputs.data(), scalars);
      });
      const HostScope running;
      run(*dst, args.data(), c.scalars);
    } else {
      run(*dst, args.data(), c.scalars);
    }
    if (c.out && dst != c.out) launch(backend(device).copy, *c.out, *dst);
  }
  // compile() (chapter 09) listens here while it traces a function.
  if (fusion::Tracer* tracer = fusion::Tracer::active())
    tracer->on_op(c, in, compute, c.out ? *c.out : fresh);
  // 7. The autograd node: for an in-place op, the newest step of the written tensor's history.
  if (inplace_node) record_from_table(*c.out, op, std::move(*inplace_node), c.scalars, true);
  if (c.out) return c.inplace ? Tensor() : *c.out;
  if (op.derivative && grad_mode_enabled()) {
    bool any = false;
    for (int k = 0; k < n; ++k) any |= in[k]->requires_grad();
    if (any) record_from_table(fresh, op, take_node_inputs(op, in, n, false), c.scalars, false);
  }
  return fresh;
}

}  // namespace detail
}  // namespace tiny
