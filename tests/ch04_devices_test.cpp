// Chapter 04's program, run for real: its golden output (the CPU file, or the GPU file when a
// device is present), its README, and the lessons its measurements must show on any machine:
// a clock that does not wait sees only the launch, and the allocator counts exactly the bytes
// of the two matrices of seed document 004 §3.3.3.
#include <cstdlib>
#include <regex>

#include "literate.h"
#include "tiny/device.h"

using namespace tiny::testing;

TINY_LITERATE_TEST(Ch04_Devices)

TEST(Ch04_Devices, RunsAndMatchesGoldenOutput) {
  ASSERT_EQ(chapter_output().status, 0);
  const bool gpu = tiny::cuda::available();
  if (gpu && tiny::cuda::device_count() != 1)
    GTEST_SKIP() << "the GPU golden file is written for one device";
  EXPECT_TRUE(matches_golden(chapter_output().out, golden_path(gpu ? "ch04_devices_gpu" : "ch04_devices")));
}

// The first number after `prefix` on the line that starts with it (-1 when absent).
static double number_after(const std::string& line_start, const std::string& prefix) {
  for (const auto& line : split_lines(chapter_output().out)) {
    if (line.rfind(line_start, 0) != 0) continue;
    const size_t at = line.find(prefix);
    if (at != std::string::npos) return std::atof(line.c_str() + at + prefix.size());
  }
  return -1;
}

TEST(Ch04_Devices, TheLessonsHold) {
  ASSERT_EQ(chapter_output().status, 0);
  // The launch returns long before the 4096 matmul is done (the document: 0.05 ms against 47.58).
  const double launch = number_after("4096 matmul on", "no synchronize: ");
  const double real = number_after("4096 matmul on", "'measured', ");
  ASSERT_GT(real, 0);
  EXPECT_LT(launch, real / 10) << "the unsynchronised clock should see only the launch";
  // Queueing never costs more per call than waiting after each (noise allowed on a busy CPU).
  const double each = number_after("256 matmul on", ": ");
  const double queued = number_after("256 matmul on", "waiting each time, ");
  ASSERT_GT(queued, 0);
  EXPECT_LT(queued, each * 1.25);
  EXPECT_TRUE(std::regex_search(chapter_output().out, std::regex("grew by 8192 bytes = 2 x \\(32 x 32 x 4\\): yes")));
  if (tiny::cuda::available()) {
    // On a GPU the queue hides the round trip: the document's 230 us against 30.
    EXPECT_LT(queued, each / 2);
    // An elementwise kernel streams memory nearly as fast as the driver's copy.
    const std::string out = chapter_output().out;
    std::smatch m;
    ASSERT_TRUE(std::regex_search(out, m, std::regex(R"(\(([0-9]+)% of the copy\))")));
    EXPECT_GE(std::stoi(m[1]), 80) << "x + y should reach 80% of the device-to-device copy's bandwidth";
  }
}
