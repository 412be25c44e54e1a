// Chapter 09's program, run for real: its golden output and README, the numbers of seed document
// 004's section 3.6 recomputed here from the datasheets and the formulas (by other arithmetic
// than the program's: closed forms, long double), and the figure's CSV. What this CPU measured
// is checked only for being consistent with itself (a rate is its FLOPs or bytes over its time,
// a verdict follows from the numbers printed beside it), never against a bound on its speed.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <regex>

#include "literate.h"
#include "tiny/tiny.h"

using namespace tiny::testing;

namespace {

// Where there is a GPU, the fusion section prints three lines about CUDA (each chain, then the
// copy) where the golden file has this machine's one line, "on CUDA: skipped (...)". A golden
// file is compared line by line, so on such a machine the test puts these in that line's place.
const std::string kGoldenCudaSkipped = "on CUDA: skipped ({{.+}})";
const std::vector<std::string> kGoldenCudaLines = {
    R"(on CUDA: GELU, scale, shift, add  eager{{ +[0-9]+\.[0-9][0-9]}} ms   compiled)"
    R"({{ +[0-9]+\.[0-9][0-9]}} ms ({{[0-9]+\.[0-9]}}x)   first call {{[0-9]+\.[0-9][0-9]}} s)",
    R"(on CUDA: scale, shift, add        eager{{ +[0-9]+\.[0-9][0-9]}} ms   compiled)"
    R"({{ +[0-9]+\.[0-9][0-9]}} ms ({{[0-9]+\.[0-9]}}x)   first call {{[0-9]+\.[0-9][0-9]}} s)",
    R"(on CUDA: x.clone()               {{ +[0-9]+\.[0-9][0-9]}} ms  ({{[0-9]+}} GB/s))",
};

// The golden file this machine's run is compared with: tests/golden/ch09_fusion.txt as it is,
// or, with a GPU, a copy in the build folder with the CUDA lines in place of the skipped one.
std::string golden_for_this_machine() {
  const std::string path = golden_path(TINY_CHAPTER_NAME);
  if (!tiny::cuda::available()) return path;
  std::string text;
  for (const std::string& line : split_lines(read_text(path))) {
    if (line == kGoldenCudaSkipped)
      for (const std::string& cuda : kGoldenCudaLines) text += cuda + "\n";
    else
      text += line + "\n";
  }
  const std::string gpu = std::string(TINY_BINARY_DIR) + "/ch09_fusion_golden_gpu.txt";
  std::ofstream(gpu) << text;
  return gpu;
}

}  // namespace

TEST(Ch09_Fusion, RunsAndMatchesGoldenOutput) {
  ASSERT_EQ(chapter_output().status, 0);
  EXPECT_TRUE(matches_golden(chapter_output().out, golden_for_this_machine()));
}

// The GPU's golden lines, checked here on any machine: the golden file holds the one line they
// replace, and they match what the program's formats print (the CUDA branch of fusion_section).
TEST(Ch09_Fusion, GpuGoldenLinesFitTheProgramsFormats) {
  const auto golden = split_lines(read_text(golden_path(TINY_CHAPTER_NAME)));
  EXPECT_EQ(std::count(golden.begin(), golden.end(), kGoldenCudaSkipped), 1);
  char line[3][200];
  std::snprintf(line[0], sizeof line[0],
                "on CUDA: %-24s eager %5.2f ms   compiled %5.2f ms (%.1fx)   first call %.2f s",
                "GELU, scale, shift, add", 2.71, 0.35, 7.7, 1.23);
  std::snprintf(line[1], sizeof line[1],
                "on CUDA: %-24s eager %5.2f ms   compiled %5.2f ms (%.1fx)   first call %.2f s",
                "scale, shift, add", 123.45, 12.5, 9.9, 0.05);
  std::snprintf(line[2], sizeof line[2], "on CUDA: %-24s %5.2f ms  (%.0f GB/s)", "x.clone()",
                0.03, 4473.9);
  for (int i = 0; i < 3; ++i)
    EXPECT_TRUE(std::regex_match(line[i], golden_line_regex(kGoldenCudaLines[i])))
        << line[i] << "\n" << kGoldenCudaLines[i];
  EXPECT_TRUE(std::regex_match("on CUDA: skipped (this build has no CUDA)",
                               golden_line_regex(kGoldenCudaSkipped)));
}

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

// ---- section 1, fusion: what the chains must cost, counted here by hand ------------------------

namespace {
// fusion.py's arrays: x is 4096 x 4096 float32, g and b one row of 4096 each.
constexpr double kElements = 4096.0 * 4096.0, kRow = 4096.0, kFloat32Bytes = 4;
}  // namespace

