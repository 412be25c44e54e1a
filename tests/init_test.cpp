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

  // Truncated normal on [a, b] = [-2 std, 2 std] and the documents' [-3, 3] with std 1/sqrt(in)
  // (redrawn normals), and on [1, 3] at std 1 (a tail: uniform candidates and an acceptance
  // test): inside the bounds, with the mean and spread of a normal truncated at alpha and beta
  // standard deviations, Z = Phi(beta) - Phi(alpha), mean std (phi(alpha) - phi(beta)) / Z and
  // variance std^2 (1 + (alpha phi(alpha) - beta phi(beta)) / Z - ((phi(alpha) - phi(beta)) /
  // Z)^2).
  auto phi = [](double x) { return std::exp(-x * x / 2) / std::sqrt(2 * std::numbers::pi); };
  auto Phi = [](double x) { return (1 + std::erf(x / std::sqrt(2.0))) / 2; };
  auto truncated_mean = [&](double std, double alpha, double beta) {
    return std * (phi(alpha) - phi(beta)) / (Phi(beta) - Phi(alpha));
  };
  auto truncated_std = [&](double std, double alpha, double beta) {
    const double z = Phi(beta) - Phi(alpha);
    const double m = (phi(alpha) - phi(beta)) / z;
    return std * std::sqrt(1 + (alpha * phi(alpha) - beta * phi(beta)) / z - m * m);
  };
  for (DType dt : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor t = empty({out, in}, dt);
    // The 16-bit types round each value by up to half an ulp: 2^-11 (float16) or 2^-8
    // (bfloat16) relative; the spread may move by that much more.
    const double rounding = dt == kBFloat16 ? std::ldexp(1.0, -8)
                            : dt == kFloat16 ? std::ldexp(1.0, -11)
                                             : 0.0;
    init::trunc_normal_(t, 0, 0.02, -0.04, 0.04, g);
    EXPECT_LE(max_abs(t), 0.04 * (1 + eps_of(dt)));
    EXPECT_NEAR(sample_std(t) / truncated_std(0.02, -2, 2), 1.0, std_tolerance(3, n) + rounding);
    const double s = 1 / std::sqrt(static_cast<double>(in));
    init::trunc_normal_(t, 0, s, -3, 3, g);  // bounds 90 std out: a plain normal
    EXPECT_NEAR(sample_std(t) / s, 1.0, std_tolerance(3, n) + rounding);
    init::trunc_normal_(t, 0, 1, 1, 3, g);
    const Tensor d = t.to(kFloat64);
    EXPECT_GE(-tiny::max(neg(d)).item(), 1.0);
    EXPECT_LE(tiny::max(d).item(), 3.0);
    // Kurtosis below 4 for this shape (a normal's upper tail, cut at 3): its sample spread is
    // held to the bound for 4.
    const double sd = truncated_std(1, 1, 3);
    EXPECT_NEAR(d.mean().item(), truncated_mean(1, 1, 3), 6 * sd / std::sqrt(n) + 2 * rounding);
    EXPECT_NEAR(sample_std(t) / sd, 1.0, std_tolerance(4, n) + 2 * rounding);
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
  // trunc_normal_ fails in its first draw: normal_ when most of the normal lies in [a, b],
  // uniform_ when little does.
  EXPECT_TRUE(throws_with<NotImplementedError>([&] { init::trunc_normal_(ints); },
                                               "\"normal_kernel_cpu\" not implemented for 'Long'"));
  EXPECT_TRUE(throws_with<NotImplementedError>([&] { init::trunc_normal_(ints, 0, 1, 1, 3); },
                                               "\"check_uniform_bounds\" not implemented for 'Long'"));
  Tensor w = empty({3, 4});
  EXPECT_TRUE(throws_with<RuntimeError>([&] { init::normal_(w, 0, -1); },
                                        "normal expects std >= 0.0, but found std -1"));
  EXPECT_TRUE(throws_with<RuntimeError>([&] { init::uniform_(w, 1, -1); },
                                        "uniform_ expects to return a [from, to) range"));
  EXPECT_TRUE(throws_with<ZeroDivisionError>([&] { init::trunc_normal_(w, 0, 0); },
                                             "float division by zero"));
  EXPECT_TRUE(throws_with<RuntimeError>(
      [&] { init::trunc_normal_(w, 0, 1, 2, -2); },
      "uniform_ expects to return a [from, to) range, but found from=2 > to=-2"));
  EXPECT_TRUE(
      throws_with<ValueError>([&] { init::kaiming_uniform_(w, 0, init::FanMode::FanIn, "gelu"); },
                              "Unsupported nonlinearity gelu"));
}

TEST(Init, WarnsLikePyTorch) {
  Tensor w = empty({3, 4});
  {
    WarningCapture caught;
    init::trunc_normal_(w, 10, 1, -2, 2);
    EXPECT_EQ(caught.messages(),
              std::vector<std::string>{"mean is more than 2 std from [a, b] in "
                                       "nn.init.trunc_normal_. The distribution of values may "
                                       "be incorrect."});
  }
  // Candidates in [-2, 2] accepted with probability pdf(x) / pdf(2): below 0 that is under
  // e^-18, so every value lands near b.
  EXPECT_LE(tiny::max(w).item(), 2.0);
  EXPECT_GT(-tiny::max(neg(w)).item(), 0.0);
  Tensor none = empty({0, 4});
  {
    WarningCapture caught;
    init::kaiming_uniform_(none);
    EXPECT_EQ(caught.messages(),
              std::vector<std::string>{"Initializing zero-element tensors is a no-op"});
  }
  WarningCapture caught;
  init::trunc_normal_(w, 0, 1, -2, 2);
  EXPECT_TRUE(caught.messages().empty());
}

// Without a capture a warning is printed as Python prints it, once per message: a loop that
// repeats a mistake is told once.
TEST(Warnings, PrintedOnceLikePythonsDefaultFilter) {
  const std::string message = "a warning only this test gives";
  ::testing::internal::CaptureStderr();
  warn(message);
  warn(message);
  warn(message + ", again");
  EXPECT_EQ(::testing::internal::GetCapturedStderr(),
            "UserWarning: " + message + "\nUserWarning: " + message + ", again\n");
  // A capture sees every one, repeats included, and the innermost capture takes them.
  WarningCapture outer;
  {
    WarningCapture inner;
    warn(message);
    warn(message);
    EXPECT_EQ(inner.messages().size(), 2u);
  }
  warn("after the inner one");
  EXPECT_EQ(outer.messages(), std::vector<std::string>{"after the inner one"});
}
