// Chapter 04's program, run for real: its golden output (the CPU file, or the GPU file when a
// device is present), its README, and the lines that carry its lessons: each is printed and its
// numbers parse, and the allocator counts exactly the bytes of the two matrices of seed document
// 004 §3.3.3. How the measured times and bandwidths compare (the launch against the real time,
// queued calls against waiting each time, x + y against the copy) is for the reader to see in
// the output; it is not asserted here, because on a busy machine any ratio can miss.
#include <regex>
#include <string>

#include "literate.h"
#include "tiny/device.h"

using namespace tiny::testing;

TINY_LITERATE_TEST(Ch04_Devices)

TEST(Ch04_Devices, RunsAndMatchesGoldenOutput) {
  ASSERT_EQ(chapter_output().status, 0);
  const bool gpu = tiny::cuda::available();
  if (gpu && tiny::cuda::device_count() != 1)
    GTEST_SKIP() << "the GPU golden file is written for one device";
  EXPECT_TRUE(
      matches_golden(chapter_output().out, golden_path(gpu ? "ch04_devices_gpu" : "ch04_devices")));
}

// The number right after `prefix` on the first line that starts with `line_start` and holds
// `prefix`; -1 when there is no such line or no number follows.
static double number_after(const std::string& line_start, const std::string& prefix) {
  static const std::regex number(R"(^-?[0-9]+(\.[0-9]+)?)");
  for (const auto& line : split_lines(chapter_output().out)) {
    if (line.rfind(line_start, 0) != 0) continue;
    const size_t at = line.find(prefix);
    if (at == std::string::npos) continue;
    const std::string rest = line.substr(at + prefix.size());
    std::smatch m;
    if (!std::regex_search(rest, m, number)) return -1;
    return std::stod(m[0]);
  }
  return -1;
}

TEST(Ch04_Devices, TheLessonsArePrinted) {
  ASSERT_EQ(chapter_output().status, 0);
  // The clock that does not wait, beside the real time (the launch alone may round to 0.00 ms).
  EXPECT_GE(number_after("4096 matmul on", "no synchronize: "), 0);
  EXPECT_GT(number_after("4096 matmul on", "'measured', "), 0);
  // Waiting after each call, and queueing 200 of them.
  EXPECT_GT(number_after("256 matmul on", ": "), 0);
  EXPECT_GT(number_after("256 matmul on", "waiting each time, "), 0);
  // The driver's copy and the elementwise kernel, and the share of the copy it reaches.
  EXPECT_GT(number_after("on ", ": copy "), 0);
  EXPECT_GT(number_after("on ", "GB/s, x + y "), 0);
  EXPECT_GT(number_after("on ", "GB/s ("), 0);
  // The one number here that is not a measurement: it must be exact.
  static const std::regex memory(
      R"(memory_allocated\([^)]+\) grew by 8192 bytes = 2 x \(32 x 32 x 4\): yes)");
  bool exact = false;
  for (const auto& line : split_lines(chapter_output().out))
    exact = exact || std::regex_match(line, memory);
  EXPECT_TRUE(exact) << "memory_allocated(device) grew by 8192 bytes = 2 x (32 x 32 x 4): yes";
}
