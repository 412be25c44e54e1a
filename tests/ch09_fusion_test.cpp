// Chapter 09's program, run for real: its golden output and README, the numbers of seed document
// 004's section 3.6 recomputed here from the datasheets and the formulas (by other arithmetic
// than the program's: closed forms, long double), and the figure's CSV. What this CPU measured
// is checked only for being consistent with itself (a rate is its FLOPs or bytes over its time,
// a verdict follows from the numbers printed beside it), never against a bound on its speed.
#include <cmath>
#include <cstdio>
#include <sstream>
#include <regex>

#include "literate.h"

using namespace tiny::testing;

TINY_GOLDEN_TEST(Ch09_Fusion)
TINY_LITERATE_TEST(Ch09_Fusion)

namespace {

// The datasheets, typed again here: dense bfloat16 FLOP/s and HBM bytes/s of the SXM cards.
constexpr long double kH100Flops = 989.5e12L, kH100Bytes = 3.35e12L;
constexpr long double kH200Flops = 989.5e12L, kH200Bytes = 4.8e12L;
constexpr long double kA100Flops = 312e12L, kA100Bytes = 2.039e12L;

// `value` as the program prints it with `format`.
std::string printed(const char* format, long double value) {
  char text[64];
  std::snprintf(text, sizeof text, format, static_cast<double>(value));
  return text;
}

// The first line that matches `pattern` (whole line), its groups as strings; fails if none.
std::vector<std::string> line_matching(const std::string& pattern) {
  const std::regex re(pattern);
  for (const std::string& line : split_lines(chapter_output().out)) {
    std::smatch m;
    if (std::regex_match(line, m, re)) return std::vector<std::string>(m.begin() + 1, m.end());
  }
  ADD_FAILURE() << "no line matches " << pattern;
  return {};
}

// A rate as printed ("71.85 GFLOP/s", "3.35 TB/s") in units per second.
double rate(const std::string& number, const std::string& prefix) {
  const double scale = prefix == "T" ? 1e12 : prefix == "G" ? 1e9 : 1e6;
  return std::stod(number) * scale;
}

// This CPU's roof as the accelerator table printed it: peak FLOP/s, bytes/s, FLOP per byte.
struct PrintedRoof {
  double flops = 0, bytes = 0, intensity = 0;
};
PrintedRoof cpu_roof() {
  const auto g = line_matching(
      R"(this CPU +([0-9.]+) ([MGT])FLOP/s +([0-9.]+) ([MGT])B/s +([0-9.]+)   measured: .*)");
  if (g.size() != 5) return {};
  return {rate(g[0], g[1]), rate(g[2], g[3]), std::stod(g[4])};
}

}  // namespace

// Section 3.6.2: ReLU on 1024 x 1024 bfloat16 numbers moves 4n bytes and does n FLOPs.
TEST(Ch09_Fusion, ReluTakesTheTimeOfItsBytes) {
  const long double n = 1024.0L * 1024.0L;
  const long double moving = 4 * n / kH100Bytes, computing = n / kH100Flops;
  EXPECT_NEAR(static_cast<double>(moving), 1.2520e-6, 1e-10);     // 4194304 / 3.35e12
  EXPECT_NEAR(static_cast<double>(computing), 1.0597e-9, 1e-13);  // 1048576 / 989.5e12
  EXPECT_TRUE(
      chapter_prints("n = 1,048,576 elements: 4,194,304 bytes to move (4n), 1,048,576 "
                     "FLOPs to do (n)"));
  EXPECT_TRUE(
      chapter_prints("moving them:   4n / 3.35e+12 B/s     = " + printed("%.2e", moving) + " s"));
  EXPECT_TRUE(chapter_prints(
      "computing:      n / 9.895e+14 FLOP/s = " + printed("%.2e", computing) + " s"));
  EXPECT_EQ(printed("%.2e", moving), "1.25e-06");
  EXPECT_EQ(printed("%.2e", computing), "1.06e-09");
  EXPECT_TRUE(chapter_prints("the bytes take " + printed("%.0f", moving / computing) +
                             " times as long as the arithmetic: ReLU is memory-bound"));
  // The document's 1.2e-6 and 1.0e-9 are the quotients truncated to two figures, as the program
  // says; rounding gives 1.3e-6 and 1.1e-9.
  EXPECT_EQ(std::trunc(moving * 1e7L) / 10, 1.2L);
  EXPECT_EQ(std::trunc(computing * 1e10L) / 10, 1.0L);
  EXPECT_EQ(printed("%.1e", moving), "1.3e-06");
  EXPECT_EQ(printed("%.1e", computing), "1.1e-09");
}

