/// @file amp.h
/// @brief Automatic mixed precision: autocast, which runs each op in the dtype PyTorch's autocast
/// lists give it (op_table.h's AutocastClass), and GradScaler, float16's dynamic loss scaling.
///
/// While an AutocastGuard for a device type is alive, ops on tensors of that device type cast
/// their floating inputs (float64 excepted, as in PyTorch) before they run, by PyTorch's lists,
/// which differ between device types:
/// - on both, matrix products (matmul, addmm, linear) run in the guard's dtype, and the losses
///   (mse_loss, cross_entropy, nll_loss, binary_cross_entropy_with_logits) in float32;
/// - on CUDA also exp, log, pow, rsqrt, reciprocal, sum, softmax and log_softmax run in float32,
///   and addcmul/addcdiv in their widest input's dtype (the op table's autocast column);
/// - every other op runs in its inputs' dtype, promoted as usual: on the CPU that includes exp,
///   softmax and sum, which PyTorch's CPU list leaves alone;
/// - factory functions (zeros, ones, randn) are not ops on inputs and keep their dtype: zeros
///   inside autocast is float32, whatever some tutorials say.
/// The casts are ordinary recorded ops (ToCopyBackward0), so gradients flow back through them
/// and reach a float32 weight in float32. A float32 weight (a leaf that requires grad) is cast
/// once per scope: later products reuse the copy, and the outermost guard drops the copies when
/// it ends (PyTorch's weight-cast cache).
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "tiny/device.h"
#include "tiny/dtype.h"
#include "tiny/tensor.h"

namespace tiny {

/// Turns autocast on (or, with `enabled` false, off) for one device type for its lifetime
/// (torch.autocast(device_type, dtype, enabled)), then restores what was there before; nests.
class AutocastGuard {
 public:
  /// Autocast on `device` (CPU or CUDA) with `dtype`, float16 or bfloat16 (ValueError otherwise);
  /// `enabled` false turns it off inside the scope instead; `cache_enabled` false casts weights
  /// afresh at every use (torch.autocast's cache_enabled).
  AutocastGuard(Device::Type device, DType dtype, bool enabled = true, bool cache_enabled = true);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  Device::Type device_;
  bool previous_enabled_;
  DType previous_dtype_;
  bool previous_cache_enabled_;
};

/// True while an AutocastGuard for `device` is alive on this thread.
bool autocast_enabled(Device::Type device);
/// The lower-precision dtype autocast uses on `device` (float16 on CUDA, bfloat16 on the CPU
/// unless a guard chose otherwise).
DType autocast_dtype(Device::Type device);
/// How many weights have a cached lower-precision copy on this thread: 0 outside any scope. A
/// window for tests and for chapter 08, which counts the copies.
size_t autocast_cached_casts();

}  // namespace tiny

// ---- GradScaler: dynamic loss scaling -----------------------------------------------------------

namespace tiny::optim {
class Optimizer;
}

namespace tiny::amp {

/// GradScaler's settings, with PyTorch's defaults (torch.amp.GradScaler's arguments).
struct GradScalerOptions {
  double init_scale = 65536.0;     ///< the first scale, 2^16
  double growth_factor = 2.0;      ///< the scale is multiplied by this after a clean stretch (> 1)
  double backoff_factor = 0.5;     ///< and by this after a step with inf or NaN gradients (< 1)
  int64_t growth_interval = 2000;  ///< clean steps in a row before the scale grows
  bool enabled = true;             ///< false: every method passes its input through
};

/// What GradScaler::state_dict() returns: PyTorch's five entries, under the same names.
struct GradScalerState {
  double scale = 65536.0;          ///< "scale": the current scale (get_scale())
  double growth_factor = 2.0;      ///< "growth_factor"
  double backoff_factor = 0.5;     ///< "backoff_factor"
  int64_t growth_interval = 2000;  ///< "growth_interval"
  int64_t growth_tracker = 0;  ///< "_growth_tracker": clean steps in a row since the last change
};

/// Dynamic loss scaling (torch.amp.GradScaler), for training under float16 autocast, whose
/// backward pass computes its intermediate gradients in float16.
///
/// In float16 a gradient below 2^-24, the smallest subnormal, rounds to zero, and one below
/// 2^-14 keeps fewer digits. Multiplying the loss by a large factor before backward multiplies
/// every gradient by it too, lifting the small ones into float16's range; dividing the
/// parameters' gradients by it again before the optimizer's step ("unscaling") undoes it. Too
/// large a factor overflows instead, so the scaler searches for one: it starts at 2^16, halves
/// the scale and skips the step whenever a gradient holds an inf or a NaN, and doubles it after
/// 2000 steps in a row without one. One iteration:
///
///     scaler.scale(loss).backward();
///     scaler.step(optimizer);   // unscales, then steps unless a gradient is inf or NaN
///     scaler.update();          // backs off or counts towards the next growth
///
/// The scale lives in a 0-dim float32 tensor on the device of the first tensor given to
/// scale(), and the count of clean steps (the growth tracker) in a 0-dim int32 tensor beside
/// it, as in PyTorch 2.5. Unscaling multiplies each gradient in place by 1/scale (computed in
/// float64, then rounded to float32), on the gradient's device, and notes whether any element
/// was inf or NaN before it was multiplied. step() and update() read those notes back to the
/// host (PyTorch's step does the same; its update stays on the device, this one reads the
/// scale and the tracker back too).
///
/// The checks and their messages are PyTorch's; where PyTorch `assert`s, this throws
/// AssertionError. A disabled scaler (`enabled` false, or a CUDA scaler in a program without a
/// usable GPU, which PyTorch disables with a warning) passes everything through: scale()
/// returns its input, step() only calls the optimizer's step, and the rest do nothing.
class GradScaler {
 public:
  using Options = GradScalerOptions;  ///< its settings

