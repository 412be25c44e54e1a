/// @file amp.h
/// @brief Automatic mixed precision: autocast, which runs each op in the dtype its class in the
/// op table asks for (op_table.h's AutocastClass).
///
/// While an AutocastGuard for a device type is alive, ops on tensors of that device type cast
/// their floating inputs (float64 excepted, as in PyTorch) before they run: LowerPrecision ops
/// (matmul) to the guard's dtype, Float32 ops (exp, log, pow, sum, mean) to float32, Promote ops
/// (addcmul, addcdiv) to the widest input's dtype; the others run as they would without it. The
/// casts are ordinary recorded ops, so gradients flow back through them in the inputs' dtypes.
#pragma once
#include "tiny/device.h"
#include "tiny/dtype.h"

namespace tiny {

/// Turns autocast on (or, with `enabled` false, off) for one device type for its lifetime
/// (torch.autocast(device_type, dtype, enabled)), then restores what was there before; nests.
class AutocastGuard {
 public:
  /// Autocast on `device` (CPU or CUDA) with `dtype`, float16 or bfloat16 (ValueError otherwise);
  /// `enabled` false turns it off inside the scope instead.
  AutocastGuard(Device::Type device, DType dtype, bool enabled = true);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  Device::Type device_;
  bool previous_enabled_;
  DType previous_dtype_;
};

/// True while an AutocastGuard for `device` is alive on this thread.
bool autocast_enabled(Device::Type device);
/// The lower-precision dtype autocast uses on `device` (float16 on CUDA, bfloat16 on the CPU
/// unless a guard chose otherwise).
DType autocast_dtype(Device::Type device);

}  // namespace tiny