// Section 3.6.3: the H100's accelerator intensity is about 295; the H200's and A100's follow
// from their sheets the same way. This CPU's printed intensity is its printed peak over its
// printed bandwidth (each printed to 4 figures, so they agree to about 0.1%).
TEST(Ch09_Fusion, AcceleratorIntensities) {
  EXPECT_EQ(printed("%.2f", kH100Flops / kH100Bytes), "295.37");
  EXPECT_EQ(printed("%.2f", kH200Flops / kH200Bytes), "206.15");
  EXPECT_EQ(printed("%.2f", kA100Flops / kA100Bytes), "153.02");
  EXPECT_TRUE(
      chapter_prints("H100 SXM        989.5 TFLOP/s   3.35 TB/s           295.37   "
                     "datasheet: bfloat16 dense, HBM"));
  EXPECT_TRUE(
      chapter_prints("H200 SXM        989.5 TFLOP/s   4.8 TB/s            206.15   "
                     "datasheet: bfloat16 dense, HBM"));
  EXPECT_TRUE(
      chapter_prints("A100 SXM 80GB   312 TFLOP/s     2.039 TB/s          153.02   "
                     "datasheet: bfloat16 dense, HBM"));
  const PrintedRoof cpu = cpu_roof();
  ASSERT_GT(cpu.bytes, 0);
  EXPECT_NEAR(cpu.flops / cpu.bytes, cpu.intensity, 2e-3 * cpu.intensity + 0.005);
}

// Section 3.6.4's table, from the document's formulas at n = 1024 in bfloat16.
TEST(Ch09_Fusion, ArithmeticIntensityTable) {
  const long double n = 1024, ridge = kH100Flops / kH100Bytes;
  const std::vector<std::pair<std::string, long double>> rows = {
      {"ReLU", n / (4 * n)},
      {"GeLU", 20 * n / (4 * n)},
      {"dot product", (2 * n - 1) / (4 * n + 2)},
      {"matrix-vector", n * (2 * n - 1) / (2 * n * n + 4 * n)},
      {"matrix-matrix", n * n * (2 * n - 1) / (6 * n * n)},
  };
  for (const auto& [name, intensity] : rows) {
    const auto g = line_matching(name + R"( +\S+ +\S+ +([0-9.]+)   .*  (memory|compute)-bound)");
    ASSERT_EQ(g.size(), 2u) << name;
    EXPECT_EQ(g[0], printed("%.2f", intensity)) << name;
    EXPECT_EQ(g[1], intensity < ridge ? "memory" : "compute") << name;
  }
  EXPECT_EQ(printed("%.2f", rows[4].second), "341.17");  // 2047 / 6
  EXPECT_EQ(printed("%.2f", n / 3), "341.33");           // the large-n rule, n / 3
  EXPECT_TRUE(
      chapter_prints("matrix-matrix   n^2(2n-1)   6n^2          341.17   n/3 = 341.33    "
                     "compute-bound"));
  EXPECT_TRUE(
      chapter_prints("ReLU            n           4n              0.25   1/4             "
                     "memory-bound"));
}

// Section 3.6.6: MFU = min(1, intensity / accelerator intensity), per op and machine. The GPUs'
// columns are recomputed here; this CPU's follows from its printed intensity and float32 bytes
// (twice bfloat16's, so every intensity is half).
TEST(Ch09_Fusion, MfuTable) {
  const long double n = 1024;
  const std::vector<std::pair<std::string, long double>> ops = {
      {"ReLU", 0.25L},
      {"GeLU", 5.0L},
      {"dot product", (2 * n - 1) / (4 * n + 2)},
      {"matrix-vector", n * (2 * n - 1) / (2 * n * n + 4 * n)},
      {"matrix-matrix", (2 * n - 1) / 6},
  };
  const PrintedRoof cpu = cpu_roof();
  for (const auto& [name, intensity] : ops) {
    const auto g =
        line_matching(name + R"( +([0-9.]+) +([0-9.]+)% +([0-9.]+)% +([0-9.]+)% +([0-9.]+)%)");
    ASSERT_EQ(g.size(), 5u) << name;
    EXPECT_EQ(g[0], printed("%.2f", intensity)) << name;
    const long double peaks[] = {kH100Flops / kH100Bytes, kH200Flops / kH200Bytes,
                                 kA100Flops / kA100Bytes};
    for (int i = 0; i < 3; ++i)
      EXPECT_EQ(g[1 + i], printed("%.2f", 100 * std::min(1.0L, intensity / peaks[i])))
          << name << ", column " << i;
    const double expected = 100 * std::min(1.0, double(intensity) / 2 / cpu.intensity);
    EXPECT_NEAR(std::stod(g[4]), expected, 0.01 * expected + 0.01) << name << ", this CPU";
  }
}

