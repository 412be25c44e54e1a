// grad_scaler.cpp: dynamic loss scaling (amp.h's GradScaler), step for step as PyTorch 2.5's
// torch/amp/grad_scaler.py and its two kernels, _amp_foreach_non_finite_check_and_unscale_ and
// _amp_update_scale_.
//
// The scale and the growth tracker are tensors on the loss's device, as in PyTorch, so that
// scale() multiplies on the device and promotes dtypes as a tensor does. Unscaling runs the
// library's own ops on each gradient's device; only the decisions (skip this step? back off
// or grow?) bring numbers back to the host.
#include <cmath>
#include <string>

#include "tiny/amp.h"
#include "tiny/autograd.h"
#include "tiny/ops.h"
#include "tiny/optim.h"

#include "internal.h"

namespace tiny::amp {

namespace {

// The update rule, PyTorch's _amp_update_scale_ kernel on one float and one int: a step that
// found an inf or a NaN backs the scale off and restarts the count; a clean one counts, and
// the growth_interval-th clean step in a row grows the scale. The products are taken in double
// and rounded to float32 once, as the kernel's float * double is. A grown scale that would be
// inf is not taken (the count restarts all the same), so the scale never overflows float32.
// The count must reach the interval exactly: a tracker loaded above it never grows the scale
// until an overflow resets it, in PyTorch too.
void update_scale(float& scale, int32_t& growth_tracker, bool found_inf, double growth_factor,
                  double backoff_factor, int64_t growth_interval) {
  // BEGIN SOLUTION ch08 grad_scaler_update
  if (found_inf) {
    scale = static_cast<float>(scale * backoff_factor);
    growth_tracker = 0;
    return;
  }
  const int32_t successful = growth_tracker + 1;
  if (successful == growth_interval) {
    const float grown = static_cast<float>(scale * growth_factor);
    if (std::isfinite(grown)) scale = grown;
    growth_tracker = 0;
  } else {
    growth_tracker = successful;
  }
  // END SOLUTION ch08 grad_scaler_update
}

}  // namespace

GradScaler::GradScaler(Device::Type device, Options options)
    : device_(device),
      enabled_(options.enabled),
      init_scale_(options.init_scale),
      growth_factor_(options.growth_factor),
      backoff_factor_(options.backoff_factor),
      growth_interval_(options.growth_interval) {
  // PyTorch disables a CUDA scaler when CUDA cannot run (with a warning; this library does not
  // print), before it checks anything else.
  if (device_ == Device::Type::CUDA && enabled_ && !cuda::available()) enabled_ = false;
  if (!enabled_) return;
  if (!(growth_factor_ > 1.0)) throw AssertionError("The growth factor must be > 1.0.");
  if (!(backoff_factor_ < 1.0)) throw AssertionError("The backoff factor must be < 1.0.");
}

void GradScaler::check_initialized(const char* method) const {
  if (!scale_.defined())
    throw AssertionError(std::string("Attempted ") + method +
                         " but _scale is None.  This may indicate your script did not use "
                         "scaler.scale(loss or outputs) earlier in the iteration.");
}

void GradScaler::lazy_init(Device device) {
  scale_ = full({}, init_scale_, kFloat32, device);
  growth_tracker_ = full({}, init_growth_tracker_, kInt32, device);
}

// ---- scaling -----------------------------------------------------------------------------------

Tensor GradScaler::scale(const Tensor& output) {
  if (!enabled_) return output;
  if (!scale_.defined()) lazy_init(output.device());
  return output * scale_.to(output.device());
}

std::vector<Tensor> GradScaler::scale(const std::vector<Tensor>& outputs) {
  if (!enabled_) return outputs;
  // One copy of the scale per device, made the first time an output there needs it.
  std::vector<std::pair<Device, Tensor>> copies;
  std::vector<Tensor> scaled;
  for (const Tensor& output : outputs) {
    if (!scale_.defined()) lazy_init(output.device());
    const Device device = output.device();
    const Tensor* copy = nullptr;
    for (const auto& [where, t] : copies)
      if (where == device) copy = &t;
    if (!copy) copy = &copies.emplace_back(device, scale_.to(device)).second;
    scaled.push_back(output * *copy);
  }
  return scaled;
}

// ---- unscaling ---------------------------------------------------------------------------------

void GradScaler::unscale_(optim::Optimizer& optimizer) {
  if (!enabled_) return;
  check_initialized("unscale_");
  PerOptimizer& state = per_optimizer_[&optimizer];
  if (state.stage == Stage::Unscaled)
    throw RuntimeError(
        "unscale_() has already been called on this optimizer since the last update().");
  if (state.stage == Stage::Stepped) throw RuntimeError("unscale_() is being called after step().");

  // Every gradient is checked before any is changed, so a float16 one leaves them all as they
  // were.
  std::vector<Tensor> grads;
  for (const optim::ParamGroup& group : optimizer.param_groups())
    for (const Tensor& param : group.params) {
      Tensor grad = param.grad();
      if (!grad.defined()) continue;
      if (grad.dtype() == kFloat16) throw ValueError("Attempting to unscale FP16 gradients.");
      grads.push_back(grad);
    }

  NoGradGuard no_grad;
  // 1/scale in float64, then rounded to float32: PyTorch's guard against a float32 division
  // that some compiler settings make inexact.
  const Tensor inv_scale = reciprocal(scale_.to(kFloat64)).to(kFloat32);
  std::vector<std::pair<Device, Tensor>> found_inf;  // per device: 0, or 1 after an inf or NaN
  std::vector<std::pair<Device, Tensor>> inv_scales;
  for (Tensor& grad : grads) {
    const Device device = grad.device();
    Tensor* found = nullptr;
    const Tensor* inv = nullptr;
    for (auto& [where, t] : found_inf)
      if (where == device) found = &t;
    for (const auto& [where, t] : inv_scales)
      if (where == device) inv = &t;
    if (!found) found = &found_inf.emplace_back(device, zeros({}, kFloat32, device)).second;
    if (!inv) inv = &inv_scales.emplace_back(device, inv_scale.to(device)).second;
    // Zero times a finite number is zero, and times an inf or a NaN is NaN; a sum is NaN as
    // soon as one term is. So the sum of 0 * grad is NaN exactly when some element is not
    // finite, and NaN is the one value that differs from itself. (Summing the gradient itself
    // would also be inf when finite elements add up past float32's range.)
    if (grad.numel() > 0) {
      const Tensor probe = sum(grad * 0.0);
      maximum_out(*found, *found, ne(probe, probe).to(kFloat32));
    }
    grad.mul_(*inv);  // unscaled even when not finite, as PyTorch does; the step is skipped then
  }
  state.found_inf = std::move(found_inf);
  state.stage = Stage::Unscaled;
}

// ---- the step and the update -------------------------------------------------------------------

void GradScaler::step(optim::Optimizer& optimizer) {
  if (!enabled_) {
    optimizer.step();
    return;
  }
  check_initialized("step");
  PerOptimizer& state = per_optimizer_[&optimizer];
  if (state.stage == Stage::Stepped)
    throw RuntimeError("step() has already been called since the last update().");
  if (state.stage == Stage::Ready) unscale_(optimizer);
  if (state.found_inf.empty())
    throw AssertionError("No inf checks were recorded for this optimizer.");
  double found = 0;
  for (const auto& entry : state.found_inf) found += entry.second.item();
  if (found == 0) optimizer.step();
  state.stage = Stage::Stepped;
}

void GradScaler::update() {
  if (!enabled_) return;
  check_initialized("update");
  bool any_recorded = false;
  bool found_inf = false;
  for (const auto& [optimizer, state] : per_optimizer_)
    for (const auto& entry : state.found_inf) {
      any_recorded = true;
      found_inf = found_inf || entry.second.item() != 0;
    }
  if (!any_recorded) throw AssertionError("No inf checks were recorded prior to update.");
  float scale = scale_.item<float>();
  int32_t tracker = growth_tracker_.item<int32_t>();
  update_scale(scale, tracker, found_inf, growth_factor_, backoff_factor_, growth_interval_);
  scale_.fill_(scale);
  growth_tracker_.fill_(tracker);
  per_optimizer_.clear();
}

void GradScaler::update(double new_scale) {
  if (!enabled_) return;
  check_initialized("update");
  scale_.fill_(new_scale);
  per_optimizer_.clear();
}

void GradScaler::update(const Tensor& new_scale) {
  if (!enabled_) return;
  check_initialized("update");
  // PyTorch's message, with the indentation its source line continuation puts inside it.
  const std::string reason =
      "new_scale should be a float or a 1-element torch.cuda.FloatTensor or " +
      std::string(20, ' ') + "torch.FloatTensor with requires_grad=False.";
  if (new_scale.device().type != device_ || new_scale.numel() != 1 || new_scale.requires_grad())
    throw AssertionError(reason);
  // The 0-dim scale takes a copy; a tensor of shape (1,) does not broadcast into it.
  if (new_scale.dim() != 0)
    throw RuntimeError("output with shape [] doesn't match the broadcast shape " +
                       detail::shape_str(new_scale.shape()));
  scale_.copy_(new_scale);
  per_optimizer_.clear();
}

// ---- what the scaler reports, and its state ----------------------------------------------------

double GradScaler::get_scale() const {
  if (!enabled_) return 1.0;
  return scale_.defined() ? scale_.item() : init_scale_;
}

int64_t GradScaler::growth_tracker() const {
  if (!enabled_) return 0;
  return growth_tracker_.defined() ? static_cast<int64_t>(growth_tracker_.item())
                                   : init_growth_tracker_;
}

std::optional<GradScalerState> GradScaler::state_dict() const {
  if (!enabled_) return std::nullopt;
  return GradScalerState{get_scale(), growth_factor_, backoff_factor_, growth_interval_,
                         growth_tracker()};
}

void GradScaler::load_state_dict(const std::optional<GradScalerState>& state) {
  if (!enabled_) return;
  if (!state)
    throw RuntimeError(
        "The source state dict is empty, possibly because it was saved from a disabled "
        "instance of GradScaler.");
  init_scale_ = state->scale;
  if (scale_.defined()) scale_.fill_(state->scale);
  growth_factor_ = state->growth_factor;
  backoff_factor_ = state->backoff_factor;
  growth_interval_ = state->growth_interval;
  init_growth_tracker_ = state->growth_tracker;
  if (growth_tracker_.defined()) growth_tracker_.fill_(state->growth_tracker);
}

}  // namespace tiny::amp
