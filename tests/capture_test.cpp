// capture_test.cpp: CPUGraph (tiny/capture.h). A captured training step, replayed, must give the
// bits the same steps give eagerly, for every optimizer, on fresh batches each step; the host
// work that belongs to a step (step counters, class checks) must run again at each replay; and
// what a replay cannot repeat must be refused while capturing, never baked in silently.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <memory>
#include <sstream>
#include <thread>

#include "test_util.h"
#include "tiny/tiny.h"

using namespace tiny;
using tiny::testing::throws_with;

#define EXPECT_THROW_MSG(statement, E, text) EXPECT_TRUE(throws_with<E>([&] { statement; }, text))

namespace {

constexpr int64_t kBatch = 6, kIn = 5, kHidden = 7, kClasses = 3;

// The same bits, element for element (shapes and dtypes equal).
::testing::AssertionResult same_bits(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype())
    return ::testing::AssertionFailure() << "shapes or dtypes differ";
  const Tensor x = a.detach().contiguous(), y = b.detach().contiguous();
  if (std::memcmp(x.data_ptr(), y.data_ptr(), x.nbytes()) != 0)
    return ::testing::AssertionFailure() << "values differ:\n" << a << "\n" << b;
  return ::testing::AssertionSuccess();
}

// A two-layer classifier in float64 and the optimizer under test, built from one seed so that an
// eager copy and a captured copy start from the same bits.
struct Trainer {
  nn::Linear first, second;
  std::unique_ptr<optim::Optimizer> opt;
  Trainer(uint64_t seed,
          const std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>,
                                                                std::vector<Tensor>)>& make)
      : first(make_layer(seed, kIn, kHidden)), second(kHidden, kClasses, true, kFloat64) {
    opt = make({first.weight, second.weight}, {first.bias, second.bias});
  }
  static nn::Linear make_layer(uint64_t seed, int64_t in, int64_t out) {
    manual_seed(seed);
    return nn::Linear(in, out, true, kFloat64);
  }
  // One training step on (x, y); returns the loss.
  Tensor step(const Tensor& x, const Tensor& y) {
    Tensor loss = cross_entropy(second(relu(first(x))), y);
    opt->zero_grad();
    loss.backward();
    opt->step();
    return loss;
  }
};

using MakeOptimizer =
    std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>, std::vector<Tensor>)>;

// Trains one copy eagerly and one by capture and replay, on the same fresh batches, and compares
// every loss, every parameter and every state tensor bit for bit.
void expect_replay_matches_eager(const MakeOptimizer& make, int64_t steps = 6) {
  TINY_SEEDED(rng);
  const uint64_t seed = rng();
  std::vector<Tensor> xs, ys;
  manual_seed(seed + 1);
  for (int64_t s = 0; s < steps; ++s) {
    xs.push_back(randn({kBatch, kIn}, kFloat64));
    ys.push_back(randint(kClasses, {kBatch}));
  }
  Trainer eager(seed, make), captured(seed, make);
  std::vector<Tensor> eager_losses;
  for (int64_t s = 0; s < steps; ++s)
    eager_losses.push_back(eager.step(xs[s], ys[s]).detach().clone());

  // The captured copy: the batch lives in two fixed tensors, refilled before each replay.
  Tensor x = xs[0].clone(), y = ys[0].clone(), loss;
  CPUGraph graph;
  graph.capture([&] { loss = captured.step(x, y); });
  EXPECT_TRUE(graph.captured());
  EXPECT_GT(graph.kernels(), 10);
  EXPECT_TRUE(same_bits(loss, eager_losses[0])) << "the capture's own step";
  for (int64_t s = 1; s < steps; ++s) {
    x.copy_(xs[s]);
    y.copy_(ys[s]);
    graph.replay();
    EXPECT_TRUE(same_bits(loss, eager_losses[s])) << "step " << s;
  }
  const auto pe = std::vector<Tensor>{eager.first.weight, eager.first.bias, eager.second.weight,
                                      eager.second.bias};
  const auto pc = std::vector<Tensor>{captured.first.weight, captured.first.bias,
                                      captured.second.weight, captured.second.bias};
  for (size_t k = 0; k < pe.size(); ++k) {
    EXPECT_TRUE(same_bits(pe[k], pc[k])) << "parameter " << k;
    EXPECT_TRUE(same_bits(pe[k].grad(), pc[k].grad())) << "gradient " << k;
    const auto& se = eager.opt->state(pe[k]);
    const auto& sc = captured.opt->state(pc[k]);
    ASSERT_EQ(se.size(), sc.size());
    for (const auto& [key, value] : se) EXPECT_TRUE(same_bits(value, sc.at(key))) << key;
  }
}

}  // namespace

