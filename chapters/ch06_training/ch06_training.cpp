// Chapter 06: training, from the parts up.
//
// A training run is a handful of pieces: parameters and how they start (initialisation), a
// model that owns them (modules), the random numbers behind both (seeds), the data (a file of
// tokens, read lazily), an optimizer that turns gradients into updates, the loop that ties
// them together, and the checkpoint that lets a run survive a crash. This program builds each
// in turn, prints what the documents print, and checks the library against PyTorch and
// against optimizers written out here by hand.
//
//   make ch06 && ./ch06_training
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tiny/tiny.h"

using namespace tiny;

// A folder for the files this chapter writes (removed at the end).
static std::string scratch_dir() {
  static const std::string dir = [] {
    char pattern[] = "/tmp/ch06_training.XXXXXX";
    if (!mkdtemp(pattern)) throw RuntimeError("could not create a temporary folder in /tmp");
    return std::string(pattern);
  }();
  return dir;
}

// ---- 1. parameters and their initialisation ---------------------------------------------------

static double rms(const Tensor& t) { return std::sqrt((t * t).mean().item()); }
static double largest_abs(const Tensor& t) { return abs(t).max().item(); }
static int64_t count_beyond(const Tensor& t, double bound) {
  return static_cast<int64_t>(gt(abs(t), scalar_tensor(bound)).to(kInt64).sum().item());
}

static void initialisation() {
  std::printf("== Parameters and their initialisation ==\n");
  //! [init]
  const int64_t input_dim = 16384, output_dim = 32;
  manual_seed(0);
  Tensor x = randn({input_dim});  // an input vector
  Tensor w = nn::Parameter(randn({input_dim, output_dim}));
  // Each output is a sum of 16384 products of unit normals: its spread grows as sqrt(16384).
  std::printf(
      "x @ w with w = randn(16384, 32):                 output rms %.1f (sqrt(16384) = 128)\n",
      rms(matmul(x, w.detach())));
  // Xavier's scaling divides by sqrt(input_dim), and the output is back near 1.
  Tensor xavier = nn::Parameter(randn({input_dim, output_dim}) / std::sqrt(double(input_dim)));
  std::printf("x @ w with w = randn(16384, 32) / sqrt(16384):   output rms %.3f\n",
              rms(matmul(x, xavier.detach())));
  //! [init]

  // Normal numbers have tails; trunc_normal_ cuts them off, but at *absolute* bounds a and b.
  //! [trunc]
  const double stddev = 1 / std::sqrt(double(input_dim));
  auto report = [&](const char* label, const Tensor& t) {
    std::printf("%-44s largest |w| %.2f std; %4lld of %lld beyond 3 std\n", label,
                largest_abs(t) / stddev, static_cast<long long>(count_beyond(t, 3 * stddev)),
                static_cast<long long>(t.numel()));
  };
  report("randn / sqrt(16384):", xavier.detach());
  Tensor t1 = empty({input_dim, output_dim});
  init::trunc_normal_(t1, 0, stddev, -3, 3);  // the documents' call: +-3 is +-384 std here
  report("trunc_normal_(std=1/128, a=-3, b=3):", t1);
  Tensor t2 = empty({input_dim, output_dim});
  init::trunc_normal_(t2, 0, stddev, -3 * stddev, 3 * stddev);  // truncating at 3 std
  report("trunc_normal_(std=1/128, a=-3/128, b=3/128):", t2);
  //! [trunc]
  std::printf("\n");
}

// ---- 2. a model: modules own their parameters --------------------------------------------------

static void modules() {
  std::printf("== A model: Cruncher(dim=64, num_layers=2) ==\n");
  //! [cruncher]
  const int64_t D = 64, num_layers = 2, B = 8;
  manual_seed(0);
  nn::Cruncher model(D, num_layers);
  std::printf("%s\n", model.repr().c_str());
  for (const auto& [name, param] : model.state_dict())
    std::printf("  %-16s %5lld values\n", name.c_str(), static_cast<long long>(param.numel()));
  std::printf("parameters: %lld = D * D * num_layers + D\n",
              static_cast<long long>(model.num_parameters()));
  Tensor x = randn({B, D});
  Tensor y = model(x);
  std::printf("model(x) for x of shape %s: output of shape %s\n", format_tuple(x.shape()).c_str(),
              format_tuple(y.shape()).c_str());
  //! [cruncher]
  std::printf("\n");
}

// ---- 3. randomness ---------------------------------------------------------------------------

