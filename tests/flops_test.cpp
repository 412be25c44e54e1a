// Napkin-math formulas and hardware promises, against the numbers the seed documents print.
#include "test_util.h"

using namespace tiny;
using namespace tiny::testing;

TEST(Flops, TrainingCostsSixFlopsPerParameterPerToken) {  // seed document 004, section 3.1.1
  EXPECT_DOUBLE_EQ(training_flops(70e9, 15e12), 6.3e24);
  EXPECT_EQ(training_flops(1, 1), 6.0);
  EXPECT_EQ(training_flops(0, 1e12), 0.0);
}

TEST(Flops, MatmulCostsTwoBDK) {  // seed document 003, tests/fixtures/pytorch_facts.txt section 10
  EXPECT_EQ(matmul_flops(1024, 256, 64), 33554432.0);
  EXPECT_EQ(matmul_flops(1, 1, 1), 2.0);
  // The two-layer model of document 003: forward 2BDD + 2BDK, the total six times data x params.
  const double B = 1024, D = 256, K = 64;
  EXPECT_EQ(matmul_flops(B, D, D) + matmul_flops(B, D, K), 167772160.0);
}

TEST(Flops, PromisesAndTime) {
  EXPECT_EQ(promised_flop_per_sec("H100", kBFloat16), 989.5e12);  // 1979e12 / 2, dense
  EXPECT_EQ(promised_flop_per_sec("H100", kFloat16), 989.5e12);
  EXPECT_EQ(promised_flop_per_sec("A100", kBFloat16), 312e12);
  EXPECT_EQ(promised_flop_per_sec("H100", kFloat32), 67.5e12);
  // 6.3e24 FLOPs at 50% of 989.5 TFLOP/s on 1024 GPUs: 12435257.7 s = 143.93 days.
  const double s = seconds_for(6.3e24, 989.5e12 * 0.5 * 1024);
  EXPECT_NEAR(s, 12435257.7, 0.05);
  EXPECT_NEAR(s / kSecondsPerDay, 143.93, 0.005);
  EXPECT_EQ(8 * 80e9 / kAdamWFloat32BytesPerParam, 40e9);
  EXPECT_TRUE(throws_with<ValueError>([] { promised_flop_per_sec("V100", kBFloat16); },
                                      "no promised FLOP/s for V100"));
  EXPECT_TRUE(throws_with<ValueError>([] { promised_flop_per_sec("H100", kInt64); },
                                      "no promised FLOP/s for H100 in int64"));
}

// Datasheet bandwidths, and the accelerator intensities chapter 09 derives from them (seed
// document 004, section 3.6.3: "H100 is approximately 295 FLOP/byte").
TEST(Flops, PromisedBandwidth) {
  EXPECT_EQ(promised_bytes_per_sec("H100"), 3.35e12);
  EXPECT_EQ(promised_bytes_per_sec("H200"), 4.8e12);
  EXPECT_EQ(promised_bytes_per_sec("A100"), 2.039e12);
  // 989.5e12 / 3.35e12 = 295.373..., 989.5 / 4.8 = 206.145..., 312 / 2.039 = 153.016...
  EXPECT_NEAR(promised_flop_per_sec("H100", kBFloat16) / promised_bytes_per_sec("H100"), 295.373,
              5e-4);
  EXPECT_NEAR(promised_flop_per_sec("H200", kBFloat16) / promised_bytes_per_sec("H200"), 206.146,
              5e-4);
  EXPECT_NEAR(promised_flop_per_sec("A100", kBFloat16) / promised_bytes_per_sec("A100"), 153.016,
              5e-4);
  EXPECT_TRUE(throws_with<ValueError>([] { promised_bytes_per_sec("V100"); },
                                      "no promised bandwidth for V100"));
}