TEST(CPUGraph, AdamWWithTwoGroupsReplaysTheEagerSteps) {
  expect_replay_matches_eager([](std::vector<Tensor> weights, std::vector<Tensor> biases) {
    return std::make_unique<optim::AdamW>(
        std::vector<optim::GroupSpec>{{weights, {{"weight_decay", 0.3}}},
                                      {biases, {{"weight_decay", 0.0}}}},
        optim::AdamW::Options{.lr = 0.01});
  });
}

TEST(CPUGraph, AdamWithAmsgradReplaysTheEagerSteps) {
  expect_replay_matches_eager([](std::vector<Tensor> weights, std::vector<Tensor> biases) {
    weights.insert(weights.end(), biases.begin(), biases.end());
    return std::make_unique<optim::Adam>(weights,
                                         optim::Adam::Options{.lr = 0.02, .amsgrad = true});
  });
}

// SGD's first step sets its momentum buffer to the gradient; every later step averages into it.
// Captured on the first step, the replays must take the second branch.
TEST(CPUGraph, SgdCapturedOnItsFirstStepReplaysTheLaterSteps) {
  expect_replay_matches_eager([](std::vector<Tensor> weights, std::vector<Tensor> biases) {
    weights.insert(weights.end(), biases.begin(), biases.end());
    return std::make_unique<optim::SGD>(
        weights, optim::SGD::Options{.lr = 0.1, .momentum = 0.9, .nesterov = true});
  });
}

TEST(CPUGraph, AdagradAndRmspropCountTheirStepsAtEachReplay) {
  expect_replay_matches_eager([](std::vector<Tensor> weights, std::vector<Tensor> biases) {
    weights.insert(weights.end(), biases.begin(), biases.end());
    return std::make_unique<optim::Adagrad>(weights,
                                            optim::Adagrad::Options{.lr = 0.1, .lr_decay = 0.5});
  });
  expect_replay_matches_eager([](std::vector<Tensor> weights, std::vector<Tensor> biases) {
    weights.insert(weights.end(), biases.begin(), biases.end());
    return std::make_unique<optim::RMSprop>(
        weights, optim::RMSprop::Options{.lr = 0.01, .momentum = 0.5, .centered = true});
  });
  expect_replay_matches_eager([](std::vector<Tensor> weights, std::vector<Tensor> biases) {
    weights.insert(weights.end(), biases.begin(), biases.end());
    return std::make_unique<optim::AdaGrad>(weights, optim::AdaGrad::Options{.lr = 0.1});
  });
}

TEST(CPUGraph, TheStepCounterAdvancesWithEachReplay) {
  Tensor w = zeros({3}, kFloat64).requires_grad_(true);
  optim::Adam opt({w}, {.lr = 0.1});
  CPUGraph graph;
  graph.capture([&] {
    opt.zero_grad();
    (w * w - w).sum().backward();
    opt.step();
  });
  EXPECT_EQ(graph.host_steps(), 1);  // one parameter's update
  for (int k = 0; k < 4; ++k) graph.replay();
  EXPECT_EQ(opt.state(w).at("step").item(), 5);
}

// Temporaries the function dropped stay with the graph, and a replay computes from the inputs'
// new values; sums, maxima, products, where and zeros are replayed like the elementwise ops.
TEST(CPUGraph, ReplaysEveryKindOfKernelOnNewInputValues) {
  TINY_SEEDED(rng);
  manual_seed(rng());
  Tensor a = randn({4, 5}), b = randn({5, 3}), out;
  auto f = [](const Tensor& p, const Tensor& q) {
    const Tensor product = matmul(p.exp(), q);
    const Tensor kept = where(product > 0, product, zeros({4, 3}));
    return kept.sum({1}) + max(p, 1).values + p.to(kFloat64).mean().to(kFloat32);
  };
  CPUGraph graph;
  graph.capture([&] { out = f(a, b); });
  for (int k = 0; k < 3; ++k) {
    a.copy_(randn({4, 5}));
    b.copy_(randn({5, 3}));
    graph.replay();
    EXPECT_TRUE(same_bits(out, f(a, b))) << "replay " << k;
  }
}