static void randomness() {
  std::printf("== Randomness: one seed, the same numbers ==\n");
  //! [seeds]
  manual_seed(0);
  std::printf("manual_seed(0); rand(3)           -> %s\n", format_tensor(rand({3})).c_str());
  manual_seed(0);
  std::printf("manual_seed(0); randn(3)          -> %s\n", format_tensor(randn({3})).c_str());
  manual_seed(0);
  std::printf("manual_seed(0); randint(10, (5,)) -> %s\n", format_tensor(randint(10, {5})).c_str());
  //! [seeds]
  std::printf("\n");
}

// ---- 4. data: a file of tokens, read lazily -----------------------------------------------------

static void data_loading() {
  std::printf("== Data ==\n");
  //! [data]
  const std::string raw = scratch_dir() + "/data.npy";  // the documents' name for a raw file
  Tensor orig = arange(1, 11, 1, kInt32);               // tokens 1..10
  tofile(orig, raw);
  std::printf("tofile: %lld int32 values -> data.npy, %lld bytes (no header)\n",
              static_cast<long long>(orig.numel()),
              static_cast<long long>(std::filesystem::file_size(raw)));
  Tensor data = memmap(raw, kInt32);  // nothing is read until an element is used
  std::printf("memmap(data.npy, int32) equals the original: %s\n",
              equal(data, orig) ? "True" : "False");
  const std::string npy = scratch_dir() + "/tokens.npy";
  save_npy(orig, npy);
  std::printf("save_npy: a real .npy file, %lld bytes (a %lld-byte header NumPy reads)\n",
              static_cast<long long>(std::filesystem::file_size(npy)),
              static_cast<long long>(std::filesystem::file_size(npy) - 40));
  manual_seed(0);
  Tensor x = get_batch(data, /*batch_size=*/2, /*sequence_length=*/4, Device::cpu());
  std::printf("manual_seed(0); get_batch(data, B=2, L=4):\n%s\n", format_tensor(x).c_str());
  //! [data]
  std::printf("\n");
}

// ---- 5. optimizers, written out, and the library's -------------------------------------------------

// The documents' two optimizers, written as they write them: subclasses of the optimizer base,
// with a step() over the parameter groups. They use ordinary tensor ops, one pass each.
//! [hand_optimizers]
struct HandSGD : optim::Optimizer {
  HandSGD(std::vector<Tensor> params, double lr)
      : Optimizer("SGD", {{std::move(params)}}, {{"lr", lr}}) {
    init_groups();
  }
  void step() override {
    NoGradGuard no_grad;
    for (const auto& group : param_groups()) {
      const double lr = group.number("lr");
      for (Tensor p : group.params)
        if (p.grad().defined()) p.sub_(p.grad() * lr);  // p -= lr * grad
    }
  }
  void check(const optim::Settings&) const override {}
};

struct HandAdaGrad : optim::Optimizer {
  HandAdaGrad(std::vector<Tensor> params, double lr)
      : Optimizer("AdaGrad", {{std::move(params)}}, {{"lr", lr}}) {
    init_groups();
  }
  void step() override {
    NoGradGuard no_grad;
    for (const auto& group : param_groups()) {
      const double lr = group.number("lr");
      for (Tensor p : group.params) {
        const Tensor grad = p.grad();
        if (!grad.defined()) continue;
        auto& st = state(p);
        if (!st.count("g2")) st["g2"] = zeros(p.shape(), p.dtype());  // sum of squared gradients
        Tensor& g2 = st["g2"];
        g2.add_(square(grad));
        p.sub_(grad * lr / sqrt(g2 + 1e-5));  // each parameter's own step size
      }
    }
  }
  void check(const optim::Settings&) const override {}
};
//! [hand_optimizers]

// The documents' regression problem: y = x @ true_w for true_w = (0, 1, ..., D - 1), x normal.
struct Regression {
  int64_t D;
  Tensor true_w;
  explicit Regression(int64_t d) : D(d), true_w(arange(0, d, 1, kFloat32)) {}
  std::pair<Tensor, Tensor> get_batch(int64_t B) const {
    Tensor x = randn({B, D});  // B random inputs of D features
    return {x, matmul(x, true_w)};
  }
};

