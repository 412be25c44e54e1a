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
/// ours; on one without, neither does). In float32, float64 and bfloat16 alike; for bfloat16 the
/// match with PyTorch's vectorised kernels holds where PyTorch runs a tensor in one piece (one
/// thread, or under 32,768 elements), since each piece ends in scalar code that rounds otherwise.
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
  std::vector<Tensor> params;  ///< the group's parameters
  Settings settings = {};      ///< overrides of the optimizer's defaults, by name
};

/// A parameter group as the optimizer keeps it: every setting filled in.
struct ParamGroup {
  std::vector<Tensor> params;  ///< the group's parameters
  Settings settings;           ///< every setting, the defaults filled in
  /// A numeric setting (ValueError for a missing one or one of another kind).
  double number(const std::string& name) const;
  /// A True/False setting (ValueError for a missing one or one of another kind).
  bool flag(const std::string& name) const;
  /// A pair setting, Adam's "betas" (ValueError for a missing one or one of another kind).
  std::array<double, 2> pair(const std::string& name) const;
  /// Sets a numeric setting (a learning-rate schedule writes "lr" here).
  void set(const std::string& name, Value value);
};

/// optimizer.state_dict(): per-parameter state by index (in group order), and each group's
/// settings with the indices of its parameters.
struct OptimizerState {
  /// Per parameter index (counting through the groups in order): its state by key.
  std::map<int64_t, std::map<std::string, Tensor>> state;
  /// Per group: its settings, and the indices of its parameters.
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

  /// The groups, in order; their settings may be changed between steps (a schedule's "lr").
  std::vector<ParamGroup>& param_groups() { return groups_; }
  /// The groups, in order.
  const std::vector<ParamGroup>& param_groups() const { return groups_; }
  /// The settings a group gets unless it overrides them.
  const Settings& defaults() const { return defaults_; }
  /// Adds a group (its settings checked and completed from the defaults).
  void add_param_group(GroupSpec group);
  /// The state of `param` (created empty on first use): "step", "exp_avg", ...
  std::map<std::string, Tensor>& state(const Tensor& param);

  /// The state and the groups (optimizer.state_dict()); the tensors are the optimizer's own,
  /// not copies (save_checkpoint writes them out).
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
    const Tensor& param;                   ///< the parameter
    Tensor grad;                           ///< its gradient (checked)
    std::map<std::string, Tensor>& state;  ///< its state, by key
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

// The settings of each optimizer have PyTorch's names and defaults; a group may override any
// of them by name (GroupSpec::settings). Two constructors each: all parameters in one group,
// or a list of groups with the settings given here as their defaults.

/// The settings of SGD, with PyTorch's defaults.
struct SGDOptions {
  double lr = 1e-3;         ///< learning rate (PyTorch 1.13 requires it; 2.x defaults to 1e-3)
  double momentum = 0;      ///< weight of the running average of updates (0: none)
  double dampening = 0;     ///< the new gradient enters the average times (1 - dampening)
  double weight_decay = 0;  ///< L2 penalty: the gradient gains weight_decay * p
  bool nesterov = false;    ///< step with g + momentum * buffer (Nesterov's momentum)
  bool maximize = false;    ///< climb the objective instead (the gradient's sign flipped)
};
/// Stochastic gradient descent, with momentum, dampening, Nesterov and (coupled) weight decay
/// (torch.optim.SGD). p -= lr * d, d = g + wd p, or the momentum buffer b = m b + (1 - damp) d.
class SGD : public Optimizer {
 public:
  using Options = SGDOptions;  ///< its settings
  /// All of `params` in one group.
  SGD(std::vector<Tensor> params, Options options);
  /// Several groups, each with its own overrides of `defaults`.
  SGD(std::vector<GroupSpec> groups, Options defaults);
  void step() override;

 private:
  void check(const Settings& s) const override;
};

/// The settings of Adagrad, with PyTorch's defaults.
struct AdagradOptions {
  double lr = 1e-2;                      ///< learning rate
  double lr_decay = 0;                   ///< step t uses lr / (1 + (t - 1) lr_decay)
  double weight_decay = 0;               ///< L2 penalty added to the gradient
  double initial_accumulator_value = 0;  ///< the sum of squares starts here
  double eps = 1e-10;                    ///< added to sqrt(sum), outside the square root
  bool maximize = false;                 ///< climb the objective instead
};
/// PyTorch's Adagrad: sum += g^2; p -= clr * g / (sqrt(sum) + eps), clr = lr / (1 + (t-1) lr_decay).
class Adagrad : public Optimizer {
 public:
  using Options = AdagradOptions;  ///< its settings
  /// All of `params` in one group.
  Adagrad(std::vector<Tensor> params, Options options = {});
  /// Several groups, each with its own overrides of `defaults`.
  Adagrad(std::vector<GroupSpec> groups, Options defaults);
  void step() override;

