// Chapter 01: tensors as bytes, FLOPs, and napkin math.
//
// Before writing any training code, estimate what it will cost. Two questions answered with
// arithmetic alone (how long does a big run take, how big a model fits in memory), then the two
// quantities every estimate is built from (bytes per tensor, FLOPs per matmul), and finally a
// matmul measured on this machine, to see how much of its promise a real chip delivers.
//
//   make ch01 && ./ch01_napkin
#include <cstdio>
#include <cstdlib>
#include <string>

#include "tiny/tiny.h"

using namespace tiny;

// How long does it take to train a 70B-parameter model on 15T tokens with 1024 H100s?
static void training_time() {
  std::printf("== napkin math 1: how long does training take? ==\n");
  const double params = 70e9, tokens = 15e12;
  // Each token costs about 2 FLOPs per parameter going forward (a multiply and an add) and
  // twice that going backward (gradients for the activations and for the weights): 6 in all.
  //! [work]
  const double work = training_flops(params, tokens);
  std::printf("work: 6 x %g parameters x %g tokens = %g FLOPs\n", params, tokens, work);

  // The H100's datasheet quotes 1979 TFLOP/s for bf16, but only with 2:4 structured sparsity;
  // a dense model gets half. Real runs reach 30-60% of that (MFU); take 50%.
  const double peak = promised_flop_per_sec("H100", kBFloat16);
  const double mfu = 0.5;
  const int gpus = 1024;
  const double throughput = peak * mfu * gpus;
  std::printf("throughput: %g TFLOP/s dense bf16 x %.0f%% MFU x %d GPUs = %g FLOP/s\n", peak / 1e12,
              mfu * 100, gpus, throughput);

  const double exact = seconds_for(work, throughput);
  //! [work]
  std::printf("time: %g / %g = %.1f s = %.2f days\n", work, throughput, exact,
              exact / kSecondsPerDay);
  // Rounding the throughput to one significant digit first, as one does on a napkin, moves the
  // answer by about 1%: the estimate is good to its first digit and no further.
  const double rounded = 5e17;
  const double napkin = seconds_for(work, rounded);
  std::printf("napkin: throughput rounded to %g first: %g s = %.2f days, \"about %.0f days\"\n",
              rounded, napkin, napkin / kSecondsPerDay, napkin / kSecondsPerDay);
}

// How big a model can 8 H100s (80 GB each) train with AdamW in float32?
static void largest_model() {
  std::printf("\n== napkin math 2: how big a model fits? ==\n");
  const double memory = 8 * 80e9;
  std::printf("memory: 8 GPUs x 80 GB = %g bytes\n", memory);
  // Counting only the weights (4 bytes each in float32) gives a wrong, four times too large
  // answer: training also keeps a gradient per weight and AdamW's two running averages.
  std::printf("weights alone, 4 bytes/param: %g parameters (wrong: ignores what training keeps)\n",
              memory / 4);
  std::printf("AdamW in float32: weight 4 + gradient 4 + Adam m and v 8 = %g bytes/param\n",
              kAdamWFloat32BytesPerParam);
  //! [memory]
  const double max_params = memory / kAdamWFloat32BytesPerParam;
  //! [memory]
  std::printf("largest model: %g / %g = %s parameters (%.0fB)\n", memory,
              kAdamWFloat32BytesPerParam, repr(max_params).c_str(), max_params / 1e9);
  std::printf("an upper bound: activations (batch x sequence x layers x width) need memory too\n");
}

// A tensor's memory is its element count times the bytes of one element.
static void tensor_bytes() {
  std::printf("\n== a tensor is bytes ==\n");
  Tensor x = zeros({4, 8});
  std::printf("x = zeros(4, 8): dtype %s, shape %s, numel %lld, element_size %zu, nbytes %zu\n",
              dtype_name(x.dtype()), format_tuple(x.shape()).c_str(),
              static_cast<long long>(x.numel()), x.element_size(), x.nbytes());
  std::printf("%-9s %12s %8s\n", "dtype", "element_size", "nbytes");
  for (DType dt : kAllDTypes) {
    Tensor t = zeros({4, 8}, dt);
    std::printf("%-9s %12zu %8zu\n", dtype_name(dt), t.element_size(), t.nbytes());
  }
}

