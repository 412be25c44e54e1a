// optim.cpp: parameter groups, per-parameter state, state_dict, and each optimizer's step. The
// element math of every update is optim_math.h's; this file computes the per-step numbers (bias
// corrections, decayed learning rates) in double, as PyTorch's Python code does, and hands each
// parameter to its device's backend.
#include "tiny/optim.h"

#include <algorithm>
#include <cmath>

#include "backend.h"
#include "capture_internal.h"
#include "internal.h"
#include "memory_internal.h"
#include "tiny/autograd.h"
#include "tiny/memory.h"
#include "tiny/error.h"
#include "tiny/format.h"

namespace tiny::optim {

// ---- settings -----------------------------------------------------------------------------

namespace {

// Marks a tensor an optimizer keeps as optimizer state, for the memory accounting.
Tensor as_state(Tensor t) {
  t.storage()->set_role(MemoryCategory::optimizer_state);
  return t;
}

// The library's optimizers run step() inside one: a memory timeline's samples meanwhile are in
// the phase "optimizer step", and one more, named after the optimizer, is taken at the end.
struct StepPhase {
  const std::string& name;
  MemoryPhase phase{"optimizer step"};
  explicit StepPhase(const std::string& n) : name(n) {}
  ~StepPhase() { detail::timeline_sample(name.c_str()); }
  StepPhase(const StepPhase&) = delete;
  StepPhase& operator=(const StepPhase&) = delete;
};

std::string value_repr(const Value& v) {
  if (const bool* b = std::get_if<bool>(&v)) return *b ? "True" : "False";
  if (const double* d = std::get_if<double>(&v)) return tiny::repr(*d);
  const auto& p = std::get<std::array<double, 2>>(v);
  return "(" + tiny::repr(p[0]) + ", " + tiny::repr(p[1]) + ")";
}

const Value& lookup(const Settings& s, const std::string& name) {
  auto it = s.find(name);
  if (it == s.end()) throw ValueError("parameter group has no setting '" + name + "'");
  return it->second;
}

// Which tensor a parameter is: the autograd record every handle to it shares (parameters
// require grad, so they have one).
const void* identity(const Tensor& t) { return t.autograd_meta().get(); }

}  // namespace

double ParamGroup::number(const std::string& name) const {
  const Value& v = lookup(settings, name);
  if (const double* d = std::get_if<double>(&v)) return *d;
  throw ValueError("setting '" + name + "' is not a number: " + value_repr(v));
}

bool ParamGroup::flag(const std::string& name) const {
  const Value& v = lookup(settings, name);
  if (const bool* b = std::get_if<bool>(&v)) return *b;
  throw ValueError("setting '" + name + "' is not True or False: " + value_repr(v));
}

std::array<double, 2> ParamGroup::pair(const std::string& name) const {
  const Value& v = lookup(settings, name);
  if (const auto* p = std::get_if<std::array<double, 2>>(&v)) return *p;
  throw ValueError("setting '" + name + "' is not a pair: " + value_repr(v));
}

void ParamGroup::set(const std::string& name, Value value) {
  const Value& old = lookup(settings, name);
  if (old.index() != value.index())
    throw ValueError("setting '" + name + "' changes kind: " + value_repr(old) + " -> " +
                     value_repr(value));
  settings[name] = value;
}

// ---- the base -----------------------------------------------------------------------------

Optimizer::Optimizer(std::string name, std::vector<GroupSpec> groups, Settings defaults)
    : name_(std::move(name)), defaults_(std::move(defaults)) {
  const bool empty = std::all_of(groups.begin(), groups.end(),
                                 [](const GroupSpec& g) { return g.params.empty(); });
  if (groups.empty() || empty) throw ValueError("optimizer got an empty parameter list");
  pending_ = std::move(groups);
}

void Optimizer::add_param_group(GroupSpec spec) {
  for (const auto& [key, value] : spec.settings) {
    auto it = defaults_.find(key);
    if (it == defaults_.end()) {
      std::string known;
      for (const auto& [k, v] : defaults_) known += (known.empty() ? "" : ", ") + k;
      throw ValueError(name_ + " has no setting '" + key + "' (its settings: " + known + ")");
    }
    if (it->second.index() != value.index())
      throw ValueError(name_ + ": setting '" + key + "' must be like " + value_repr(it->second) +
                       ", got " + value_repr(value));
  }
  ParamGroup group{{}, defaults_};
  for (const auto& [key, value] : spec.settings) group.settings[key] = value;
  check(group.settings);
  for (const Tensor& p : spec.params) {
    if (!p.defined()) throw ValueError("optimizer got an undefined tensor as a parameter");
    if (!p.is_leaf()) throw ValueError("can't optimize a non-leaf Tensor");
    // A tiny Tensor is a handle: the optimizer sees the gradient a user's handle receives only
    // through the autograd record they share, which exists once requires_grad_() was called.
    // (PyTorch accepts such a tensor and skips it while its grad is None; here that would skip it
    // silently forever.)
    if (!p.requires_grad())
      throw ValueError(
          "optimizer got a tensor that does not require grad: make it a parameter "
          "(nn::Parameter or requires_grad_()) or leave it out");
    if (!is_floating(p.dtype()))
      throw ValueError(std::string("optimizer can only optimize floating point Tensors, got ") +
                       dtype_name(p.dtype()));
    const void* id = identity(p);
    for (const auto& g : groups_)
      for (const Tensor& q : g.params)
        if (identity(q) == id)
          throw ValueError("some parameters appear in more than one parameter group");
    for (const Tensor& q : group.params)
      if (identity(q) == id)
        throw ValueError("optimizer contains a parameter group with duplicate parameters");
    group.params.push_back(p);
  }
  // What an optimizer updates is a weight, whatever made it (accounting, allocator.h).
  for (const Tensor& p : group.params) p.storage()->set_role(MemoryCategory::weights);
  groups_.push_back(std::move(group));
  size_t total = 0;
  for (const auto& g : groups_) total += g.params.size();
  state_.resize(total);
}

void Optimizer::init_groups() {
  for (auto& spec : pending_) add_param_group(std::move(spec));
  pending_.clear();
}

void Optimizer::zero_grad(bool set_to_none) {
  for (const auto& g : groups_) tiny::zero_grad(g.params, set_to_none);
}

int64_t Optimizer::index_of(const Tensor& param) const {
  const void* id = identity(param);
  int64_t k = 0;
  for (const auto& g : groups_)
    for (const Tensor& p : g.params) {
      if (identity(p) == id) return k;
      ++k;
    }
  throw ValueError("the tensor is not a parameter of this optimizer");
}

std::map<std::string, Tensor>& Optimizer::state(const Tensor& param) {
  return state_[static_cast<size_t>(index_of(param))];
}

void Optimizer::check_grad(const Tensor& p, const Tensor& g) {
  if (g.shape() != p.shape())
    throw RuntimeError("the gradient's shape " + detail::shape_str(g.shape()) +
                       " does not match the parameter's " + detail::shape_str(p.shape()));
  if (g.dtype() != p.dtype())
    throw RuntimeError(std::string("the gradient's dtype ") + dtype_name(g.dtype()) +
                       " does not match the parameter's " + dtype_name(p.dtype()));
  if (g.device() != p.device())
    throw RuntimeError("the gradient is on " + g.device().str() + " but the parameter is on " +
                       p.device().str());
}

std::vector<Optimizer::Update> Optimizer::updates(size_t group) {
  size_t k = 0;  // the flat index of the group's first parameter
  for (size_t g = 0; g < group; ++g) k += groups_[g].params.size();
  std::vector<Update> out;
  for (const Tensor& p : groups_[group].params) {
    const Tensor grad = p.grad();
    if (grad.defined()) {
      check_grad(p, grad);
      out.push_back({p, grad, state_[k]});
    }
    ++k;
  }
  return out;
}

OptimizerState Optimizer::state_dict() const {
  OptimizerState out;
  int64_t k = 0;
  for (const auto& g : groups_) {
    std::vector<int64_t> indices;
    for (size_t i = 0; i < g.params.size(); ++i, ++k) {
      indices.push_back(k);
      if (!state_[static_cast<size_t>(k)].empty()) out.state[k] = state_[static_cast<size_t>(k)];
    }
    out.param_groups.emplace_back(g.settings, std::move(indices));
  }
  return out;
}

void Optimizer::load_state_dict(const OptimizerState& saved) {
  if (saved.param_groups.size() != groups_.size())
    throw ValueError("loaded state dict has a different number of parameter groups");
  for (size_t i = 0; i < groups_.size(); ++i)
    if (saved.param_groups[i].second.size() != groups_[i].params.size())
      throw ValueError(
          "loaded state dict contains a parameter group that doesn't match the size of optimizer's "
          "group");
  // Map the saved indices onto our parameters, group by group, and check everything before
  // changing anything, so that a bad state dict leaves the optimizer as it was.
  std::map<int64_t, const Tensor*> param_of;
  for (size_t i = 0; i < groups_.size(); ++i)
    for (size_t j = 0; j < groups_[i].params.size(); ++j)
      param_of[saved.param_groups[i].second[j]] = &groups_[i].params[j];
  for (size_t i = 0; i < groups_.size(); ++i) {
    for (const auto& [key, value] : saved.param_groups[i].first) {
      auto it = defaults_.find(key);
      if (it == defaults_.end() || it->second.index() != value.index())
        throw ValueError("loaded state dict has a setting " + name_ + " does not have: '" + key +
                         "'");
    }
    check(saved.param_groups[i].first);
  }
  std::vector<std::map<std::string, Tensor>> state(state_.size());
  for (const auto& [index, entries] : saved.state) {
    auto it = param_of.find(index);
    if (it == param_of.end())
      throw ValueError("loaded state dict has state for parameter " + std::to_string(index) +
                       ", which is in none of its parameter groups");
    const Tensor& p = *it->second;
    auto& dst = state[static_cast<size_t>(index_of(p))];
    for (const auto& [key, t] : entries) {
      if (!t.defined())
        throw ValueError("loaded state for parameter " + std::to_string(index) + ": '" + key +
                         "' is undefined");
      if (key == "step") {
        if (t.numel() != 1)
          throw ValueError("loaded state for parameter " + std::to_string(index) +
                           ": 'step' must hold one number, it has " + std::to_string(t.numel()));
        dst[key] = as_state(t.detach().to(kFloat32).cpu().clone());
        continue;
      }
      if (t.shape() != p.shape())
        throw ValueError("loaded state for parameter " + std::to_string(index) + ": '" + key +
                         "' has shape " + detail::shape_str(t.shape()) +
                         " but the parameter has shape " + detail::shape_str(p.shape()));
      Tensor copy = empty(p.shape(), is_floating(t.dtype()) ? p.dtype() : t.dtype(), p.device());
      copy.copy_(t.detach());
      dst[key] = as_state(copy);
    }
  }
  for (size_t i = 0; i < groups_.size(); ++i)
    for (const auto& [key, value] : saved.param_groups[i].first) groups_[i].settings[key] = value;
  state_ = std::move(state);
}

std::string Optimizer::repr() const {
  std::string s = name_ + " (";
  for (size_t i = 0; i < groups_.size(); ++i) {
    if (i) s += "\n";
    s += "\nParameter Group " + std::to_string(i);
    for (const auto& [key, value] : groups_[i].settings)
      s += "\n    " + key + ": " + value_repr(value);
  }
  return s + "\n)";
}

// ---- the steps ----------------------------------------------------------------------------

namespace {

// Whether a missing entry may be made: PyTorch's Adam, AdamW, RMSprop and Adagrad make a
// parameter's whole state at once, when it has none, and a state that has some entries but lacks
// one (a state dict edited by hand) raises KeyError with the key at the step. SGD's momentum
// buffer is made whenever it is missing.
enum class Missing { Make, MakeIfEmpty };

// A state tensor of `param`'s shape, dtype and device, created on first use with `fill`.
// `empty`: whether the state had no entries when this step began (for Missing::MakeIfEmpty).
Tensor& state_tensor(std::map<std::string, Tensor>& state, const std::string& key,
                     const Tensor& param, double fill = 0.0, Missing missing = Missing::Make,
                     bool empty = true) {
  auto it = state.find(key);
  if (it == state.end()) {
    if (missing == Missing::MakeIfEmpty && !empty) throw KeyError("'" + key + "'");
    // Made once: a CPUGraph capturing the first step must not refill it at every replay.
    const detail::HostScope once;
    return state[key] = as_state(full(param.shape(), fill, param.dtype(), param.device()));
  }
  Tensor& t = it->second;
  // A user may have replaced a state tensor: the kernel reads numel() elements of each, so
  // anything else would read out of bounds.
  if (t.shape() != param.shape() || t.dtype() != param.dtype() || t.device() != param.device() ||
      !t.is_contiguous())
    throw RuntimeError("optimizer state '" + key + "' does not match its parameter (shape " +
                       detail::shape_str(t.shape()) + " vs " + detail::shape_str(param.shape()) +
                       ", or its dtype, device or layout)");
  return t;
}

// The float32 step counter of a parameter's state, made at 0 on its first step. It is a
// one-element CPU tensor (as in PyTorch 1.13 and 2.x, which keep it a tensor so that it can be
// saved with the rest of the state), counted by ParamUpdate below.
const Tensor& step_counter(std::map<std::string, Tensor>& state, bool empty = true) {
  auto it = state.find("step");
  if (it == state.end()) {
    if (!empty) throw KeyError("'step'");
    const detail::HostScope once;  // as state_tensor's: never reset by a CPUGraph's replays
    it = state.emplace("step", as_state(scalar_tensor(0.0, kFloat32))).first;
  }
  const Tensor& t = it->second;
  if (t.dtype() != kFloat32 || !t.device().is_cpu() || t.numel() != 1)
    throw RuntimeError("optimizer state 'step' must be one float32 number on the CPU");
  return t;
}

// The numbers of a step that depend on its count (Adam's bias corrections, Adagrad's decayed
// learning rate), computed from the count in double the way torch/optim computes them.
using StepNumbers = void (*)(detail::UpdateArgs& args, double step);

// One parameter's update, everything that must happen at every step: add one to the step
// counter (`step_t += 1`), compute the numbers that depend on it, run the fused kernel, mark
// the written tensors changed. It runs as a host step (capture_internal.h): eagerly it just
// runs, and a CPUGraph that captures an optimizer step keeps it and runs it again at each
// replay, so a replayed step counts, and corrects its bias, as an eager one does. The settings
// and the memory are those of the step it was made for.
struct ParamUpdate {
  detail::UpdateArgs args;
  Tensor param, grad, counter;  // counter: undefined for the rules that keep none
  std::array<Tensor, 3> state;
  StepNumbers numbers = nullptr;

