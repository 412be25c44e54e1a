// torch.nn.init's functions: bit for bit against PyTorch's own numbers (the init cases of
// tests/fixtures/random_streams.txt, under both of PyTorch's CPU kernel families), against
// float64 formulas for their bounds and spreads, and PyTorch's errors and warnings.
#include <cmath>
#include <numbers>

#include "fixtures/random_streams.h"
#include "test_util.h"
#include "tiny/init.h"

using namespace tiny;
using namespace tiny::testing;

namespace {

bool init_op(const std::string& op) {
  return op == "trunc" || op == "xavier_uniform" || op == "xavier_normal" ||
         op == "kaiming_uniform";
}

// The sample standard deviation, in float64.
double sample_std(const Tensor& t) {
  const Tensor d = t.to(kFloat64);
  const double mean = d.mean().item();
  return std::sqrt(((d - mean) * (d - mean)).sum().item() / static_cast<double>(d.numel() - 1));
}

double max_abs(const Tensor& t) { return t.to(kFloat64).abs().max().item(); }

// Statistical tolerances. For n independent values the sample standard deviation s of a
// distribution with kurtosis k has relative standard error sqrt((k - 1) / (4 n)): 0.707/sqrt(n)
// for a normal (k = 3), 0.447/sqrt(n) for a uniform (k = 1.8); a truncated normal has k < 3, so
// the normal's bound covers it. The tests allow 6 standard errors: a false alarm once in 5e8.
double std_tolerance(double kurtosis, int64_t n) {
  return 6 * std::sqrt((kurtosis - 1) / (4.0 * static_cast<double>(n)));
}

}  // namespace

TEST(Init, MatchesTorchOnThisProcessor) {
  EXPECT_GT(check_streams(init_op, cpu_capability()), 600);
}

TEST(Init, DefaultKernelsMatchTorchDefaultCapability) {
  EXPECT_GT(check_streams(init_op, CpuCapability::Default), 600);
}

TEST(Init, Avx2KernelsMatchTorchAvx2Capability) {
  if (!have_avx2_kernels()) GTEST_SKIP() << "this processor lacks AVX2 or FMA";
  EXPECT_GT(check_streams(init_op, CpuCapability::Avx2), 600);
}

TEST(Init, FansFollowPyTorchsRule) {
  EXPECT_EQ(init::calculate_fan_in_and_fan_out(empty({256, 128})),
            (std::pair<int64_t, int64_t>{128, 256}));  // nn.Linear's (out, in): fan_in = in
  EXPECT_EQ(init::calculate_fan_in_and_fan_out(empty({10, 7, 3, 3})),
            (std::pair<int64_t, int64_t>{63, 90}));  // a convolution: times the kernel's size
  EXPECT_TRUE(throws_with<ValueError>(
      [] { init::calculate_fan_in_and_fan_out(empty({5})); },
      "Fan in and fan out can not be computed for tensor with fewer than 2 dimensions"));
  Tensor bias = empty({5});
  EXPECT_TRUE(throws_with<ValueError>([&] { init::xavier_uniform_(bias); }, "fewer than 2"));
}

TEST(Init, GainsAreTorchs) {
  EXPECT_EQ(init::calculate_gain("linear"), 1.0);
  EXPECT_EQ(init::calculate_gain("conv2d"), 1.0);
  EXPECT_EQ(init::calculate_gain("sigmoid"), 1.0);
  EXPECT_EQ(init::calculate_gain("tanh"), 5.0 / 3);
  EXPECT_EQ(init::calculate_gain("relu"), std::sqrt(2.0));
  EXPECT_EQ(init::calculate_gain("leaky_relu"), std::sqrt(2.0 / (1 + 0.01 * 0.01)));
  EXPECT_EQ(init::calculate_gain("leaky_relu", std::sqrt(5.0)), std::sqrt(2.0 / 6.0));
  EXPECT_EQ(init::calculate_gain("selu"), 0.75);
  EXPECT_TRUE(throws_with<ValueError>([] { init::calculate_gain("gelu"); },
                                      "Unsupported nonlinearity gelu"));
}

