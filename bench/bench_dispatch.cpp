// What the dispatcher costs: one elementwise op on a 1 x 8 tensor, where the arithmetic is a few
// nanoseconds and everything else (devices, dtypes, the output, the kernel's lookup) is the
// dispatcher's. Each form of an op is timed: a new result, out=, in place, with a Python number,
// and a three-input op as an optimizer calls it. Compare with BM_ChainForwardNoGrad in
// bench_autograd, the same measure through `y * 1.0001`.
//   make bench   (or build/bench/bench_dispatch)
#include "bench_common.h"

using namespace tiny;

static void BM_AddNew(benchmark::State& state) {
  const Tensor a = ones({1, 8}), b = ones({1, 8});
  for (auto _ : state) benchmark::DoNotOptimize(add(a, b).data_ptr());
}

static void BM_AddOut(benchmark::State& state) {
  const Tensor a = ones({1, 8}), b = ones({1, 8}), out = empty({1, 8});
  for (auto _ : state) benchmark::DoNotOptimize(add_out(out, a, b).data_ptr());
}

static void BM_AddInPlace(benchmark::State& state) {
  Tensor a = ones({1, 8});
  const Tensor b = full({1, 8}, 1e-9);
  for (auto _ : state) benchmark::DoNotOptimize(a.add_(b).data_ptr());
}

static void BM_MulByNumber(benchmark::State& state) {
  const Tensor a = ones({1, 8});
  for (auto _ : state) benchmark::DoNotOptimize((a * 1.0001).data_ptr());
}

static void BM_AddcmulInPlace(benchmark::State& state) {
  Tensor v = ones({1, 8});
  const Tensor g = full({1, 8}, 1e-3);
  for (auto _ : state) benchmark::DoNotOptimize(v.addcmul_(g, g, 0.001).data_ptr());
}

BENCHMARK(BM_AddNew);
BENCHMARK(BM_AddOut);
BENCHMARK(BM_AddInPlace);
BENCHMARK(BM_MulByNumber);
BENCHMARK(BM_AddcmulInPlace);

TINY_BENCHMARK_MAIN();