  void operator()() {
    if (counter.defined()) {
      float* count = static_cast<float*>(counter.data_ptr());
      *count += 1.0f;
      counter.storage()->bump_version();
      if (numbers) numbers(args, *count);
    }
    args.param = param.data_ptr();
    args.grad = grad.data_ptr();
    for (int k = 0; k < 3; ++k) args.state[k] = state[k].defined() ? state[k].data_ptr() : nullptr;
    detail::backend(param.device()).optimizer_update(args);
    args.first_step = false;  // SGD: from now on the momentum buffer exists
    param.storage()->bump_version();
    for (const Tensor& s : state)
      if (s.defined()) s.storage()->bump_version();
  }
};

// Runs one fused update of `param` on its device (see ParamUpdate), `counter` and `numbers`
// being the step counter and the numbers that follow from it, where the rule has them.
void run_update(const detail::UpdateArgs& args, const Tensor& param, const Tensor& grad,
                std::initializer_list<const Tensor*> state, const Tensor* counter = nullptr,
                StepNumbers numbers = nullptr) {
  if (!param.is_contiguous()) throw RuntimeError("optimizer step: parameters must be contiguous");
  detail::check_capture_device(param.device());  // a CPUGraph replays CPU work only
  ParamUpdate update{args, param, grad.contiguous(), counter ? *counter : Tensor(), {}, numbers};
  update.args.dtype = param.dtype();
  update.args.n = param.numel();
  update.args.device = param.device().index;
  int k = 0;
  for (const Tensor* s : state) update.state[k++] = s ? *s : Tensor();
  detail::host_step(std::move(update));
}

}  // namespace

// ---- SGD ------------------------------------------------------------------------------------

namespace {
Settings sgd_settings(const SGD::Options& o) {
  return {{"lr", o.lr},
          {"momentum", o.momentum},
          {"dampening", o.dampening},
          {"weight_decay", o.weight_decay},
          {"nesterov", o.nesterov},
          {"maximize", o.maximize}};
}
}  // namespace

SGD::SGD(std::vector<Tensor> params, Options o)
    : SGD(std::vector<GroupSpec>{{std::move(params)}}, o) {}
SGD::SGD(std::vector<GroupSpec> groups, Options o)
    : Optimizer("SGD", std::move(groups), sgd_settings(o)) {
  init_groups();
}

// The range checks are written `!(x >= 0)`, as PyTorch writes `not 0.0 <= x`, so that a NaN
// setting is refused too.
void SGD::check(const Settings& s) const {
  ParamGroup g{{}, s};
  if (!(g.number("lr") >= 0))
    throw ValueError("Invalid learning rate: " + tiny::repr(g.number("lr")));
  if (!(g.number("momentum") >= 0))
    throw ValueError("Invalid momentum value: " + tiny::repr(g.number("momentum")));
  if (!(g.number("weight_decay") >= 0))
    throw ValueError("Invalid weight_decay value: " + tiny::repr(g.number("weight_decay")));
  if (g.flag("nesterov") && (g.number("momentum") <= 0 || g.number("dampening") != 0))
    throw ValueError("Nesterov momentum requires a momentum and zero dampening");
}

void SGD::step() {
  const StepPhase phase(name());
  NoGradGuard no_grad;
  for (size_t g = 0; g < param_groups().size(); ++g) {
    const ParamGroup& group = param_groups()[g];
    detail::UpdateArgs a{};
    a.rule = detail::UpdateRule::Sgd;
    a.lr = group.number("lr");
    a.momentum = group.number("momentum");
    a.dampening = group.number("dampening");
    a.weight_decay = group.number("weight_decay");
    a.nesterov = group.flag("nesterov");
    a.maximize = group.flag("maximize");
    for (const Update& u : updates(g)) {
      const Tensor& p = u.param;
      const Tensor& grad = u.grad;
      auto& st = u.state;
      const Tensor* buf = nullptr;
      if (a.momentum != 0) {
        a.first_step = st.find("momentum_buffer") == st.end();
        buf = &state_tensor(st, "momentum_buffer", p);
      }
      run_update(a, p, grad, {buf});
    }
  }
}

// ---- Adagrad (PyTorch's) and AdaGrad (the documents') --------------------------------------------

namespace {
Settings adagrad_settings(const Adagrad::Options& o) {
  return {{"lr", o.lr},
          {"lr_decay", o.lr_decay},
          {"weight_decay", o.weight_decay},
          {"initial_accumulator_value", o.initial_accumulator_value},
          {"eps", o.eps},
          {"maximize", o.maximize}};
}
}  // namespace

Adagrad::Adagrad(std::vector<Tensor> params, Options o)
    : Adagrad(std::vector<GroupSpec>{{std::move(params)}}, o) {}
Adagrad::Adagrad(std::vector<GroupSpec> groups, Options o)
    : Optimizer("Adagrad", std::move(groups), adagrad_settings(o)) {
  init_groups();
  // PyTorch's Adagrad creates its state when it is built, not at the first step.
  for (const auto& group : param_groups())
    for (const Tensor& p : group.params) {
      auto& st = state(p);
      st["step"] = as_state(scalar_tensor(0.0, kFloat32));
      state_tensor(st, "sum", p, group.number("initial_accumulator_value"));
    }
}

void Adagrad::check(const Settings& s) const {
  ParamGroup g{{}, s};
  if (!(g.number("lr") >= 0))
    throw ValueError("Invalid learning rate: " + tiny::repr(g.number("lr")));
  if (!(g.number("lr_decay") >= 0))
    throw ValueError("Invalid lr_decay value: " + tiny::repr(g.number("lr_decay")));
  if (!(g.number("weight_decay") >= 0))
    throw ValueError("Invalid weight_decay value: " + tiny::repr(g.number("weight_decay")));
  if (!(g.number("initial_accumulator_value") >= 0))
    throw ValueError("Invalid initial_accumulator_value value: " +
                     tiny::repr(g.number("initial_accumulator_value")));
  if (!(g.number("eps") >= 0))
    throw ValueError("Invalid epsilon value: " + tiny::repr(g.number("eps")));
}

void Adagrad::step() {
  const StepPhase phase(name());
  NoGradGuard no_grad;
  for (size_t g = 0; g < param_groups().size(); ++g) {
    const ParamGroup& group = param_groups()[g];
    detail::UpdateArgs a{};
    a.rule = detail::UpdateRule::Adagrad;
    a.lr = group.number("lr");
    a.lr_decay = group.number("lr_decay");
    a.weight_decay = group.number("weight_decay");
    a.eps = group.number("eps");
    a.maximize = group.flag("maximize");
    for (const Update& u : updates(g)) {
      const Tensor& p = u.param;
      const Tensor& grad = u.grad;
      auto& st = u.state;
      const bool empty = st.empty();
      run_update(a, p, grad,
                 {&state_tensor(st, "sum", p, group.number("initial_accumulator_value"),
                                Missing::MakeIfEmpty, empty)},
                 &step_counter(st, empty), [](detail::UpdateArgs& args, double step) {
                   args.step_size = args.lr / (1 + (step - 1) * args.lr_decay);
                 });
    }
  }
}

AdaGrad::AdaGrad(std::vector<Tensor> params, Options o)
    : Optimizer("AdaGrad", std::vector<GroupSpec>{{std::move(params)}},
                Settings{{"lr", o.lr}, {"eps", o.eps}}) {
  init_groups();
}

void AdaGrad::check(const Settings& s) const {
  ParamGroup g{{}, s};
  if (!(g.number("lr") >= 0))
    throw ValueError("Invalid learning rate: " + tiny::repr(g.number("lr")));
  if (!(g.number("eps") >= 0))
    throw ValueError("Invalid epsilon value: " + tiny::repr(g.number("eps")));
}

void AdaGrad::step() {
  const StepPhase phase(name());
  NoGradGuard no_grad;
  for (size_t g = 0; g < param_groups().size(); ++g) {
    const ParamGroup& group = param_groups()[g];
    detail::UpdateArgs a{};
    a.rule = detail::UpdateRule::DocumentAdaGrad;
    a.lr = group.number("lr");
    a.eps = group.number("eps");
    for (const Update& u : updates(g))
      run_update(a, u.param, u.grad, {&state_tensor(u.state, "g2", u.param)});
  }
}

// ---- RMSprop --------------------------------------------------------------------------------

namespace {
Settings rmsprop_settings(const RMSprop::Options& o) {
  return {{"lr", o.lr},
          {"alpha", o.alpha},
          {"eps", o.eps},
          {"weight_decay", o.weight_decay},
          {"momentum", o.momentum},
          {"centered", o.centered},
          {"maximize", o.maximize}};
}
}  // namespace

RMSprop::RMSprop(std::vector<Tensor> params, Options o)
    : RMSprop(std::vector<GroupSpec>{{std::move(params)}}, o) {}
RMSprop::RMSprop(std::vector<GroupSpec> groups, Options o)
    : Optimizer("RMSprop", std::move(groups), rmsprop_settings(o)) {
  init_groups();
}

void RMSprop::check(const Settings& s) const {
  ParamGroup g{{}, s};
  if (!(g.number("lr") >= 0))
    throw ValueError("Invalid learning rate: " + tiny::repr(g.number("lr")));
  if (!(g.number("eps") >= 0))
    throw ValueError("Invalid epsilon value: " + tiny::repr(g.number("eps")));
  if (!(g.number("momentum") >= 0))
    throw ValueError("Invalid momentum value: " + tiny::repr(g.number("momentum")));
  if (!(g.number("weight_decay") >= 0))
    throw ValueError("Invalid weight_decay value: " + tiny::repr(g.number("weight_decay")));
  if (!(g.number("alpha") >= 0))
    throw ValueError("Invalid alpha value: " + tiny::repr(g.number("alpha")));
}

void RMSprop::step() {
  const StepPhase phase(name());
  NoGradGuard no_grad;
  for (size_t g = 0; g < param_groups().size(); ++g) {
    const ParamGroup& group = param_groups()[g];
    detail::UpdateArgs a{};
    a.rule = detail::UpdateRule::Rmsprop;
    a.lr = group.number("lr");
    a.alpha = group.number("alpha");
    a.eps = group.number("eps");
    a.weight_decay = group.number("weight_decay");
    a.momentum = group.number("momentum");
    a.centered = group.flag("centered");
    a.maximize = group.flag("maximize");
    for (const Update& u : updates(g)) {
      const Tensor& p = u.param;
      const Tensor& grad = u.grad;
      auto& st = u.state;
      const bool empty = st.empty();
      const Tensor* counter = &step_counter(st, empty);
      const Tensor* sq = &state_tensor(st, "square_avg", p, 0.0, Missing::MakeIfEmpty, empty);
      const Tensor* buf = a.momentum > 0 ? &state_tensor(st, "momentum_buffer", p, 0.0,
                                                         Missing::MakeIfEmpty, empty)
                                         : nullptr;
      const Tensor* ga =
          a.centered ? &state_tensor(st, "grad_avg", p, 0.0, Missing::MakeIfEmpty, empty) : nullptr;
      run_update(a, p, grad, {sq, ga, buf}, counter);
    }
  }
}

// ---- Adam and AdamW -------------------------------------------------------------------------

namespace {
template <typename O> Settings adam_settings(const O& o) {
  return {{"lr", o.lr},           {"betas", std::array<double, 2>{o.beta1, o.beta2}},
          {"eps", o.eps},         {"weight_decay", o.weight_decay},
          {"amsgrad", o.amsgrad}, {"maximize", o.maximize}};
}
Adam::Options adam_options(const AdamW::Options& o) {
  return {o.lr, o.beta1, o.beta2, o.eps, o.weight_decay, o.amsgrad, o.maximize};
}
}  // namespace

Adam::Adam(std::vector<Tensor> params, Options o)
    : Adam(std::vector<GroupSpec>{{std::move(params)}}, o) {}
Adam::Adam(std::vector<GroupSpec> groups, Options o) : Adam("Adam", std::move(groups), o) {}
Adam::Adam(std::string name, std::vector<GroupSpec> groups, Options o)
    : Optimizer(std::move(name), std::move(groups), adam_settings(o)) {
  init_groups();
}

void Adam::check(const Settings& s) const {
  ParamGroup g{{}, s};
  const auto betas = g.pair("betas");
  if (!(g.number("lr") >= 0))
    throw ValueError("Invalid learning rate: " + tiny::repr(g.number("lr")));
  if (!(g.number("eps") >= 0))
    throw ValueError("Invalid epsilon value: " + tiny::repr(g.number("eps")));
  if (!(betas[0] >= 0 && betas[0] < 1))
    throw ValueError("Invalid beta parameter at index 0: " + tiny::repr(betas[0]));
  if (!(betas[1] >= 0 && betas[1] < 1))
    throw ValueError("Invalid beta parameter at index 1: " + tiny::repr(betas[1]));
  if (!(g.number("weight_decay") >= 0))
    throw ValueError("Invalid weight_decay value: " + tiny::repr(g.number("weight_decay")));
}

void Adam::step() {
  const StepPhase phase(name());
  NoGradGuard no_grad;
  for (size_t g = 0; g < param_groups().size(); ++g) {
    const ParamGroup& group = param_groups()[g];
    detail::UpdateArgs a{};
    a.rule = decoupled_ ? detail::UpdateRule::AdamW : detail::UpdateRule::Adam;
    a.lr = group.number("lr");
    const auto betas = group.pair("betas");
    a.beta1 = betas[0];
    a.beta2 = betas[1];
    a.eps = group.number("eps");
    a.weight_decay = group.number("weight_decay");
    a.amsgrad = group.flag("amsgrad");
    a.maximize = group.flag("maximize");
    for (const Update& u : updates(g)) {
      const Tensor& p = u.param;
      const Tensor& grad = u.grad;
      auto& st = u.state;
      const bool empty = st.empty();
      const Tensor* m = &state_tensor(st, "exp_avg", p, 0.0, Missing::MakeIfEmpty, empty);
      const Tensor* v = &state_tensor(st, "exp_avg_sq", p, 0.0, Missing::MakeIfEmpty, empty);
      const Tensor* vmax =
          a.amsgrad ? &state_tensor(st, "max_exp_avg_sq", p, 0.0, Missing::MakeIfEmpty, empty)
                    : nullptr;
      run_update(a, p, grad, {m, v, vmax}, &step_counter(st, empty),
                 [](detail::UpdateArgs& args, double step) {
                   // In double, in the order torch/optim/adamw.py computes them.
                   const double bias_correction1 = 1 - std::pow(args.beta1, step);
                   const double bias_correction2 = 1 - std::pow(args.beta2, step);
                   args.step_size = args.lr / bias_correction1;
                   args.bias_correction2_sqrt = std::sqrt(bias_correction2);
                 });
    }
  }
}

AdamW::AdamW(std::vector<Tensor> params, Options o)
    : AdamW(std::vector<GroupSpec>{{std::move(params)}}, o) {}
AdamW::AdamW(std::vector<GroupSpec> groups, Options o)
    : Adam("AdamW", std::move(groups), adam_options(o)) {
  decoupled_ = true;
}

}  // namespace tiny::optim
