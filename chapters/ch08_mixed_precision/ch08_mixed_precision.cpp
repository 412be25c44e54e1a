// Chapter 08: mixed precision, the way it is trained in practice.
//
// Chapter 05 showed, with single numbers, the three facts this chapter builds on: float16's
// small gradients vanish unless scaled up, bfloat16 rounds small updates away, and a long sum in
// 16 bits stalls. Here they meet a real model. Autocast runs the matrix products in 16 bits and
// the sensitive ops in float32, the weights stay in float32 as the master copy, and GradScaler
// keeps float16's gradients alive. Five training runs of one problem show what each piece buys.
//
//   make ch08 && ./ch08_mixed_precision
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tiny/tiny.h"

using namespace tiny;

// ---- 1 and 5. one problem, trained five ways -------------------------------------------------
//
// A student network learns a teacher network's outputs. Both are ReLU MLPs without biases, and the
// inputs are small (2^-6 times standard normal), so every output and every gradient is small:
// the scale at which float16's range runs out. With a mean over 64 x 256 outputs, the gradient of
// the loss with respect to one output is 2 (y - t) / 16384, and below a few times 1e-8 float16
// has nothing left. The targets carry a little noise (1e-4), so the best loss there is, 1e-8, is
// known in advance: a run that learns reaches it, a run that stalls stays above it.

constexpr int64_t kSteps = 800, kBatch = 64, kIn = 16, kHidden = 8, kOut = 256;
constexpr double kLr = 5e-3, kNoise = 1e-4;

static std::shared_ptr<nn::Sequential> mlp(int64_t hidden, Generator& gen) {
  return std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(kIn, hidden, /*bias=*/false, kFloat32, gen),
      std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(hidden, kOut, /*bias=*/false, kFloat32, gen)});
}

// The teacher and an endless stream of batches from it, the same for every run.
struct Problem {
  Generator gen;
  std::shared_ptr<nn::Sequential> teacher;
  explicit Problem(uint64_t seed) : gen(seed), teacher(mlp(4, gen)) {}
  std::pair<Tensor, Tensor> batch() {
    const NoGradGuard data;
    const Tensor x = mul(randn({kBatch, kIn}, kFloat32, gen), scalar_tensor(1.0 / 64));
    const Tensor t = add((*teacher)(x), mul(randn({kBatch, kOut}, kFloat32, gen),
                                            scalar_tensor(kNoise)));
    return {x, t};
  }
};

enum class Precision { Float32, PureBFloat16, MixedBFloat16, Float16, Float16Scaled };

// The share of elements of `ts` that are exactly 0.
static double share_of_zeros(const std::vector<Tensor>& ts) {
  double zeros_count = 0, n = 0;
  for (const Tensor& t : ts) {
    zeros_count += sum(eq(t, scalar_tensor(0.0, t.dtype()))).item();
    n += static_cast<double>(t.numel());
  }
  return zeros_count / n;
}

// One training run: the student, its optimizer and scaler, and what each step measured.
struct Run {
  const char* name;
  Precision precision;
  Problem problem{0};
  Generator init{1000};
  std::shared_ptr<nn::Sequential> model = mlp(kHidden, init);
  std::unique_ptr<optim::AdamW> opt;
  // PyTorch's default growth_interval is 2000, longer than this run: at 25 the scale climbs
  // until it overflows, which shows every rule of the scaler within 800 steps.
  amp::GradScaler scaler{Device::Type::CPU, {.growth_interval = 25}};
  std::vector<double> loss, scale;  // per step (scale: GradScaler's, after update)
  double unchanged = 0;             // share of weights a step left as they were (last 100)
  double zero_grads = 0;            // share of weight-gradient elements exactly 0 (last 50)
  int64_t skipped = 0;              // steps GradScaler skipped

  Run(const char* run_name, Precision p) : name(run_name), precision(p) {
    // Pure bfloat16 keeps the weights, their gradients and AdamW's state in bfloat16; every
    // other run keeps them in float32 (the master weights) and differs only in the forward pass.
    if (precision == Precision::PureBFloat16) model->to(kBFloat16);
    opt = std::make_unique<optim::AdamW>(model->parameters(),
                                         optim::AdamW::Options{.lr = kLr, .weight_decay = 0.0});
  }

