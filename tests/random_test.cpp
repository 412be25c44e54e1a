// The generator reproduces PyTorch's CPU streams (values from tests/fixtures/pytorch_facts.txt,
// section 10, measured with torch 1.13), and its distributions have the right statistics.
#include "test_util.h"

using namespace tiny;
using namespace tiny::testing;

TEST(Random, RandMatchesTorch) {
  manual_seed(0);
  EXPECT_EQ(rand({3}).tolist(),
            (std::vector<double>{0.49625658988952637, 0.7682217955589294, 0.08847743272781372}));
}

TEST(Random, RandnSerialPathMatchesTorch) {
  manual_seed(0);
  const auto v = randn({3}).tolist();
  const std::vector<double> torch = {1.5409960746765137, -0.293428897857666, -2.1787893772125244};
  for (size_t i = 0; i < 3; ++i) EXPECT_NEAR(v[i], torch[i], 1e-7) << i;
}

TEST(Random, RandnBlockPathMatchesTorch) {
  manual_seed(0);
  const auto v = randn({16}).tolist();
  const std::vector<double> torch = {-1.1258398294448853, -1.152360200881958, -0.2505785822868347,
                                     -0.4338788092136383};
  // The transform runs in float32; libm's float sin/cos/log may differ from torch's vectorised
  // ones in the last bit, so compare to 2 float32 ulps at magnitude ~1.
  for (size_t i = 0; i < 4; ++i) EXPECT_NEAR(v[i], torch[i], 2.5e-7) << i;
}

// Values printed by torch 1.13 on this machine (torch.Generator().manual_seed(0)); the script
// that made them is tests/fixtures/random_fixtures.py.
TEST(Random, TailOfTheBlockPathAndFloat64MatchTorch) {
  Generator g(0);
  const auto v = randn({20}, kFloat32, g).tolist();  // 16 + a tail that redoes the last 16
  const std::vector<double> tail = {0.9318265914916992, 1.2590092420578003, 2.0049805641174316,
                                    0.05373690277338028};
  for (size_t i = 0; i < 4; ++i) EXPECT_NEAR(v[16 + i], tail[i], 2.5e-7) << i;
  g.manual_seed(0);
  const auto d = randn({5}, kFloat64, g).tolist();
  const std::vector<double> torch64 = {1.5409961082440433, -0.2934289057609464, -2.1787893820745574,
                                       0.5684312772806678, -1.084522342424021};
  for (size_t i = 0; i < 5; ++i) EXPECT_NEAR(d[i], torch64[i], 1e-15) << i;
  g.manual_seed(0);
  EXPECT_EQ(rand({3}, kFloat64, g).tolist(),
            (std::vector<double>{0.9700530018065531, 0.707819864399788, 0.45938294312745087}));
  g.manual_seed(0);  // a range of 2^40 takes 64-bit draws
  EXPECT_EQ(randint(3, int64_t(1) << 40, {3}, g).tolist(),
            (std::vector<double>{741308245840, 506173264053, 291477995287}));
}

TEST(Random, RandintMatchesTorch) {
  manual_seed(0);
  EXPECT_EQ(randint(10, {5}).tolist(), (std::vector<double>{4, 9, 3, 0, 3}));
}

TEST(Random, SeedRestartsTheStreamAndGeneratorsAreIndependent) {
  Generator a(123), b(123);
  Tensor x = randn({7}, kFloat32, a);
  rand({5});  // the default generator does not disturb a or b
  Tensor y = randn({7}, kFloat32, b);
  EXPECT_TRUE(equal(x, y));
  a.manual_seed(123);
  EXPECT_TRUE(equal(randn({7}, kFloat32, a), x));
}

TEST(Random, DistributionsHaveTheRightMoments) {
  Generator g(test_seed());
  const int64_t n = 200000;
  // Standard errors: uniform mean 1/sqrt(12 n) ~ 6.5e-4, normal mean 1/sqrt(n) ~ 2.2e-3;
  // allow 6 of them.
  Tensor u = rand({n}, kFloat32, g);
  EXPECT_NEAR(u.mean().item(), 0.5, 6 * 6.5e-4);
  EXPECT_GE(tiny::max(neg(u)).item(), -1.0);         // all >= 0 ...
  EXPECT_LT(u.max().item(), 1.0);                    // ... and < 1
  for (int64_t size : {15, 16, 17, 1000, 100001}) {  // both randn paths, with and without a tail
    Tensor z = randn({size}, kFloat64, g);
    EXPECT_EQ(z.numel(), size);
  }
  Tensor z = randn({n}, kFloat32, g);
  EXPECT_NEAR(z.mean().item(), 0.0, 6 * 2.2e-3);
  EXPECT_NEAR((z * z).mean().item(), 1.0, 6 * 3.2e-3);  // var of z^2 is 2: se sqrt(2/n)
  Tensor r = randint(3, 7, {n}, g);
  EXPECT_EQ(r.dtype(), kInt64);
  EXPECT_EQ(r.max().item(), 6);
  EXPECT_EQ(tiny::max(neg(r)).item(), -3);
}

TEST(Random, BadArgumentsRaise) {
  EXPECT_TRUE(
      throws_with<RuntimeError>([] { randint(5, 5, {3}); }, "expects 'from' to be less than 'to'"));
  EXPECT_TRUE(
      throws_with<TypeError>([] { rand({3}, kInt64); }, "\"uniform_\" not implemented for 'Long'"));
  EXPECT_TRUE(
      throws_with<TypeError>([] { randn({3}, kBool); }, "\"normal_\" not implemented for 'Bool'"));
}