// Trains a fresh Cruncher(D, num_layers=0) with `make_optimizer` and returns the losses.
template <typename Make>
static std::vector<double> train(const Regression& problem, int64_t B, int steps,
                                 Make make_optimizer) {
  manual_seed(0);
  nn::Cruncher model(problem.D, 0);
  auto optimizer = make_optimizer(model.parameters());
  std::vector<double> losses;
  for (int t = 0; t < steps; ++t) {
    auto [x, y] = problem.get_batch(B);
    Tensor loss = mse_loss(model(x), y);
    loss.backward();
    optimizer->step();
    optimizer->zero_grad(/*set_to_none=*/true);
    losses.push_back(loss.item());
  }
  return losses;
}

static void optimizers(const std::optional<std::string>& csv_dir) {
  std::printf("== Optimizers, on one problem (D = 16, B = 4, 100 steps) ==\n");
  using Params = std::vector<Tensor>;
  const Regression problem(16);
  struct Run {
    const char* name;
    std::function<std::unique_ptr<optim::Optimizer>(Params)> make;
    std::vector<double> losses;
  };
  //! [optimizers]
  std::vector<Run> runs = {
      {"HandSGD(lr=0.02)", [](Params p) { return std::make_unique<HandSGD>(p, 0.02); }, {}},
      {"SGD(lr=0.02)",
       [](Params p) { return std::make_unique<optim::SGD>(p, optim::SGD::Options{.lr = 0.02}); },
       {}},
      {"SGD(lr=0.01, momentum=0.9)",
       [](Params p) {
         return std::make_unique<optim::SGD>(p, optim::SGD::Options{.lr = 0.01, .momentum = 0.9});
       },
       {}},
      {"HandAdaGrad(lr=3)", [](Params p) { return std::make_unique<HandAdaGrad>(p, 3.0); }, {}},
      {"AdaGrad(lr=3)",
       [](Params p) {
         return std::make_unique<optim::AdaGrad>(p, optim::AdaGrad::Options{.lr = 3});
       },
       {}},
      {"Adagrad(lr=3)",
       [](Params p) {
         return std::make_unique<optim::Adagrad>(p, optim::Adagrad::Options{.lr = 3});
       },
       {}},
      {"RMSprop(lr=0.3)",
       [](Params p) {
         return std::make_unique<optim::RMSprop>(p, optim::RMSprop::Options{.lr = 0.3});
       },
       {}},
      {"Adam(lr=1)",
       [](Params p) { return std::make_unique<optim::Adam>(p, optim::Adam::Options{.lr = 1}); },
       {}},
      {"AdamW(lr=1)",
       [](Params p) { return std::make_unique<optim::AdamW>(p, optim::AdamW::Options{.lr = 1}); },
       {}},
  };
  for (auto& run : runs) run.losses = train(problem, 4, 100, run.make);
  //! [optimizers]
  std::printf("%-28s %12s %10s %10s %10s\n", "", "loss step 1", "step 10", "step 50", "step 100");
  for (const auto& run : runs)
    std::printf("%-28s %12.3g %10.3g %10.3g %10.3g\n", run.name, run.losses[0], run.losses[9],
                run.losses[49], run.losses[99]);
  // The hand-written AdaGrad and the library's run the same operations in the same order.
  std::printf("HandAdaGrad and optim::AdaGrad give the same losses, bit for bit: %s\n",
              runs[3].losses == runs[4].losses ? "True" : "False");
  if (csv_dir) {
    CsvFile csv(*csv_dir, "ch06_optimizers.csv", {"optimizer", "step", "loss"});
    for (const auto& run : runs) {
      std::string name = run.name;  // CSV fields here hold no commas
      for (char& c : name)
        if (c == ',') c = ';';
      for (size_t t = 0; t < run.losses.size(); ++t)
        csv.row(name, static_cast<int64_t>(t + 1), run.losses[t]);
    }
  }
  std::printf("\n");
}

// ---- 6. the training loop ---------------------------------------------------------------------

static void training_loop() {
  std::printf("== The training loop (the documents' train_loop: D = 16, B = 4, 10 steps) ==\n");
  const Regression problem(16);
  for (double lr : {0.01, 0.1}) {
    //! [train]
    manual_seed(0);
    nn::Cruncher model(/*dim=*/16, /*num_layers=*/0);
    HandSGD optimizer(model.parameters(), lr);
    std::printf("train(\"simple\", lr=%g):", lr);
    for (int t = 0; t < 10; ++t) {
      auto [x, y] = problem.get_batch(/*B=*/4);  // x (4, 16), y (4,)
      Tensor pred_y = model(x);                  // (4,)
      Tensor loss = mse_loss(pred_y, y);
      loss.backward();
      optimizer.step();
      optimizer.zero_grad(/*set_to_none=*/true);
      std::printf(" %.2f", loss.item());
    }
    //! [train]
    std::printf("\n");
  }
  std::printf("\n");
}