// Eagerly, every op reads each of its inputs and writes its result: for gelu(x) * g + b + x,
//   gelu: x -> t1            2 arrays
//   mul:  t1, g -> t2        2 arrays and a row
//   add:  t2, b -> t3        2 arrays and a row
//   add:  t3, x -> y         3 arrays
// nine arrays and two rows; x * g + b + x is the same without gelu, seven. A fused kernel reads
// x, g and b once and writes y: two arrays and two rows, as x.clone()'s two arrays.
TEST(Ch09_Fusion, PassesOverMemoryCountedByHand) {
  const double gelu_chain = 2 + 2 + 2 + 3, scale_shift = 2 + 2 + 3, fused = 1 + 1;
  const double rows = 2 * kRow / kElements;  // g and b, in arrays
  EXPECT_TRUE(chapter_prints("  GELU, scale, shift, add  eager " +
                             printed("%.1f", gelu_chain + rows) + "   compiled " +
                             printed("%.1f", fused + rows)));
  EXPECT_TRUE(chapter_prints("  scale, shift, add        eager " +
                             printed("%.1f", scale_shift + rows) + "   compiled " +
                             printed("%.1f", fused + rows)));
  EXPECT_TRUE(chapter_prints("  x.clone()                " + printed("%.1f", fused)));
  EXPECT_EQ(printed("%.1f", gelu_chain + rows), "9.0");
  EXPECT_EQ(printed("%.1f", scale_shift + rows), "7.0");
  // The heading's "64 MiB each" is one array; the two rows are 32 KiB, under 0.1% of it.
  EXPECT_EQ(kElements * kFloat32Bytes, 64.0 * 1024 * 1024);
  EXPECT_LT(rows, 0.001);
  EXPECT_TRUE(chapter_prints("memory traffic, in passes over x (64 MiB each; the rows of g and b "
                             "add under 0.1%):"));
}

// The fused kernels' FLOPs from the op table's counts per element (gelu, mul and add: one each,
// the table's convention), every op run once per output element; their bytes: x, g and b read
// once, y written once. GELU's chain: 4 FLOPs over 8 bytes an element, 0.500 FLOP/byte; the
// scale-shift chain 3 over 8, 0.375 (both a hair less, for the rows).
TEST(Ch09_Fusion, FusedKernelsCostFromTheOpTable) {
  const double gelu = tiny::op_info("gelu").flops, mul = tiny::op_info("mul").flops,
               add = tiny::op_info("add").flops;
  const double bytes = kFloat32Bytes * (kElements + 2 * kRow + kElements);
  const double gelu_flops = (gelu + mul + add + add) * kElements;
  const double shift_flops = (mul + add + add) * kElements;
  EXPECT_TRUE(chapter_prints("GELU, scale, shift, add, compiled: " + printed("%.3g", gelu_flops) +
                             " FLOPs and " + printed("%.3g", bytes) + " bytes a call, " +
                             printed("%.3f", gelu_flops / bytes) + " FLOP/byte"));
  EXPECT_TRUE(chapter_prints("scale, shift, add, compiled: " + printed("%.3g", shift_flops) +
                             " FLOPs and " + printed("%.3g", bytes) + " bytes a call, " +
                             printed("%.3f", shift_flops / bytes) + " FLOP/byte"));
  EXPECT_EQ(printed("%.3f", gelu_flops / bytes), "0.500");
  EXPECT_EQ(printed("%.3f", shift_flops / bytes), "0.375");
}

// The counters after the scale-shift chain's calls: two shapes (1024 rows, 4096 rows) are two
// compiles, the second a recompile, and every other call found its kernel.
TEST(Ch09_Fusion, CompileCountersAddUp) {
  const auto g = line_matching(
      R"(scale, shift, add after ([0-9]+) calls \(1024 rows once, 4096 rows the rest\): )"
      R"(compiles ([0-9]+), recompiles ([0-9]+), cache hits ([0-9]+))");
  ASSERT_EQ(g.size(), 4u);
  const int calls = std::stoi(g[0]), compiles = std::stoi(g[1]), recompiles = std::stoi(g[2]),
            hits = std::stoi(g[3]);
  EXPECT_EQ(compiles, 2);
  EXPECT_EQ(recompiles, compiles - 1);
  EXPECT_EQ(hits, calls - compiles);
}