  void step(int64_t step) {
    nn::Sequential& net = *model;
    //! [precisions]
    auto [x, t] = problem.batch();
    opt->zero_grad();
    Tensor out, loss_value;
    if (precision == Precision::PureBFloat16) {
      out = net(x.to(kBFloat16));
      loss_value = mse_loss(out, t.to(kBFloat16));
    } else {
      std::optional<AutocastGuard> scope;
      if (precision == Precision::MixedBFloat16) scope.emplace(Device::Type::CPU, kBFloat16);
      if (precision == Precision::Float16 || precision == Precision::Float16Scaled)
        scope.emplace(Device::Type::CPU, kFloat16);
      out = net(x);                   // float16 or bfloat16 under autocast
      loss_value = mse_loss(out, t);  // float32: the losses are on autocast's float32 list
    }
    if (precision == Precision::Float16Scaled) scaler.scale(loss_value).backward();
    else loss_value.backward();
    opt->param_groups()[0].set("lr", kLr * (1.0 - double(step) / double(kSteps)));
    //! [precisions]
    loss.push_back(mse_loss(out.detach().to(kFloat32), t).item());
    const std::vector<Tensor> weights = net.parameters();
    std::vector<Tensor> grads, before;
    for (const Tensor& w : weights) {
      grads.push_back(w.grad());
      before.push_back(w.detach().clone());
    }
    if (step >= kSteps - 50) zero_grads += share_of_zeros(grads) / 50;
    if (precision == Precision::Float16Scaled) {
      const double old_scale = scaler.get_scale();
      scaler.step(*opt);  // unscales; skips the step if a gradient is inf or NaN
      scaler.update();    // halves the scale after an overflow, doubles it every 25 clean steps
      skipped += scaler.get_scale() < old_scale;
      scale.push_back(scaler.get_scale());
    } else {
      opt->step();
    }
    if (step >= kSteps - 100) {
      std::vector<Tensor> changed;
      for (size_t i = 0; i < weights.size(); ++i)
        changed.push_back(ne(weights[i].detach(), before[i]));  // 0 where the step did nothing
      unchanged += share_of_zeros(changed) / 100;
    }
  }

  // Steps [from, to).
  void train(int64_t from, int64_t to) {
    for (int64_t k = from; k < to; ++k) step(k);
  }
};

static double mean_of_last(const std::vector<double>& v, size_t n) {
  double s = 0;
  for (size_t i = v.size() - n; i < v.size(); ++i) s += v[i];
  return s / double(n);
}

// The weights' gradients for one batch, in float32 or under float16 autocast with a loss scale
// (and divided by the scale again), all in one vector.
static Tensor gradients(nn::Sequential& model, const Tensor& x, const Tensor& t,
                        std::optional<double> scale) {
  for (const Tensor& w : model.parameters()) w.set_grad(Tensor());
  Tensor loss;
  {
    std::optional<AutocastGuard> scope;
    if (scale) scope.emplace(Device::Type::CPU, kFloat16);
    loss = mse_loss(model(x), t);
  }
  const Tensor s = scalar_tensor(scale.value_or(1.0));
  mul(loss, s).backward();
  std::vector<Tensor> weights = model.parameters();
  const Tensor& w1 = weights[0];
  const Tensor& w2 = weights[1];
  Tensor all = empty({w1.numel() + w2.numel()});
  all.narrow(0, 0, w1.numel()).copy_(div(w1.grad(), s).flatten());
  all.narrow(0, w1.numel(), w2.numel()).copy_(div(w2.grad(), s).flatten());
  return all;
}

static int64_t count_zeros(const Tensor& g) {
  return static_cast<int64_t>(sum(eq(g, scalar_tensor(0.0))).item());
}

static void float16_gradients() {
  std::printf("== float16 gradients of a real loss: the student's first batch, one backward ==\n");
  //! [underflow]
  Problem problem(0);
  Generator init(1000);
  auto model = mlp(kHidden, init);
  const auto [x, t] = problem.batch();
  const Tensor g32 = gradients(*model, x, t, std::nullopt);
  std::printf("float32: %lld gradient elements, |g| from %.1e to %.1e; float16's smallest normal "
              "is %.1e, its smallest subnormal %.1e\n",
              static_cast<long long>(g32.numel()), -max(neg(abs(g32))).item(),
              max(abs(g32)).item(), std::ldexp(1.0, -14), std::ldexp(1.0, -24));
  for (double scale : {1.0, 65536.0}) {
    const Tensor g = gradients(*model, x, t, scale);
    const Tensor nonzero = where(ne(g, scalar_tensor(0.0)), abs(g), scalar_tensor(INFINITY));
    const double off = std::sqrt(sum(square(sub(g, g32))).item() / sum(square(g32)).item());
    std::printf("float16, %-22s %4lld of %lld are 0, the smallest nonzero %.1e, %.2g%% off "
                "float32\n",
                scale == 1.0 ? "no loss scale:" : "loss scaled by 65536:", static_cast<long long>(count_zeros(g)), static_cast<long long>(g.numel()),
                -max(neg(nonzero)).item(), 100 * off);
  }
  //! [underflow]
  std::printf("\n");
}

