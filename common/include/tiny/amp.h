/// @file amp.h
/// @brief Automatic mixed precision: autocast, which runs each op in the dtype PyTorch's autocast
/// lists give it (op_table.h's AutocastClass).
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

#include "tiny/device.h"
#include "tiny/dtype.h"

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