// Bounds and spreads against the float64 formulas, on a (256, 128) weight: n = 32768 values.
TEST(Init, BoundsAndSpreadsMatchTheFormulas) {
  Generator g(test_seed());
  const int64_t out = 256, in = 128, n = out * in;
  Tensor w = empty({out, in});

  // Xavier uniform: U(-b, b), b = gain sqrt(6 / (in + out)); the largest of 32768 values lies
  // within b / 1000 of b except with probability (1 - 1e-3)^32768 = 6e-15.
  const double xb = 2.0 * std::sqrt(6.0 / (in + out));
  init::xavier_uniform_(w, 2.0, g);
  // The values are float32, computed as from + (to - from) u in float: one may round up to the
  // float32 nearest b, a hair above the float64 bound (seen once in 300 seeds).
  const double f32_ulp = 1.0 + std::ldexp(1.0, -23);
  EXPECT_LE(max_abs(w), xb * f32_ulp);
  EXPECT_GT(max_abs(w), xb * (1 - 1e-3));
  EXPECT_NEAR(sample_std(w) / (xb / std::sqrt(3.0)), 1.0, std_tolerance(1.8, n));

  // Xavier normal: std = gain sqrt(2 / (in + out)).
  init::xavier_normal_(w, 1.0, g);
  EXPECT_NEAR(sample_std(w) / std::sqrt(2.0 / (in + out)), 1.0, std_tolerance(3, n));

  // Kaiming uniform as nn.Linear calls it (a = sqrt(5)): bound 1 / sqrt(fan_in).
  init::kaiming_uniform_(w, std::sqrt(5.0), init::FanMode::FanIn, "leaky_relu", g);
  EXPECT_LE(max_abs(w), f32_ulp / std::sqrt(in));
  EXPECT_GT(max_abs(w), (1.0 / std::sqrt(in)) * (1 - 1e-3));
  // ... and for relu by fan_out: bound sqrt(2) sqrt(3 / fan_out).
  init::kaiming_uniform_(w, 0, init::FanMode::FanOut, "relu", g);
  EXPECT_LE(max_abs(w), std::sqrt(2.0) * std::sqrt(3.0 / out) * f32_ulp);
  EXPECT_NEAR(sample_std(w) / std::sqrt(2.0 / out), 1.0, std_tolerance(1.8, n));

  // Truncated normal on [a, b] = [-2 std, 2 std] and the documents' [-3, 3] with std 1/sqrt(in):
  // inside the bounds, and the spread of a normal truncated at alpha and beta standard
  // deviations, std^2 (1 + (alpha phi(alpha) - beta phi(beta)) / Z - ((phi(alpha) - phi(beta))
  // / Z)^2) with Z = Phi(beta) - Phi(alpha).
  auto truncated_std = [](double std, double alpha, double beta) {
    auto phi = [](double x) { return std::exp(-x * x / 2) / std::sqrt(2 * std::numbers::pi); };
    auto Phi = [](double x) { return (1 + std::erf(x / std::sqrt(2.0))) / 2; };
    const double z = Phi(beta) - Phi(alpha);
    const double m = (phi(alpha) - phi(beta)) / z;
    return std * std::sqrt(1 + (alpha * phi(alpha) - beta * phi(beta)) / z - m * m);
  };
  for (DType dt : {kFloat32, kFloat64, kBFloat16}) {
    Tensor t = empty({out, in}, dt);
    init::trunc_normal_(t, 0, 0.02, -0.04, 0.04, g);
    EXPECT_LE(max_abs(t), 0.04 * (1 + eps_of(dt))) << dtype_name(dt);
    // bfloat16 rounds each value by up to 2^-9 relative: its std may move by that much more.
    const double rounding = dt == kBFloat16 ? std::ldexp(1.0, -8) : 0.0;
    EXPECT_NEAR(sample_std(t) / truncated_std(0.02, -2, 2), 1.0, std_tolerance(3, n) + rounding)
        << dtype_name(dt);
    const double s = 1 / std::sqrt(static_cast<double>(in));
    init::trunc_normal_(t, 0, s, -3, 3, g);  // bounds far outside: a plain normal ...
    if (dt != kBFloat16) {
      // The uniform step can draw exactly -1 (in float32 one draw in 2^24), whose erfinv is
      // -inf, clamped to a = -3: 34 standard deviations out, enough for one such value to move
      // the spread by 2%. PyTorch does the same. The spread is measured without those; more
      // than two of them in 32768 draws would be a fault (expected 0.002 in float32).
      std::vector<double> inside;
      for (double v : t.tolist())
        if (v != -3.0 && v != 3.0) inside.push_back(v);
      EXPECT_LE(n - static_cast<int64_t>(inside.size()), 2) << dtype_name(dt);
      const Shape kept{static_cast<int64_t>(inside.size())};
      EXPECT_NEAR(sample_std(from_vector(inside, kept)) / s, 1.0, std_tolerance(3, n))
          << dtype_name(dt);
    } else {
      // ... except in bfloat16, in PyTorch as here: the uniform step draws from 256 levels in
      // [-1, 1), and the level -1 (one draw in 256) has erfinv -inf, which the clamp makes a =
      // -3, some 34 standard deviations out. Expect n / 256 = 128 of them (binomial standard
      // deviation 11.3; 6 of them allowed).
      const double at_a = (t.to(kFloat64) == -3.0).to(kFloat64).sum().item();
      EXPECT_NEAR(at_a, n / 256.0, 6 * std::sqrt(n / 256.0));
    }
  }
}

