// Seed document 000's four-way router trained for 10,000 steps: nn::Linear(8, 4) in float64,
// zero-initialised, on a synthetic 4-class data set (400 points in 8 dimensions, fixed seed),
// mini-batches of 16 drawn without replacement, loss = cross_entropy, then zero_grad(),
// backward(), step() with AdamW (lr 0.01) on two parameter groups: weight decay 0.3 on the
// weight, none on the bias. The matrices are 16 x 8 and 16 x 4, so a step is ~50 tiny ops
// on a few hundred numbers: the time is the library's per-op overhead, not arithmetic.
//
// The bar: under 10% of the loop's time outside the kernels. "Inside the kernels" means
// in the CPU backend's work functions (common/src/cpu/: the elementwise loops, copy, where,
// the reductions, matmul and BLAS, optimizer_update) and everything they call (the strided-loop
// helpers, libm, OpenBLAS, memset/memcpy on their behalf), malloc excepted; "outside" is
// everything else the loop runs: the dispatcher (dtype promotion, broadcasting, shape logic, the
// op table), autograd recording and the backward walk, the allocator and malloc, reference
// counts, the optimizer's bookkeeping (its settings maps, state lookups, step counter).
// bench/router_profile.sh runs a loop under callgrind (the loop function only, the harness
// excluded) and prints that split and the top functions by self cost; this program prints the
// time. The eager loop is about three quarters outside; the same loop with its step captured
// once in a CPUGraph and replayed (train_router_replayed) meets the bar.
//   build/bench/bench_router --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
//   bench/router_profile.sh build eager
//   bench/router_profile.sh build replayed
#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "bench_common.h"
#include "tiny/capture.h"
#include "tiny/functional.h"
#include "tiny/init.h"
#include "tiny/nn.h"
#include "tiny/optim.h"

using namespace tiny;

namespace {

constexpr int64_t kPoints = 400, kDim = 8, kClasses = 4, kBatch = 16;

// The mini-batches of a run, drawn before it: batch k is rows k of xs (steps, 16, 8) and ys
// (steps, 16), so that the loop reads a batch as a view, as a data loader hands it out.
struct Batches {
  Tensor xs, ys;
};

Batches make_batches(int64_t steps) {
  // Four clusters: centres ~ N(0, 2^2), points ~ centre + N(0, 1).
  manual_seed(0);
  const Tensor centres = randn({kClasses, kDim}, kFloat64);
  const Tensor noise = randn({kPoints, kDim}, kFloat64);
  const double* c = centres.data<double>();
  const double* e = noise.data<double>();
  std::vector<double> x(kPoints * kDim);
  std::vector<int64_t> y(kPoints);
  for (int64_t i = 0; i < kPoints; ++i) {
    y[i] = i % kClasses;
    for (int64_t j = 0; j < kDim; ++j) x[i * kDim + j] = 2 * c[y[i] * kDim + j] + e[i * kDim + j];
  }
  std::mt19937_64 rng(0);
  std::vector<int64_t> order(kPoints);
  std::vector<double> bx(steps * kBatch * kDim);
  std::vector<int64_t> by(steps * kBatch);
  for (int64_t s = 0; s < steps; ++s) {
    std::iota(order.begin(), order.end(), 0);
    for (int64_t k = 0; k < kBatch; ++k) {  // the first 16 of a Fisher-Yates shuffle
      std::uniform_int_distribution<int64_t> pick(k, kPoints - 1);
      std::swap(order[k], order[pick(rng)]);
      const int64_t i = order[k];
      by[s * kBatch + k] = y[i];
      std::copy_n(&x[i * kDim], kDim, &bx[(s * kBatch + k) * kDim]);
    }
  }
  return {from_vector(bx, {steps, kBatch, kDim}), from_vector(by, {steps, kBatch})};
}

struct Router {
  nn::Linear model{kDim, kClasses, /*bias=*/true, kFloat64};
  optim::AdamW opt;
  Router()
      : opt({{{model.weight}, {{"weight_decay", 0.3}}}, {{model.bias}, {{"weight_decay", 0.0}}}},
            {.lr = 0.01}) {
    init::zeros_(model.weight);
    init::zeros_(model.bias);
  }
};

}  // namespace

// The training loop: what the benchmark times and router_profile.sh counts (by this name, so
// it must stay a function of its own). Returns the last loss.
__attribute__((noinline, noclone)) double train_router(Router& r, const Batches& data,
                                                       int64_t steps) {
  Tensor loss;
  for (int64_t s = 0; s < steps; ++s) {
    loss = cross_entropy(r.model(data.xs.select(0, s)), data.ys.select(0, s));
    r.opt.zero_grad();
    loss.backward();
    r.opt.step();
  }
  return loss.item();
}

// The same loop with its step captured once in a CPUGraph (tiny/capture.h) and replayed: the
// first step runs eagerly while the graph records its kernels (and the optimizer's per-step host
// work); every later step copies its mini-batch into the tensors the graph reads and replays.
// The losses and parameters are the eager loop's, bit for bit (tests/capture_test.cpp).
__attribute__((noinline, noclone)) double train_router_replayed(Router& r, const Batches& data,
                                                                int64_t steps) {
  Tensor x = data.xs[0].clone(), y = data.ys[0].clone(), loss;
  CPUGraph step;
  step.capture([&] {
    loss = cross_entropy(r.model(x), y);
    r.opt.zero_grad();
    loss.backward();
    r.opt.step();
  });
  for (int64_t s = 1; s < steps; ++s) {
    {
      NoGradGuard loading;  // the batch is data, not part of any gradient
      x.copy_(data.xs.select(0, s));
      y.copy_(data.ys.select(0, s));
    }
    step.replay();
  }
  return loss.item();
}

using Loop = double (*)(Router&, const Batches&, int64_t);

static void run_router(benchmark::State& state, Loop loop) {
  const int64_t steps = state.range(0);
  const Batches data = make_batches(steps);
  {
    Router warm;  // warm-up: fills the caching allocator, builds the op table's entries
    loop(warm, data, 100);
  }
  double last_loss = 0;
  for (auto _ : state) {
    state.PauseTiming();
    auto r = std::make_unique<Router>();  // every run starts from zero, as the document's
    state.ResumeTiming();
    last_loss = loop(*r, data, steps);
    state.PauseTiming();
    r.reset();
    state.ResumeTiming();
  }
  state.counters["final_loss"] = last_loss;
  state.counters["steps_per_second"] =
      benchmark::Counter(static_cast<double>(steps) * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate);
}

static void BM_RouterTraining(benchmark::State& state) { run_router(state, train_router); }
static void BM_RouterTrainingReplayed(benchmark::State& state) {
  run_router(state, train_router_replayed);
}

BENCHMARK(BM_RouterTraining)
    ->ArgName("steps")
    ->Arg(10'000)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(1);
BENCHMARK(BM_RouterTrainingReplayed)
    ->ArgName("steps")
    ->Arg(10'000)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(1);

TINY_BENCHMARK_MAIN();