// ---- 7. the router: the library's AdamW against one written out --------------------------------

// A synthetic four-class problem: class c's points scatter around a centre of its own.
struct RouterData {
  Tensor X, y, X_val, y_val;  // (N, F) float64, (N,) int64
};
static RouterData make_router_data(int64_t n_train, int64_t n_val, int64_t features) {
  Generator gen(0);
  Tensor centres = randn({4, features}, kFloat64, gen);
  auto draw = [&](int64_t n, Tensor& X, Tensor& y) {
    y = randint(4, {n}, gen);
    X = randn({n, features}, kFloat64, gen) * 1.5;
    for (int64_t i = 0; i < n; ++i) X[i].add_(centres[static_cast<int64_t>(y.at({i}))]);
  };
  RouterData d;
  draw(n_train, d.X, d.y);
  draw(n_val, d.X_val, d.y_val);
  return d;
}

// The rows `index` of `X`, copied into a new tensor (a mini-batch).
static Tensor rows(const Tensor& X, const Tensor& index) {
  Shape shape = X.shape();
  shape[0] = index.numel();
  Tensor out = empty(shape, X.dtype());
  for (int64_t j = 0; j < index.numel(); ++j) out[j].copy_(X[static_cast<int64_t>(index.at({j}))]);
  return out;
}

// AdamW written out over plain arrays, as "Initialization and Optimizers"'s optim.py writes it:
// decay first, then the two averages, then the bias-corrected step.
//! [hand_adamw]
struct HandAdamW {
  double lr = 0.01, beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  std::map<std::string, std::vector<double>> m, v;
  std::map<std::string, int> t;
  void step(std::vector<double>& p, const std::vector<double>& g, const std::string& name,
            double decay) {
    auto& mi = m[name];
    auto& vi = v[name];
    if (mi.empty()) mi.assign(p.size(), 0.0), vi.assign(p.size(), 0.0);
    const int step = ++t[name];
    const double c1 = 1 - std::pow(beta1, step), c2 = 1 - std::pow(beta2, step);
    for (size_t i = 0; i < p.size(); ++i) {
      p[i] *= 1 - lr * decay;
      mi[i] = beta1 * mi[i] + (1 - beta1) * g[i];
      vi[i] = beta2 * vi[i] + (1 - beta2) * g[i] * g[i];
      p[i] -= lr / c1 * mi[i] / (std::sqrt(vi[i]) / std::sqrt(c2) + eps);
    }
  }
};
//! [hand_adamw]

static void router() {
  const int64_t F = 8, B = 16;
  const RouterData data = make_router_data(600, 200, F);
  std::printf(
      "== The router: 4 classes, %lld features, %lld training and %lld validation points ==\n",
      static_cast<long long>(F), static_cast<long long>(data.y.numel()),
      static_cast<long long>(data.y_val.numel()));
  //! [router]
  nn::Linear model(F, 4, /*bias=*/true, kFloat64);
  init::zeros_(model.weight);
  init::zeros_(model.bias);
  optim::AdamW opt({{{model.weight}, {{"weight_decay", 0.3}}},
                    {{model.bias}, {{"weight_decay", 0.0}}}},  // no decay on biases
                   {.lr = 0.01});
  // The same run with the AdamW written out above, on the same mini-batches; its gradients are
  // computed by hand: dL/dlogits = (softmax(logits) - onehot(y)) / B.
  std::vector<double> W(F * 4, 0.0), b(4, 0.0);  // W (F, 4), row-major
  HandAdamW ours;
  ours.lr = 0.01;
  Generator batches(0);
  Progress progress(3000, "router");
  for (int step = 1; step <= 3000; ++step) {
    const Tensor i = randperm(data.y.numel(), kInt64, batches).narrow(0, 0, B);  // 16, no repeats
    const Tensor X = rows(data.X, i), y = rows(data.y, i);
    Tensor loss = cross_entropy(model(X), y);
    opt.zero_grad();  // gradients accumulate otherwise
    loss.backward();
    opt.step();
    // By hand: logits = X W + b, G = (softmax - onehot) / B, dW = X^T G, db = sum of G's rows.
    std::vector<double> gW(F * 4, 0.0), gb(4, 0.0);
    for (int64_t r = 0; r < B; ++r) {
      double z[4], zmax = -INFINITY, total = 0;
      for (int c = 0; c < 4; ++c) {
        z[c] = b[c];
        for (int64_t f = 0; f < F; ++f) z[c] += X.at({r, f}) * W[f * 4 + c];
        zmax = std::max(zmax, z[c]);
      }
      for (double& zc : z) total += (zc = std::exp(zc - zmax));
      for (int c = 0; c < 4; ++c) {
        const double G = (z[c] / total - (y.at({r}) == c ? 1.0 : 0.0)) / B;
        gb[c] += G;
        for (int64_t f = 0; f < F; ++f) gW[f * 4 + c] += X.at({r, f}) * G;
      }
    }
    ours.step(W, gW, "W", 0.3);
    ours.step(b, gb, "b", 0.0);
    progress.update(step, loss.item());
    if (step == 1 || step == 10 || step == 3000) {
      double gap = 0;  // the library keeps W as (4, F), PyTorch's layout
      for (int64_t f = 0; f < F; ++f)
        for (int c = 0; c < 4; ++c)
          gap = std::max(gap, std::fabs(model.weight.detach().at({c, f}) - W[f * 4 + c]));
      progress.write(
          strprintf("step %4d: loss %.4f, largest gap between optim::AdamW and the hand-written "
                    "AdamW %.1e",
                    step, loss.item(), gap));
    }
  }
  progress.close();
  //! [router]
  NoGradGuard no_grad;
  const MaxResult best = max(model(data.X_val), 1);
  const double accuracy = eq(best.indices, data.y_val).to(kFloat64).mean().item();
  std::printf("validation accuracy %.3f\n\n", accuracy);
}

