/// @file flops.h
/// @brief Napkin math: FLOPs of training and of a matmul, hardware promises (FLOP/s and memory
/// bandwidth), time and memory.
///
/// The formulas every estimate in this tutorial rests on, in one place:
/// training costs about 6 FLOPs per parameter per token (2 forward, 4 backward), a matmul of
/// (B, D) by (D, K) costs 2 B D K, and AdamW with everything in float32 keeps 16 bytes per parameter.
#pragma once
#include <cstdint>
#include <string>

#include "tiny/dtype.h"

namespace tiny {

/// FLOPs to train a model of `parameters` on `tokens`: 6 per parameter per token.
inline double training_flops(double parameters, double tokens) {
  // BEGIN SOLUTION ch01 training_flops
  return 6.0 * parameters * tokens;
  // END SOLUTION ch01 training_flops
}

/// FLOPs of (B, D) @ (D, K): each of the B*K outputs takes D multiplies and D adds.
inline double matmul_flops(double B, double D, double K) {
  // BEGIN SOLUTION ch01 matmul_flops
  return 2.0 * B * D * K;
  // END SOLUTION ch01 matmul_flops
}

/// Seconds to do `flops` at `flop_per_sec`.
inline double seconds_for(double flops, double flop_per_sec) { return flops / flop_per_sec; }

/// Seconds in a day.
inline constexpr double kSecondsPerDay = 24.0 * 3600.0;

/// Bytes per parameter that training with AdamW keeps when everything is float32:
/// the weight (4), its gradient (4) and Adam's two moving averages (8).
inline constexpr double kAdamWFloat32BytesPerParam = 4 + 4 + 8;

/// A datasheet's peak matmul throughput for one accelerator.
struct Promise {
  const char* device;   ///< "H100 SXM", "A100"
  DType dtype;          ///< the input type the number is for
  double flop_per_sec;  ///< dense peak, FLOP/s
};

/// The peak dense matmul FLOP/s a datasheet promises for `device` ("H100", "H200" or "A100") in
/// `dtype` (float32, bfloat16, float16). The H100's sheet quotes 1979 TFLOP/s for bf16 with
/// 2:4 structured sparsity; dense is half, 989.5. Throws for combinations it does not know.
double promised_flop_per_sec(const std::string& device, DType dtype);

/// The memory bandwidth, bytes/s between HBM and the chip, that a datasheet promises for
/// `device`: "H100" (the SXM card, 3.35 TB/s; the PCIe card has 2 TB/s), "H200" (4.8 TB/s) or
/// "A100" (the 80 GB SXM card, 2.039 TB/s; the 40 GB card has 1.555 TB/s). Chapter 09 divides
/// promised_flop_per_sec by it to get the accelerator intensity, the FLOPs per byte at which an
/// op stops waiting on memory. Throws for devices it does not know.
double promised_bytes_per_sec(const std::string& device);

}  // namespace tiny