// Section 3.6.5: a d = 4096 layer over 2048 tokens (training) against one token (generating),
// in bfloat16 on an H100, and the smallest batch of tokens that makes the product compute-bound.
TEST(Ch09_Fusion, TrainingAgainstInference) {
  const long double d = 4096, ridge = kH100Flops / kH100Bytes;
  // (T, d) @ (d, d): T d (2d - 1) FLOPs over 2 (T d + d^2 + T d) bytes.
  const auto intensity = [&](long double T) {
    return T * d * (2 * d - 1) / (2 * (2 * T * d + d * d));
  };
  EXPECT_EQ(printed("%.2f", intensity(2048)), "1023.88");  // 2048 * 8191 / 16384
  EXPECT_EQ(printed("%.2f", intensity(1)), "1.00");        // 8191 / 8196
  EXPECT_TRUE(
      chapter_prints("  training, 2048 tokens at once:   1023.88 FLOP/byte, MFU at most "
                     "100.00%"));
  EXPECT_TRUE(
      chapter_prints("  inference, one token at a time:     1.00 FLOP/byte, MFU at most "
                     "  " +
                     printed("%.2f", 100 * intensity(1) / ridge) + "%"));
  EXPECT_EQ(printed("%.2f", 100 * intensity(1) / ridge), "0.34");
  // intensity(T) >= ridge solved for T: T >= 2 d ridge / (2d - 1 - 4 ridge).
  const long double tokens = std::ceil(2 * d * ridge / (2 * d - 1 - 4 * ridge));
  EXPECT_EQ(tokens, 346);
  EXPECT_TRUE(chapter_prints("  the product becomes compute-bound at 346 tokens at once (" +
                             printed("%.2f", intensity(tokens)) + " FLOP/byte)"));
}

// The kernels measured on this CPU: their FLOPs per byte are exact (float32), each row's
// GFLOP/s over its GB/s gives its intensity back, its "roofline says" column follows from the
// CPU's intensity in the heading, and each verdict from the percentage printed in it.
TEST(Ch09_Fusion, MeasuredKernelsAreConsistent) {
  const long double m = 4096;
  const std::vector<std::pair<std::string, long double>> kernels = {
      {"relu(x)", 1.0L / 8},
      {"gelu(x)", 20.0L / 8},
      {"x @ v (4096)", m * (2 * m - 1) / (4 * (m * m + 2 * m))},
      {"matmul (256)", (2 * 256.0L - 1) / 12},
      {"matmul (1024)", (2 * 1024.0L - 1) / 12},
  };
  const auto heading = line_matching(
      R"(== Measured on this CPU: float32 kernels against its roof \(([0-9.]+) GFLOP/s, )"
      R"(([0-9.]+) GB/s, ([0-9.]+) FLOP/byte\) ==)");
  ASSERT_EQ(heading.size(), 3u);
  const double ridge = std::stod(heading[2]);
  for (const auto& [name, intensity] : kernels) {
    const std::string escaped = std::regex_replace(name, std::regex(R"([()@.])"), R"(\$&)");
    const auto g = line_matching(
        escaped + R"( +([0-9.]+) +([0-9.]+) ms +([0-9.]+) +([0-9.]+) +([0-9]+)%   (\w+)-bound)");
    ASSERT_EQ(g.size(), 6u) << name;
    EXPECT_EQ(g[0], printed("%.3f", intensity)) << name;
    const double gflops = std::stod(g[2]), gbytes = std::stod(g[3]);
    // Both are printed to two decimals, which bounds how far their ratio can be from the truth.
    if (gbytes >= 0.1 && gflops >= 0.1) {
      EXPECT_NEAR(gflops / gbytes, double(intensity),
                  1.01 * double(intensity) * (0.005 / gflops + 0.005 / gbytes))
          << name;
    }
    // (When the measured ridge lies within rounding of an intensity, either word is right.)
    if (std::abs(double(intensity) - ridge) > 0.1) {
      EXPECT_EQ(g[5], double(intensity) < ridge ? "memory" : "compute") << name;
    }
  }
  EXPECT_TRUE(chapter_prints_matching(
      R"(x\.clone\(\)           0\.000 +[0-9.]+ ms      0\.00 +[0-9.]+           -   )"
      R"(memory-bound \(the copy\))"));
  for (const std::string name : {"relu", "gelu"}) {
    const auto g = line_matching(name + R"(\(x\) moves its bytes at ([0-9]+)% of the copy's )"
                                        R"(speed: (memory-bound|not memory-bound): .*)");
    ASSERT_EQ(g.size(), 2u) << name;
    const int share = std::stoi(g[0]);
    if (share != 50) {  // the verdict's threshold: a printed 50 may lie on either side of it
      EXPECT_EQ(g[1], share > 50 ? "memory-bound" : "not memory-bound") << name;
    }
  }
}

