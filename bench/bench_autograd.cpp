// What the tape costs. A chain of 1,000 elementwise ops on tiny tensors measures the per-op
// overhead of recording and of the backward engine (the arithmetic is negligible); a two-layer
// MLP step at a size where the matrix multiplies dominate is compared with those multiplies alone.
//   make bench   (or build/bench/bench_autograd)
#include "bench_common.h"

using namespace tiny;

constexpr int kChain = 1000;

static void BM_ChainForwardNoGrad(benchmark::State& state) {
  Tensor x = ones({4});
  for (auto _ : state) {
    NoGradGuard no_grad;
    Tensor y = x;
    for (int i = 0; i < kChain; ++i) y = y * 1.0001;
    benchmark::DoNotOptimize(y.data_ptr());
  }
  state.counters["per_op"] = benchmark::Counter(
      kChain, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert,
      benchmark::Counter::kIs1000);
}

static void BM_ChainForwardRecorded(benchmark::State& state) {
  Tensor x = ones({4}).requires_grad_();
  for (auto _ : state) {
    Tensor y = x;
    for (int i = 0; i < kChain; ++i) y = y * 1.0001;
    benchmark::DoNotOptimize(y.data_ptr());
  }
  state.counters["per_op"] = benchmark::Counter(
      kChain, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert,
      benchmark::Counter::kIs1000);
}

static void BM_ChainForwardAndBackward(benchmark::State& state) {
  Tensor x = ones({4}).requires_grad_();
  for (auto _ : state) {
    Tensor y = x;
    for (int i = 0; i < kChain; ++i) y = y * 1.0001;
    y.sum().backward();
    x.set_grad(Tensor());
  }
  state.counters["per_op"] = benchmark::Counter(
      kChain, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert,
      benchmark::Counter::kIs1000);
}

// Two layers, B x D -> D -> D, at sizes where each matmul is milliseconds of work.
constexpr int64_t kB = 512, kD = 1024;

static void BM_MlpStepMatmulsOnly(benchmark::State& state) {
  // The six products of a forward and backward pass, called directly.
  Tensor x = randn({kB, kD}), w1 = randn({kD, kD}), w2 = randn({kD, kD});
  for (auto _ : state) {
    Tensor h = relu(matmul(x, w1));
    Tensor y = matmul(h, w2);
    Tensor g = y * (2.0 / y.numel());
    Tensor dw2 = matmul(h.T(), g);
    Tensor dh = matmul(g, w2.T());
    Tensor dw1 = matmul(x.T(), dh);
    benchmark::DoNotOptimize(dw1.data_ptr());
    benchmark::DoNotOptimize(dw2.data_ptr());
  }
}

static void BM_MlpStepWithTape(benchmark::State& state) {
  Tensor x = randn({kB, kD}), w1 = randn({kD, kD}).requires_grad_(),
         w2 = randn({kD, kD}).requires_grad_();
  for (auto _ : state) {
    Tensor loss = matmul(relu(matmul(x, w1)), w2).pow(2).mean();
    loss.backward();
    zero_grad({w1, w2});
  }
}

BENCHMARK(BM_ChainForwardNoGrad)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ChainForwardRecorded)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ChainForwardAndBackward)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_MlpStepMatmulsOnly)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_MlpStepWithTape)->Unit(benchmark::kMillisecond)->UseRealTime();

TINY_BENCHMARK_MAIN();