  /// A scaler for gradients on devices of type `device` (PyTorch's first argument, "cuda" or
  /// "cpu"). AssertionError unless growth_factor > 1 and backoff_factor < 1 (checked only when
  /// enabled, as in PyTorch).
  explicit GradScaler(Device::Type device, Options options = {});
  GradScaler(const GradScaler&) = delete;
  GradScaler& operator=(const GradScaler&) = delete;

  /// The output times the scale: a recorded multiplication, so backward through the result
  /// gives scaled gradients. The first call puts the scale on `output`'s device. The scale is a
  /// 0-dim float32 tensor, so PyTorch's promotion rules apply: a 0-dim float16 loss comes back
  /// float32, a float16 tensor with dimensions stays float16.
  Tensor scale(const Tensor& output);
  /// Each output times the scale, copied once to each output's device.
  std::vector<Tensor> scale(const std::vector<Tensor>& outputs);

  /// Divides the gradients of `optimizer`'s parameters by the scale, in place, and notes
  /// whether any was inf or NaN. Optional: step() calls it unless it was called since the last
  /// update() (to clip unscaled gradients, call it first). RuntimeError when called twice
  /// before update() or after step(); ValueError for a float16 gradient ("Attempting to unscale
  /// FP16 gradients."), as in PyTorch: mixed precision keeps the parameters, and so their
  /// gradients, in float32 (or bfloat16); only the computation in between runs in float16.
  void unscale_(optim::Optimizer& optimizer);

  /// Unscales (unless unscale_ already did) and calls `optimizer.step()`, unless a gradient
  /// held an inf or a NaN: then the step is skipped and the parameters stay as they were.
  /// RuntimeError when called twice before update(); AssertionError when no parameter of the
  /// optimizer has a gradient ("No inf checks were recorded for this optimizer.").
  void step(optim::Optimizer& optimizer);

  /// Ends the iteration: after an inf or NaN in any optimizer's gradients, the scale is
  /// multiplied by the backoff factor and the growth tracker set to 0; otherwise the tracker
  /// counts one more clean step, and when it reaches the growth interval the scale is
  /// multiplied by the growth factor (unless that overflows float32) and the tracker set to 0.
  /// AssertionError when no optimizer's gradients were checked (by step() or unscale_())
  /// since the last update().
  void update();
  /// Ends the iteration with `new_scale` as the scale (rounded to float32); the tracker stays.
  void update(double new_scale);
  /// Ends the iteration with the value of `new_scale` as the scale. AssertionError unless it is
  /// on a device of the scaler's type, holds one element and does not require grad;
  /// RuntimeError, as PyTorch 2.5's copy into the 0-dim scale, unless it is 0-dim too.
  void update(const Tensor& new_scale);

  /// The scale as a number: init_scale (as given, not rounded) before the first scale(), the
  /// scale tensor's float32 value after it, and 1.0 when disabled.
  double get_scale() const;
  /// The growth tracker (PyTorch's private _get_growth_tracker()): clean steps in a row since
  /// the scale last changed; 0 when disabled.
  int64_t growth_tracker() const;
  /// The factor the scale grows by.
  double get_growth_factor() const { return growth_factor_; }
  /// Sets the factor the scale grows by (unchecked, as in PyTorch).
  void set_growth_factor(double factor) { growth_factor_ = factor; }
  /// The factor the scale backs off by.
  double get_backoff_factor() const { return backoff_factor_; }
  /// Sets the factor the scale backs off by (unchecked, as in PyTorch).
  void set_backoff_factor(double factor) { backoff_factor_ = factor; }
  /// Clean steps in a row before the scale grows.
  int64_t get_growth_interval() const { return growth_interval_; }
  /// Sets the number of clean steps in a row before the scale grows.
  void set_growth_interval(int64_t interval) { growth_interval_ = interval; }
  /// False for a disabled scaler.
  bool is_enabled() const { return enabled_; }

  /// The scale, the factors, the interval and the tracker (call it after update()); nothing
  /// (PyTorch's empty dict) when disabled.
  std::optional<GradScalerState> state_dict() const;
  /// Restores a state_dict(). Before the first scale() it sets what scale() starts from;
  /// after it, it overwrites the scale and the tracker. Nothing happens when disabled;
  /// RuntimeError for an empty state (one saved from a disabled scaler), as in PyTorch.
  void load_state_dict(const std::optional<GradScalerState>& state);

 private:
  // Where an optimizer stands in the iteration (PyTorch's OptState).
  enum class Stage { Ready, Unscaled, Stepped };
  // Per optimizer: its stage, and one inf/NaN note (a 0-dim float32 tensor, 0 or 1) per device
  // its gradients were on.
  struct PerOptimizer {
    Stage stage = Stage::Ready;
    std::vector<std::pair<Device, Tensor>> found_inf;
  };
  void check_initialized(const char* method) const;
  void lazy_init(Device device);

  Device::Type device_;
  bool enabled_;
  double init_scale_;
  double growth_factor_;
  double backoff_factor_;
  int64_t growth_interval_;
  int64_t init_growth_tracker_ = 0;
  Tensor scale_;           // 0-dim float32, undefined until the first scale()
  Tensor growth_tracker_;  // 0-dim int32, beside it
  std::map<const optim::Optimizer*, PerOptimizer> per_optimizer_;  // cleared by update()
};

}  // namespace tiny::amp
