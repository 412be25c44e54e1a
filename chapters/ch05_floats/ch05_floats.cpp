// Chapter 05: numbers, bit by bit.
//
// A floating-point number is a sign, an exponent that sets its range, and a mantissa that sets
// its precision. Deep learning uses formats that split their bits differently: float32, float16,
// bfloat16, and for the newest hardware fp8 (E4M3, E5M2) and the 4-bit E2M1 of NVFP4. This
// program prints what each can hold, what happens to numbers stored in them, and why training
// keeps its weights in float32 and scales its gradients in float16.
//
//   make ch05 && ./ch05_floats
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "tiny/tiny.h"

using namespace tiny;

// One row per format: the layout, and the limits computed from it (FloatFormat::info derives
// them from the bit counts; nothing here is typed in).
struct Row {
  const char* label;
  FloatFormat format;
};
static void print_table(const std::vector<Row>& rows) {
  std::printf("%-9s %8s %8s %10s %16s %19s %12s\n", "", "exponent", "mantissa", "largest",
              "smallest normal", "smallest subnormal", "step at 1.0");
  for (const auto& [label, f] : rows) {
    const FInfo i = f.info();
    std::printf("%-9s %8d %8d %10.3g %16.3g %19.3g %12.3g\n", label, f.exponent_bits,
                f.mantissa_bits, i.max, i.smallest_normal, i.smallest_subnormal, i.eps);
  }
}

// `v` stored in `dtype` and read back, as a Python float.
static double stored(double v, DType dtype) { return tensor({v}).to(dtype).item(); }

// A list printed with 3 significant digits each, like the document's fmt().
static std::string short_list(const Tensor& t) {
  std::string out = "[";
  for (double v : t.tolist()) out += (out.size() > 1 ? ", " : "") + strprintf("%.3g", v);
  return out + "]";
}

static void three_formats(const std::optional<std::string>& csv_dir) {
  std::printf("== float32, float16, bfloat16 ==\n");
  //! [table]
  print_table(
      {{"float32", kFormatFloat32}, {"float16", kFormatFloat16}, {"bfloat16", kFormatBFloat16}});
  std::printf("\n");
  for (double v : {1e-8, 70000.0, 1.001})
    std::printf("%9g stored as  float16: %-12.6g bfloat16: %.6g\n", v, stored(v, kFloat16),
                stored(v, kBFloat16));
  //! [table]

  // An optimizer adds small updates to a weight, over and over.
  //! [accumulate]
  std::vector<std::vector<double>> trace;  // (step, value in each dtype), for the figure
  const DType dtypes[] = {kFloat32, kBFloat16, kFloat16};
  std::vector<Tensor> w, step;
  for (DType dt : dtypes) {
    w.push_back(scalar_tensor(1.0, dt));
    step.push_back(scalar_tensor(1e-4, dt));
  }
  for (int i = 1; i <= 10000; ++i) {
    for (size_t k = 0; k < w.size(); ++k) w[k] = w[k] + step[k];  // rounded to the dtype each time
    if (i % 50 == 0) trace.push_back({double(i), w[0].item(), w[1].item(), w[2].item()});
  }
  for (size_t k = 0; k < 2; ++k)
    std::printf("1 + 10,000 steps of 0.0001 in %-8s = %.4f (should be 2.0000)\n",
                dtype_name(dtypes[k]), w[k].item());
  //! [accumulate]

  // Small gradients in float16, with and without scaling them up first.
  //! [scaling]
  const Tensor g = tensor({1e-8, 2e-7, 1e-4});
  std::printf("gradients %s in float16: %s\n", short_list(g).c_str(),
              short_list(g.to(kFloat16).to(kFloat32)).c_str());
  std::printf("scaled by 1024, stored, unscaled: %s\n",
              short_list((g * 1024).to(kFloat16).to(kFloat32) / 1024).c_str());
  //! [scaling]

  if (csv_dir) {
    CsvFile csv(*csv_dir, "ch05_running_sum.csv", {"step", "float32", "bfloat16", "float16"});
    for (const auto& r : trace) csv.row(static_cast<int64_t>(r[0]), r[1], r[2], r[3]);
  }
}

