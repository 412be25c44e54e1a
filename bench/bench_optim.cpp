// An AdamW step on 8,393,728 float32 parameters through tiny::optim::AdamW, against a
// hand-written single pass over the same four arrays (param, grad, exp_avg, exp_avg_sq) on one
// thread: the same math, rounded at the same places (optim_math.h), compiled with the same flags
// as the library's kernel (-O3 -ffp-contract=off -fno-math-errno, AVX2 + FMA; see
// bench/CMakeLists.txt), so it is as fast as one pass can be. The bar: the library at
// most 1.3x the hand loop. Two layouts: one tensor of 8,393,728 elements, and the same count in
// 1024 tensors of 8197 (the per-parameter overhead: state lookups, the step counter, the call).
// Memory is reused: every array is allocated and touched before the timed loop, which runs the
// step on the same buffers over and over. The library is single-threaded (so is the hand loop).
// A step reads 4 arrays and writes 3: bytes_per_second counts those 7 * 4 bytes per element.
// bench/pytorch_adamw.py times torch.optim.AdamW on the same size.
//   build/bench/bench_optim --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <cmath>
#include <cstring>
#include <vector>

#include "bench_common.h"
#include "tiny/optim.h"

using namespace tiny;

namespace {

constexpr int64_t kTotal = 8'393'728;  // 2048 * 4096 + 2048 * 2

// torch.optim.AdamW's defaults.
constexpr double kLr = 1e-3, kBeta1 = 0.9, kBeta2 = 0.999, kEps = 1e-8, kWeightDecay = 1e-2;

// ---- the hand-written loop ------------------------------------------------------------------

// The numbers of one step, computed in double as torch/optim/adamw.py computes them and then
// made float32 once, as the library's kernel does (optim_math.h's S and F).
struct StepConstants {
  float decay, one_minus_beta1, beta2, one_minus_beta2, bias_correction2_sqrt, eps,
      neg_step_size;
};

StepConstants step_constants(double step) {
  const double bias_correction1 = 1 - std::pow(kBeta1, step);
  const double bias_correction2 = 1 - std::pow(kBeta2, step);
  return {static_cast<float>(1 - kLr * kWeightDecay),
          static_cast<float>(1 - kBeta1),
          static_cast<float>(kBeta2),
          static_cast<float>(1 - kBeta2),
          static_cast<float>(std::sqrt(bias_correction2)),
          static_cast<float>(kEps),
          static_cast<float>(-(kLr / bias_correction1))};
}

// One AdamW pass, each product and sum where the library's fused (FMA) copy has it.
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2,fma")))
#endif
void hand_adamw(float* __restrict param, const float* __restrict grad, float* __restrict m,
                float* __restrict v, int64_t n, StepConstants c) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = grad[i];
    const float p = param[i] * c.decay;
    const float mi = std::fma(c.one_minus_beta1, g - m[i], m[i]);  // exp_avg.lerp_(g, 1 - beta1)
    const float vi = std::fma(c.one_minus_beta2 * g, g, v[i] * c.beta2);
    m[i] = mi;
    v[i] = vi;
    const float denom = std::sqrt(vi) / c.bias_correction2_sqrt + c.eps;
    param[i] = p + (c.neg_step_size * mi) / denom;
  }
}

// The arrays of one layout: `count` parameters of `total / count` elements (the first takes the
// remainder), with their gradients and optimizer state.
struct Arrays {
  std::vector<Tensor> params, grads, m, v;
};

Arrays make_arrays(int64_t count) {
  manual_seed(0);
  Arrays a;
  const int64_t each = kTotal / count;
  for (int64_t k = 0; k < count; ++k) {
    const int64_t n = each + (k == 0 ? kTotal - each * count : 0);
    a.params.push_back(randn({n}).requires_grad_());
    a.grads.push_back(randn({n}) * 1e-2);
    a.m.push_back(zeros({n}));
    a.v.push_back(zeros({n}));
  }
  return a;
}

float* f32(const Tensor& t) { return static_cast<float*>(t.data_ptr()); }

// Whether the hand loop is the library's math: one step each, from the same numbers, compared
// bit for bit (run once, on a small array; the result goes in the benchmark's label).
bool hand_loop_matches_library() {
  static const bool same = [] {
    manual_seed(1);
    const int64_t n = 4099;
    Tensor p = randn({n}), g = randn({n}) * 1e-2;
    Tensor hp = p.clone(), hm = zeros({n}), hv = zeros({n});
    p.requires_grad_();
    p.set_grad(g);
    optim::AdamW opt({p});
    for (int step = 1; step <= 3; ++step) {
      opt.step();
      hand_adamw(f32(hp), f32(g), f32(hm), f32(hv), n, step_constants(step));
    }
    return std::memcmp(p.data_ptr(), hp.data_ptr(), p.nbytes()) == 0 &&
           std::memcmp(opt.state(p).at("exp_avg").data_ptr(), hm.data_ptr(), hm.nbytes()) == 0 &&
           std::memcmp(opt.state(p).at("exp_avg_sq").data_ptr(), hv.data_ptr(), hv.nbytes()) == 0;
  }();
  return same;
}

void set_bytes(benchmark::State& state) {
  state.SetBytesProcessed(state.iterations() * 7 * kTotal * static_cast<int64_t>(sizeof(float)));
}

// ---- the benchmarks -------------------------------------------------------------------------

void BM_AdamWTiny(benchmark::State& state) {
  Arrays a = make_arrays(state.range(0));
  for (size_t k = 0; k < a.params.size(); ++k) a.params[k].set_grad(a.grads[k]);
  optim::AdamW opt(a.params, {.lr = kLr, .weight_decay = kWeightDecay});
  opt.step();  // warm-up: creates and touches the state
  for (auto _ : state) {
    opt.step();
    benchmark::ClobberMemory();
  }
  set_bytes(state);
}

void BM_AdamWHandLoop(benchmark::State& state) {
  state.SetLabel(hand_loop_matches_library() ? "bitwise equal to tiny's step"
                                             : "DIFFERS from tiny's step");
  Arrays a = make_arrays(state.range(0));
  double step = 1;
  auto one_step = [&] {
    const StepConstants c = step_constants(step++);
    for (size_t k = 0; k < a.params.size(); ++k)
      hand_adamw(f32(a.params[k]), f32(a.grads[k]), f32(a.m[k]), f32(a.v[k]), a.params[k].numel(),
                 c);
  };
  one_step();  // warm-up, as for the library
  for (auto _ : state) {
    one_step();
    benchmark::ClobberMemory();
  }
  set_bytes(state);
}

}  // namespace

BENCHMARK(BM_AdamWHandLoop)
    ->ArgName("tensors")
    ->Arg(1)
    ->Arg(1024)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_AdamWTiny)
    ->ArgName("tensors")
    ->Arg(1)
    ->Arg(1024)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

TINY_BENCHMARK_MAIN();
