// nn.cpp: the module tree (registration, naming, state_dict, moving) and the layers.
#include "tiny/nn.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "tiny/autograd.h"
#include "tiny/checkpoint.h"
#include "tiny/error.h"
#include "tiny/format.h"
#include "tiny/functional.h"
#include "tiny/init.h"
#include "tiny/ops.h"
#include "internal.h"

namespace tiny::nn {

Tensor Parameter(const Tensor& data, bool requires_grad) {
  if (!data.defined()) throw ValueError("Parameter: the data tensor is undefined");
  if (requires_grad && !is_floating(data.dtype()))
    throw RuntimeError("Only Tensors of floating point and complex dtype can require gradients");
  Tensor leaf = data.detach();
  leaf.requires_grad_(requires_grad);
  leaf.storage()->set_role(MemoryCategory::weights);  // its bytes count as weights (allocator.h)
  return leaf;
}

Module::Module(std::string type_name) : type_name_(std::move(type_name)) {}

Tensor Module::forward(const Tensor&) {
  throw NotImplementedError("Module [" + type_name_ +
                            "] is missing the required \"forward\" function");
}

// PyTorch's checks, in its order: a name must be a plain attribute name, and one a child holds
// cannot name a parameter (nor the other way round); registering a name again under its own kind
// replaces the entry, as assigning the attribute again does in Python.
void Module::check_new_name(const std::string& name, const char* kind) const {
  auto taken = [&](const auto& list) {
    return std::any_of(list.begin(), list.end(), [&](const auto& e) { return e.first == name; });
  };
  const bool is_module = std::string(kind) == "module";
  if (is_module ? taken(params_) : taken(children_))
    throw KeyError("attribute '" + name + "' already exists");
  if (name.find('.') != std::string::npos)
    throw KeyError(std::string(kind) + " name can't contain \".\"" +
                   (is_module ? ", got: " + name : std::string()));
  if (name.empty()) throw KeyError(std::string(kind) + " name can't be empty string \"\"");
}

template <typename Entry, typename Value>
static void add_or_replace(std::vector<std::pair<std::string, Entry>>& list,
                           const std::string& name, Value&& value) {
  for (auto& e : list)
    if (e.first == name) {
      e.second = std::forward<Value>(value);
      return;
    }
  list.emplace_back(name, std::forward<Value>(value));
}

void Module::register_parameter(const std::string& name, Tensor* slot) {
  check_new_name(name, "parameter");
  if (slot == nullptr) throw ValueError("register_parameter: null slot for '" + name + "'");
  add_or_replace(params_, name, slot);
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> child) {
  check_new_name(name, "module");
  if (!child) throw TypeError("register_module: '" + name + "' is not a Module (null)");
  add_or_replace(children_, name, std::move(child));
}

// Depth first, own parameters before the children's, as PyTorch's named_parameters walks. A
// tensor reachable twice (a shared layer) is reported once, under its first name.
void Module::collect(const std::string& prefix, std::vector<std::pair<std::string, Tensor*>>& out,
                     std::vector<const Tensor*>& seen) const {
  for (const auto& param : params_) {
    // Not a structured binding: clang before 16 cannot capture one in the lambda below.
    const auto& name = param.first;
    const auto& slot = param.second;
    if (!slot->defined()) continue;
    const bool dup = std::any_of(seen.begin(), seen.end(), [&](const Tensor* s) {
      return s == slot || (s->autograd_meta() && s->autograd_meta() == slot->autograd_meta());
    });
    if (dup) continue;
    seen.push_back(slot);
    out.emplace_back(prefix + name, slot);
  }
  for (const auto& [name, child] : children_) child->collect(prefix + name + ".", out, seen);
}

std::vector<std::pair<std::string, Tensor*>> Module::parameter_slots() {
  std::vector<std::pair<std::string, Tensor*>> out;
  std::vector<const Tensor*> seen;
  collect("", out, seen);
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_parameters() const {
  std::vector<std::pair<std::string, Tensor*>> slots;
  std::vector<const Tensor*> seen;
  collect("", slots, seen);
  std::vector<std::pair<std::string, Tensor>> out;
  out.reserve(slots.size());
  for (auto& [name, slot] : slots) out.emplace_back(name, *slot);
  return out;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& [name, t] : named_parameters()) out.push_back(t);
  return out;
}

std::vector<std::pair<std::string, std::shared_ptr<Module>>> Module::named_children() const {
  return children_;
}

int64_t Module::num_parameters() const {
  int64_t n = 0;
  for (const auto& [name, t] : named_parameters()) n += t.numel();
  return n;
}

StateDict Module::state_dict() const {
  StateDict out;
  for (const auto& [name, t] : named_parameters()) out.emplace_back(name, t.detach());
  return out;
}

void Module::load_state_dict(const StateDict& state, bool strict) {
  // The names and shapes are checked as a checkpoint's are (checkpoint.h), with PyTorch's
  // message; the dtype may differ, since the copy converts it.
  auto slots = parameter_slots();
  std::vector<TensorSpec> expected;
  for (const auto& [name, slot] : slots) expected.push_back({name, slot->shape(), std::nullopt});
  check_tensors(state, expected, type_name_, strict);
  NoGradGuard no_grad;
  for (const auto& entry : state) {
    const std::string& name = entry.first;  // captured below: no structured binding (clang < 16)
    const Tensor& t = entry.second;
    auto it =
        std::find_if(slots.begin(), slots.end(), [&](const auto& s) { return s.first == name; });
    if (it != slots.end()) it->second->copy_(t);
  }
}

Module& Module::to(Device device) {
  for (auto& [name, slot] : parameter_slots()) {
    if (slot->device() == device) continue;
    const bool grad = slot->requires_grad();
    *slot = Parameter(slot->detach().to(device), grad);
  }
  return *this;
}

Module& Module::to(DType dtype) {
  if (!is_floating(dtype))
    throw TypeError(
        std::string("nn.Module.to only accepts floating point or complex dtypes, but got desired "
                    "dtype=torch.") +
        dtype_name(dtype));
  for (auto& [name, slot] : parameter_slots()) {
    if (slot->dtype() == dtype) continue;
    const bool grad = slot->requires_grad();
    *slot = Parameter(slot->detach().to(dtype), grad);
  }
  return *this;
}

Module& Module::train(bool on) {
  training_ = on;
  for (auto& [name, child] : children_) child->train(on);
  return *this;
}

void Module::zero_grad(bool set_to_none) { tiny::zero_grad(parameters(), set_to_none); }

std::string Module::repr() const {
  if (children_.empty()) return type_name_ + "(" + extra_repr() + ")";
  std::string s = type_name_ + "(";
  const std::string extra = extra_repr();
  if (!extra.empty()) s += "\n  " + extra;
  for (const auto& [name, child] : children_) {
    std::string body = child->repr();
    std::string indented;  // every line of a child after its first moves two spaces right
    for (char c : body) {
      indented += c;
      if (c == '\n') indented += "  ";
    }
    s += "\n  (" + name + "): " + indented;
  }
  return s + "\n)";
}

// ---- layers ---------------------------------------------------------------------------------

Linear::Linear(int64_t in, int64_t out, bool with_bias, DType dtype, Generator& gen)
    : Module("Linear"), in_features(in), out_features(out) {
  if (in < 0 || out < 0)
    throw RuntimeError("Trying to create tensor with negative dimension " +
                       std::to_string(std::min(in, out)) + ": [" + std::to_string(out) + ", " +
                       std::to_string(in) + "]");
  // An integer dtype fails where PyTorch's does: making the weight a Parameter.
  weight = Parameter(empty({out, in}, dtype));
  register_parameter("weight", &weight);
  if (with_bias) bias = Parameter(empty({out}, dtype));
  register_parameter("bias", &bias);
  // nn.Linear.reset_parameters: the weight first, then the bias, from one generator.
  init::kaiming_uniform_(weight, std::sqrt(5.0), init::FanMode::FanIn, "leaky_relu", gen);
  if (with_bias) {
    const double bound = in > 0 ? 1.0 / std::sqrt(static_cast<double>(in)) : 0.0;
    init::uniform_(bias, -bound, bound, gen);
  }
}

Tensor Linear::forward(const Tensor& x) { return linear(x, weight, bias); }

std::string Linear::extra_repr() const {
  return "in_features=" + std::to_string(in_features) +
         ", out_features=" + std::to_string(out_features) +
         ", bias=" + (bias.defined() ? "True" : "False");
}

XavierLinear::XavierLinear(int64_t input_dim, int64_t output_dim, Generator& gen)
    : Module("XavierLinear") {
  weight = Parameter(randn({input_dim, output_dim}, kFloat32, gen) /
                     std::sqrt(static_cast<double>(input_dim)));
  register_parameter("weight", &weight);
}

Tensor XavierLinear::forward(const Tensor& x) { return matmul(x, weight); }

ModuleList& ModuleList::append(std::shared_ptr<Module> module) {
  register_module(std::to_string(items_.size()), module);
  items_.push_back(std::move(module));
  return *this;
}

const std::shared_ptr<Module>& ModuleList::operator[](int64_t i) const {
  const int64_t n = size();
  if (i < -n || i >= n) throw IndexError("index " + std::to_string(i) + " is out of range");
  return items_[static_cast<size_t>(i < 0 ? i + n : i)];
}

Sequential::Sequential(std::vector<std::shared_ptr<Module>> modules) : Module("Sequential") {
  for (auto& m : modules) append(std::move(m));
}

Sequential& Sequential::append(std::shared_ptr<Module> module) {
  register_module(std::to_string(items_.size()), module);
  items_.push_back(std::move(module));
  return *this;
}

Tensor Sequential::forward(const Tensor& input) {
  Tensor x = input;
  for (auto& m : items_) x = m->forward(x);
  return x;
}

Tensor ReLU::forward(const Tensor& input) { return relu(input); }
Tensor GELU::forward(const Tensor& input) { return gelu(input); }

Cruncher::Cruncher(int64_t dim, int64_t num_layers, Generator& gen) : Module("Cruncher") {
  if (dim <= 0 || num_layers < 0)
    throw ValueError("Cruncher: dim must be positive and num_layers non-negative, got dim=" +
                     std::to_string(dim) + ", num_layers=" + std::to_string(num_layers));
  layers = register_module("layers", std::make_shared<ModuleList>());
  for (int64_t i = 0; i < num_layers; ++i)
    layers->append(std::make_shared<XavierLinear>(dim, dim, gen));
  final = register_module("final", std::make_shared<XavierLinear>(dim, 1, gen));
}

Tensor Cruncher::forward(const Tensor& input) {
  if (input.dim() != 2)
    throw RuntimeError("Cruncher expects a (B, D) input, got " + std::to_string(input.dim()) +
                       " dimensions");
  Tensor x = input;
  for (const auto& layer : *layers) x = layer->forward(x);  // (B, D)
  x = final->forward(x);                                    // (B, 1)
  return x.squeeze(-1);                                     // (B,)
}

}  // namespace tiny::nn
