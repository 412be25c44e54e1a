// Chapter 05's program, run for real: its golden output, its README, and every line seed
// document 000 prints for float_formats.py.
#include "literate.h"

using namespace tiny::testing;

TINY_GOLDEN_TEST(Ch05_Floats)
TINY_LITERATE_TEST(Ch05_Floats)

TEST(Ch05_Floats, PrintsEveryLineOfTheDocument) {
  const std::vector<std::string> document = {
      "          exponent mantissa    largest  smallest normal  smallest subnormal  step at 1.0",
      "float32          8       23    3.4e+38         1.18e-38             1.4e-45     1.19e-07",
      "float16          5       10   6.55e+04          6.1e-05            5.96e-08     0.000977",
      "bfloat16         8        7   3.39e+38         1.18e-38            9.18e-41      0.00781",
      "",
      "    1e-08 stored as  float16: 0            bfloat16: 1.00117e-08",
      "    70000 stored as  float16: inf          bfloat16: 70144",
      "    1.001 stored as  float16: 1.00098      bfloat16: 1",
      "1 + 10,000 steps of 0.0001 in float32  = 2.0002 (should be 2.0000)",
      "1 + 10,000 steps of 0.0001 in bfloat16 = 1.0000 (should be 2.0000)",
      "gradients [1e-08, 2e-07, 0.0001] in float16: [0, 1.79e-07, 0.0001]",
      "scaled by 1024, stored, unscaled: [1e-08, 2e-07, 0.0001]"};
  const auto lines = split_lines(chapter_output().out);
  ASSERT_GE(lines.size(), document.size() + 1);
  for (size_t i = 0; i < document.size(); ++i)
    EXPECT_EQ(lines[i + 1], document[i]) << "line " << i + 2;
  // Seed document 004, section 3.3.1: the 16 values of NVFP4's E2M1 (the 8 non-negative ones).
  EXPECT_TRUE(
      chapter_prints("the non-negative values of E2M1: [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]"));
}

// A --csv folder that cannot be written stops the chapter at once: the error is all it prints.
TEST(Ch05_Floats, BadCsvFolderFailsBeforeAnyOutput) {
  const std::string blocker = std::string(TINY_BINARY_DIR) + "/test_csv_ch05_blocker";
  std::ofstream(blocker) << "a file, not a folder\n";
  const ProgramOutput bad =
      run_program(std::string(TINY_CHAPTER_EXE) + " --csv " + blocker + "/figures");
  EXPECT_EQ(bad.status, 1);
  EXPECT_EQ(bad.out,
            "error: cannot write CSV files to '" + blocker + "/figures': Not a directory\n");
}
