// Chapter 10's program, run for real: its golden output, its README, the documents' numbers,
// and what its own measurements must show whatever the machine: every process count follows one
// process's loss curve, sharding cuts the bytes per rank as the rule says, and a checkpoint saved
// by 4 processes carries on in 2.
#include <cmath>
#include <sstream>

#include "literate.h"
#include "tiny/distributed.h"

using namespace tiny::testing;

// Without MPI (a machine where Open MPI is not installed) the chapter can only do its napkin
// math, and says so; its measured sections, which the golden file and the README hold, are then
// skipped rather than failed.
class Ch10_Parallel : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!tiny::dist::is_mpi_available())
      GTEST_SKIP() << "built without MPI (make deps installs Open MPI; then rebuild)";
  }
};

TEST_F(Ch10_Parallel, RunsAndMatchesGoldenOutput) {
  ASSERT_EQ(chapter_output().status, 0);
  EXPECT_TRUE(matches_golden(chapter_output().out, golden_path(TINY_CHAPTER_NAME)));
}

TEST_F(Ch10_Parallel, ReadmeMatchesTheCodeAndTheOutput) {
  EXPECT_TRUE(readme_is_honest(TINY_CHAPTER_NAME));
}

TEST(Ch10_ParallelWithoutMpi, DoesTheNapkinMathAndSaysWhatIsMissing) {
  if (tiny::dist::is_mpi_available()) GTEST_SKIP() << "built with MPI: the chapter runs whole";
  EXPECT_EQ(chapter_output().status, 0);
  EXPECT_TRUE(chapter_prints("this build has no MPI, so the processes cannot be started: install "
                             "Open MPI (make deps) and rebuild"));
}

namespace {

// The numbers of the lines between the heading holding `heading` and the next blank line, for
// the lines whose first word is a number.
std::vector<std::vector<double>> table(const std::string& heading) {
  std::vector<std::vector<double>> rows;
  bool inside = false;
  for (const auto& line : split_lines(chapter_output().out)) {
    if (line.find(heading) != std::string::npos) {
      inside = true;
      continue;
    }
    if (!inside) continue;
    if (line.empty()) break;
    std::istringstream words(line);
    std::vector<double> row;
    std::string word;
    while (words >> word) {
      char* end = nullptr;
      const double v = std::strtod(word.c_str(), &end);
      if (end != word.c_str() && *end == '\0') row.push_back(v);
      else if (row.empty()) break;
    }
    if (!row.empty()) rows.push_back(row);
  }
  return rows;
}

}  // namespace

TEST_F(Ch10_Parallel, TheDocumentsNumbers) {
  // Seed document 004, 3.1.1: 1,024 H100s at 50% of 990 TFLOP/s, 6 x params x tokens.
  EXPECT_TRUE(chapter_prints(
      "  compute: 6 x 70e9 x 4.19e+06 / (1,024 x 4.95e+14 FLOP/s) = 3.48 s per step"));
  // Seed document 000: FP32 gradients move 4 bytes per parameter, BF16 2 (the ring's 2(N-1)/N
  // makes that 8 and 4 on a large ring).
  EXPECT_TRUE(chapter_prints("       2             4.00             2.00"));
  EXPECT_TRUE(chapter_prints("    1024             7.99             4.00"));
  // 2 x 1023/1024 x 280 GB = 559 GB; / 50 GB/s = 11.19 s.
  EXPECT_TRUE(chapter_prints("  all-reduce, bytes each GPU sends:    FP32   559 GB    BF16   280 GB"));
  // 004, 3.1.2: 640 GB / 16 bytes = 40 billion, which only full sharding reaches per GPU.
  EXPECT_TRUE(chapter_prints(
      "  ZeRO-3 (FSDP): weights too        2.00 bytes/param   40.0 billion parameters"));
  EXPECT_TRUE(chapter_prints(
      "  data parallel, nothing sharded   16.00 bytes/param    5.0 billion parameters"));
}

TEST_F(Ch10_Parallel, EveryProcessCountFollowsOneProcessesCurve) {
  const auto rows = table("The same model in 1, 2 and 4 processes");
  ASSERT_GE(rows.size(), 4u);
  for (const auto& r : rows) {
    if (r.size() != 5) continue;  // the gap lines
    for (size_t k = 2; k < 5; ++k) EXPECT_NEAR(r[k], r[1], 2e-6) << "step " << r[0];
  }
  // One rank does exactly what one process does.
  EXPECT_TRUE(chapter_prints(
      "  1 process:    largest gap to one process over 12 steps: 0 (bit for bit)"));
  EXPECT_TRUE(chapter_prints_matching(
      R"(  2 processes:  largest gap to one process over 12 steps: (0 \(bit for bit\)|[0-9]\.[0-9]e-(0[7-9]|1[0-9])))"));
  EXPECT_TRUE(chapter_prints_matching(
      R"(  4 processes:  largest gap to one process over 12 steps: (0 \(bit for bit\)|[0-9]\.[0-9]e-(0[7-9]|1[0-9])))"));
}

TEST_F(Ch10_Parallel, ShardingCutsTheBytesPerRankAsTheRuleSays) {
  const auto rows = table("Memory per rank after a step");
  int checked = 0;
  for (const auto& r : rows) {
    if (r.size() != 6) continue;  // processes, weights, gradients, m and v, total, rule
    EXPECT_DOUBLE_EQ(r[4], r[5]) << "processes " << r[0];
    EXPECT_DOUBLE_EQ(r[1], 4.0);
    ++checked;
  }
  EXPECT_EQ(checked, 9);  // 1, 2 and 4 processes, three ways each
}

TEST_F(Ch10_Parallel, ACheckpointFromFourProcessesGoesOnInTwo) {
  const auto rows = table("A sharded checkpoint saved by 4 processes, loaded by 2");
  int steps = 0;
  for (const auto& r : rows)
    if (r.size() == 3) {
      EXPECT_NEAR(r[1], r[2], 2e-6) << "step " << r[0];
      ++steps;
    }
  EXPECT_EQ(steps, 3);
}
