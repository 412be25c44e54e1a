// quantize.cpp: rounding tensors to small formats, and NVFP4's two-level scaling.
#include "tiny/quantize.h"

#include <algorithm>
#include <cmath>

#include "dispatch.h"
#include "internal.h"
#include "tiny/format.h"
#include "tiny/ops.h"

namespace tiny {

namespace {
// The float32 elements of `x`, contiguous, on the host (a copy when needed). These functions
// simulate formats to teach them, bit by bit with FloatFormat; a GPU tensor is rounded on the
// host and the result moved back to its device.
Tensor as_float32(const Tensor& x, const char* op) {
  detail::op_device(op, {&x});
  if (!is_floating(x.dtype()))
    throw not_implemented_for(op, x.dtype());
  return x.detach().to(kFloat32).contiguous().cpu();
}

// Refuses NaN and infinity: E2M1 has neither, and one infinite value would make the tensor
// scale infinite and every other value 0, a wrong answer without a word.
void check_finite(const Tensor& in, const char* op) {
  const float* p = in.data<float>();
  for (int64_t i = 0; i < in.numel(); ++i)
    if (!std::isfinite(p[i]))
      throw ValueError(std::string(op) + ": the input has a non-finite value (" +
                       (std::isnan(p[i]) ? "nan"
                        : p[i] > 0       ? "inf"
                                         : "-inf") +
                       " at index " + std::to_string(i) + "), which FP4 (E2M1) cannot represent");
}

// The number of elements of `shape`, refusing negative sizes and a product beyond int64.
int64_t checked_numel(const Shape& shape, const char* op) {
  int64_t n = 1;
  for (int64_t s : shape) {
    if (s < 0)
      throw ValueError(std::string(op) + ": shape " + detail::shape_str(shape) +
                       " has a negative size");
    if (__builtin_mul_overflow(n, s, &n))
      throw ValueError(std::string(op) + ": shape " + detail::shape_str(shape) +
                       " has more elements than int64 holds");
  }
  return n;
}

// An NvFp4Tensor is a plain struct that anyone can fill: before reading a single code, check
// that its fields agree with each other (a code per element, a scale per block of kBlock) and
// that every code and scale is one the format defines.
void check_nvfp4(const NvFp4Tensor& q, const char* op) {
  const int64_t n = checked_numel(q.shape, op), B = NvFp4Tensor::kBlock;
  const std::string at = std::string(op) + ": ";
  if (static_cast<uint64_t>(n) != q.codes.size())
    throw ValueError(at + "codes has " + std::to_string(q.codes.size()) + " values but shape " +
                     detail::shape_str(q.shape) + " has " + std::to_string(n) + " elements");
  const int64_t blocks = (n + B - 1) / B;
  if (static_cast<uint64_t>(blocks) != q.block_scales.size())
    throw ValueError(at + "block_scales has " + std::to_string(q.block_scales.size()) +
                     " scales but " + std::to_string(n) + " values in blocks of " +
                     std::to_string(B) + " need " + std::to_string(blocks));
  for (size_t i = 0; i < q.codes.size(); ++i)
    if (q.codes[i] > 15)
      throw ValueError(at + "code " + std::to_string(q.codes[i]) + " at index " +
                       std::to_string(i) + " is not a 4-bit E2M1 code (0 to 15)");
  // The block scales are non-negative E4M3 (the hardware's UE4M3): no sign bit, and not NaN.
  for (size_t b = 0; b < q.block_scales.size(); ++b) {
    const uint8_t s = q.block_scales[b];
    if (s & 0x80u || std::isnan(kFormatE4M3.decode(s)))
      throw ValueError(at + "block scale " + std::to_string(s) + " of block " + std::to_string(b) +
                       (s & 0x80u ? " has the sign bit set" : " is NaN") +
                       "; block scales are non-negative E4M3 values (0 to 126)");
  }
  if (!std::isfinite(q.tensor_scale) || q.tensor_scale < 0)
    throw ValueError(at + "tensor_scale must be finite and not negative, got " +
                     repr(static_cast<double>(q.tensor_scale)));
}
}  // namespace

Tensor round_to_format(const Tensor& x, const FloatFormat& format, Overflow overflow) {
  const Tensor in = as_float32(x, "round_to_format");
  Tensor out = empty(in.shape(), kFloat32);
  const float* p = in.data<float>();
  float* o = out.data<float>();
  for (int64_t i = 0; i < in.numel(); ++i) o[i] = static_cast<float>(format.round(p[i], overflow));
  return out.to(x.device());
}

NvFp4Tensor nvfp4_quantize(const Tensor& x) {
  const Tensor in = as_float32(x, "nvfp4_quantize");
  check_finite(in, "nvfp4_quantize");
  const float* p = in.data<float>();
  const int64_t n = in.numel(), B = NvFp4Tensor::kBlock;
  NvFp4Tensor q;
  q.shape = in.shape();
  q.codes.resize(static_cast<size_t>(n));
  q.block_scales.resize(static_cast<size_t>((n + B - 1) / B));
  const double e2m1_max = kFormatE2M1.info().max, e4m3_max = kFormatE4M3.info().max;
  double amax = 0;
  for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(static_cast<double>(p[i])));
  q.tensor_scale = amax > 0 ? static_cast<float>(amax / (e2m1_max * e4m3_max)) : 1.0f;
  for (int64_t b = 0; b * B < n; ++b) {
    const int64_t lo = b * B, hi = std::min(n, lo + B);
    double block_amax = 0;
    for (int64_t i = lo; i < hi; ++i)
      block_amax = std::max(block_amax, std::fabs(static_cast<double>(p[i])));
    // The block's scale, in units of the tensor scale, stored as E4M3 (clamped to its range).
    const float wanted = static_cast<float>(block_amax / e2m1_max / q.tensor_scale);
    q.block_scales[b] = static_cast<uint8_t>(kFormatE4M3.encode(wanted, Overflow::Saturate));
    const double scale = kFormatE4M3.decode(q.block_scales[b]) * q.tensor_scale;
    for (int64_t i = lo; i < hi; ++i)
      q.codes[i] = static_cast<uint8_t>(kFormatE2M1.encode(
          scale > 0 ? static_cast<float>(p[i] / scale) : 0.0f, Overflow::Saturate));
  }
  return q;
}

Tensor nvfp4_dequantize(const NvFp4Tensor& q) {
  check_nvfp4(q, "nvfp4_dequantize");
  Tensor out = empty(q.shape, kFloat32);
  float* o = out.data<float>();
  for (size_t i = 0; i < q.codes.size(); ++i) {
    const double scale =
        kFormatE4M3.decode(q.block_scales[i / NvFp4Tensor::kBlock]) * q.tensor_scale;
    o[i] = static_cast<float>(kFormatE2M1.decode(q.codes[i]) * scale);
  }
  return out;
}

Tensor fp4_single_scale(const Tensor& x) {
  const Tensor in = as_float32(x, "fp4_single_scale");
  check_finite(in, "fp4_single_scale");
  const float* p = in.data<float>();
  double amax = 0;
  for (int64_t i = 0; i < in.numel(); ++i)
    amax = std::max(amax, std::fabs(static_cast<double>(p[i])));
  const double scale = amax > 0 ? amax / kFormatE2M1.info().max : 1.0;
  Tensor out = empty(in.shape(), kFloat32);
  float* o = out.data<float>();
  for (int64_t i = 0; i < in.numel(); ++i)
    o[i] = static_cast<float>(
        kFormatE2M1.round(static_cast<float>(p[i] / scale), Overflow::Saturate) * scale);
  return out.to(x.device());
}

}  // namespace tiny
