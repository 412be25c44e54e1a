// An elementwise add of two 4096 x 4096 float32 tensors against memcpy of the same array:
// both are bound by memory traffic, so bytes moved per second is the measure. The add reads two
// arrays and writes one (192 MiB), the copy reads one and writes one (128 MiB).
// The eager transcendental ops (exp, log, tanh, sigmoid, GELU and GELU's backward) read one or
// two arrays and write one; each reports `x_memcpy`, its time over the time memcpy takes to
// copy the same output array, measured in the same run, so the ratio does not depend on how
// busy the machine was between two runs.
//   make bench   (or build/bench/bench_elementwise --benchmark_filter=Eager)
#include <algorithm>
#include <chrono>
#include <cstring>

#include "bench_common.h"

using namespace tiny;

constexpr int64_t kN = 4096;

static void BM_Memcpy(benchmark::State& state) {
  Tensor a = randn({kN, kN}), c = empty({kN, kN});
  for (auto _ : state) {
    std::memcpy(c.data_ptr(), a.data_ptr(), a.nbytes());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * 2 * static_cast<int64_t>(a.nbytes()));
}

static void BM_AddContiguous(benchmark::State& state) {
  Tensor a = randn({kN, kN}), b = randn({kN, kN});
  for (auto _ : state) benchmark::DoNotOptimize(add(a, b).data_ptr());
  state.SetBytesProcessed(state.iterations() * 3 * static_cast<int64_t>(a.nbytes()));
}

static void BM_AddTransposedInput(benchmark::State& state) {
  Tensor a = randn({kN, kN}), b = randn({kN, kN});
  Tensor at = a.T();  // reads a column by column: one element per cache line fetched
  for (auto _ : state) benchmark::DoNotOptimize(add(at, b).data_ptr());
  state.SetBytesProcessed(state.iterations() * 3 * static_cast<int64_t>(a.nbytes()));
}

static void BM_AddBroadcastRow(benchmark::State& state) {
  Tensor a = randn({kN, kN}), b = randn({kN});
  for (auto _ : state) benchmark::DoNotOptimize(add(a, b).data_ptr());
  state.SetBytesProcessed(state.iterations() * 2 * static_cast<int64_t>(a.nbytes()));
}

// The best of several copies of `bytes` bytes, in seconds: the memory floor an op that reads and
// writes that many bytes is compared with.
static double memcpy_seconds(const Tensor& from, const Tensor& to) {
  double best = 1e30;
  for (int rep = 0; rep < 10; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    std::memcpy(to.data_ptr(), from.data_ptr(), from.nbytes());
    benchmark::ClobberMemory();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

// Runs `op(out, in)` on 4096 x 4096 float32 values in [lo, hi] (the output reused, as a caching
// allocator would hand it back), and reports the time per call over memcpy's.
template <typename Op>
static void eager(benchmark::State& state, float lo, float hi, Op op) {
  Tensor a = rand({kN, kN}) * (hi - lo) + lo, b = randn({kN, kN}), c = empty({kN, kN});
  const double floor = memcpy_seconds(a, c);
  const auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) {
    op(c, a, b);
    benchmark::ClobberMemory();
  }
  const double per_call = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() /
                          static_cast<double>(state.iterations());
  state.SetBytesProcessed(state.iterations() * 2 * static_cast<int64_t>(a.nbytes()));
  state.counters["x_memcpy"] = per_call / floor;
}

static void BM_EagerExp(benchmark::State& state) {
  eager(state, -10, 10, [](auto& c, auto& a, auto&) { exp_out(c, a); });
}
static void BM_EagerLog(benchmark::State& state) {
  eager(state, 0, 10, [](auto& c, auto& a, auto&) { log_out(c, a); });
}
static void BM_EagerTanh(benchmark::State& state) {
  eager(state, -5, 5, [](auto& c, auto& a, auto&) { tanh_out(c, a); });
}
static void BM_EagerSigmoid(benchmark::State& state) {
  eager(state, -10, 10, [](auto& c, auto& a, auto&) { sigmoid_out(c, a); });
}
static void BM_EagerGelu(benchmark::State& state) {
  eager(state, -5, 5, [](auto& c, auto& a, auto&) { gelu_out(c, a); });
}
// The same GELU without out=: the result comes from the allocator's cache each time.
static void BM_EagerGeluAllocating(benchmark::State& state) {
  eager(state, -5, 5, [](auto&, auto& a, auto&) { benchmark::DoNotOptimize(gelu(a).data_ptr()); });
}

BENCHMARK(BM_Memcpy)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_AddContiguous)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_AddBroadcastRow)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_AddTransposedInput)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_EagerExp)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_EagerLog)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_EagerTanh)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_EagerSigmoid)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_EagerGelu)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_EagerGeluAllocating)->Unit(benchmark::kMillisecond)->UseRealTime();

TINY_BENCHMARK_MAIN();