static void small_formats(const std::optional<std::string>& csv_dir) {
  std::printf("\n== fp8 and fp4 ==\n");
  print_table({{"e4m3fn", kFormatE4M3}, {"e5m2", kFormatE5M2}, {"e2m1", kFormatE2M1}});
  std::vector<double> values;
  for (uint32_t p = 0; p < 8; ++p) values.push_back(kFormatE2M1.decode(p));
  std::printf("the non-negative values of E2M1: %s\n", format_list(values).c_str());

  // Out of range, fp8 either saturates to its largest value (what NVIDIA's conversions do when
  // asked to) or becomes inf or NaN (PyTorch's casts). E4M3 has no inf, so it becomes NaN.
  //! [fp8]
  std::printf(
      "stored in fp8 (sat: out of range saturates; else it becomes inf, or NaN without inf)\n");
  std::printf("%9s  %-12s %-12s %-12s %s\n", "value", "e4m3fn sat", "e4m3fn", "e5m2 sat", "e5m2");
  for (float v : {0.1f, 1.1f, 3.14159f, 240.0f, 500.0f, 57344.0f, 70000.0f, 1e-8f}) {
    std::printf("%9g  %-12s %-12s %-12s %s\n", v,
                repr(kFormatE4M3.round(v, Overflow::Saturate)).c_str(),
                repr(kFormatE4M3.round(v, Overflow::NonFinite)).c_str(),
                repr(kFormatE5M2.round(v, Overflow::Saturate)).c_str(),
                repr(kFormatE5M2.round(v, Overflow::NonFinite)).c_str());
  }
  //! [fp8]

  if (csv_dir) {
    CsvFile csv(*csv_dir, "ch05_layouts.csv", {"format", "sign", "exponent", "mantissa"});
    for (const FloatFormat& f :
         {kFormatFloat32, kFormatFloat16, kFormatBFloat16, kFormatE4M3, kFormatE5M2, kFormatE2M1})
      csv.row(f.name, 1, f.exponent_bits, f.mantissa_bits);
  }
}

// The share of values lost to 0, and the mean relative error |approx - exact| / |exact| per value.
static void report(const char* name, const Tensor& exact, const Tensor& approx, int64_t bytes) {
  const Tensor x = exact.to(kFloat64), y = approx.to(kFloat64);
  const double lost = sum((y == 0.0).to(kFloat64)).item() / double(x.numel());
  const double rel = (abs(y - x) / abs(x)).mean().item();
  std::printf("%-30s %5.1f%% of values become 0, mean relative error %5.3f, %4lld bytes\n", name,
              100 * lost, rel, static_cast<long long>(bytes));
}

static void nvfp4() {
  std::printf("\n== NVFP4: why 4 bits need block scales ==\n");
  // 64 blocks of 16 values, each block at its own scale between 2^-8 and 2^7: the spread of
  // magnitudes a real activation or weight tensor has across its rows.
  // The two draws are statements of their own, the exponents first: the operands of one `*`
  // may be evaluated in either order, and the compiler's choice would decide which numbers each
  // draw gets (GCC drew the exponents first when the golden output was recorded; clang did not).
  Generator gen(0);
  //! [nvfp4]
  const Tensor exponents = randint(-8, 8, {64, 1}, gen).to(kFloat32);
  const Tensor values = rand({64, 16}, kFloat32, gen) * 2.0 - 1.0;
  Tensor x = values * (2.0 * ones({64, 1})).pow(exponents);
  const Tensor one_scale = fp4_single_scale(x);  // E2M1 values times amax / 6
  const NvFp4Tensor q = nvfp4_quantize(x);       // plus an E4M3 scale per 16 values
  const Tensor block_scaled = nvfp4_dequantize(q);
  //! [nvfp4]
  report("float32", x, x, static_cast<int64_t>(x.nbytes()));
  report("fp4, one scale for the tensor", x, one_scale, x.numel() / 2 + 4);
  report("NVFP4, a scale per 16 values", x, block_scaled, q.storage_bytes());
}

int main(int argc, char** argv) {
  return run_chapter(argc, argv, [](const std::optional<std::string>& csv_dir) {
    three_formats(csv_dir);
    small_formats(csv_dir);
    nvfp4();
    if (csv_dir)
      std::printf("\nwrote %s/ch05_running_sum.csv and ch05_layouts.csv\n", csv_dir->c_str());
  });
}