// ---- 8. the router's step, captured once and replayed -----------------------------------------

// The router above spends most of each step deciding what to run: dtypes, shapes, the tape, the
// output's memory, the optimizer's bookkeeping. The decisions come out the same every step; only
// the numbers change. A CPUGraph (tiny/capture.h) runs the step once, keeping every kernel it
// launched, and replays those kernels on new numbers. Both loops here train from zero on the
// same 3000 mini-batches; the batches are drawn first, so that the clock sees only training.
static void replayed_router() {
  const int64_t F = 8, B = 16, steps = 3000;
  const RouterData data = make_router_data(600, 200, F);
  std::printf("== The router's step, captured once and replayed (%lld steps) ==\n",
              static_cast<long long>(steps));
  std::vector<Tensor> Xs, ys;
  Generator batches(0);
  for (int64_t s = 0; s < steps; ++s) {
    const Tensor i = randperm(data.y.numel(), kInt64, batches).narrow(0, 0, B);
    Xs.push_back(rows(data.X, i));
    ys.push_back(rows(data.y, i));
  }
  struct Run {
    nn::Linear model{8, 4, /*bias=*/true, kFloat64};
    optim::AdamW opt{{{{model.weight}, {{"weight_decay", 0.3}}}, {{model.bias}, {{"weight_decay", 0.0}}}},
                     {.lr = 0.01}};
    std::vector<double> losses;
    Run() {
      init::zeros_(model.weight);
      init::zeros_(model.bias);
    }
  };
  using Clock = std::chrono::steady_clock;
  auto seconds_since = [](Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
  };

  auto eager_steps = [&](Run& run, int64_t n) {
    for (int64_t s = 0; s < n; ++s) {
      Tensor loss = cross_entropy(run.model(Xs[s]), ys[s]);
      run.opt.zero_grad();
      loss.backward();
      run.opt.step();
      run.losses.push_back(loss.item());
    }
  };
  {
    Run warm_up;  // the first steps of a program fill the allocator's cache: not timed
    eager_steps(warm_up, 100);
  }
  Run eager;
  auto t0 = Clock::now();
  eager_steps(eager, steps);
  const double eager_s = seconds_since(t0);

  Run replayed;
  t0 = Clock::now();
  //! [replayed]
  // The graph reads its batch from two tensors of its own; each step copies the next batch in.
  Tensor X = Xs[0].clone(), y = ys[0].clone(), loss;
  CPUGraph step;
  step.capture([&] {  // runs step 1, keeping its kernels
    loss = cross_entropy(replayed.model(X), y);
    replayed.opt.zero_grad();
    loss.backward();
    replayed.opt.step();
  });
  replayed.losses.push_back(loss.item());
  for (int64_t s = 1; s < steps; ++s) {
    {
      NoGradGuard loading;  // a batch is data, not part of any gradient
      X.copy_(Xs[s]);
      y.copy_(ys[s]);
    }
    step.replay();  // forward, backward and AdamW's update: its kernels, and nothing else
    replayed.losses.push_back(loss.item());
  }
  //! [replayed]
  const double replayed_s = seconds_since(t0);

  std::printf("eager:    %6.1f ms, %5.1f us a step\n", 1e3 * eager_s, 1e6 * eager_s / steps);
  std::printf("replayed: %6.1f ms, %5.1f us a step, a speed-up of %.1fx; the graph: %lld kernels, "
              "%lld host steps\n",
              1e3 * replayed_s, 1e6 * replayed_s / steps, eager_s / replayed_s,
              static_cast<long long>(step.kernels()), static_cast<long long>(step.host_steps()));
  const bool same = eager.losses == replayed.losses &&
                    equal(eager.model.weight, replayed.model.weight) &&
                    equal(eager.model.bias, replayed.model.bias);
  std::printf("the same losses and weights as the eager loop, bit for bit: %s\n\n",
              same ? "True" : "False");
}