// tril and triu build their mask on the host; the where that applies it is a kernel like any
// other, and so is the backward's.
TEST(CPUGraph, TrilAndItsGradientAreReplayed) {
  Tensor a = randn({4, 4}).requires_grad_(true), out;
  CPUGraph graph;
  graph.capture([&] {
    a.set_grad(Tensor());
    out = tril(a * 2);
    out.sum().backward();
  });
  a.detach().copy_(randn({4, 4}));
  graph.replay();
  EXPECT_TRUE(same_bits(out, tril(a.detach() * 2)));
  EXPECT_TRUE(same_bits(a.grad(), tril(ones({4, 4})) * 2));
}

// Numbers the function wrote into tensors of its own (arange, tensor, scalar_tensor) are
// constants of the graph: one the function changes in place starts every replay afresh.
TEST(CPUGraph, ConstantsChangedInPlaceStartEachReplayAfresh) {
  Tensor x = full({3}, 2.0f), total, steps;
  CPUGraph graph;
  graph.capture([&] {
    total = scalar_tensor(1.0f);
    total.add_(x.sum());
    steps = arange(3).to(kFloat32);
    steps.mul_(x);
  });
  x.fill_(5);
  graph.replay();
  graph.replay();
  EXPECT_EQ(total.item(), 16);
  EXPECT_EQ(steps.tolist(), (std::vector<double>{0, 5, 10}));
}

// Without zero_grad the gradients add up, at every eager call and at every replay alike.
TEST(CPUGraph, GradientsAccumulateAcrossReplaysAsAcrossCalls) {
  Tensor w = ones({2}, kFloat64).requires_grad_(true);
  auto step = [&] { (w * w).sum().backward(); };
  step();  // .grad exists before the capture: later gradients are added into it
  CPUGraph graph;
  graph.capture(step);
  for (int k = 0; k < 3; ++k) graph.replay();
  EXPECT_EQ(w.grad().tolist(), (std::vector<double>{10, 10}));  // 5 backward passes of 2 w
}

// cross_entropy's targets are read on the host: a replay reads each new batch's classes, counts
// the ones not ignored afresh, and refuses a class out of range as the eager op does.
TEST(CPUGraph, CrossEntropyChecksAndCountsEachReplaysTargets) {
  Tensor logits = randn({4, 3}, kFloat64), target = tensor({0, 1, 2, 1}), loss;
  CPUGraph graph;
  graph.capture([&] { loss = cross_entropy(logits, target, /*ignore_index=*/1); });
  target.copy_(tensor({1, 1, 2, 1}));  // one class counted now, not two
  graph.replay();
  EXPECT_TRUE(same_bits(loss, cross_entropy(logits, target, 1)));
  target.copy_(tensor({0, 7, 2, 1}));
  EXPECT_THROW_MSG(graph.replay(), IndexError, "Target 7 is out of bounds.");
}

TEST(CPUGraph, RefusesWhatAReplayCouldNotRepeat) {
  Tensor x = randn({3});
  CPUGraph graph;
  EXPECT_THROW_MSG(graph.capture([&] { (void)(x * 2).sum().item(); }), RuntimeError,
                   "item() cannot run while a CPUGraph is capturing");
  EXPECT_FALSE(graph.captured());
  EXPECT_FALSE(is_capturing());
  EXPECT_THROW_MSG(graph.capture([&] { (void)(x + randn({3})); }), RuntimeError,
                   "while a CPUGraph was capturing");
  EXPECT_THROW_MSG(graph.capture([&] { (void)(x + 1).data<float>(); }), RuntimeError,
                   "replay() repeats only the captured kernels");
  EXPECT_THROW_MSG(graph.capture([&] { (void)(x + 1).tolist(); }), RuntimeError,
                   "while a CPUGraph was capturing");
  EXPECT_THROW_MSG(graph.capture([&] {
    std::ostringstream printed;
    printed << x + 1;
  }),
                   RuntimeError, "cannot run while a CPUGraph is capturing");
  EXPECT_FALSE(graph.captured());
  if (cuda::available()) {
    EXPECT_THROW_MSG(graph.capture([&] { (void)x.to(Device::cuda(0)); }), RuntimeError,
                     "CPUGraph captures CPU work only");
  }
}