TEST(Init, FillsParametersWithoutRecording) {
  Tensor w = empty({4, 3}).requires_grad_();
  init::normal_(w, 0, 0.02);
  init::uniform_(w, -1, 1);
  init::xavier_uniform_(w);
  init::kaiming_uniform_(w, std::sqrt(5.0));
  init::trunc_normal_(w, 0, 0.02, -0.04, 0.04);
  EXPECT_TRUE(w.requires_grad());
  EXPECT_TRUE(w.is_leaf());
  EXPECT_EQ(&init::zeros_(w), &w);  // returns its argument
  EXPECT_EQ(w.abs().max().item(), 0.0);
  init::ones_(w);
  EXPECT_EQ(-tiny::max(neg(w)).item(), 1.0);
  Tensor ints = empty({3}, kInt64);
  EXPECT_EQ(init::ones_(ints).tolist(), (std::vector<double>{1, 1, 1}));
  EXPECT_EQ(init::zeros_(ints).tolist(), (std::vector<double>{0, 0, 0}));
}

TEST(Init, BadInputRaisesPyTorchsErrors) {
  Tensor ints = empty({3, 4}, kInt64);
  EXPECT_TRUE(throws_with<RuntimeError>([&] { init::xavier_uniform_(ints); },
                                     "\"check_uniform_bounds\" not implemented for 'Long'"));
  EXPECT_TRUE(throws_with<RuntimeError>([&] { init::xavier_normal_(ints); },
                                     "\"normal_kernel_cpu\" not implemented for 'Long'"));
  EXPECT_TRUE(throws_with<RuntimeError>([&] { init::trunc_normal_(ints); },
                                     "\"check_uniform_bounds\" not implemented for 'Long'"));
  Tensor half = empty({3, 4}, kFloat16);
  EXPECT_TRUE(throws_with<RuntimeError>([&] { init::trunc_normal_(half); },
                                     "\"erfinv_vml_cpu\" not implemented for 'Half'"));
  Tensor w = empty({3, 4});
  EXPECT_TRUE(throws_with<RuntimeError>([&] { init::normal_(w, 0, -1); },
                                        "normal expects std >= 0.0, but found std -1"));
  EXPECT_TRUE(throws_with<RuntimeError>([&] { init::uniform_(w, 1, -1); },
                                        "uniform_ expects to return a [from, to) range"));
  EXPECT_TRUE(throws_with<RuntimeError>([&] { init::trunc_normal_(w, 0, 0); },
                                        "trunc_normal_ expects std > 0, but found std=0"));
  EXPECT_TRUE(throws_with<RuntimeError>([&] { init::trunc_normal_(w, 0, 1, 2, -2); },
                                        "trunc_normal_ expects a < b, but found a=2 and b=-2"));
  EXPECT_TRUE(
      throws_with<ValueError>([&] { init::kaiming_uniform_(w, 0, init::FanMode::FanIn, "gelu"); },
                              "Unsupported nonlinearity gelu"));
}

TEST(Init, WarnsLikePyTorch) {
  Tensor w = empty({3, 4});
  ::testing::internal::CaptureStderr();
  init::trunc_normal_(w, 10, 1, -2, 2);
  EXPECT_NE(::testing::internal::GetCapturedStderr().find(
                "UserWarning: mean is more than 2 std from [a, b] in nn.init.trunc_normal_. The "
                "distribution of values may be incorrect."),
            std::string::npos);
  EXPECT_EQ(-tiny::max(neg(w)).item(), -2.0);  // everything clamped to a, as in PyTorch
  Tensor none = empty({0, 4});
  ::testing::internal::CaptureStderr();
  init::kaiming_uniform_(none);
  EXPECT_NE(::testing::internal::GetCapturedStderr().find(
                "UserWarning: Initializing zero-element tensors is a no-op"),
            std::string::npos);
  ::testing::internal::CaptureStderr();
  init::trunc_normal_(w, 0, 1, -2, 2);  // no warning
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
}
