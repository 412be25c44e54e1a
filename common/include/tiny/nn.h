/// @file nn.h
/// @brief Modules: the objects that own a model's parameters, as torch.nn has them.
///
/// A Module is a tree. Each node registers its own parameters (leaf tensors that require grad)
/// and its child modules, in order; `named_parameters()` walks the tree and names every
/// parameter by its path (`layers.0.weight`), which is also the key it has in `state_dict()`.
/// That one naming rule is what lets an optimizer, a checkpoint and a memory report all talk
/// about "the same" tensor.
///
/// In PyTorch, `model.to(device)` swaps the data inside each Parameter object, so every handle
/// to it sees the move. A tiny Tensor is a handle without that extra indirection, so a module
/// registers the *address* of each parameter member and `to()` writes the moved tensor back
/// through it. Two consequences: a Module cannot be copied (the addresses would dangle), and an
/// optimizer must be built after the model has moved (PyTorch recommends the same order).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tiny/random.h"
#include "tiny/tensor.h"

namespace tiny::nn {

/// Tensors by dotted name, in registration order (PyTorch's OrderedDict).
using StateDict = std::vector<std::pair<std::string, Tensor>>;

/// A trainable leaf: `data`, detached from any graph, with requires_grad set (nn.Parameter).
Tensor Parameter(const Tensor& data, bool requires_grad = true);

/// The base of every module.
class Module {
 public:
  /// `type_name` is what the repr prints ("Linear", "Cruncher").
  explicit Module(std::string type_name);
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  /// The computation. The base raises PyTorch's NotImplementedError.
  virtual Tensor forward(const Tensor& input);
  /// forward(input), as `model(x)` reads in Python.
  Tensor operator()(const Tensor& input) { return forward(input); }

  /// Every parameter of this module and its descendants, named by path, each once.
  std::vector<std::pair<std::string, Tensor>> named_parameters() const;
  /// The same parameters without their names (what an optimizer takes).
  std::vector<Tensor> parameters() const;
  /// The direct children, in registration order.
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_children() const;
  /// The number of elements over all parameters.
  int64_t num_parameters() const;

  /// Every parameter by name, detached but sharing memory with the module (model.state_dict()).
  StateDict state_dict() const;
  /// Copies `state` into the parameters. With `strict`, a missing or unexpected name is an
  /// error; a wrong shape always is. The error lists every problem, as PyTorch's does. The
  /// copy converts dtype and device to the parameter's own.
  void load_state_dict(const StateDict& state, bool strict = true);

  /// Moves every parameter to `device`, keeping requires_grad; returns *this.
  Module& to(Device device);
  /// Converts every parameter to floating `dtype`, keeping requires_grad; returns *this.
  Module& to(DType dtype);
  /// Training mode on or off, for this module and its descendants (dropout-like modules read
  /// it; none of the ones here behave differently).
  Module& train(bool on = true);
  /// train(false).
  Module& eval() { return train(false); }
  /// True in training mode (the default).
  bool is_training() const { return training_; }
  /// Clears every parameter's gradient (to undefined, or to zeros).
  void zero_grad(bool set_to_none = true);

  /// PyTorch's module repr: `Name(extra)` for a leaf, children indented one per line.
  std::string repr() const;
  /// The text inside a leaf's parentheses (`in_features=3, out_features=4, bias=True`).
  virtual std::string extra_repr() const { return ""; }
  /// The name the repr prints ("Linear").
  const std::string& type_name() const { return type_name_; }

 protected:
  /// Registers the tensor member at `slot` (which must outlive the module: a member) under
  /// `name`. An undefined tensor (a bias turned off) is registered as absent. A name with a "."
  /// or empty, or a child's name, raises PyTorch's KeyError; a parameter's own name again
  /// replaces it.
  void register_parameter(const std::string& name, Tensor* slot);
  /// Registers a child module under `name` and returns it; the names are checked as
  /// register_parameter's are, and a child's own name again replaces that child.
  template <typename M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> child) {
    add_child(name, child);
    return child;
  }

