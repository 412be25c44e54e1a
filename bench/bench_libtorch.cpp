// The library's eager CPU ops against libtorch's, the same op on the same numbers in the same
// process, one call of each in turn on every iteration: whatever the machine is doing at that
// moment (another program, the frequency it runs at) slows both alike, so their ratio means
// more than two timings taken minutes apart.
//
// Built only where libtorch's CMake files are installed (Debian: apt-get install libtorch-dev);
// nothing else in the project needs libtorch. Each benchmark reports three counters:
//   tiny_ms    the library's call,   torch_ms   libtorch's call,
//   ratio      tiny_ms / torch_ms (below 1: the library is faster).
// The /1 and /2 suffixes are the number of threads both libraries were given.
//
//   build/bench/bench_libtorch --benchmark_min_time=1
//
// glibc returns every large freed block to the kernel by default, so each of libtorch's 64 MiB
// results would be a fresh mapping whose first touch page-faults; the library's caching allocator
// keeps its blocks. main() asks glibc to keep freed memory too, which is how libtorch is usually
// run (with a caching malloc such as jemalloc) and the fair comparison.
#include <malloc.h>
#include <unistd.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>

#include "bench_common.h"

namespace {

constexpr int64_t kN = 4096;

// One input set, shared by both libraries: torch's tensors are views of the library's memory.
struct Inputs {
  tiny::Tensor x, y, g, b, small_x, small_y;
  torch::Tensor tx, ty, tg, tb, tsmall_x, tsmall_y;
};

torch::Tensor as_torch(const tiny::Tensor& t) {
  std::vector<int64_t> shape(t.shape().begin(), t.shape().end());
  return torch::from_blob(t.data_ptr(), shape, torch::kFloat32);
}

const Inputs& inputs() {
  static const Inputs in = [] {
    tiny::manual_seed(0);
    Inputs r;
    r.x = tiny::randn({kN, kN});
    r.y = tiny::randn({kN, kN});
    r.g = tiny::randn({kN});
    r.b = tiny::randn({kN});
    r.small_x = tiny::randn({1, 8});
    r.small_y = tiny::randn({1, 8});
    r.tx = as_torch(r.x);
    r.ty = as_torch(r.y);
    r.tg = as_torch(r.g);
    r.tb = as_torch(r.b);
    r.tsmall_x = as_torch(r.small_x);
    r.tsmall_y = as_torch(r.small_y);
    return r;
  }();
  return in;
}

double seconds_of(const std::function<void()>& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Each library's worst error for float32 GELU, in units in the last place of the correctly
// rounded result, over 2^22 points of [0.01, 3.01] (where 1 + erf does not cancel), against
// long double: a faster GELU is a fair win only where it is as accurate. Reported once, as
// context, beside the timings.
std::string gelu_worst_ulps() {
  const int64_t n = int64_t(1) << 22;
  tiny::Tensor x = tiny::empty({n});
  float* p = x.data<float>();
  for (int64_t i = 0; i < n; ++i) p[i] = 0.01f + 3.0f * (static_cast<float>(i) / n);
  const tiny::Tensor ours = tiny::gelu(x);
  const torch::Tensor theirs = torch::gelu(as_torch(x)).contiguous();
  auto worst = [&](const float* y) {
    long double w = 0;
    for (int64_t i = 0; i < n; ++i) {
      const long double v = p[i];
      const long double exact = v * 0.5L * (1.0L + erfl(v / sqrtl(2.0L)));
      const float nearest = static_cast<float>(exact);  // positive and normal on this range
      const long double ulp = std::nextafter(nearest, INFINITY) - nearest;
      w = std::max(w, fabsl(y[i] - exact) / ulp);
    }
    return static_cast<double>(w);
  };
  char text[96];
  std::snprintf(text, sizeof text, "tiny %.2f, libtorch %.2f (worst ulps on [0.01, 3.01])",
                worst(ours.data<float>()), worst(theirs.data_ptr<float>()));
  return text;
}

// Times `ours` and `theirs` alternately; the benchmark's own time is the library's call.
void compare(benchmark::State& state, const std::function<tiny::Tensor(const Inputs&)>& ours,
             const std::function<torch::Tensor(const Inputs&)>& theirs) {
  const int threads = static_cast<int>(state.range(0));
  tiny::set_num_threads(threads);
  torch::set_num_threads(threads);
  const Inputs& in = inputs();
  ours(in);  // warm both: first calls fill caches and allocators
  theirs(in);
  // The two calls take turns going first: an input larger than the last-level cache still
  // leaves part of itself there after a pass, and whichever call came second would always read
  // that part from the cache (with 64 MiB inputs and a 32 MiB cache the second call of a sum was
  // up to 25% faster, whichever library made it).
  double tiny_s = 0, torch_s = 0;
  bool ours_first = true;
  for (auto _ : state) {
    auto time_theirs = [&] {
      torch_s += seconds_of([&] { benchmark::DoNotOptimize(theirs(in).data_ptr()); });
    };
    if (!ours_first) time_theirs();
    const double t = seconds_of([&] { benchmark::DoNotOptimize(ours(in).data_ptr()); });
    if (ours_first) time_theirs();
    ours_first = !ours_first;
    tiny_s += t;
    state.SetIterationTime(t);
  }
  const double n = static_cast<double>(state.iterations());
  state.counters["tiny_ms"] = 1e3 * tiny_s / n;
  state.counters["torch_ms"] = 1e3 * torch_s / n;
  state.counters["ratio"] = tiny_s / torch_s;
}

#define TINY_VS_TORCH(NAME, OURS, THEIRS)                                                  \
  void BM_##NAME(benchmark::State& state) {                                                \
    compare(                                                                               \
        state, [](const Inputs& in) { return OURS; }, [](const Inputs& in) { return THEIRS; }); \
  }                                                                                        \
  BENCHMARK(BM_##NAME)->Arg(1)->Arg(2)->UseManualTime()->Unit(benchmark::kMillisecond)

// clang-format off
TINY_VS_TORCH(Gelu, tiny::gelu(in.x), torch::gelu(in.tx));
TINY_VS_TORCH(Exp, tiny::exp(in.x), torch::exp(in.tx));
TINY_VS_TORCH(Tanh, tiny::tanh(in.x), torch::tanh(in.tx));
TINY_VS_TORCH(GeluScaleShiftAdd, tiny::gelu(in.x) * in.g + in.b + in.x,
              torch::gelu(in.tx) * in.tg + in.tb + in.tx);
TINY_VS_TORCH(ScaleShiftAdd, in.x * in.g + in.b + in.x, in.tx * in.tg + in.tb + in.tx);
TINY_VS_TORCH(Add, in.x + in.y, in.tx + in.ty);
TINY_VS_TORCH(MulRow, in.x * in.g, in.tx * in.tg);
TINY_VS_TORCH(AddTransposed, in.x.T() + in.y, in.tx.t() + in.ty);
TINY_VS_TORCH(SumLastDim, in.x.sum({1}), in.tx.sum({1}));
TINY_VS_TORCH(SumFirstDim, in.x.sum({0}), in.tx.sum({0}));
TINY_VS_TORCH(SumAll, in.x.sum(), in.tx.sum());
TINY_VS_TORCH(AddSmall1x8, in.small_x + in.small_y, in.tsmall_x + in.tsmall_y);
// clang-format on

}  // namespace

int main(int argc, char** argv) {
  // libtorch's OpenMP threads keep spinning for a while after each parallel loop (libgomp's
  // default wait policy), so on a 2-core machine they hold the second core while the library's
  // next op wants it; the library's own pool sleeps between loops. libgomp reads OMP_WAIT_POLICY
  // once, when it loads, so where it is unset the program starts itself again with PASSIVE: each
  // library then has the cores to itself while its own op runs.
  // Likewise glibc reads GLIBC_TUNABLES once: where the library is asked for huge pages
  // (TINY_HUGE_PAGES=1), libtorch's blocks, which come from glibc's malloc, get them too
  // (glibc.malloc.hugetlb=1), so that neither side is measured on faster memory than the other.
  const bool huge_for_torch =
      tiny::detail::cpu::huge_pages() && std::getenv("GLIBC_TUNABLES") == nullptr;
  if (std::getenv("OMP_WAIT_POLICY") == nullptr || huge_for_torch) {
    if (std::getenv("OMP_WAIT_POLICY") == nullptr) setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
    if (huge_for_torch) setenv("GLIBC_TUNABLES", "glibc.malloc.hugetlb=1", 1);
    execv("/proc/self/exe", argv);  // returns only on failure: measure as we are
  }
  // Keep freed blocks in the process (see the top of this file): no block gets a mapping of its
  // own, and the heap is never trimmed.
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  add_tiny_context();
  benchmark::AddCustomContext("libtorch", TORCH_VERSION);
  benchmark::AddCustomContext("OMP_WAIT_POLICY", std::getenv("OMP_WAIT_POLICY"));
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  benchmark::AddCustomContext("GLIBC_TUNABLES", tunables ? tunables : "(unset)");
  // libtorch's kernels for an instruction set are picked as the library's are: the best the
  // processor has, or a lesser one named by ATEN_CPU_CAPABILITY (default, avx2, avx512), the
  // counterpart of TINY_CPU_ISA. Holding both to avx2 shows what a machine without AVX-512 sees.
  const char* aten = std::getenv("ATEN_CPU_CAPABILITY");
  benchmark::AddCustomContext("ATEN_CPU_CAPABILITY", aten ? aten : "(unset: the best there is)");
  benchmark::AddCustomContext("GELU accuracy", gelu_worst_ulps());
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
