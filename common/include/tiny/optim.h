/// @file optim.h
/// @brief Optimizers: SGD, Adagrad (and the documents' AdaGrad), RMSprop, Adam, AdamW, as
/// torch.optim has them, down to the order of their floating-point operations.
///
/// An optimizer holds parameter groups (parameters plus their settings: the optimizer's defaults,
/// overridden per group) and per-parameter state (moment estimates, step counts). `step()`
/// updates every parameter that has a gradient. Each update runs as one fused pass over the
/// parameter, its gradient and its state (on the parameter's device), rounding where PyTorch's
/// chain of tensor ops rounds, so that on the same inputs the results are PyTorch's bit for bit
/// (on a processor with FMA, PyTorch's vectorised kernels fuse some multiply-adds, and so do
/// ours; on one without, neither does).
///
/// `state_dict()` has PyTorch's shape: state by parameter index, and the groups' settings with
/// the indices of their parameters.
#pragma once
#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "tiny/tensor.h"

namespace tiny::optim {

/// A setting's value: a number, a flag, or a pair (Adam's betas).
using Value = std::variant<double, bool, std::array<double, 2>>;
/// Settings by name ("lr", "weight_decay", "betas", ...).
using Settings = std::map<std::string, Value>;

/// Parameters with the settings that differ from the optimizer's defaults:
/// `{{model.weight}, {{"weight_decay", 0.3}}}`.
struct GroupSpec {
  std::vector<Tensor> params;
  Settings settings = {};
};

/// A parameter group as the optimizer keeps it: every setting filled in.
struct ParamGroup {
  std::vector<Tensor> params;
  Settings settings;
  /// A numeric setting (raises KeyError-like ValueError for a missing or non-numeric one).
  double number(const std::string& name) const;
  bool flag(const std::string& name) const;
  std::array<double, 2> pair(const std::string& name) const;
  /// Sets a numeric setting (a learning-rate schedule writes "lr" here).
  void set(const std::string& name, Value value);
};

/// optimizer.state_dict(): per-parameter state by index (in group order), and each group's
/// settings with the indices of its parameters.
struct OptimizerState {
  std::map<int64_t, std::map<std::string, Tensor>> state;
  std::vector<std::pair<Settings, std::vector<int64_t>>> param_groups;
};

/// The base of every optimizer.
class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  /// Updates every parameter that has a gradient.
  virtual void step() = 0;
  /// Clears the gradients of every parameter: to undefined (the default, as in PyTorch 2), or
  /// to zeros.
  void zero_grad(bool set_to_none = true);

  std::vector<ParamGroup>& param_groups() { return groups_; }
  const std::vector<ParamGroup>& param_groups() const { return groups_; }
  const Settings& defaults() const { return defaults_; }
  /// Adds a group (its settings checked and completed from the defaults).
  void add_param_group(GroupSpec group);
  /// The state of `param` (created empty on first use): "step", "exp_avg", ...
  std::map<std::string, Tensor>& state(const Tensor& param);

  OptimizerState state_dict() const;
  /// Restores state saved by state_dict() from an optimizer built over the same parameters:
  /// same number of groups, same sizes. Tensors are copied to each parameter's device, and
  /// floating state to its dtype ("step" stays float32), as PyTorch does.
  void load_state_dict(const OptimizerState& saved);

  /// The name PyTorch prints ("AdamW").
  const std::string& name() const { return name_; }
  /// PyTorch's repr: "AdamW (\nParameter Group 0\n    amsgrad: False\n ...)".
  std::string repr() const;

 protected:
  /// Keeps `groups` until the subclass, once constructed, calls init_groups() (its check() is
  /// virtual, so it cannot run from this constructor).
  Optimizer(std::string name, std::vector<GroupSpec> groups, Settings defaults);
  /// Adds the groups given to the constructor, checking each.
  void init_groups();
  /// Range checks of one group's settings, with PyTorch's messages.
  virtual void check(const Settings& settings) const = 0;
  /// Index of `param` among all parameters (state_dict's numbering).
  int64_t index_of(const Tensor& param) const;
  /// Raises unless `param`'s gradient can be used: same shape, dtype and device.
  static void check_grad(const Tensor& param, const Tensor& grad);
  /// A parameter with a gradient, and its state, as step() visits them.
  struct Update {
    const Tensor& param;
    Tensor grad;
    std::map<std::string, Tensor>& state;
  };
  /// The parameters of param_groups()[group] that have a gradient (each checked by check_grad),
  /// in order, with their state.
  std::vector<Update> updates(size_t group);