 private:
  void check(const Settings& s) const override;
};

/// The settings of the documents' AdaGrad.
struct AdaGradOptions {
  double lr = 1e-2;   ///< learning rate
  double eps = 1e-5;  ///< added to g2 inside the square root (the documents' 1e-5)
};
/// The documents' AdaGrad: g2 += g^2; p -= lr * g / sqrt(g2 + eps). Its epsilon (1e-5 in the
/// documents) sits inside the square root, where PyTorch's Adagrad adds 1e-10 outside it.
/// State: "g2".
class AdaGrad : public Optimizer {
 public:
  using Options = AdaGradOptions;  ///< its settings
  /// All of `params` in one group.
  AdaGrad(std::vector<Tensor> params, Options options = {});
  void step() override;

 private:
  void check(const Settings& s) const override;
};

/// The settings of RMSprop, with PyTorch's defaults.
struct RMSpropOptions {
  double lr = 1e-2;         ///< learning rate
  double alpha = 0.99;      ///< decay of the running average of g^2
  double eps = 1e-8;        ///< added to the root mean square
  double weight_decay = 0;  ///< L2 penalty added to the gradient
  double momentum = 0;      ///< weight of a running average of the steps (0: none)
  bool centered = false;    ///< divide by the standard deviation (the mean gradient removed)
  bool maximize = false;    ///< climb the objective instead
};
/// RMSprop: v = alpha v + (1 - alpha) g^2; p -= lr g / (sqrt(v) + eps), optionally centered
/// (v minus the squared mean gradient) and with momentum (torch.optim.RMSprop).
class RMSprop : public Optimizer {
 public:
  using Options = RMSpropOptions;  ///< its settings
  /// All of `params` in one group.
  RMSprop(std::vector<Tensor> params, Options options = {});
  /// Several groups, each with its own overrides of `defaults`.
  RMSprop(std::vector<GroupSpec> groups, Options defaults);
  void step() override;

 private:
  void check(const Settings& s) const override;
};

/// The settings of Adam, with PyTorch's defaults (the group setting "betas" holds beta1, beta2).
struct AdamOptions {
  double lr = 1e-3;         ///< learning rate
  double beta1 = 0.9;       ///< decay of the running average of g
  double beta2 = 0.999;     ///< decay of the running average of g^2
  double eps = 1e-8;        ///< added after the bias-corrected square root
  double weight_decay = 0;  ///< Adam: L2 penalty added to the gradient
  bool amsgrad = false;     ///< divide by the largest v so far (AMSGrad)
  bool maximize = false;    ///< climb the objective instead
};
/// Adam, and AdamW (decoupled weight decay): m and v, the running averages of g and g^2,
/// bias-corrected; p -= lr m_hat / (sqrt(v_hat) + eps). Adam's weight decay adds wd p to the
/// gradient; AdamW's multiplies p by (1 - lr wd) first (PyTorch's order: see optim_math.h).
class Adam : public Optimizer {
 public:
  using Options = AdamOptions;  ///< its settings
  /// All of `params` in one group.
  Adam(std::vector<Tensor> params, Options options = {});
  /// Several groups, each with its own overrides of `defaults`.
  Adam(std::vector<GroupSpec> groups, Options defaults);
  void step() override;

 protected:
  /// For AdamW: the same state and settings under another name.
  Adam(std::string name, std::vector<GroupSpec> groups, Options defaults);
  void check(const Settings& s) const override;
  bool decoupled_ = false;  ///< AdamW's decay (p *= 1 - lr wd) instead of Adam's L2 term
};

/// The settings of AdamW, with PyTorch's defaults: Adam's, with weight decay 0.01.
struct AdamWOptions {
  double lr = 1e-3;            ///< learning rate
  double beta1 = 0.9;          ///< decay of the running average of g
  double beta2 = 0.999;        ///< decay of the running average of g^2
  double eps = 1e-8;           ///< added after the bias-corrected square root
  double weight_decay = 1e-2;  ///< decoupled: p is multiplied by (1 - lr weight_decay) first
  bool amsgrad = false;        ///< divide by the largest v so far (AMSGrad)
  bool maximize = false;       ///< climb the objective instead
};
/// AdamW: Adam with decoupled weight decay, default 0.01 (torch.optim.AdamW).
class AdamW : public Adam {
 public:
  using Options = AdamWOptions;  ///< its settings
  /// All of `params` in one group.
  AdamW(std::vector<Tensor> params, Options options = {});
  /// Several groups, each with its own overrides of `defaults`.
  AdamW(std::vector<GroupSpec> groups, Options defaults);
};

}  // namespace tiny::optim
