// An elementwise add of two 4096 x 4096 float32 tensors against memcpy of the same array:
// both are bound by memory traffic, so bytes moved per second is the measure. The add reads two
// arrays and writes one (192 MiB), the copy reads one and writes one (128 MiB).
//   make bench   (or build/bench/bench_elementwise)
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

BENCHMARK(BM_Memcpy)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_AddContiguous)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_AddBroadcastRow)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_AddTransposedInput)->Unit(benchmark::kMillisecond)->UseRealTime();

TINY_BENCHMARK_MAIN();