// ---- 9. checkpoints: stop, load, resume ------------------------------------------------------------

static void checkpoints() {
  std::printf("== Checkpoint: stop, load, resume ==\n");
  const RouterData data = make_router_data(600, 200, 8);
  // Batch t comes from a generator seeded with t, so a resumed run draws the same batches
  // without having to save the generator.
  auto batch = [&](int step) {
    Generator g(1000 + step);
    const Tensor i = randperm(data.y.numel(), kInt64, g).narrow(0, 0, 16);
    return std::pair{rows(data.X, i), rows(data.y, i)};
  };
  auto train_steps = [&](nn::Linear& model, optim::AdamW& opt, int from, int to) {
    for (int step = from; step < to; ++step) {
      auto [X, y] = batch(step);
      Tensor loss = cross_entropy(model(X), y);
      opt.zero_grad();
      loss.backward();
      opt.step();
    }
  };
  auto make = [](Generator& g) { return std::make_unique<nn::Linear>(8, 4, true, kFloat64, g); };
  //! [checkpoint]
  // The uninterrupted run: 20 steps.
  Generator g1(7);
  auto straight = make(g1);
  optim::AdamW opt1(straight->parameters(), {.lr = 0.01});
  train_steps(*straight, opt1, 0, 20);
  // The interrupted one: 10 steps, a checkpoint, a fresh model and optimizer, 10 more.
  const std::string path = scratch_dir() + "/checkpoint.safetensors";
  {
    Generator g2(7);
    auto first = make(g2);
    optim::AdamW opt2(first->parameters(), {.lr = 0.01});
    train_steps(*first, opt2, 0, 10);
    save_checkpoint(path, *first, opt2, {{"step", "10"}});
  }                  // the process "stops": model and optimizer are gone
  Generator g3(99);  // a different initialisation, overwritten by the checkpoint
  auto resumed = make(g3);
  optim::AdamW opt3(resumed->parameters(), {.lr = 0.5});  // settings come from the file too
  const auto meta = load_checkpoint(path, *resumed, opt3);
  train_steps(*resumed, opt3, std::stoi(meta.at("step")), 20);
  //! [checkpoint]
  const TensorFile file = load_safetensors(path);
  std::printf("saved at step 10: %s, %lld bytes, %zu tensors:",
              std::filesystem::path(path).filename().c_str(),
              static_cast<long long>(std::filesystem::file_size(path)), file.tensors.size());
  for (const auto& [name, t] : file.tensors) std::printf(" %s", name.c_str());
  std::printf("\n");
  const bool same = equal(straight->weight.detach(), resumed->weight.detach()) &&
                    equal(straight->bias.detach(), resumed->bias.detach());
  std::printf(
      "resumed from it for 10 more steps: equal to the uninterrupted run, bit for bit: %s\n",
      same ? "True" : "False");
}

int main(int argc, char** argv) {
  return run_chapter(argc, argv, [](const std::optional<std::string>& csv_dir) {
    initialisation();
    modules();
    randomness();
    data_loading();
    optimizers(csv_dir);
    training_loop();
    router();
    replayed_router();
    checkpoints();
    std::filesystem::remove_all(scratch_dir());
    if (csv_dir) std::printf("\nwrote %s/ch06_optimizers.csv\n", csv_dir->c_str());
  });
}