// --csv DIR writes the roofs and this section's points, in the columns plots/ch09_roofline.py
// reads (and section 1 writes too, to its own ch09_points_fusion.csv).
TEST(Ch09_Fusion, WritesTheFiguresData) {
  const std::string dir = std::string(TINY_BINARY_DIR) + "/test_csv_ch09";
  std::filesystem::remove_all(dir);
  const ProgramOutput run = run_program(std::string(TINY_CHAPTER_EXE) + " --csv " + dir);
  ASSERT_EQ(run.status, 0) << run.out;
  EXPECT_NE(run.out.find("wrote " + dir + "/ch09_roofs.csv\n"), std::string::npos);
  EXPECT_NE(run.out.find("wrote " + dir + "/ch09_points_measured.csv\n"), std::string::npos);

  const auto roofs = split_lines(read_text(dir + "/ch09_roofs.csv"));
  ASSERT_EQ(roofs.size(), 5u);
  EXPECT_EQ(roofs[0], "device,flop_per_sec,bytes_per_sec,intensity,source");
  EXPECT_EQ(roofs[1],
            "H100 SXM,989500000000000.0,3350000000000.0,295.3731343283582,"
            "\"datasheet: bfloat16 dense, HBM\"");
  EXPECT_EQ(roofs[2].rfind("H200 SXM,989500000000000.0,4800000000000.0,", 0), 0u);
  EXPECT_EQ(roofs[3].rfind("A100 SXM 80GB,312000000000000.0,2039000000000.0,", 0), 0u);
  EXPECT_EQ(roofs[4].rfind("this CPU,", 0), 0u);

  const auto points = split_lines(read_text(dir + "/ch09_points_measured.csv"));
  ASSERT_EQ(points.size(), 7u);
  EXPECT_EQ(points[0], "kernel,device,flops,bytes,seconds,intensity,flop_per_sec,bytes_per_sec");
  // 4096 x 4096 float32: 2^24 elements, 2^27 bytes read and written; gelu counted at 20 FLOPs.
  EXPECT_EQ(points[1].rfind("x.clone(),this CPU,0.0,134217728.0,", 0), 0u);
  EXPECT_EQ(points[2].rfind("relu(x),this CPU,16777216.0,134217728.0,", 0), 0u);
  EXPECT_EQ(points[3].rfind("gelu(x),this CPU,335544320.0,134217728.0,", 0), 0u);
  // x @ v: 4096 x 8191 FLOPs; 4 x (4096^2 + 2 x 4096) bytes.
  EXPECT_EQ(points[4].rfind("x @ v (4096),this CPU,33550336.0,67141632.0,", 0), 0u);
  EXPECT_EQ(points[5].rfind("matmul (256),this CPU,33488896.0,786432.0,", 0), 0u);
  EXPECT_EQ(points[6].rfind("matmul (1024),this CPU,2146435072.0,12582912.0,", 0), 0u);
  for (size_t i = 1; i < points.size(); ++i) {
    std::vector<std::string> f;
    std::stringstream row(points[i]);
    for (std::string cell; std::getline(row, cell, ',');) f.push_back(cell);
    ASSERT_EQ(f.size(), 8u) << points[i];
    const double flops = std::stod(f[2]), bytes = std::stod(f[3]), seconds = std::stod(f[4]);
    EXPECT_GT(seconds, 0) << points[i];
    EXPECT_DOUBLE_EQ(std::stod(f[5]), flops / bytes) << points[i];
    EXPECT_NEAR(std::stod(f[6]), flops / seconds, 1e-9 * flops / seconds) << points[i];
    EXPECT_NEAR(std::stod(f[7]), bytes / seconds, 1e-9 * bytes / seconds) << points[i];
  }
}