 private:
  std::string name_;
  Settings defaults_;
  std::vector<ParamGroup> groups_;
  std::vector<std::map<std::string, Tensor>> state_;  // by parameter index
  std::vector<GroupSpec> pending_;                    // until init_groups()
};

/// The settings of SGD, with PyTorch's defaults.
struct SGDOptions {
  double lr = 1e-3;  ///< PyTorch 1.13 requires lr; 2.x defaults to 1e-3
  double momentum = 0, dampening = 0, weight_decay = 0;
  bool nesterov = false, maximize = false;
};
/// Stochastic gradient descent, with momentum, dampening, Nesterov and (coupled) weight decay
/// (torch.optim.SGD). p -= lr * d, d = g + wd p, or the momentum buffer b = m b + (1 - damp) d.
class SGD : public Optimizer {
 public:
  using Options = SGDOptions;
  SGD(std::vector<Tensor> params, Options options);
  SGD(std::vector<GroupSpec> groups, Options defaults);
  void step() override;

 private:
  void check(const Settings& s) const override;
};

/// The settings of Adagrad, with PyTorch's defaults.
struct AdagradOptions {
  double lr = 1e-2, lr_decay = 0, weight_decay = 0, initial_accumulator_value = 0, eps = 1e-10;
  bool maximize = false;
};
/// PyTorch's Adagrad: sum += g^2; p -= clr * g / (sqrt(sum) + eps), clr = lr / (1 + (t-1) lr_decay).
class Adagrad : public Optimizer {
 public:
  using Options = AdagradOptions;
  Adagrad(std::vector<Tensor> params, Options options = {});
  Adagrad(std::vector<GroupSpec> groups, Options defaults);
  void step() override;

 private:
  void check(const Settings& s) const override;
};

/// The settings of AdaGrad, with PyTorch's defaults.
struct AdaGradOptions {
  double lr = 1e-2, eps = 1e-5;
};
/// The documents' AdaGrad: g2 += g^2; p -= lr * g / sqrt(g2 + eps). Its epsilon (1e-5 in the
/// documents) sits inside the square root, where PyTorch's Adagrad adds 1e-10 outside it.
/// State: "g2".
class AdaGrad : public Optimizer {
 public:
  using Options = AdaGradOptions;
  AdaGrad(std::vector<Tensor> params, Options options = {});
  void step() override;

 private:
  void check(const Settings& s) const override;
};

/// The settings of RMSprop, with PyTorch's defaults.
struct RMSpropOptions {
  double lr = 1e-2, alpha = 0.99, eps = 1e-8, weight_decay = 0, momentum = 0;
  bool centered = false, maximize = false;
};
/// RMSprop: v = alpha v + (1 - alpha) g^2; p -= lr g / (sqrt(v) + eps), optionally centered
/// (v minus the squared mean gradient) and with momentum (torch.optim.RMSprop).
class RMSprop : public Optimizer {
 public:
  using Options = RMSpropOptions;
  RMSprop(std::vector<Tensor> params, Options options = {});
  RMSprop(std::vector<GroupSpec> groups, Options defaults);
  void step() override;

 private:
  void check(const Settings& s) const override;
};

/// The settings of Adam, with PyTorch's defaults.
struct AdamOptions {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0;
  bool amsgrad = false, maximize = false;
};
/// Adam, and AdamW (decoupled weight decay): m and v, the running averages of g and g^2,
/// bias-corrected; p -= lr m_hat / (sqrt(v_hat) + eps). Adam's weight decay adds wd p to the
/// gradient; AdamW's multiplies p by (1 - lr wd) first (PyTorch's order: see optim_math.h).
class Adam : public Optimizer {
 public:
  using Options = AdamOptions;
  Adam(std::vector<Tensor> params, Options options = {});
  Adam(std::vector<GroupSpec> groups, Options defaults);
  void step() override;

 protected:
  Adam(std::string name, std::vector<GroupSpec> groups, Options defaults);
  void check(const Settings& s) const override;
  bool decoupled_ = false;
};

/// The settings of AdamW, with PyTorch's defaults.
struct AdamWOptions {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 1e-2;
  bool amsgrad = false, maximize = false;
};
/// AdamW: Adam with decoupled weight decay, default 0.01 (torch.optim.AdamW).
class AdamW : public Adam {
 public:
  using Options = AdamWOptions;
  AdamW(std::vector<Tensor> params, Options options = {});
  AdamW(std::vector<GroupSpec> groups, Options defaults);
};

}  // namespace tiny::optim
