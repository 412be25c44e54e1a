// quantize.cpp: rounding tensors to small formats, and NVFP4's two-level scaling.
#include "tiny/quantize.h"

#include <algorithm>
#include <cmath>

#include "dispatch.h"
#include "internal.h"
#include "tiny/ops.h"

namespace tiny {

namespace {
// The float32 elements of `x`, contiguous, on the host (a copy when needed). These functions
// simulate formats to teach them, bit by bit with FloatFormat; a GPU tensor is rounded on the
// host and the result moved back to its device.
Tensor as_float32(const Tensor& x, const char* op) {
  detail::op_device(op, {&x});
  if (!is_floating(x.dtype()))
    throw TypeError(std::string("\"") + op + "\" not implemented for '" +
                    dtype_legacy_name(x.dtype()) + "'");
  return x.detach().to(kFloat32).contiguous().cpu();
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