// FLOPs of a linear layer, y = x @ w, and how fast this machine does them.
static void matmul_flops_measured() {
  std::printf("\n== FLOPs of y = x @ w, and a measurement ==\n");
  const int64_t B = 1024, D = 256, K = 64;
  const double flops = matmul_flops(B, D, K);
  std::printf("x (%lld, %lld) @ w (%lld, %lld): 2 x B x D x K = %.0f FLOPs\n",
              static_cast<long long>(B), static_cast<long long>(D), static_cast<long long>(D),
              static_cast<long long>(K), flops);
  std::printf("(each of the B x K outputs is D multiplies and D adds)\n");

  //! [measure]
  manual_seed(0);
  Tensor x = ones({B, D});
  Tensor w = randn({D, K});
  Tensor y;
  double seconds = timed([&] { y = matmul(x, w); }, 50);  // median of 50, after a warm-up
  //! [measure]
  // This CPU's own peak, measured: a large square float32 matmul, where a BLAS does its best.
  const int64_t n = 2048;
  Tensor a = randn({n, n}), b = randn({n, n});
  double big = timed([&] { y = matmul(a, b); }, 5);
  // Nothing runs faster than the peak, so the small matmul beating it means that other work slowed
  // one of the two measurements: both are taken again, and the chapter says so if that persists.
  const bool agree = remeasure_while([&] { return flops / seconds > matmul_flops(n, n, n) / big; },
                                     [&] {
                                       seconds = timed([&] { y = matmul(x, w); }, 50);
                                       big = timed([&] { y = matmul(a, b); }, 5);
                                     });
  const double rate = flops / seconds;
  const double peak = matmul_flops(n, n, n) / big;
  const char* coretype = std::getenv("OPENBLAS_CORETYPE");
  std::printf("matmul on this CPU: %s%s%s\n", matmul_backend_description().c_str(),
              coretype ? ", OPENBLAS_CORETYPE=" : "", coretype ? coretype : "");
  std::printf("measured: %.3f ms per matmul, %.1f GFLOP/s\n", seconds * 1e3, rate / 1e9);

  // MFU: the share of a promised peak that the work achieved.
  const double h100 = promised_flop_per_sec("H100", kFloat32);
  std::printf("MFU against an H100's float32 promise (%.1f TFLOP/s): %.3f%%\n", h100 / 1e12,
              100 * rate / h100);
  std::printf("this CPU's peak, measured (float32 %lldx%lld matmul): %.1f GFLOP/s\n",
              static_cast<long long>(n), static_cast<long long>(n), peak / 1e9);
  std::printf("MFU against that measured peak: %.0f%%%s\n", 100 * rate / peak,
              busy_note(agree, "more than 100%").c_str());
}

// The figure: days to train the 70B model on 15T tokens, against MFU, for three cluster sizes.
static void write_figure_data(const std::string& dir) {
  CsvFile csv(dir, "ch01_training_time.csv", {"gpus", "mfu", "days"});
  const double work = training_flops(70e9, 15e12);
  const double peak = promised_flop_per_sec("H100", kBFloat16);
  for (int gpus : {256, 1024, 4096})
    for (int percent = 5; percent <= 100; percent += 5)
      csv.row(gpus, percent / 100.0,
              seconds_for(work, peak * gpus * percent / 100.0) / kSecondsPerDay);
  std::printf("\nwrote %s\n", csv.path().c_str());
}

int main(int argc, char** argv) {
  return run_chapter(argc, argv, [](const std::optional<std::string>& csv_dir) {
    training_time();
    largest_model();
    tensor_bytes();
    matmul_flops_measured();
    if (csv_dir) write_figure_data(*csv_dir);
  });
}
