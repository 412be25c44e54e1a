// Eager CPU ops on one and two threads against their floors, measured in the same run: each
// iteration times the op and then its floor, so that both see the same machine, and the counter
// x_floor is their ratio (time over time for the same bytes in and out).
//   add (4096 x 4096 float32):   memcpy of one array on as many threads (the cheapest way to move
//                                bytes: it writes around the caches), scaled by bytes moved (the
//                                add moves 3 arrays, the copy 2), and x_loop: a plain
//                                c[i] = a[i] + b[i] loop split the same way, unscaled;
//   sum over the last dim and the first: one read of the input (a float32 sum in 16 lanes), and
//                                the last-dim sum again on rows that fit in the L2 cache;
//   x.T + y:                     a hand-tiled transpose fused with the add (tiles of 8 x 8, the
//                                best of 8, 16 and 32 here), bands of rows across the threads;
//   add of 1 x 8:                no floor, to compare with the library before threads.
// The floors on two threads split their range with the library's pool (detail::parallel_for),
// which costs microseconds against milliseconds of work.
//   build/bench/bench_parallel   (run when `uptime` shows a load below 1)
#include <chrono>
#include <cstring>

#include "bench_common.h"
#include "parallel.h"

using namespace tiny;

namespace {

constexpr int64_t kN = 4096;
using Clock = std::chrono::steady_clock;

double seconds_of(const std::function<void()>& fn) {
  const auto t0 = Clock::now();
  fn();
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Runs fn over [0, n) in as many pieces as the thread count.
template <typename F> void split(int64_t n, F&& fn) {
  detail::parallel_for(0, n, 1, [&](int64_t b, int64_t e) { fn(b, e); });
}

// Times op and floor in turn each iteration; reports the op's time and x_floor = op / floor,
// with the floor's time scaled by `floor_scale` (bytes of the op over bytes of the floor).
template <typename Op, typename Floor>
void against_floor(benchmark::State& state, Op&& op, Floor&& floor, double floor_scale) {
  const int saved = get_num_threads();
  set_num_threads(static_cast<int>(state.range(0)));
  op();
  floor();  // warm up: pages, caches and the pool's threads
  double op_total = 0, floor_total = 0;
  for (auto _ : state) {
    const double t = seconds_of(op);
    state.SetIterationTime(t);
    op_total += t;
    floor_total += seconds_of(floor);
  }
  state.counters["floor_ms"] = floor_total / static_cast<double>(state.iterations()) * 1e3;
  state.counters["x_floor"] = op_total / (floor_total * floor_scale);
  set_num_threads(saved);
}

void BM_Add(benchmark::State& state) {
  const Tensor a = randn({kN, kN}), b = randn({kN, kN});
  Tensor c = empty({kN, kN}), d = empty({kN, kN});
  const float* pa = a.data<float>();
  const float* pb = b.data<float>();
  float* pd = d.data<float>();
  auto op = [&] { add_out(c, a, b); };
  against_floor(
      state, op,
      [&] {
        split(a.numel(), [&](int64_t s, int64_t e) {
          std::memcpy(pd + s, pa + s, static_cast<size_t>(e - s) * sizeof(float));
        });
      },
      3.0 / 2.0);
  // The plain loop, once more on its own to report its ratio.
  const int saved = get_num_threads();
  set_num_threads(static_cast<int>(state.range(0)));
  auto loop = [&] {
    split(a.numel(), [&](int64_t s, int64_t e) {
      for (int64_t i = s; i < e; ++i) pd[i] = pa[i] + pb[i];
    });
  };
  loop();
  double t_op = 0, t_loop = 0;
  for (int i = 0; i < 10; ++i) {
    t_op += seconds_of(op);
    t_loop += seconds_of(loop);
  }
  state.counters["x_loop"] = t_op / t_loop;
  set_num_threads(saved);
}

// One read of the input: a float32 sum in 16 lanes, which the compiler vectorises.
float read_once(const float* p, int64_t n) {
  float lanes[16] = {};
  for (int64_t i = 0; i + 16 <= n; i += 16)
    for (int k = 0; k < 16; ++k) lanes[k] += p[i + k];
  float total = 0;
  for (float l : lanes) total += l;
  return total;
}

template <bool kLastDim> void BM_Sum(benchmark::State& state) {
  const Tensor a = randn({kN, kN});
  const float* pa = a.data<float>();
  std::vector<float> partial(kN);
  against_floor(
      state, [&] { benchmark::DoNotOptimize(sum(a, {kLastDim ? 1 : 0}).data_ptr()); },
      [&] {
        split(kN, [&](int64_t s, int64_t e) {
          partial[static_cast<size_t>(s)] = read_once(pa + s * kN, (e - s) * kN);
        });
        benchmark::DoNotOptimize(partial.data());
      },
      1.0);
}

void BM_SumAll(benchmark::State& state) {
  const Tensor a = randn({kN, kN});
  const float* pa = a.data<float>();
  std::vector<float> partial(kN);
  against_floor(
      state, [&] { benchmark::DoNotOptimize(sum(a).data_ptr()); },
      [&] {
        split(kN, [&](int64_t s, int64_t e) {
          partial[static_cast<size_t>(s)] = read_once(pa + s * kN, (e - s) * kN);
        });
        benchmark::DoNotOptimize(partial.data());
      },
      1.0);
}

// The same sum over the last dim on 32 rows (512 KiB, which stays in a core's L2 cache), 64
// times per iteration: with memory out of the way, what its float64 lanes cost against a float32
// read. A float is widened to a double before it is added, one more instruction per four floats
// with AVX2, so where memory is fast (huge pages, a large cache) this is the ratio the sum of a
// large tensor tends to.
void BM_SumLastDimInCache(benchmark::State& state) {
  constexpr int64_t kRows = 32, kRepeats = 64;
  const Tensor a = randn({kRows, kN});
  const float* pa = a.data<float>();
  std::vector<float> partial(kRows);
  against_floor(
      state,
      [&] {
        for (int64_t r = 0; r < kRepeats; ++r) benchmark::DoNotOptimize(sum(a, {1}).data_ptr());
      },
      [&] {
        for (int64_t r = 0; r < kRepeats; ++r) {
          split(kRows, [&](int64_t s, int64_t e) {
            partial[static_cast<size_t>(s)] = read_once(pa + s * kN, (e - s) * kN);
          });
          benchmark::DoNotOptimize(partial.data());
        }
      },
      1.0);
}

// out = x.T + y, by hand: 8 x 8 tiles, each read along x's rows and written along out's.
void transpose_add(float* out, const float* x, const float* y, int64_t n, int64_t r0, int64_t r1) {
  constexpr int64_t kT = 8;
  for (int64_t i0 = r0; i0 < r1; i0 += kT)
    for (int64_t j0 = 0; j0 < n; j0 += kT)
      for (int64_t j = j0; j < j0 + kT; ++j)
        for (int64_t i = i0; i < i0 + kT; ++i) out[i * n + j] = x[j * n + i] + y[i * n + j];
}

void BM_TransposedAdd(benchmark::State& state) {
  const Tensor x = randn({kN, kN}), y = randn({kN, kN});
  Tensor c = empty({kN, kN}), d = empty({kN, kN});
  const Tensor xt = x.T();
  against_floor(
      state, [&] { add_out(c, xt, y); },
      [&] {
        split(kN / 8, [&](int64_t s, int64_t e) {
          transpose_add(d.data<float>(), x.data<float>(), y.data<float>(), kN, s * 8, e * 8);
        });
      },
      1.0);
}

void BM_AddSmall(benchmark::State& state) {
  const int saved = get_num_threads();
  set_num_threads(static_cast<int>(state.range(0)));
  const Tensor a = randn({1, 8}), b = randn({1, 8});
  for (auto _ : state) benchmark::DoNotOptimize(add(a, b).data_ptr());
  set_num_threads(saved);
}

}  // namespace

BENCHMARK(BM_Add)->Arg(1)->Arg(2)->ArgName("threads")->Unit(benchmark::kMillisecond)->UseManualTime();
BENCHMARK(BM_Sum<true>)->Name("BM_SumLastDim")->Arg(1)->Arg(2)->ArgName("threads")
    ->Unit(benchmark::kMillisecond)->UseManualTime();
BENCHMARK(BM_Sum<false>)->Name("BM_SumFirstDim")->Arg(1)->Arg(2)->ArgName("threads")
    ->Unit(benchmark::kMillisecond)->UseManualTime();
BENCHMARK(BM_SumLastDimInCache)
    ->Arg(1)
    ->ArgName("threads")
    ->Unit(benchmark::kMillisecond)
    ->UseManualTime();
BENCHMARK(BM_SumAll)->Arg(1)->Arg(2)->ArgName("threads")->Unit(benchmark::kMillisecond)->UseManualTime();
BENCHMARK(BM_TransposedAdd)->Arg(1)->Arg(2)->ArgName("threads")->Unit(benchmark::kMillisecond)
    ->UseManualTime();
BENCHMARK(BM_AddSmall)->Arg(1)->Arg(2)->ArgName("threads");

TINY_BENCHMARK_MAIN();
