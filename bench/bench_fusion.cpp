// bench_fusion.cpp: chapter 09's measurements. Fused chains (compile()) against the library's
// own eager chains and against the floor of any one-pass kernel, x.clone(), at the document's
// 4096 x 4096 float32 with g and b broadcast along rows; and the first call's cost.
//
// The bars are ratios within one run: fused x*g+b+x at most 1.15x the clone, the fused
// GELU chain at most 2.0x the clone, each at least 3x faster than eager; a first call under 1 s.
#include <unistd.h>

#include <filesystem>

#include "bench_common.h"

using namespace tiny;

namespace {

constexpr int64_t kN = 4096;

Tensor gelu_scale_shift(const Tensor& x, const Tensor& g, const Tensor& b) {
  return gelu(x) * g + b + x;
}
Tensor scale_shift(const Tensor& x, const Tensor& g, const Tensor& b) { return x * g + b + x; }
// No broadcast operand: the generated kernel is one loop over all the elements, not rows.
Tensor gelu_residual(const Tensor& x, const Tensor&, const Tensor&) { return gelu(x) * 1.5 + x; }

struct Inputs {
  Tensor x = randn({kN, kN}), g = randn({kN}), b = randn({kN});
};
Inputs& inputs() {
  static Inputs in;
  return in;
}

void set_bytes(benchmark::State& state, double passes) {
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * passes * kN * kN * 4));
}

void BM_Clone(benchmark::State& state) {
  const Tensor& x = inputs().x;
  for (auto _ : state) benchmark::DoNotOptimize(x.clone());
  set_bytes(state, 2);
}
BENCHMARK(BM_Clone)->Unit(benchmark::kMillisecond)->UseRealTime();

template <Tensor (*F)(const Tensor&, const Tensor&, const Tensor&)>
void BM_Eager(benchmark::State& state) {
  Inputs& in = inputs();
  for (auto _ : state) benchmark::DoNotOptimize(F(in.x, in.g, in.b));
  set_bytes(state, 2);  // bytes of the one-pass floor, so "bytes_per_second" compares directly
}
BENCHMARK(BM_Eager<scale_shift>)->Name("BM_EagerScaleShift")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Eager<gelu_scale_shift>)->Name("BM_EagerGeluChain")->Unit(benchmark::kMillisecond)->UseRealTime();

template <Tensor (*F)(const Tensor&, const Tensor&, const Tensor&)>
void BM_Fused(benchmark::State& state) {
  Inputs& in = inputs();
  auto fast = compile(F, {static_cast<FusionBackend>(state.range(0))});
  fast(in.x, in.g, in.b);
  for (auto _ : state) benchmark::DoNotOptimize(fast(in.x, in.g, in.b));
  set_bytes(state, 2);
  state.SetLabel(fast.backend());
}
BENCHMARK(BM_Fused<scale_shift>)->Name("BM_FusedScaleShift")->Arg(static_cast<int>(FusionBackend::Cpp))
    ->Arg(static_cast<int>(FusionBackend::Interpreter))->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Fused<gelu_scale_shift>)->Name("BM_FusedGeluChain")->Arg(static_cast<int>(FusionBackend::Cpp))
    ->Arg(static_cast<int>(FusionBackend::Interpreter))->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Fused<gelu_residual>)
    ->Name("BM_FusedGeluResidual")
    ->Arg(static_cast<int>(FusionBackend::Cpp))
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// The first call with an empty disk cache: trace, generate, compile, load, run.
void BM_FirstCall(benchmark::State& state) {
  Inputs& in = inputs();
  const std::string dir = std::filesystem::temp_directory_path() /
                          ("tiny_fusion_bench_" + std::to_string(getpid()));
  setenv("TINY_FUSION_CACHE", dir.c_str(), 1);
  for (auto _ : state) {
    std::filesystem::remove_all(dir);
    auto fast = compile(gelu_scale_shift);
    benchmark::DoNotOptimize(fast(in.x, in.g, in.b));
  }
  std::filesystem::remove_all(dir);
  unsetenv("TINY_FUSION_CACHE");
}
BENCHMARK(BM_FirstCall)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);

}  // namespace

TINY_BENCHMARK_MAIN();
