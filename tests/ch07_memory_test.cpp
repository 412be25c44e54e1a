// Chapter 07's program, run for real: its golden output, its README, the lines seed documents
// 000 and 004 print or imply, and what PyTorch prints for the same model
// (tests/fixtures/ch07_pytorch.txt, written by the script beside it with PyTorch 2.15).
#include <fstream>

#include "literate.h"

using namespace tiny::testing;

TINY_GOLDEN_TEST(Ch07_Memory)
TINY_LITERATE_TEST(Ch07_Memory)

// step_memory.py's four float32 lines, exactly as PyTorch prints them.
TEST(Ch07_Memory, PrintsPyTorchsFourLines) {
  EXPECT_EQ(prints_pytorchs_lines("ch07_pytorch.txt"), 4);
}

TEST(Ch07_Memory, TheDocumentsNumbers) {
  // Seed document 004, 3.1.2: 640 GB / 4 bytes is the naive 160 billion; 16 bytes gives 40.
  EXPECT_TRUE(chapter_prints("memory: 8 x 80 GB = 640 GB"));
  EXPECT_TRUE(chapter_prints("weights alone, 4 bytes/param:                        160 billion parameters"));
  EXPECT_TRUE(chapter_prints("weights + gradients + Adam m and v, 16 bytes/param:   40 billion parameters"));
  // 004, 3.5.6, at B = 2, D = 4, L = 2: 36 parameters, 16 activations, 496 bytes, 432 FLOPs.
  EXPECT_TRUE(chapter_prints("  parameters        D*D*L + D    36"));
  EXPECT_TRUE(chapter_prints("  activations       B*D*L        16"));
  EXPECT_TRUE(chapter_prints("  total memory      4 x 124     496 bytes"));
  EXPECT_TRUE(chapter_prints("  FLOPs per step    6*B*params  432"));
  // The measured side: weights, gradients and AdaGrad's g2 are the formula's 36 x 4 bytes.
  EXPECT_TRUE(chapter_prints("  weights            144 bytes"));
  EXPECT_TRUE(chapter_prints("  gradients          144 bytes"));
  EXPECT_TRUE(chapter_prints("  optimizer state    144 bytes"));
  // PyTorch's graph saves 24 numbers for the same model (the fixture's count).
  EXPECT_TRUE(chapter_prints(
      "  activations         96 bytes  = 24 numbers: the graph keeps each layer's input (x, h1, "
      "h2)"));
  // The fixture: 1,572,864 bytes of activations saved by PyTorch for the step_memory model.
  EXPECT_TRUE(chapter_prints("activations saved: 1,572,864 bytes"));
  // 16 bytes per parameter of 8,393,728, as the allocator counts them (plus 4 step counters).
  EXPECT_TRUE(chapter_prints(
      "the allocator: weights 33,574,912 bytes, gradients 33,574,912, optimizer state 67,149,840"));
}

TEST(Ch07_Memory, CheckpointedGradientsAreBitwiseTheSame) {
  const auto lines = split_lines(chapter_output().out);
  int rows = 0;
  for (const auto& line : lines)
    if (line.find("bitwise") != std::string::npos) ++rows;
  EXPECT_EQ(rows, 4);
  for (const auto& line : lines) EXPECT_EQ(line.find("  NO"), std::string::npos) << line;
}