// The timing lines agree with themselves: each speed-up is its eager time over its compiled time,
// each "times the floor" a compiled time over the clone's, and the verdict follows from the two
// (GELU's chain more than 1.5 times the scale-shift chain's: its arithmetic sets its time). No
// time is compared with a bound.
TEST(Ch09_Fusion, FusionTimingsAgreeWithThemselves) {
  const std::string number = "([0-9]+\\.[0-9]+)";
  std::vector<double> compiled;
  for (const std::string name : {"GELU, scale, shift, add", "scale, shift, add"}) {
    char head[32];
    std::snprintf(head, sizeof head, "%-24s", name.c_str());
    const auto g = line_matching(std::string(head) + " eager +" + number + " ms   compiled +" +
                                 number + " ms \\(" + number + "x\\)   first call " + number +
                                 " s   same result: True");
    ASSERT_EQ(g.size(), 4u) << name;
    const double eager = std::stod(g[0]), fused = std::stod(g[1]), speedup = std::stod(g[2]);
    // Times printed to 0.05 ms, the ratio to 0.05.
    const double slack = eager / fused * (0.05 / eager + 0.05 / fused) + 0.05 + 1e-9;
    EXPECT_NEAR(speedup, eager / fused, slack) << name;
    compiled.push_back(fused);
  }
  const auto clone = line_matching("one read \\+ one write +" + number +
                                   " ms  \\(x\\.clone\\(\\), the floor for any one-pass kernel\\)");
  ASSERT_EQ(clone.size(), 1u);
  const double floor = std::stod(clone[0]);
  const auto r = line_matching("the compiled scale-shift chain takes " + number +
                               " times the floor, the compiled GELU chain " + number + " times:");
  ASSERT_EQ(r.size(), 2u);
  ASSERT_EQ(compiled.size(), 2u);
  const double shift = std::stod(r[0]), gelu = std::stod(r[1]);
  for (const auto& [printed_ratio, fused] : {std::pair{gelu, compiled[0]}, {shift, compiled[1]}})
    EXPECT_NEAR(printed_ratio, fused / floor,
                fused / floor * (0.05 / fused + 0.05 / floor) + 0.005 + 1e-9);
  const bool arithmetic = chapter_prints(
      "without passes to remove, GELU's arithmetic (a polynomial an element) sets its time");
  const bool memory = chapter_prints("both are bound by their two passes over memory");
  EXPECT_NE(arithmetic, memory);  // one verdict, not both
  // Both ratios are printed to 0.005: away from the threshold the verdict must follow them.
  if (std::abs(gelu - 1.5 * shift) > 0.02) {
    EXPECT_EQ(arithmetic, gelu > 1.5 * shift);
  }
}

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

  // Section 1's kernels: each chain eager (its ops' bytes, counted: 9 and 7 arrays and two rows)
  // and compiled (2 arrays and two rows), and the clone; on a GPU two rows more, for CUDA.
  EXPECT_NE(run.out.find("wrote " + dir + "/ch09_points_fusion.csv\n"), std::string::npos);
  const auto fusion = split_lines(read_text(dir + "/ch09_points_fusion.csv"));
  ASSERT_GE(fusion.size(), 6u);
  EXPECT_EQ(fusion[0], "kernel,device,flops,bytes,seconds,intensity,flop_per_sec,bytes_per_sec");
  // 2^24 elements: 4 x (9 x 2^24 + 2 x 4096) = 604012544 bytes; 4 x (7 x ...) = 469794816;
  // 4 x (2 x 2^24 + 2 x 4096) = 134250496; the clone 2^27. FLOPs: 4 and 3 an element.
  EXPECT_EQ(fusion[1].rfind("\"GELU, scale, shift, add, eager\",this CPU,67108864.0,604012544.0,", 0), 0u);
  EXPECT_EQ(fusion[2].rfind("\"GELU, scale, shift, add, compiled\",this CPU,67108864.0,134250496.0,", 0), 0u);
  EXPECT_EQ(fusion[3].rfind("\"scale, shift, add, eager\",this CPU,50331648.0,469794816.0,", 0), 0u);
  EXPECT_EQ(fusion[4].rfind("\"scale, shift, add, compiled\",this CPU,50331648.0,134250496.0,", 0), 0u);
  EXPECT_EQ(fusion[5].rfind("x.clone(),this CPU,0.0,134217728.0,", 0), 0u);

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
    EXPECT_GT(seconds, 0) << points[i];  // a time was measured (no bound on how long)
    EXPECT_DOUBLE_EQ(std::stod(f[5]), flops / bytes) << points[i];
    EXPECT_NEAR(std::stod(f[6]), flops / seconds, 1e-9 * flops / seconds) << points[i];
    EXPECT_NEAR(std::stod(f[7]), bytes / seconds, 1e-9 * bytes / seconds) << points[i];
  }
}
