// GPU benchmarks: cuBLAS matmul per dtype, an elementwise add against the device-to-device copy
// on 256 MiB tensors, and copies over the bus from pageable and pinned memory. Each iteration is
// timed by CUDA events around the work (UseManualTime), so the numbers are the GPU's own time,
// not the launch. Without a device the program prints one line that says why and exits 0.
//   make bench   (or build/bench/bench_cuda)
#include <cstdio>

#include "bench_common.h"

using namespace tiny;

namespace {

// Times `work` on the GPU with events, one iteration per benchmark iteration.
template <typename Work> void time_on_gpu(benchmark::State& state, Work&& work) {
  work();  // warm up (cuBLAS picks its kernel on the first call)
  cuda::synchronize();
  cuda::Event start, stop;
  for (auto _ : state) {
    start.record();
    work();
    stop.record();
    stop.synchronize();
    state.SetIterationTime(start.elapsed_time(stop) / 1e3);
  }
}

const DType kMatmulTypes[] = {kFloat32, kFloat16, kBFloat16, kFloat32};  // the last: TF32

void BM_CudaMatmul(benchmark::State& state) {
  const int64_t n = state.range(0);
  const int which = static_cast<int>(state.range(1));
  const Tensor a = randn({n, n}).to(kMatmulTypes[which]).cuda(),
               b = randn({n, n}).to(kMatmulTypes[which]).cuda();
  set_float32_matmul_precision(which == 3 ? "high" : "highest");
  time_on_gpu(state, [&] { matmul(a, b); });
  set_float32_matmul_precision("highest");
  state.SetLabel(which == 3 ? "tf32" : dtype_name(kMatmulTypes[which]));
  state.counters["TFLOP/s"] =
      benchmark::Counter(2.0 * n * n * n * state.iterations() / 1e12, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_CudaMatmul)
    ->ArgsProduct({{4096}, {0, 1, 2, 3}})
    ->Args({8192, 2})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

constexpr int64_t kElements = int64_t(64) << 20;  // 256 MiB of float32

void BM_CudaCopy(benchmark::State& state) {
  const Tensor x = ones({kElements}, kFloat32, Device::cuda());
  Tensor y = empty({kElements}, kFloat32, Device::cuda());
  time_on_gpu(state, [&] { y.copy_(x); });
  state.SetBytesProcessed(state.iterations() * 2 * static_cast<int64_t>(x.nbytes()));
}
BENCHMARK(BM_CudaCopy)->UseManualTime()->Unit(benchmark::kMillisecond);

void BM_CudaAdd(benchmark::State& state) {
  const Tensor x = ones({kElements}, kFloat32, Device::cuda()),
               y = ones({kElements}, kFloat32, Device::cuda());
  time_on_gpu(state, [&] { add(x, y); });
  state.SetBytesProcessed(state.iterations() * 3 * static_cast<int64_t>(x.nbytes()));
}
BENCHMARK(BM_CudaAdd)->UseManualTime()->Unit(benchmark::kMillisecond);

void BM_CudaAddStrided(benchmark::State& state) {
  const Tensor x = ones({8192, 8192}, kFloat32, Device::cuda()),
               y = ones({8192, 8192}, kFloat32, Device::cuda());
  time_on_gpu(state, [&] { add(x.T(), y); });  // the general loop: a transposed input
  state.SetBytesProcessed(state.iterations() * 3 * static_cast<int64_t>(x.nbytes()));
}
BENCHMARK(BM_CudaAddStrided)->UseManualTime()->Unit(benchmark::kMillisecond);

void BM_CudaSum(benchmark::State& state) {
  const Tensor x = ones({kElements}, kFloat32, Device::cuda());
  time_on_gpu(state, [&] { x.sum(); });
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(x.nbytes()));
}
BENCHMARK(BM_CudaSum)->UseManualTime()->Unit(benchmark::kMillisecond);

void BM_HostToDevice(benchmark::State& state) {
  const bool pinned = state.range(0);
  Tensor host = ones({kElements});
  if (pinned) host = host.pin_memory();
  time_on_gpu(state, [&] { host.to(Device::cuda()); });
  state.SetLabel(pinned ? "pinned" : "pageable");
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(host.nbytes()));
}
BENCHMARK(BM_HostToDevice)->Arg(0)->Arg(1)->UseManualTime()->Unit(benchmark::kMillisecond);

}  // namespace

// Without a device there is nothing to time: one line instead of an error per benchmark (make
// bench runs this program on every machine).
int main(int argc, char** argv) {
  if (!cuda::available()) {
    std::printf("bench_cuda: skipped, no CUDA device: %s\n", cuda::unavailable_reason().c_str());
    return 0;
  }
  return run_benchmarks(argc, argv);
}
