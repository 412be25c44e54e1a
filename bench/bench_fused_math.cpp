// The fused kernels' math functions (common/src/fusion/fused_math.inc) in the loop a generated
// kernel runs, `out[i] = f(in[i])` over 16M floats, against the same loop calling the C library
// (std::exp, std::erf, std::tanh, std::log: a call per element, so the loop stays scalar) and
// against memcpy of the same bytes, the speed of memory. Each loop reads 64 MiB and writes
// 64 MiB, so bytes per second compare directly with memcpy's; the GELU chain of chapter 09,
// gelu(x) * g + b + x, reads three arrays and writes one.
// This file is compiled as the kernels are, -O3 -march=native (bench/CMakeLists.txt). The tiny_
// loops are vectorised to the width the compiler prefers for the machine (GCC 12 picks 256-bit
// vectors even on AVX-512 CPUs unless given -mprefer-vector-width=512); to see it,
//   objdump -d -C build/bench/bench_fused_math | grep -A80 'map_tiny_erf.*>:' | grep -c ymm
//   build/bench/bench_fused_math
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "bench_common.h"

namespace fused {
#include "fusion/fused_math.inc"
}  // namespace fused

namespace {

constexpr size_t kN = size_t(1) << 24;

std::vector<float> uniform(float lo, float hi, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(kN);
  for (float& x : v) x = u(rng);
  return v;
}

// One loop per function, kept out of line so that -fopt-info-vec or a disassembler finds each.
#define TINY_MAP(name, expr)                                                             \
  __attribute__((noinline)) void name(const float* __restrict in, float* __restrict out, \
                                      size_t n) {                                        \
    for (size_t i = 0; i < n; ++i) out[i] = expr(in[i]);                                 \
  }
TINY_MAP(map_tiny_exp, fused::tiny_expf)
TINY_MAP(map_std_exp, std::exp)
TINY_MAP(map_tiny_erf, fused::tiny_erff)
TINY_MAP(map_std_erf, std::erf)
TINY_MAP(map_tiny_tanh, fused::tiny_tanhf)
TINY_MAP(map_std_tanh, std::tanh)
TINY_MAP(map_tiny_log, fused::tiny_logf)
TINY_MAP(map_std_log, std::log)
#undef TINY_MAP

using Map = void (*)(const float*, float*, size_t);

void run_map(benchmark::State& state, Map map, float lo, float hi) {
  const std::vector<float> in = uniform(lo, hi, 1);
  std::vector<float> out(kN);
  for (auto _ : state) {
    map(in.data(), out.data(), kN);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * 2 * int64_t(kN * sizeof(float)));
}

void BM_Memcpy(benchmark::State& state) {
  const std::vector<float> in = uniform(-4, 4, 1);
  std::vector<float> out(kN);
  for (auto _ : state) {
    std::memcpy(out.data(), in.data(), kN * sizeof(float));
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * 2 * int64_t(kN * sizeof(float)));
}

// exp's arguments in [-10, 10], erf's and tanh's in [-4, 4] (every branch-free path is computed
// anyway, so the values matter only to the C library), log's in (0, 100].
void BM_TinyExp(benchmark::State& s) { run_map(s, map_tiny_exp, -10, 10); }
void BM_StdExp(benchmark::State& s) { run_map(s, map_std_exp, -10, 10); }
void BM_TinyErf(benchmark::State& s) { run_map(s, map_tiny_erf, -4, 4); }
void BM_StdErf(benchmark::State& s) { run_map(s, map_std_erf, -4, 4); }
void BM_TinyTanh(benchmark::State& s) { run_map(s, map_tiny_tanh, -4, 4); }
void BM_StdTanh(benchmark::State& s) { run_map(s, map_std_tanh, -4, 4); }
void BM_TinyLog(benchmark::State& s) { run_map(s, map_tiny_log, 1e-3f, 100); }
void BM_StdLog(benchmark::State& s) { run_map(s, map_std_log, 1e-3f, 100); }

// gelu(x) * g + b + x with the exact GELU, 0.5 x (1 + erf(x / sqrt(2))).
template <float (*Erf)(float)>
__attribute__((noinline)) void gelu_chain(const float* __restrict x, const float* __restrict g,
                                          const float* __restrict b, float* __restrict out,
                                          size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const float v = x[i];
    out[i] = 0.5f * v * (1.0f + Erf(v * 0x1.6a09e6p-1f)) * g[i] + b[i] + v;
  }
}
float std_erf(float v) { return std::erf(v); }

template <float (*Erf)(float)> void run_gelu_chain(benchmark::State& state) {
  const std::vector<float> x = uniform(-4, 4, 1), g = uniform(0.5f, 2, 2), b = uniform(-1, 1, 3);
  std::vector<float> out(kN);
  for (auto _ : state) {
    gelu_chain<Erf>(x.data(), g.data(), b.data(), out.data(), kN);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * 4 * int64_t(kN * sizeof(float)));
}
void BM_GeluChainTiny(benchmark::State& s) { run_gelu_chain<fused::tiny_erff>(s); }
void BM_GeluChainStd(benchmark::State& s) { run_gelu_chain<std_erf>(s); }

}  // namespace

BENCHMARK(BM_Memcpy)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_TinyExp)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_StdExp)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_TinyErf)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_StdErf)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_TinyTanh)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_StdTanh)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_TinyLog)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_StdLog)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_GeluChainTiny)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_GeluChainStd)->Unit(benchmark::kMillisecond)->UseRealTime();

TINY_BENCHMARK_MAIN();