// ---- 6. a checkpoint keeps the scaler -------------------------------------------------------

// The float16 run with GradScaler again, stopped after 410 steps and saved to a checkpoint (chapter 06's
// file, now with the scaler's state), then resumed in a fresh process's worth of objects: a new
// model, optimizer and scaler, loaded from the file. Without the scaler's state the resumed run
// would start again at 2^16 and count towards its next growth from 0.
static void resume(const Run& uninterrupted) {
  std::printf("== A checkpoint keeps the scaler: the float16 run stopped at step 410 and resumed ==\n");
  //! [resume]
  const int64_t stop = 410;
  const std::string path =
      (std::filesystem::temp_directory_path() / "ch08_checkpoint.safetensors").string();
  {
    Run first("first half", Precision::Float16Scaled);
    first.train(0, stop);
    save_checkpoint(path, *first.model, *first.opt, first.scaler, {{"step", std::to_string(stop)}});
    std::printf("saved at step %lld: scale 2^%.0f, %lld clean steps towards the next growth\n",
                static_cast<long long>(stop), std::log2(first.scaler.get_scale()),
                static_cast<long long>(first.scaler.growth_tracker()));
  }
  Run second("second half", Precision::Float16Scaled);  // freshly initialised, then loaded
  const auto extra = load_checkpoint(path, *second.model, *second.opt, second.scaler);
  const int64_t start = std::stoll(extra.at("step"));
  for (int64_t k = 0; k < start; ++k) (void)second.problem.batch();  // the data stream's place
  second.train(start, kSteps);
  std::filesystem::remove(path);
  bool same = true;
  const auto a = uninterrupted.model->parameters(), b = second.model->parameters();
  for (size_t i = 0; i < a.size(); ++i) same = same && equal(a[i], b[i]);
  std::printf("resumed: scale 2^%.0f at the end, as the uninterrupted run's 2^%.0f; the final "
              "weights equal bit for bit: %s\n",
              std::log2(second.scaler.get_scale()), std::log2(uninterrupted.scaler.get_scale()),
              same ? "yes" : "NO");
  //! [resume]
  std::printf("\n");
}

static void five_runs(const std::optional<std::string>& csv_dir) {
  std::printf("== One model trained five ways (%lld AdamW steps; the label noise puts the best "
              "loss at %.1e) ==\n",
              static_cast<long long>(kSteps), kNoise * kNoise);
  //! [runs]
  std::vector<std::unique_ptr<Run>> runs;
  for (auto [name, precision] : {std::pair{"float32", Precision::Float32},
                                 {"pure bfloat16", Precision::PureBFloat16},
                                 {"mixed bfloat16", Precision::MixedBFloat16},
                                 {"float16, no loss scaling", Precision::Float16},
                                 {"float16 with GradScaler", Precision::Float16Scaled}}) {
    runs.push_back(std::make_unique<Run>(name, precision));
    runs.back()->train(0, kSteps);
  }
  const double reference = mean_of_last(runs[0]->loss, 50);
  std::printf("run                        final loss   x float32\n");
  for (const auto& run : runs) {
    const double final_loss = mean_of_last(run->loss, 50);  // the mean of the last 50 steps
    std::printf("%-25s %11.2e %10.2f\n", run->name, final_loss, final_loss / reference);
  }
  //! [runs]
  std::printf("pure bfloat16: %.1f%% of the weights unchanged by a step (the last 100 steps)\n",
              100 * runs[1]->unchanged);
  std::printf("float16, no loss scaling: %.1f%% of the weight gradients exactly 0 (the last 50 "
              "steps); with GradScaler: %.2f%%\n",
              100 * runs[3]->zero_grads, 100 * runs[4]->zero_grads);
  const std::vector<double>& scale = runs[4]->scale;
  std::printf("GradScaler: the scale went from 2^16 to 2^%.0f at most and ended at 2^%.0f; %lld "
              "steps skipped on an overflow\n",
              std::log2(*std::max_element(scale.begin(), scale.end())), std::log2(scale.back()),
              static_cast<long long>(runs[4]->skipped));
  // Trained, the float32 model's gradients are smaller still: float16 keeps none of them.
  Problem later(0);
  for (int64_t i = 0; i < kSteps; ++i) (void)later.batch();
  const auto [x, t] = later.batch();
  const Tensor g = gradients(*runs[0]->model, x, t, 1.0);
  std::printf("the trained float32 model's next batch in float16 without a scale: %lld of %lld "
              "gradient elements are 0\n",
              static_cast<long long>(count_zeros(g)), static_cast<long long>(g.numel()));
  if (csv_dir) {
    CsvFile losses(*csv_dir, "ch08_losses.csv", {"step", "run", "loss", "scale"});
    for (const auto& run : runs)
      for (size_t i = 0; i < run->loss.size(); ++i)
        losses.row(static_cast<int64_t>(i), std::string(run->name), run->loss[i],
                   run->scale.empty() ? 0.0 : run->scale[i]);
  }
  std::printf("\n");
  resume(*runs[4]);
}

