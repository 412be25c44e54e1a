// Chapter 06's program, run for real: its golden output, its README, and every line that
// PyTorch prints for the same computations (tests/fixtures/ch06_pytorch.txt, written by the
// script beside it with PyTorch 1.13: the same seeds, data, models and optimizers).
#include <cstdlib>
#include <fstream>

#include "literate.h"

using namespace tiny::testing;

TINY_GOLDEN_TEST(Ch06_Training)
TINY_LITERATE_TEST(Ch06_Training)

TEST(Ch06_Training, PrintsWhatPyTorchPrintsForTheSameProgram) {
  std::ifstream in(std::string(TINY_SOURCE_DIR) + "/tests/fixtures/ch06_pytorch.txt");
  ASSERT_TRUE(in) << "tests/fixtures/ch06_pytorch.txt is missing";
  const auto lines = split_lines(chapter_output().out);
  std::string want;
  int checked = 0;
  while (std::getline(in, want)) {
    if (want.empty()) continue;
    // A line of PyTorch's may be the beginning of the chapter's (the router's lines go on with
    // the gap to the hand-written AdamW, which PyTorch has no counterpart for).
    bool found = false;
    for (const auto& line : lines) found |= line.rfind(want, 0) == 0;
    EXPECT_TRUE(found) << "PyTorch prints, and the chapter does not:\n" << want;
    ++checked;
  }
  EXPECT_GE(checked, 20);  // the fixture is not empty (it has 24 lines)
}

TEST(Ch06_Training, TheDocumentsNumbersAndClaims) {
  // Seed document 004: Cruncher(64, 2)'s state_dict names and sizes; 003/PYTORCH_FACTS: 8256.
  EXPECT_TRUE(chapter_prints("  layers.0.weight   4096 values"));
  EXPECT_TRUE(chapter_prints("  layers.1.weight   4096 values"));
  EXPECT_TRUE(chapter_prints("  final.weight        64 values"));
  EXPECT_TRUE(chapter_prints("parameters: 8256 = D * D * num_layers + D"));
  EXPECT_TRUE(chapter_prints("model(x) for x of shape (8, 64): output of shape (8,)"));
  // PYTORCH_FACTS.md: seeds, and the documents' data file (40 bytes, no header).
  EXPECT_TRUE(
      chapter_prints("manual_seed(0); rand(3)           -> tensor([0.4963, 0.7682, 0.0885])"));
  EXPECT_TRUE(chapter_prints("manual_seed(0); randint(10, (5,)) -> tensor([4, 9, 3, 0, 3])"));
  EXPECT_TRUE(chapter_prints("tofile: 10 int32 values -> data.npy, 40 bytes (no header)"));
  // trunc_normal_'s bounds are absolute: a=-3, b=3 truncates nothing at std 1/128.
  EXPECT_TRUE(chapter_prints_matching(
      R"(trunc_normal_\(std=1/128, a=-3, b=3\): +largest \|w\| [4-9]\.\d\d std; +[1-9]\d* of 524288 beyond 3 std)"));
  EXPECT_TRUE(chapter_prints_matching(
      R"(trunc_normal_\(std=1/128, a=-3/128, b=3/128\): largest \|w\| 3\.00 std; +0 of 524288 beyond 3 std)"));
  // Document 000's router: loss ln 4 at the first step, and the library's AdamW within
  // floating-point rounding of the written-out one (the document: 1.7e-18, 2.8e-17, 1.1e-15).
  EXPECT_TRUE(chapter_prints_matching(
      R"(step    1: loss 1\.3863, largest gap between optim::AdamW and the hand-written AdamW \d\.\de-(1[6-9]|2\d))"));
  EXPECT_TRUE(chapter_prints_matching(
      R"(step 3000: loss \d\.\d{4}, largest gap between optim::AdamW and the hand-written AdamW \d\.\de-(1[5-9]|2\d))"));
  EXPECT_TRUE(
      chapter_prints("HandAdaGrad and optim::AdaGrad give the same losses, bit for bit: True"));
  EXPECT_TRUE(chapter_prints(
      "resumed from it for 10 more steps: equal to the uninterrupted run, bit for bit: True"));
}
