// Matmul through the library against a direct cblas_sgemm call on the same buffers, so the
// library's overhead (shape logic, dispatch, the result's allocation) shows as the gap; and the
// same product in float32, bfloat16 and float16, whose FLOP/s should be close, since the 16-bit
// products run through sgemm a panel at a time.
//   make bench   (or build/bench/bench_matmul --benchmark_filter=1024)
//   build/bench/bench_matmul --benchmark_filter=InDtype --benchmark_repetitions=5
//       --benchmark_enable_random_interleaving=true   (one command line)
// (on a shared machine the load drifts by more than the dtypes differ; interleaving the
// repetitions spreads the drift over all of them, so the medians can be compared)
#include <vector>

#include "bench_common.h"

#ifdef TINY_HAS_OPENBLAS
#include <cblas.h>
#endif

using namespace tiny;

static void set_flops(benchmark::State& state, int64_t n) {
  state.counters["FLOP/s"] =
      benchmark::Counter(2.0 * n * n * n, benchmark::Counter::kIsIterationInvariantRate);
}

static void BM_LibraryMatmul(benchmark::State& state) {
  const int64_t n = state.range(0);
  Tensor a = randn({n, n}), b = randn({n, n});
  for (auto _ : state) benchmark::DoNotOptimize(matmul(a, b).data_ptr());
  set_flops(state, n);
}

static void BM_LibraryMatmulBlocked(benchmark::State& state) {
  set_matmul_backend(MatmulBackend::Blocked);
  BM_LibraryMatmul(state);
  set_matmul_backend(MatmulBackend::Blas);
}

// Random normal inputs rounded to the benchmark's dtype, so each dtype multiplies its own values.
template <DType dt> static void BM_LibraryMatmulInDtype(benchmark::State& state) {
  const int64_t n = state.range(0);
  Tensor a = randn({n, n}).to(dt), b = randn({n, n}).to(dt);
  for (auto _ : state) benchmark::DoNotOptimize(matmul(a, b).data_ptr());
  set_flops(state, n);
}

#ifdef TINY_HAS_OPENBLAS
static void BM_DirectSgemm(benchmark::State& state) {
  const int64_t n = state.range(0);
  Tensor a = randn({n, n}), b = randn({n, n}), c = empty({n, n});
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data<float>(), n,
                b.data<float>(), n, 0.0f, c.data<float>(), n);
    benchmark::ClobberMemory();
  }
  set_flops(state, n);
}
BENCHMARK(BM_DirectSgemm)
    ->Arg(256)
    ->Arg(1024)
    ->Arg(2048)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
#endif
BENCHMARK(BM_LibraryMatmul)
    ->Arg(256)
    ->Arg(1024)
    ->Arg(2048)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_LibraryMatmulBlocked)
    ->Arg(256)
    ->Arg(1024)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

BENCHMARK_TEMPLATE(BM_LibraryMatmulInDtype, kFloat32)
    ->Arg(512)
    ->Arg(1024)
    ->Arg(2048)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_TEMPLATE(BM_LibraryMatmulInDtype, kBFloat16)
    ->Arg(512)
    ->Arg(1024)
    ->Arg(2048)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_TEMPLATE(BM_LibraryMatmulInDtype, kFloat16)
    ->Arg(512)
    ->Arg(1024)
    ->Arg(2048)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

TINY_BENCHMARK_MAIN();