// ---- 2. autocast: which ops run in which dtype ---------------------------------------------

static void dispatch_table() {
  std::printf("== Autocast on the CPU: the dtype each op returns (inputs float32 unless named) ==\n");
  //! [dispatch]
  manual_seed(0);
  const Tensor x = randn({4, 8}), w = randn({8, 8});
  const AutocastGuard autocast(Device::Type::CPU, kBFloat16);
  const Tensor h = matmul(x, w);  // a product: bfloat16 inputs, float32 sums, bfloat16 out
  struct Row {
    const char* expression;
    Tensor result;
  };
  const std::vector<Row> rows = {
      {"x @ w", h},
      {"linear(x, w, b)", linear(x, w, zeros({8}))},
      {"h + x  (bfloat16 + float32)", add(h, x)},
      {"relu(h)", relu(h)},
      {"exp(h)", exp(h)},
      {"softmax(h, 1)", softmax(h, 1)},
      {"sum(h)", sum(h)},
      {"mse_loss(h, h)", mse_loss(h, h)},
      {"cross_entropy(h, labels)", cross_entropy(h, zeros({4}, kInt64))},
      {"zeros({4, 8})", zeros({4, 8})},
  };
  for (const Row& r : rows) std::printf("  %-30s %s\n", r.expression, dtype_name(r.result.dtype()));
  //! [dispatch]
  std::printf("zeros is not cast: autocast changes the inputs of ops, never what a factory "
              "function makes\n");
  std::printf("on CUDA, PyTorch's list also runs exp, softmax and sum in float32 from 16-bit "
              "inputs\n\n");
}

// ---- 3. one cast per weight per scope -------------------------------------------------------

static void weight_cache() {
  std::printf("== The weight-cast cache: one bfloat16 copy per weight per autocast scope ==\n");
  //! [cache]
  manual_seed(0);
  nn::Linear layer(256, 256);
  const Tensor x = randn({32, 256});
  {
    const AutocastGuard autocast(Device::Type::CPU, kBFloat16);
    const Tensor a = layer(x);
    const Tensor b = layer(x);  // the same weight again: its copy comes from the cache
    const auto cast_of = [](const Tensor& y) {
      return y.grad_fn()->next_functions()[2].fn->next_functions()[0].fn;  // TBackward0's input
    };
    std::printf("two forward passes: %zu cached copies (weight and bias), one cast node: %s\n",
                autocast_cached_casts(), cast_of(a) == cast_of(b) ? "yes" : "no");
  }
  std::printf("after the scope: %zu cached copies\n", autocast_cached_casts());
  //! [cache]
  std::printf("\n");
}

// ---- 4. step_memory.py under autocast -------------------------------------------------------

static int64_t size_of(const std::vector<Tensor>& ts) {
  int64_t n = 0;
  for (const Tensor& t : ts) n += t.numel() * static_cast<int64_t>(t.element_size());
  return n;
}

