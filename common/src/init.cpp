// init.cpp: torch.nn.init, step for step (PyTorch 2.x's torch/nn/init.py), on top of random.h's
// uniform_ and normal_ and the library's tensor ops, so that the bits agree with PyTorch's.
#include "tiny/init.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "internal.h"  // non_overlapping_and_dense
#include "tiny/autograd.h"  // NoGradGuard
#include "tiny/error.h"
#include "tiny/ops.h"


namespace tiny::init {

namespace {

// A new CPU tensor with t's dtype and shape, and t's strides where t is dense (torch.empty_like;
// contiguous otherwise): a random fill then visits its elements in the order it visits t's.
Tensor empty_like(const Tensor& t) {
  if (!detail::non_overlapping_and_dense(t)) return empty(t.shape(), t.dtype());
  auto storage = std::make_shared<Storage>(t.numel() * t.element_size(), Device::cpu());
  return Tensor(storage, t.dtype(), t.shape(), t.strides(), 0);
}

// x rounded to dtype d and read back as a double (`t.new_tensor(x).item()`).
double round_to(DType d, double x) { return full({}, x, d).item(); }

}  // namespace

double calculate_gain(std::string_view nonlinearity, std::optional<double> param) {
  for (std::string_view linear : {"linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d",
                                  "conv_transpose2d", "conv_transpose3d", "sigmoid"})
    if (nonlinearity == linear) return 1.0;
  if (nonlinearity == "tanh") return 5.0 / 3;
  if (nonlinearity == "relu") return std::sqrt(2.0);
  if (nonlinearity == "leaky_relu") {
    const double slope = param.value_or(0.01);
    return std::sqrt(2.0 / (1 + slope * slope));
  }
  if (nonlinearity == "selu") return 3.0 / 4;
  throw ValueError("Unsupported nonlinearity " + std::string(nonlinearity));
}

std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Tensor& t) {
  if (t.dim() < 2)
    throw ValueError(
        "Fan in and fan out can not be computed for tensor with fewer than 2 dimensions");
  int64_t receptive_field = 1;  // the kernel's size, for convolution weights
  for (int64_t d = 2; d < t.dim(); ++d) receptive_field *= t.size(d);
  return {t.size(1) * receptive_field, t.size(0) * receptive_field};
}

Tensor& uniform_(Tensor& t, double a, double b, Generator& gen) {
  NoGradGuard no_grad;
  return tiny::uniform_(t, a, b, gen);
}

Tensor& normal_(Tensor& t, double mean, double std, Generator& gen) {
  NoGradGuard no_grad;
  return tiny::normal_(t, mean, std, gen);
}

Tensor& zeros_(Tensor& t) {
  NoGradGuard no_grad;
  return t.zero_();
}

Tensor& ones_(Tensor& t) {
  NoGradGuard no_grad;
  return t.fill_(1);
}

Tensor& xavier_uniform_(Tensor& t, double gain, Generator& gen) {
  const auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(t);
  const double std = gain * std::sqrt(2.0 / static_cast<double>(fan_in + fan_out));
  const double bound = std::sqrt(3.0) * std;  // U(-b, b) has standard deviation b / sqrt(3)
  return init::uniform_(t, -bound, bound, gen);
}

Tensor& xavier_normal_(Tensor& t, double gain, Generator& gen) {
  const auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(t);
  const double std = gain * std::sqrt(2.0 / static_cast<double>(fan_in + fan_out));
  return init::normal_(t, 0.0, std, gen);
}

Tensor& kaiming_uniform_(Tensor& t, double a, FanMode mode, std::string_view nonlinearity,
                         Generator& gen) {
  if (t.numel() == 0) {
    warn("Initializing zero-element tensors is a no-op");
    return t;
  }
  const auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(t);
  const int64_t fan = mode == FanMode::FanIn ? fan_in : fan_out;
  const double std = calculate_gain(nonlinearity, a) / std::sqrt(static_cast<double>(fan));
  const double bound = std::sqrt(3.0) * std;
  return init::uniform_(t, -bound, bound, gen);
}

Tensor& trunc_normal_(Tensor& t, double mean, double std, double a, double b, Generator& gen) {
  // The probability mass inside [a, b] picks the method. PyTorch computes it in Python, where
  // std = 0 is a division by zero (after the warning).
  auto cdf = [](double x) { return (1.0 + std::erf(x / std::sqrt(2.0))) / 2.0; };
  if (mean < a - 2 * std || mean > b + 2 * std)
    warn(
        "mean is more than 2 std from [a, b] in nn.init.trunc_normal_. The distribution of "
        "values may be incorrect.");
  if (std == 0) throw ZeroDivisionError("float division by zero");
  const double p = cdf((b - mean) / std) - cdf((a - mean) / std);
  NoGradGuard no_grad;
  // Every step below is one of PyTorch's tensor ops, so each rounds to t's dtype as PyTorch's
  // does; a tensor on a GPU is worked on as a CPU copy with its layout, so it gets the numbers a
  // CPU tensor would, as the other fills do.
  Tensor work = t.device().is_cpu() ? t : t.cpu();
  auto any = [](const Tensor& mask) { return mask.sum().item() != 0; };
  if (p > 0.3) {
    // Most of the normal lies inside: draw normals and redraw, for the whole tensor at once,
    // until none is outside. The bounds are first rounded to t's dtype, so that the test agrees
    // with the values t can hold.
    const double lo = round_to(work.dtype(), a), hi = round_to(work.dtype(), b);
    Tensor result = tiny::normal_(work, mean, std, gen);
    for (;;) {
      const Tensor outside = (result < lo) != (result > hi);  // one of them, never both
      if (!any(outside)) break;
      Tensor fresh = empty_like(result);
      result = where(outside, tiny::normal_(fresh, mean, std, gen), result);
    }
    if (!result.shares_storage_with(work)) work.copy_(result);
  } else {
    // Little of it does (narrow bounds, or bounds out in a tail): uniform candidates in [a, b],
    // each accepted with probability pdf(x) / pdf(mode), the mode being the highest point of
    // the density inside [a, b]; the test is log(u) <= log pdf(x) - log pdf(mode), and the
    // elements not yet accepted draw again, whole tensors at a time.
    const double mode = std::max(a, std::min(mean, b));
    const double log_peak = -0.5 * ((mode - mean) / std) * ((mode - mean) / std);
    Tensor candidates = empty_like(work), accept = empty_like(work);
    auto log_density = [&](Tensor& x) -> Tensor& {
      return x.sub_(mean).div_(std).pow_(2).mul_(-0.5).sub_(log_peak);
    };
    tiny::uniform_(work, a, b, gen);
    candidates.copy_(work);
    Tensor pending = tiny::uniform_(accept, 0, 1, gen).log_() > log_density(candidates);
    Tensor result = work;
    while (any(pending)) {
      tiny::uniform_(candidates, a, b, gen);
      result = where(pending, candidates, result);
      pending = where(pending, tiny::uniform_(accept, 0, 1, gen).log_() > log_density(candidates),
                      pending);
    }
    if (!result.shares_storage_with(work)) work.copy_(result);
  }
  if (!work.shares_storage_with(t)) t.copy_(work);
  return t;
}

}  // namespace tiny::init
