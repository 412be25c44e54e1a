// init.cpp: torch.nn.init, step for step (PyTorch 1.13's torch/nn/init.py), on top of random.h's
// uniform_ and normal_. The one piece of arithmetic of its own is trunc_normal_'s erfinv, which
// follows PyTorch's CPU calc_erfinv (aten/src/ATen/native/Math.h) so the bits agree.
#include "tiny/init.h"

#include <algorithm>
#include <cmath>
#include <iostream>
#include <limits>
#include <numbers>
#include <sstream>
#include <string>

#include "tiny/autograd.h"  // NoGradGuard
#include "tiny/error.h"

#include "mul_add.h"  // detail::mul_add: a * b + c, fused or not, as PyTorch's kernels do it

namespace tiny::init {

namespace {

std::string number_str(double x) {  // as PyTorch's messages print a double (6 digits)
  std::ostringstream s;
  s << x;
  return s.str();
}

void warn(const std::string& message) { std::cerr << "UserWarning: " << message << "\n"; }

// ---- erfinv, as PyTorch's CPU computes it -----------------------------------------------------
//
// A rational approximation (Pavlis's translation of the MATLAB erfinv, the coefficients below)
// on |y| <= 0.7 and another beyond, then two Newton steps on erf(x) = y. PyTorch's AVX2 build
// fuses every `p * z + c` of the polynomials into one FMA; its default build rounds twice.
// Matching that is what makes the result bit-exact (checked against torch on 200,000 inputs
// each for float32 and float64, both builds).

template <bool kFused, typename M> M erfinv(M y) {
  constexpr M a0 = M(0.886226899), a1 = M(-1.645349621), a2 = M(0.914624893), a3 = M(-0.140543331);
  constexpr M b0 = M(-2.118377725), b1 = M(1.442710462), b2 = M(-0.329097515), b3 = M(0.012229801);
  constexpr M c0 = M(-1.970840454), c1 = M(-1.624906493), c2 = M(3.429567803), c3 = M(1.641345311);
  constexpr M d0 = M(3.543889200), d1 = M(1.637067800);
  const M y_abs = std::fabs(y);
  if (y_abs > M(1)) return std::numeric_limits<M>::quiet_NaN();
  if (y_abs == M(1)) return std::copysign(std::numeric_limits<M>::infinity(), y);
  M x;
  if (y_abs <= M(0.7)) {  // the central range: a ratio of polynomials in y^2
    const M z = y * y;
    const M num = detail::mul_add<kFused>(
        detail::mul_add<kFused>(detail::mul_add<kFused>(a3, z, a2), z, a1), z, a0);
    const M dem = detail::mul_add<kFused>(
        detail::mul_add<kFused>(detail::mul_add<kFused>(detail::mul_add<kFused>(b3, z, b2), z, b1),
                                z, b0),
        z, M(1));
    x = y * num / dem;
  } else {  // the tails: a ratio of polynomials in sqrt(-log((1 - |y|) / 2))
    const M z = std::sqrt(-std::log((M(1) - y_abs) / M(2)));
    const M num = detail::mul_add<kFused>(
        detail::mul_add<kFused>(detail::mul_add<kFused>(c3, z, c2), z, c1), z, c0);
    const M dem = detail::mul_add<kFused>(detail::mul_add<kFused>(d1, z, d0), z, M(1));
    x = std::copysign(num, y) / dem;
  }
  // Newton: x -= (erf(x) - y) / erf'(x), with erf'(x) = 2 / sqrt(pi) * exp(-x^2).
  const M two_over_sqrt_pi = M(2) / static_cast<M>(std::sqrt(std::numbers::pi));
  x = x - (std::erf(x) - y) / (two_over_sqrt_pi * std::exp(-x * x));
  x = x - (std::erf(x) - y) / (two_over_sqrt_pi * std::exp(-x * x));
  return x;
}

// trunc_normal_'s steps after the uniform draw, on a contiguous CPU tensor of T: erfinv_,
// mul_(scale), add_(mean), clamp_(lo, hi), each rounding to T. PyTorch turns each number into a
// T first, then computes in float for the 16-bit types.
template <bool kFused, typename T>
void erfinv_scale_shift_clamp(T* p, int64_t n, double scale, double mean, double lo, double hi) {
  using M = opmath_t<T>;
  const M s = static_cast<M>(T(static_cast<M>(scale))), m = static_cast<M>(T(static_cast<M>(mean)));
  const M l = static_cast<M>(T(static_cast<M>(lo))), h = static_cast<M>(T(static_cast<M>(hi)));
  for (int64_t i = 0; i < n; ++i) {
    T v = T(erfinv<kFused>(static_cast<M>(p[i])));
    v = T(detail::rounded_product(static_cast<M>(v), s));  // mul_ and add_ are separate kernels
    v = T(static_cast<M>(v) + m);
    p[i] = T(std::min(std::max(static_cast<M>(v), l), h));
  }
}

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
  if (!is_floating(t.dtype()))  // PyTorch fails in its first step, uniform_
    throw not_implemented_for("check_uniform_bounds", t.dtype());
  if (t.dtype() == kFloat16)  // ... or in its second, on the CPU (raised here before any draw)
    throw not_implemented_for("erfinv_vml_cpu", kFloat16);
  if (!(std > 0))
    throw RuntimeError("trunc_normal_ expects std > 0, but found std=" + number_str(std));
  if (!(a < b))
    throw RuntimeError("trunc_normal_ expects a < b, but found a=" + number_str(a) +
                       " and b=" + number_str(b));
  if (mean < a - 2 * std || mean > b + 2 * std)
    warn(
        "mean is more than 2 std from [a, b] in nn.init.trunc_normal_. The distribution of "
        "values may be incorrect.");
  NoGradGuard no_grad;
  // Uniform between the normal CDF at a and at b, mapped to [2 cdf(a) - 1, 2 cdf(b) - 1], where
  // erfinv(v) * sqrt(2) is the inverse CDF: cdf(x) = (1 + erf(x / sqrt(2))) / 2.
  auto cdf = [](double x) { return (1.0 + std::erf(x / std::sqrt(2.0))) / 2.0; };
  const double lo = cdf((a - mean) / std), hi = cdf((b - mean) / std);
  tiny::uniform_(t, 2 * lo - 1, 2 * hi - 1, gen);
  // The remaining steps are elementwise, so any order will do: a contiguous CPU copy when t is
  // not one already, written back at the end.
  Tensor work = t.device().is_cpu() && t.is_contiguous() ? t : t.cpu().contiguous();
  const bool fused = cpu_capability() == CpuCapability::Avx2;
  const double scale = std * std::sqrt(2.0);
  dispatch_floating(work.dtype(), "erfinv_vml_cpu", [&]<typename T>() {
    T* p = static_cast<T*>(work.data_ptr());
    if (fused) erfinv_scale_shift_clamp<true, T>(p, work.numel(), scale, mean, a, b);
    else erfinv_scale_shift_clamp<false, T>(p, work.numel(), scale, mean, a, b);
  });
  if (!work.shares_storage_with(t)) t.copy_(work);
  return t;
}

}  // namespace tiny::init
