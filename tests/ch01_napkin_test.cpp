// Chapter 01's program, run for real: its output against the golden file, and the numbers the
// seed documents print (004 section 3.1, 003's tensor memory and matmul FLOPs) checked directly.
#include <gtest/gtest.h>

#include "literate.h"

using namespace tiny::testing;

TINY_GOLDEN_TEST(Ch01_Napkin)
TINY_LITERATE_TEST(Ch01_Napkin)

// The documents' numbers, typed from the documents: 6 x 70e9 x 15e12 = 6.3e24 FLOPs; 989.5
// TFLOP/s dense; 50% MFU on 1024 GPUs; 143.93 days exactly, "about 146" after rounding the
// throughput to 5e17; 640 GB / 16 bytes = 40B parameters; zeros(4, 8) is 128 bytes;
// 2 * 1024 * 256 * 64 = 33554432 FLOPs.
TEST(Ch01_Napkin, ReproducesTheDocumentsNumbers) {
  EXPECT_TRUE(chapter_prints("work: 6 x 7e+10 parameters x 1.5e+13 tokens = 6.3e+24 FLOPs"));
  EXPECT_TRUE(chapter_prints(
      "throughput: 989.5 TFLOP/s dense bf16 x 50% MFU x 1024 GPUs = 5.06624e+17 FLOP/s"));
  EXPECT_TRUE(chapter_prints("time: 6.3e+24 / 5.06624e+17 = 12435257.7 s = 143.93 days"));
  EXPECT_TRUE(chapter_prints(
      "napkin: throughput rounded to 5e+17 first: 1.26e+07 s = 145.83 days, \"about 146 days\""));
  EXPECT_TRUE(chapter_prints("largest model: 6.4e+11 / 16 = 40000000000.0 parameters (40B)"));
  EXPECT_TRUE(chapter_prints(
      "x = zeros(4, 8): dtype float32, shape (4, 8), numel 32, element_size 4, nbytes 128"));
  EXPECT_TRUE(chapter_prints("x (1024, 256) @ w (256, 64): 2 x B x D x K = 33554432 FLOPs"));
}