 private:
  void add_child(const std::string& name, std::shared_ptr<Module> child);
  void collect(const std::string& prefix, std::vector<std::pair<std::string, Tensor*>>& out,
               std::vector<const Tensor*>& seen) const;
  std::vector<std::pair<std::string, Tensor*>> parameter_slots();
  void check_new_name(const std::string& name, const char* kind) const;

  std::string type_name_;
  std::vector<std::pair<std::string, Tensor*>> params_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
};

/// y = x W^T + b with W (out, in) and b (out) (nn.Linear), initialised as PyTorch does:
/// W ~ kaiming_uniform_(a = sqrt(5)), i.e. U(-1/sqrt(in), 1/sqrt(in)), and b from the same
/// range, drawn in that order from `gen`.
class Linear : public Module {
 public:
  /// A layer from `in_features` to `out_features`, its parameters of `dtype`, drawn from `gen`.
  Linear(int64_t in_features, int64_t out_features, bool bias = true, DType dtype = kFloat32,
         Generator& gen = default_generator());
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;
  Tensor weight;         ///< (out_features, in_features)
  Tensor bias;           ///< (out_features), or undefined
  int64_t in_features;   ///< the size of an input row
  int64_t out_features;  ///< the size of an output row
};

/// The documents' linear layer: y = x @ W with W (in, out) drawn as randn(in, out) / sqrt(in)
/// (the Xavier scaling that keeps the output's size independent of `in`), no bias.
class XavierLinear : public Module {
 public:
  /// A layer from `input_dim` to `output_dim`, its weight drawn from `gen`.
  XavierLinear(int64_t input_dim, int64_t output_dim, Generator& gen = default_generator());
  Tensor forward(const Tensor& input) override;
  Tensor weight;  ///< (input_dim, output_dim)
};

/// A list of modules, registered as "0", "1", ... It has no forward of its own.
class ModuleList : public Module {
 public:
  ModuleList() : Module("ModuleList") {}
  /// Appends `module` and returns *this.
  ModuleList& append(std::shared_ptr<Module> module);
  /// The number of modules.
  int64_t size() const { return static_cast<int64_t>(items_.size()); }
  /// Module i (negative i counts from the end; IndexError outside).
  const std::shared_ptr<Module>& operator[](int64_t i) const;
  /// The first module, for range-for.
  auto begin() const { return items_.begin(); }
  /// Past the last module.
  auto end() const { return items_.end(); }

 private:
  std::vector<std::shared_ptr<Module>> items_;
};

/// Modules applied one after another (nn.Sequential).
class Sequential : public Module {
 public:
  Sequential() : Module("Sequential") {}
  /// `modules`, registered as "0", "1", ... in order.
  explicit Sequential(std::vector<std::shared_ptr<Module>> modules);
  /// Appends `module` and returns *this.
  Sequential& append(std::shared_ptr<Module> module);
  Tensor forward(const Tensor& input) override;

 private:
  std::vector<std::shared_ptr<Module>> items_;
};

/// max(x, 0).
class ReLU : public Module {
 public:
  ReLU() : Module("ReLU") {}
  Tensor forward(const Tensor& input) override;
};

/// x Phi(x), the exact (erf) form (nn.GELU(approximate='none')).
class GELU : public Module {
 public:
  GELU() : Module("GELU") {}
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override { return "approximate='none'"; }
};

/// The documents' deep linear model: `num_layers` XavierLinear(dim, dim) layers in a ModuleList
/// named `layers`, then `final` = XavierLinear(dim, 1); the output (B, 1) is squeezed to (B,).
/// Its state_dict names are layers.0.weight, ..., final.weight.
class Cruncher : public Module {
 public:
  /// `num_layers` (dim, dim) layers and a (dim, 1) head, drawn in that order from `gen`.
  Cruncher(int64_t dim, int64_t num_layers, Generator& gen = default_generator());
  Tensor forward(const Tensor& x) override;
  std::shared_ptr<ModuleList> layers;   ///< the square layers, "layers.0", "layers.1", ...
  std::shared_ptr<XavierLinear> final;  ///< the head, "final"
};

}  // namespace tiny::nn