static void step_memory() {
  std::printf("== What a step keeps, per parameter, under autocast (step_memory.py) ==\n");
  //! [step_memory]
  manual_seed(0);
  auto model = std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(1024, 4096), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(4096, 1024)});
  optim::AdamW opt(model->parameters(), {.lr = 1e-3});
  const Tensor x = randn({64, 1024});
  std::vector<SavedTensorRecord> saved;  // what autograd keeps for backward
  Tensor loss;
  {
    const SavedTensorLog log;
    const AutocastGuard autocast(Device::Type::CPU, kBFloat16);
    loss = (*model)(x).to(kFloat32).pow(2).mean();
    saved = log.records();
  }
  loss.backward();
  opt.step();

  const std::vector<Tensor> weights = model->parameters();
  std::vector<Tensor> grads, state;
  std::vector<Shape> weight_shapes;
  int64_t n = 0;
  for (const Tensor& p : weights) {
    n += p.numel();
    grads.push_back(p.grad());
    if (p.dim() == 2) weight_shapes.push_back(p.shape());
    for (const auto& [key, t] : opt.state(p))
      if (t.dim() > 0) state.push_back(t);  // m and v; the 0-dim step counters are left out
  }
  const std::vector<std::pair<const char*, std::vector<Tensor>>> parts = {
      {"weights", weights}, {"gradients", grads}, {"Adam m and v", state}};
  int64_t total = 0;
  for (const auto& [name, ts] : parts) {
    std::printf("%-13s %4.1f bytes/param  (%s)\n", name, double(size_of(ts)) / double(n),
                dtype_name(ts[0].dtype()));
    total += size_of(ts);
  }
  std::printf("%-13s %4.1f bytes/param for %s parameters\n", "total", double(total) / double(n),
              with_commas(n).c_str());
  // The saved bfloat16 tensors shaped like a weight (either way round: the product saves w.t()).
  int64_t copies = 0, copy_bytes = 0;
  for (const SavedTensorRecord& r : saved) {
    const bool weight_shaped = std::any_of(weight_shapes.begin(), weight_shapes.end(),
                                           [&](const Shape& s) {
                                             return r.shape == s ||
                                                    r.shape == Shape{s[1], s[0]};
                                           });
    if (r.dtype == kBFloat16 && weight_shaped) {
      ++copies;
      copy_bytes += r.nbytes;
    }
  }
  std::printf("during the step: %lld BF16 weight copies saved for backward, %.1f more "
              "bytes/param\n",
              static_cast<long long>(copies), double(copy_bytes) / double(n));
  //! [step_memory]

  //! [why_one]
  // Why one copy and not two: each product saves the weight only if its input needs a gradient.
  std::printf("by layer, what each product saved:\n");
  for (const SavedTensorRecord& r : saved)
    if (r.op == "AddmmBackward0")
      std::printf("  %-14s %-12s %-8s %s\n", r.op.c_str(), format_tuple(r.shape).c_str(),
                  dtype_name(r.dtype),
                  r.shape == Shape{64, 1024}   ? "x: for layer 1's weight gradient"
                  : r.shape == Shape{64, 4096} ? "relu's output: for layer 2's weight gradient"
                                               : "layer 2's weight copy: for relu's gradient");
  std::printf("layer 1's input x needs no gradient, so layer 1's weight copy is not saved\n");
  //! [why_one]
  std::printf("\n");
}

// ---- 7. the speed of each precision ----------------------------------------------------------

static void speed() {
  std::printf("== Matrix products in each precision (n = 2048, float32 sums) ==\n");
  //! [speed]
  const int64_t n = 2048;
  const Tensor a = randn({n, n}), b = randn({n, n});
  const double flops = 2.0 * double(n) * double(n) * double(n);
  double fp32_seconds = 0;
  for (DType d : {kFloat32, kBFloat16, kFloat16}) {
    const Tensor x = a.to(d), y = b.to(d);
    const double s = timed([&] { (void)matmul(x, y); }, 3);
    if (d == kFloat32) fp32_seconds = s;
    std::printf("  %-9s %7.1f GFLOP/s  (%.2fx float32's time)\n", dtype_name(d), flops / s / 1e9,
                s / fp32_seconds);
  }
  //! [speed]
  //! [speed_cuda]
  // On a GPU the 16-bit products run on its tensor cores (cuBLAS, float32 accumulation).
  if (!cuda::available()) {
    std::printf("cuda: not available (%s)\n\n", cuda::unavailable_reason().c_str());
    return;
  }
  const int64_t m = 4096;
  const Tensor ga = randn({m, m}).to(Device::cuda()), gb = randn({m, m}).to(Device::cuda());
  std::printf("cuda, n = %lld:", static_cast<long long>(m));
  for (DType d : {kFloat32, kBFloat16, kFloat16}) {
    const Tensor x = ga.to(d), y = gb.to(d);
    const double s = timed([&] { (void)matmul(x, y); }, Device::cuda(), 5);
    std::printf("  %s %.1f TFLOP/s", dtype_name(d), 2.0 * double(m) * double(m) * double(m) / s / 1e12);
  }
  std::printf("\n\n");
  //! [speed_cuda]
}

int main(int argc, char** argv) {
  return run_chapter(argc, argv, [](const std::optional<std::string>& csv_dir) {
    float16_gradients();
    dispatch_table();
    weight_cache();
    step_memory();
    five_runs(csv_dir);
    speed();
    if (csv_dir) std::printf("wrote %s/ch08_losses.csv\n", csv_dir->c_str());
  });
}