TEST(CPUGraph, ItsOwnMisuseIsAnError) {
  CPUGraph graph;
  EXPECT_THROW_MSG(graph.replay(), RuntimeError,
                   "Called CPUGraph::replay without a preceding successful capture.");
  EXPECT_THROW_MSG(graph.capture(nullptr), RuntimeError, "empty function");
  Tensor x = ones({2}), y;
  graph.capture([&] {
    EXPECT_TRUE(is_capturing());
    CPUGraph inner;
    EXPECT_THROW_MSG(inner.capture([] {}), RuntimeError, "inside another capture");
    y = x * 3;
  });
  EXPECT_FALSE(is_capturing());
  EXPECT_THROW_MSG(graph.capture([] {}), RuntimeError, "already owns a captured graph");
  // An exception from the function passes through, and the graph stays empty.
  CPUGraph failed;
  EXPECT_THROW_MSG(failed.capture([&] { (void)(x + ones({3})); }), RuntimeError,
                   "must match the size");
  EXPECT_FALSE(failed.captured());
  EXPECT_FALSE(is_capturing());
  // reset() frees the capture; the graph can capture again.
  graph.reset();
  EXPECT_FALSE(graph.captured());
  graph.capture([&] { y = x * 5; });
  x.fill_(2);
  graph.replay();
  EXPECT_EQ(y.tolist(), (std::vector<double>{10, 10}));
}

// A graph moved while it captures takes the capture under way with it; one moved into a local
// of the function (and destroyed with it) takes the capture away, leaving nothing dangling.
TEST(CPUGraph, AGraphMovedWhileCapturingTakesTheCapture) {
  Tensor x = ones({4});
  CPUGraph graph, outer;
  graph.capture([&] {
    x.mul_(2);
    outer = std::move(graph);
  });
  EXPECT_FALSE(graph.captured());
  ASSERT_TRUE(outer.captured());
  outer.replay();
  EXPECT_EQ(x.tolist(), (std::vector<double>{4, 4, 4, 4}));
  CPUGraph gone;
  gone.capture([&] {
    CPUGraph local(std::move(gone));
    x.add_(1);
  });
  EXPECT_FALSE(gone.captured());
  EXPECT_FALSE(is_capturing());
  gone.capture([&] { x.add_(1); });  // the moved-from graph captures afresh
  EXPECT_TRUE(gone.captured());
  // reset() from inside its own capture would drop the state being filled.
  CPUGraph self;
  EXPECT_THROW_MSG(self.capture([&] { self.reset(); }), RuntimeError,
                   "cannot reset a CPUGraph while it is capturing");
  EXPECT_FALSE(self.captured());
  EXPECT_FALSE(is_capturing());
}

// The tensors a graph uses live as long as the graph, whatever the function kept.
TEST(CPUGraph, TheGraphKeepsItsMemory) {
  Tensor result;
  CPUGraph graph;
  {
    Tensor x = full({3}, 2.0);
    graph.capture([&] { result = (x * x).exp(); });
  }  // x is gone from here, but not from the graph
  result = Tensor();
  graph.replay();  // reads and writes memory only the graph holds: no crash, no leak
  SUCCEED();
}

// Only the capturing thread records: another thread's ops run and read values as usual.
TEST(CPUGraph, OtherThreadsAreNotCaptured) {
  Tensor x = full({2}, 3.0), y;
  double other = 0;
  CPUGraph alone, graph;
  alone.capture([&] { y = x + 1; });
  graph.capture([&] {
    std::thread([&] { other = (x * x).sum().item(); }).join();
    y = x + 1;
  });
  EXPECT_EQ(other, 18);
  EXPECT_EQ(graph.kernels(), alone.kernels());
}
