// Converting 64M float32 values to bfloat16 and float16 and back, in bytes moved per second,
// against memcpy of the float32 array. The conversions are branch-light code the compiler can
// vectorise, so they should run near memory bandwidth.
//   make bench   (or build/bench/bench_convert)
#include <cstring>

#include "bench_common.h"

using namespace tiny;

constexpr int64_t kN = int64_t(64) << 20;

static void BM_MemcpyFloat32(benchmark::State& state) {
  Tensor a = rand({kN}), c = empty({kN});
  for (auto _ : state) {
    std::memcpy(c.data_ptr(), a.data_ptr(), a.nbytes());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * 2 * static_cast<int64_t>(a.nbytes()));
}

static void BM_ToLowPrecision(benchmark::State& state) {
  const DType dt = state.range(0) ? kFloat16 : kBFloat16;
  Tensor a = rand({kN});
  for (auto _ : state) benchmark::DoNotOptimize(a.to(dt).data_ptr());
  state.SetBytesProcessed(state.iterations() * kN * (4 + 2));  // read 4 bytes, write 2
  state.SetLabel(dtype_name(dt));
}

static void BM_FromLowPrecision(benchmark::State& state) {
  const DType dt = state.range(0) ? kFloat16 : kBFloat16;
  Tensor a = rand({kN}).to(dt);
  for (auto _ : state) benchmark::DoNotOptimize(a.to(kFloat32).data_ptr());
  state.SetBytesProcessed(state.iterations() * kN * (2 + 4));
  state.SetLabel(dtype_name(dt));
}

BENCHMARK(BM_MemcpyFloat32)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_ToLowPrecision)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_FromLowPrecision)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();

TINY_BENCHMARK_MAIN();
