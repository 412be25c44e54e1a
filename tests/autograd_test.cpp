// The library's autograd: every differentiable op against central finite differences, on random
// shapes and layouts (broadcast and non-contiguous inputs included); the graph's structure and
// names; the cases small tapes get wrong; memory and error behaviour.
#include <functional>

#include "test_util.h"

using namespace tiny;
using namespace tiny::testing;

namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

// The loss the check differentiates: f's output weighted by fixed random numbers and summed, so
// that every output element's gradient matters.
double weighted(const Tensor& out, const Tensor& w) { return sum(mul(out, w)).item(); }

// Compares the tape's gradients of sum(f(inputs) * w) with central differences
// (f(x + h) - f(x - h)) / 2h in float64. With h = 1e-6 the truncation error is ~h^2 |f'''| and
// the rounding error ~eps |f| / h ~ 1e-10, so 1e-6 absolute plus 1e-5 relative is far above
// both and far below any wrong rule.
::testing::AssertionResult gradients_match(std::mt19937_64& rng, const Fn& f,
                                           std::vector<Tensor> inputs) {
  for (auto& x : inputs) x.requires_grad_();
  const Tensor out = f(inputs);
  const Tensor w = random_values(rng, out.shape());
  backward(sum(mul(out, w)));
  const double h = 1e-6;
  for (size_t k = 0; k < inputs.size(); ++k) {
    Tensor x = inputs[k];
    const Tensor grad = x.grad();
    if (!grad.defined())
      return ::testing::AssertionFailure() << "input " << k << " got no gradient";
    if (grad.shape() != x.shape())
      return ::testing::AssertionFailure()
             << "input " << k << " gradient shape " << format_tuple(grad.shape());
    Tensor numeric = zeros(x.shape(), kFloat64);
    NoGradGuard no_grad;
    for (const auto& idx : all_indices(x.shape())) {
      Tensor cell = x;
      for (int64_t i : idx) cell = cell.select(0, i);
      const double v = cell.item();
      cell.fill_(v + h);
      const double up = weighted(f(inputs), w);
      cell.fill_(v - h);
      const double down = weighted(f(inputs), w);
      cell.fill_(v);
      Tensor slot = numeric;
      for (int64_t i : idx) slot = slot.select(0, i);
      slot.fill_((up - down) / (2 * h));
    }
    auto r = close(grad, numeric, 1e-6, 1e-5);
    if (!r) return r << " (gradient of input " << k << ", shape " << format_tuple(x.shape()) << ")";
  }
  return ::testing::AssertionSuccess();
}

// A float64 input of `shape` in a random layout (contiguous, permuted or strided).
Tensor input(std::mt19937_64& rng, const Shape& shape, bool positive = false) {
  return random_layout(rng, random_values(rng, shape, positive), kFloat64);
}

Tensor one_hot_targets(std::mt19937_64& rng, int64_t n, int64_t c) {
  std::vector<int64_t> t(static_cast<size_t>(n));
  for (auto& v : t) v = uniform_int(rng, 0, c - 1);
  return from_vector(t, {n});
}

}  // namespace

TEST(Ch03_Autograd, ElementwiseOpsMatchFiniteDifferences) {
  TINY_SEEDED(rng);
  struct Case {
    const char* name;
    Fn f;
    bool positive;
  };
  const std::vector<Case> unary = {
      {"neg", [](auto& v) { return -v[0]; }, false},
      {"abs", [](auto& v) { return abs(v[0]); }, false},
      {"sqrt", [](auto& v) { return sqrt(v[0]); }, true},
      {"rsqrt", [](auto& v) { return rsqrt(v[0]); }, true},
      {"exp", [](auto& v) { return exp(v[0]); }, false},
      {"log", [](auto& v) { return log(v[0]); }, true},
      {"log1p", [](auto& v) { return log1p(v[0]); }, true},
      {"expm1", [](auto& v) { return expm1(v[0]); }, false},
      {"erf", [](auto& v) { return erf(v[0]); }, false},
      {"relu", [](auto& v) { return relu(v[0]); }, false},
      {"gelu", [](auto& v) { return gelu(v[0]); }, false},
      {"sigmoid", [](auto& v) { return sigmoid(v[0]); }, false},
      {"tanh", [](auto& v) { return tanh(v[0]); }, false},
      {"pow 3", [](auto& v) { return v[0].pow(3); }, false},
      {"pow -0.5", [](auto& v) { return v[0].pow(-0.5); }, true},
      {"x * 2.5 + 1", [](auto& v) { return v[0] * 2.5 + 1; }, false},
      {"1 / x", [](auto& v) { return 1.0 / v[0]; }, true},
      {"x * x", [](auto& v) { return v[0] * v[0]; }, false},
      {"square", [](auto& v) { return square(v[0]); }, false},
      {"reciprocal", [](auto& v) { return reciprocal(v[0]); }, true},
      // Random inputs land within h of a bound with probability ~1e-6: the kinks are not probed.
      {"clamp", [](auto& v) { return clamp(v[0], -0.7, 0.9); }, false},
      {"clamp_min", [](auto& v) { return clamp_min(v[0], 0.3); }, false},
      {"clamp_max", [](auto& v) { return clamp_max(v[0], 0.3); }, false},
  };
  for (const auto& c : unary)
    for (int trial = 0; trial < 3; ++trial)
      ASSERT_TRUE(gradients_match(rng, c.f, {input(rng, random_shape(rng, 3, 4), c.positive)}))
          << c.name;
  const std::vector<Case> binary = {
      {"add", [](auto& v) { return v[0] + v[1]; }, false},
      {"sub", [](auto& v) { return v[0] - v[1]; }, false},
      {"mul", [](auto& v) { return v[0] * v[1]; }, false},
      {"div", [](auto& v) { return v[0] / v[1]; }, true},
      {"pow", [](auto& v) { return pow(v[0], v[1]); }, true},
      {"maximum", [](auto& v) { return maximum(v[0], v[1]); }, false},
      {"minimum", [](auto& v) { return minimum(v[0], v[1]); }, false},
      {"where", [](auto& v) { return where(gt(v[0], v[1]), v[0] * 3, v[1]); }, false},
      {"add alpha", [](auto& v) { return add(v[0], v[1], 2.5); }, false},
      {"sub alpha", [](auto& v) { return sub(v[0], v[1], -0.5); }, false},
      {"lerp 0.3", [](auto& v) { return lerp(v[0], v[1], 0.3); }, false},
      {"lerp 0.8", [](auto& v) { return lerp(v[0], v[1], 0.8); }, false},
  };
  for (const auto& c : binary)
    for (int trial = 0; trial < 4; ++trial) {
      // Shapes that broadcast: the gradient of a broadcast input is summed back to its shape.
      Shape full = random_shape(rng, 3, 4);
      Shape sa = full, sb = full;
      for (auto& d : sa)
        if (uniform_int(rng, 0, 3) == 0) d = 1;
      for (auto& d : sb)
        if (uniform_int(rng, 0, 3) == 0) d = 1;
      if (!sb.empty() && uniform_int(rng, 0, 1)) sb.erase(sb.begin());
      ASSERT_TRUE(
          gradients_match(rng, c.f, {input(rng, sa, c.positive), input(rng, sb, c.positive)}))
          << c.name << " " << format_tuple(sa) << " with " << format_tuple(sb);
    }
  const std::vector<Case> ternary = {
      {"lerp", [](auto& v) { return lerp(v[0], v[1], v[2]); }, false},
      {"addcmul", [](auto& v) { return addcmul(v[0], v[1], v[2], 0.7); }, false},
      {"addcdiv", [](auto& v) { return addcdiv(v[0], v[1], v[2], -1.5); }, true},
  };
  for (const auto& c : ternary)
    for (int trial = 0; trial < 4; ++trial) {
      Shape full = random_shape(rng, 3, 4);
      std::vector<Tensor> in;
      for (int k = 0; k < 3; ++k) {
        Shape s = full;
        for (auto& d : s)
          if (uniform_int(rng, 0, 3) == 0) d = 1;
        in.push_back(input(rng, s, c.positive));
      }
      ASSERT_TRUE(gradients_match(rng, c.f, in)) << c.name;
    }
}

TEST(Ch03_Autograd, ReductionsMatchFiniteDifferences) {
  TINY_SEEDED(rng);
  const Shape s = {3, 4, 2};
  ASSERT_TRUE(gradients_match(rng, [](auto& v) { return sum(v[0]); }, {input(rng, s)}));
  ASSERT_TRUE(gradients_match(rng, [](auto& v) { return sum(v[0], {0, 2}); }, {input(rng, s)}));
  ASSERT_TRUE(gradients_match(rng, [](auto& v) { return sum(v[0], {1}, true); }, {input(rng, s)}));
  ASSERT_TRUE(gradients_match(rng, [](auto& v) { return mean(v[0]); }, {input(rng, s)}));
  ASSERT_TRUE(gradients_match(rng, [](auto& v) { return mean(v[0], {-1}); }, {input(rng, s)}));
  ASSERT_TRUE(gradients_match(rng, [](auto& v) { return max(v[0]); }, {input(rng, s)}));
  ASSERT_TRUE(gradients_match(rng, [](auto& v) { return max(v[0], 1).values; }, {input(rng, s)}));
  ASSERT_TRUE(
      gradients_match(rng, [](auto& v) { return max(v[0], 0, true).values; }, {input(rng, s)}));
}

TEST(Ch03_Autograd, MatmulInEveryShapeMatchesFiniteDifferences) {
  TINY_SEEDED(rng);
  const std::vector<std::pair<Shape, Shape>> shapes = {{{3}, {3}},
                                                       {{2, 3}, {3}},
                                                       {{3}, {3, 4}},
                                                       {{2, 3}, {3, 4}},
                                                       {{2, 5, 3}, {3, 4}},
                                                       {{2, 2, 3}, {2, 3, 4}},
                                                       {{3, 1, 2, 3}, {2, 3, 2}},
                                                       {{2, 3}, {2, 3, 4}},
                                                       {{2, 2, 3}, {3}},
                                                       {{3}, {2, 3, 4}},
                                                       {{1, 2, 3}, {4, 3, 2}},
                                                       {{4, 2, 3}, {1, 3, 2}}};
  // Which operands require grad decides how matmul computes (a batch folds into one mm or mv
  // when the other operand requires grad, as in PyTorch), so each pair is tried three ways.
  for (const auto& [sa, sb] : shapes) {
    ASSERT_TRUE(gradients_match(rng, [](auto& v) { return matmul(v[0], v[1]); },
                                {input(rng, sa), input(rng, sb)}))
        << format_tuple(sa) << " @ " << format_tuple(sb);
    const Tensor a = input(rng, sa), b = input(rng, sb);
    ASSERT_TRUE(gradients_match(rng, [&b](auto& v) { return matmul(v[0], b); }, {input(rng, sa)}))
        << format_tuple(sa) << " (requires grad) @ " << format_tuple(sb);
    ASSERT_TRUE(gradients_match(rng, [&a](auto& v) { return matmul(a, v[0]); }, {input(rng, sb)}))
        << format_tuple(sa) << " @ " << format_tuple(sb) << " (requires grad)";
  }
}

TEST(Ch03_Autograd, ViewsMatchFiniteDifferences) {
  TINY_SEEDED(rng);
  const std::vector<std::pair<const char*, Fn>> views = {
      {"transpose", [](auto& v) { return v[0].transpose(0, 2) * 1.0; }},
      {"T", [](auto& v) { return v[0].T() * 1.0; }},
      {"permute",
       [](auto& v) {
         return v[0].permute({1, 2, 0}) * 1.0;
       }},
      {"select", [](auto& v) { return v[0][1] * 1.0; }},
      {"slice", [](auto& v) { return v[0].slice(1, 1, std::nullopt, 2) * 1.0; }},
      {"index",
       [](auto& v) {
         return v[0].index({Slice{}, 2, Slice{0, 1}}) * 1.0;
       }},
      {"view",
       [](auto& v) {
         return v[0].contiguous().view({4, 6}) * 1.0;
       }},
      {"reshape (copy)", [](auto& v) { return v[0].transpose(0, 1).reshape({24}) * 1.0; }},
      {"flatten", [](auto& v) { return v[0].flatten(1) * 1.0; }},
      {"expand",
       [](auto& v) {
         return v[0][0].unsqueeze(0).expand({5, 4, 2}) * 1.0;
       }},
      {"squeeze/unsqueeze",
       [](auto& v) { return v[0].unsqueeze(1).squeeze(1).narrow(2, 1, 1).squeeze() * 1.0; }},
      {"clone", [](auto& v) { return v[0].clone(); }},
      {"triu", [](auto& v) { return v[0].triu(1) * 1.0; }},
      {"tril", [](auto& v) { return v[0].tril() * 1.0; }},
  };
  for (const auto& [name, f] : views)
    ASSERT_TRUE(gradients_match(rng, f, {input(rng, {3, 4, 2})})) << name;
}

TEST(Ch03_Autograd, LossesMatchFiniteDifferences) {
  TINY_SEEDED(rng);
  const Tensor labels = random_layout(rng, rand({4, 3}, kFloat64), kFloat64);
  const Tensor classes = one_hot_targets(rng, 5, 4);
  ASSERT_TRUE(gradients_match(rng, [](auto& v) { return mse_loss(v[0], v[1]); },
                              {input(rng, {4, 3}), input(rng, {4, 3})}));
  ASSERT_TRUE(gradients_match(rng,
                              [](auto& v) { return binary_cross_entropy_with_logits(v[0], v[1]); },
                              {input(rng, {4, 3}), labels.clone()}));
  ASSERT_TRUE(gradients_match(rng, [&](auto& v) { return cross_entropy(v[0], classes); },
                              {input(rng, {5, 4})}));
  const Tensor probabilities = softmax(randn({5, 4}, kFloat64), 1);
  ASSERT_TRUE(gradients_match(rng, [&](auto& v) { return cross_entropy(v[0], probabilities); },
                              {input(rng, {5, 4})}));
  ASSERT_TRUE(
      gradients_match(rng, [](auto& v) { return log_softmax(v[0], 1); }, {input(rng, {3, 4})}));
  ASSERT_TRUE(gradients_match(rng, [](auto& v) { return softmax(v[0], 0); }, {input(rng, {3, 4})}));
}

TEST(Ch03_Autograd, DtypeConversionPassesGradientsBack) {
  // float32 rounding would swamp a finite difference, so check the rule directly: the gradient
  // of to(float64) is the incoming gradient cast back to float32.
  Tensor a = tensor({1.5f, -2.0f}).requires_grad_();
  (a.to(kFloat64) * tensor({3.0, 4.0}, kFloat64)).sum().backward();
  EXPECT_EQ(a.grad().dtype(), kFloat32);
  EXPECT_EQ(a.grad().tolist(), (std::vector<double>{3, 4}));
  Tensor b = tensor({1.5}).requires_grad_();
  EXPECT_FALSE(b.to(kInt64).requires_grad());  // integers carry no gradient
}

TEST(Ch03_Autograd, LossesAreStableAndMatchPyTorch) {
  // Zero logits over 4 classes: ln 4 (tests/fixtures/pytorch_facts.txt, section 10).
  EXPECT_NEAR(cross_entropy(zeros({2, 4}), tensor({0, 3})).item(), 1.3862943649291992, 1e-7);
  // Class probabilities as the target (PyTorch 1.13: F.cross_entropy of these float64 tensors).
  EXPECT_NEAR(cross_entropy(tensor({{1.0, 2.0, 3.0}, {0.0, -1.0, 2.0}}, kFloat64),
                            tensor({{0.2, 0.3, 0.5}, {1.0, 0.0, 0.0}}, kFloat64))
                  .item(),
              1.638725992000333, 1e-14);
  // Logits of +-1000 would overflow exp() in the naive forms; the stable forms give exact answers.
  Tensor big = tensor({{1000.0, -1000.0}}, kFloat64);
  EXPECT_NEAR(binary_cross_entropy_with_logits(big, tensor({{1.0, 0.0}}, kFloat64)).item(), 0.0,
              1e-12);
  EXPECT_NEAR(binary_cross_entropy_with_logits(big, tensor({{0.0, 1.0}}, kFloat64)).item(), 1000.0,
              1e-9);
  EXPECT_NEAR(cross_entropy(tensor({{1000.0, 0.0}}, kFloat64), tensor({1})).item(), 1000.0, 1e-9);
  EXPECT_TRUE(throws_with<IndexError>(
      [] {
        cross_entropy(zeros({2, 3}), tensor({0, 3}));
      },
      "Target 3 is out of bounds."));
  // A target that broadcasts is used so, after PyTorch's warning; one that does not is refused.
  {
    WarningCapture caught;
    EXPECT_EQ(mse_loss(tensor({{1.0, 2.0}, {3.0, 4.0}}, kFloat64), tensor({1.0, 0.0}, kFloat64))
                  .item(),
              (0.0 + 4.0 + 4.0 + 16.0) / 4);
    EXPECT_EQ(caught.messages(),
              std::vector<std::string>{
                  "Using a target size (torch.Size([2])) that is different to the input size "
                  "(torch.Size([2, 2])). This will likely lead to incorrect results due to "
                  "broadcasting. Please ensure they have the same size."});
    EXPECT_TRUE(throws_with<RuntimeError>(
        [] { mse_loss(zeros({2, 3}), zeros({2})); },
        "The size of tensor a (3) must match the size of tensor b (2) at non-singleton dimension 1"));
  }
  // The gradient reaches a broadcast target summed over the rows it was repeated along, through
  // ExpandBackward0 as in PyTorch; the input, already of the broadcast shape, is not expanded.
  const Tensor x = tensor({{1.0, 2.0}, {3.0, 4.0}}, kFloat64).requires_grad_();
  const Tensor y = tensor({0.5, 1.0}, kFloat64).requires_grad_();
  WarningCapture quiet;
  const Tensor loss = mse_loss(x, y);
  EXPECT_EQ(loss.grad_fn()->next_functions()[0].fn->name(), "AccumulateGrad");
  EXPECT_EQ(loss.grad_fn()->next_functions()[1].fn->name(), "ExpandBackward0");
  loss.backward();
  // d/dy of mean((x - y)^2) = -2/4 * sum over rows of (x - y): (-0.5 (0.5 + 2.5), -0.5 (1 + 3)).
  EXPECT_TRUE(close(y.grad(), tensor({-1.5, -2.0}, kFloat64), 0, 0));
  EXPECT_TRUE(close(x.grad(), tensor({{0.25, 0.5}, {1.25, 1.5}}, kFloat64), 0, 0));
}

// The cases a small tape gets wrong.
TEST(Ch03_Autograd, PathsAddUp) {
  Tensor a = tensor({1.5, -2.0}, kFloat64).requires_grad_();
  Tensor b = a + a;  // the diamond: a reaches c along four paths
  Tensor c = b + b;
  sum(c).backward();
  EXPECT_EQ(a.grad().tolist(), (std::vector<double>{4, 4}));

  Tensor x = tensor({3.0}, kFloat64).requires_grad_();
  (x * x).sum().backward();  // y = x * x: the same tensor as both inputs
  EXPECT_EQ(x.grad().item(), 6.0);

  Tensor w = tensor({{2.0}}, kFloat64).requires_grad_();       // a weight used twice
  Tensor h = matmul(matmul(tensor({{3.0}}, kFloat64), w), w);  // 3 w^2
  h.sum().backward();
  EXPECT_EQ(w.grad().item(), 12.0);

  Tensor leaf = tensor({2.0}, kFloat64).requires_grad_();  // one leaf, two branches
  (exp(leaf) + leaf * 3).sum().backward();
  EXPECT_NEAR(leaf.grad().item(), std::exp(2.0) + 3, 1e-12);
}

TEST(Ch03_Autograd, GradientsBasicsOfTheLecture) {  // seed document 003, gradients_basics
  Tensor x = tensor({1., 2, 3});
  Tensor w = tensor({1., 1, 1}).requires_grad_();
  Tensor loss = 0.5 * (matmul(x, w) - 5).pow(2);
  loss.backward();
  EXPECT_EQ(w.grad().tolist(), (std::vector<double>{1, 2, 3}));
}

TEST(Ch03_Autograd, DeepChainNeedsNoRecursion) {
  // 100,000 recorded ops: building, differentiating and freeing the graph must not recurse.
  Tensor x = tensor({1.0}, kFloat64).requires_grad_();
  Tensor y = x;
  for (int i = 0; i < 100000; ++i) y = y * 1.0;
  EXPECT_EQ(graph_nodes(y).size(), 100001u);
  y.sum().backward();
  EXPECT_EQ(x.grad().item(), 1.0);
  y = Tensor();  // the whole chain is freed here
}

TEST(Ch03_Autograd, DeepChainOfWritesThroughViewsNeedsNoRecursion) {
  // 100,000 writes through views: each CopySlices keeps the in-place op's node besides its
  // edges, and freeing the graph must not recurse through those either.
  const Tensor x = tensor({1.0, 2.0}, kFloat64).requires_grad_();
  Tensor y = x * 1;
  for (int i = 0; i < 100000; ++i) y.select(0, i % 2).mul_(1.0);
  EXPECT_EQ(y.grad_fn()->name(), "CopySlices");
  y.sum().backward();
  EXPECT_EQ(x.grad().tolist(), (std::vector<double>{1, 1}));
  y = Tensor();  // the whole chain is freed here
}

TEST(Ch03_Autograd, GradientsAccumulateUntilCleared) {
  Tensor w = tensor({1.0, -1.0}, kFloat64).requires_grad_();
  Tensor loss = (w * w).sum();
  loss.backward(Tensor(), /*retain_graph=*/true);
  loss.backward();  // a second pass through the retained graph adds the same gradient again
  EXPECT_EQ(w.grad().tolist(), (std::vector<double>{4, -4}));
  zero_grad({w});
  EXPECT_FALSE(w.grad().defined());  // set to None
  (w * 3).sum().backward();
  zero_grad({w}, /*set_to_none=*/false);
  EXPECT_EQ(w.grad().tolist(), (std::vector<double>{0, 0}));
}

// A later gradient is added into the .grad the leaf has, in place, as PyTorch's AccumulateGrad
// adds it: a handle taken before the second backward sees the sum (torch 2.15: `g is x.grad`
// and g == [5, 5]), and so does a tensor the program gave set_grad.
TEST(Ch03_Autograd, LaterGradientsAreAddedIntoTheSameTensor) {
  Tensor x = ones({2}).requires_grad_();
  (x * 2).sum().backward();
  const Tensor g = x.grad();
  (x * 3).sum().backward();
  EXPECT_EQ(g.tolist(), (std::vector<double>{5, 5}));
  EXPECT_EQ(x.grad().data_ptr(), g.data_ptr());
  const Tensor mine = full({2}, 10.0);
  x.set_grad(mine);
  (x * 4).sum().backward();
  EXPECT_EQ(mine.tolist(), (std::vector<double>{14, 14}));
  zero_grad({x}, /*set_to_none=*/false);
  EXPECT_EQ(mine.tolist(), (std::vector<double>{0, 0}));
}

// set_grad refuses what PyTorch 2.15 refuses when Python assigns .grad, in its words.
TEST(Ch03_Autograd, SetGradChecksLikePyTorch) {
  Tensor t = ones({3}).requires_grad_();
  EXPECT_TRUE(throws_with<RuntimeError>([&] { t.set_grad(t); },
                                        "can't assign Variable as its own grad"));
  EXPECT_TRUE(throws_with<RuntimeError>(
      [&] { t.set_grad(ones({3}, kFloat64)); },
      "attempting to assign a gradient with dtype 'double' to a tensor with grad_dtype 'Float'. "
      "The gradient must match the tensor's grad_dtype (defaults to the tensor's dtype)."));
  EXPECT_TRUE(throws_with<RuntimeError>(
      [&] { t.set_grad(ones({4})); },
      "attempting to assign a gradient of size '[4]' to a tensor of size '[3]'. Please ensure "
      "that the gradient and the tensor are the same size"));
  EXPECT_FALSE(t.grad().defined());  // nothing was assigned
  t.set_grad(t.detach());            // another handle to the same memory is allowed
  EXPECT_TRUE(t.grad().defined());
}

// x^0 is 1 everywhere, so its gradient is 0 everywhere, 0 included (0 * 0^-1 would be NaN);
// PyTorch 2.15 gives [0, 0] for each form below, and [0, 1] with e's gradient [0, 2 ln 2]
// when only some exponents are 0.
TEST(Ch03_Autograd, PowerZeroHasZeroGradientAtZero) {
  for (int form = 0; form < 2; ++form) {
    Tensor x = tensor({0.0, 2.0}).requires_grad_();
    (form == 0 ? x.pow(0) : x.pow(zeros({1}))).sum().backward();
    EXPECT_EQ(x.grad().tolist(), (std::vector<double>{0, 0})) << form;
  }
  Tensor x = tensor({0.0, 2.0}).requires_grad_();
  Tensor e = tensor({0.0, 1.0}).requires_grad_();
  x.pow(e).sum().backward();
  EXPECT_EQ(x.grad().tolist(), (std::vector<double>{0, 1}));
  EXPECT_NEAR(e.grad().tolist()[1], 2 * std::log(2.0), 1e-6);
  EXPECT_EQ(e.grad().tolist()[0], 0.0);
}

TEST(Ch03_Autograd, SecondBackwardThroughAFreedGraphRaises) {
  Tensor w = tensor({1.0}, kFloat64).requires_grad_();
  Tensor loss = (w * w).sum();
  loss.backward();
  EXPECT_TRUE(throws_with<RuntimeError>(
      [&] { loss.backward(); },
      "Trying to backward through the graph a second time (or directly access saved tensors after "
      "they have already been freed). Saved intermediate values of the graph are freed when you "
      "call "
      ".backward() or autograd.grad(). Specify retain_graph=True if you need to backward through "
      "the "
      "graph a second time or if you need to access saved tensors after calling backward."));
  EXPECT_TRUE(throws_with<RuntimeError>([] { (ones({2}).requires_grad_() * 2).backward(); },
                                        "grad can be implicitly created only for scalar outputs"));
  EXPECT_TRUE(throws_with<RuntimeError>([] { ones({1}).backward(); }, "does not require grad"));
}

// Nodes that kept no tensor (a transpose, an addition, a sum) have nothing to free, so PyTorch
// lets a second backward pass through them; so does this library. (An exp keeps its result:
// there a second pass raises, as above.)
TEST(Ch03_Autograd, ASecondBackwardThroughNodesThatSavedNothingIsAllowed) {
  Tensor w = tensor({{1.0, 2.0}}, kFloat64).requires_grad_();
  Tensor t = w.T() + 1;
  t.sum().backward();
  t.sum().backward();
  EXPECT_EQ(w.grad().view({-1}).tolist(), (std::vector<double>{2, 2}));
  Tensor e = w.exp();
  e.sum().backward();
  EXPECT_TRUE(throws_with<RuntimeError>([&] { e.sum().backward(); }, "a second time"));
}

TEST(Ch03_Autograd, NoGradRecordsAndSavesNothing) {
  Tensor w = tensor({{0.5, -0.4}, {0.3, 0.8}}).requires_grad_();
  int saved = 0;
  SavedTensorsHooks count(
      [&](const Tensor& t) {
        ++saved;
        return t;
      },
      [](const Tensor& t) { return t; });
  {
    NoGradGuard no_grad;
    Tensor y = relu(matmul(tensor({{1.0, 0.0}}), w));
    EXPECT_EQ(y.grad_fn(), nullptr);
    EXPECT_FALSE(y.requires_grad());
  }
  EXPECT_EQ(saved, 0);
  Tensor y = relu(matmul(tensor({{1.0, 0.0}}), w));  // saves the input of mm and relu's output
  EXPECT_EQ(saved, 2);
  EXPECT_TRUE(grad_mode_enabled());
  Tensor d = y.detach();
  EXPECT_FALSE(d.requires_grad());
  EXPECT_EQ(d.data_ptr(), y.data_ptr());
}

TEST(Ch03_Autograd, SavedTensorHooksSeeWhatBackwardKeeps) {
  Tensor w = tensor({{0.5, -0.4}, {0.3, 0.8}}).requires_grad_();
  size_t bytes = 0;
  int unpacked = 0;
  Tensor loss;
  {
    SavedTensorsHooks hooks(
        [&](const Tensor& t) {
          bytes += t.nbytes();
          return t;
        },
        [&](const Tensor& t) {
          ++unpacked;
          return t;
        });
    loss = relu(matmul(ones({3, 2}), w)).sum();
  }
  EXPECT_EQ(bytes, 3 * 2 * 4u + 3 * 2 * 4u);  // mm keeps x (3x2), relu keeps its output (3x2)
  loss.backward();
  EXPECT_EQ(unpacked, 2);
}

TEST(Ch03_Autograd, InPlaceChangesAreCaught) {
  Tensor w = tensor({1.0, 2.0}).requires_grad_();
  EXPECT_TRUE(throws_with<RuntimeError>(
      [&] { w.fill_(0); },
      "a leaf Variable that requires grad is being used in an in-place operation."));
  {
    NoGradGuard no_grad;  // how an optimizer updates a weight
    w.fill_(3.0);
  }
  // A write into a computed tensor becomes the newest step of its history, as in PyTorch:
  // fill_ overwrites every element, so no gradient reaches w through y.
  Tensor y = w * 2;
  y.fill_(0);
  EXPECT_EQ(y.grad_fn()->name(), "FillBackward2");
  EXPECT_EQ(y.grad_fn()->next_functions()[0].fn->name(), "MulBackward0");
  (y * 3).sum().backward();
  EXPECT_TRUE(equal(w.grad(), tensor({0.0, 0.0})));
  Tensor x = tensor({1.0, 2.0});
  Tensor z = (w * x).sum();  // saves x
  x.fill_(5.0);
  EXPECT_TRUE(throws_with<RuntimeError>([&] { z.backward(); },
                                        "one of the variables needed for gradient computation has "
                                        "been modified by an inplace operation"));
  EXPECT_TRUE(throws_with<RuntimeError>(
      [] {
        tensor({1, 2}).requires_grad_();
      },
      "only Tensors of floating point dtype can require gradients"));
  EXPECT_TRUE(
      throws_with<RuntimeError>([&] { y.requires_grad_(false); },
                                "you can only change requires_grad flags of leaf variables."));
}

// Seed document 000, graph.py; the names as tests/fixtures/pytorch_facts.txt, section 3, has them.
TEST(Ch03_Autograd, GraphHasPyTorchsNodes) {
  Tensor x = tensor({{1.0, 0.0}});
  Tensor W1 = tensor({{0.5, -0.4}, {0.3, 0.8}}).requires_grad_();
  Tensor w2 = tensor({{0.7}, {-0.6}}).requires_grad_();
  Tensor z = matmul(relu(matmul(x, W1)), w2);
  std::vector<std::string> names;
  for (const auto& n : graph_nodes(z)) names.push_back(n->name());
  EXPECT_EQ(names, (std::vector<std::string>{"MmBackward0", "ReluBackward0", "MmBackward0",
                                             "AccumulateGrad", "AccumulateGrad"}));
  EXPECT_EQ(z.grad_fn()->next_functions().size(), 2u);
  EXPECT_EQ(matmul(relu(matmul(x, W1)), w2).grad_fn()->next_functions()[0].fn->name(),
            "ReluBackward0");
  // A layer applied three times with one shared weight: 3 x 2 nodes plus one accumulator.
  Tensor W = eye(2).requires_grad_();
  Tensor h = x;
  for (int i = 0; i < 3; ++i) h = relu(matmul(h, W));
  EXPECT_EQ(graph_nodes(h).size(), 7u);
  // Names of the other nodes, as PyTorch 1.13 names them.
  Tensor a = ones({2, 3}).requires_grad_();
  EXPECT_EQ((a + 1).grad_fn()->name(), "AddBackward0");
  EXPECT_EQ((a - 1).grad_fn()->name(), "SubBackward0");
  EXPECT_EQ((a / 2).grad_fn()->name(), "DivBackward0");
  EXPECT_EQ((-a).grad_fn()->name(), "NegBackward0");
  EXPECT_EQ(a.pow(2).grad_fn()->name(), "PowBackward0");
  EXPECT_EQ(a.sum().grad_fn()->name(), "SumBackward0");
  EXPECT_EQ(a.sum({0}).grad_fn()->name(), "SumBackward1");
  EXPECT_EQ(a.mean().grad_fn()->name(), "MeanBackward0");
  EXPECT_EQ(a.mean({1}).grad_fn()->name(), "MeanBackward1");
  EXPECT_EQ(a.max().grad_fn()->name(), "MaxBackward1");
  EXPECT_EQ(max(a, 1).values.grad_fn()->name(), "MaxBackward0");
  EXPECT_EQ(a.T().grad_fn()->name(), "PermuteBackward0");
  EXPECT_EQ(a.transpose(0, 1).grad_fn()->name(), "TransposeBackward0");
  EXPECT_EQ(a.view({6}).grad_fn()->name(), "ViewBackward0");
  EXPECT_EQ(a.reshape({6}).grad_fn()->name(), "ViewBackward0");  // 2.x (1.13: ReshapeAliasBackward0)
  EXPECT_EQ(a.T().reshape({6}).grad_fn()->name(), "UnsafeViewBackward0");
  EXPECT_EQ(a.T().contiguous().grad_fn()->name(), "CloneBackward0");
  EXPECT_EQ(a[0].grad_fn()->name(), "SelectBackward0");
  EXPECT_EQ(a.index({Slice{}, 1}).grad_fn()->name(), "SelectBackward0");
  EXPECT_EQ(a.index({Slice{}, Slice{1}}).grad_fn()->name(), "SliceBackward0");
  EXPECT_EQ(a.unsqueeze(0).grad_fn()->name(), "UnsqueezeBackward0");
  EXPECT_EQ(a.unsqueeze(0).squeeze(0).grad_fn()->name(), "SqueezeBackward1");
  EXPECT_EQ(a.unsqueeze(0).squeeze().grad_fn()->name(), "SqueezeBackward0");
  EXPECT_EQ(a.unsqueeze(0).expand({2, 2, 3}).grad_fn()->name(), "ExpandBackward0");
  EXPECT_EQ(a.to(kFloat64).grad_fn()->name(), "ToCopyBackward0");
  EXPECT_EQ(a.triu().grad_fn()->name(), "TriuBackward0");
  EXPECT_EQ(where(a > 0.0, a, a).grad_fn()->name(), "WhereBackward0");
  EXPECT_EQ(matmul(ones({3}).requires_grad_(), ones({3})).grad_fn()->name(), "DotBackward0");
  EXPECT_EQ(matmul(a, ones({3})).grad_fn()->name(), "MvBackward0");
  EXPECT_EQ(matmul(ones({4, 2, 3}).requires_grad_(), ones({3, 5})).grad_fn()->name(),
            "UnsafeViewBackward0");
  EXPECT_EQ(mse_loss(a, ones({2, 3})).grad_fn()->name(), "MseLossBackward0");
  EXPECT_EQ(binary_cross_entropy_with_logits(a, ones({2, 3})).grad_fn()->name(),
            "BinaryCrossEntropyWithLogitsBackward0");
  EXPECT_EQ(cross_entropy(a, tensor({0, 1})).grad_fn()->name(), "NllLossBackward0");
  EXPECT_EQ(cross_entropy(a, tensor({0, 1})).grad_fn()->next_functions()[0].fn->name(),
            "LogSoftmaxBackward0");
  EXPECT_EQ((a * 2).str(), "tensor([[2., 2., 2.],\n        [2., 2., 2.]], grad_fn=<MulBackward0>)");
  EXPECT_EQ(ones({2}).requires_grad_().str(), "tensor([1., 1.], requires_grad=True)");
}

TEST(Ch03_Autograd, NodesCountTheirFlops) {  // seed document 003, gradients_flops
  const int64_t B = 16, D = 8, K = 4;
  Tensor x = ones({B, D});
  Tensor w1 = randn({D, D}).requires_grad_();
  Tensor w2 = randn({D, K}).requires_grad_();
  Tensor h1 = matmul(x, w1);
  Tensor h2 = matmul(h1, w2);
  EXPECT_EQ(h1.grad_fn()->forward_flops(), 2.0 * B * D * D);
  EXPECT_EQ(h2.grad_fn()->forward_flops(), 2.0 * B * D * K);
  // dL/dw2 and dL/dh1 for the second layer; only dL/dw1 for the first, since x needs no gradient.
  EXPECT_EQ(h2.grad_fn()->backward_flops(), 4.0 * B * D * K);
  EXPECT_EQ(h1.grad_fn()->backward_flops(), 2.0 * B * D * D);
  x.requires_grad_();  // as for a hidden layer, whose input is itself computed: 2 x forward
  EXPECT_EQ(matmul(x, w1).grad_fn()->backward_flops(), 4.0 * B * D * D);
}

// ---- in-place writes into the graph --------------------------------------------------------------

namespace {

// The function below written out in plain double loops: the independent reference whose central
// differences the tape's gradients are held to.
//   y = 2x + 1 (3x4); y[:, 1:3] *= w (3x2); y[:, 0] += z (3); y = tanh(y);
//   loss = sum(C * y) + sum(y[:, 1:3]^2)
double written_in_place_reference(const std::vector<double>& x, const std::vector<double>& w,
                                  const std::vector<double>& z, const std::vector<double>& c) {
  double loss = 0;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) {
      double y = 2 * x[i * 4 + j] + 1;
      if (j == 1 || j == 2) y *= w[i * 2 + (j - 1)];
      if (j == 0) y += z[i];
      y = std::tanh(y);
      loss += c[i * 4 + j] * y + ((j == 1 || j == 2) ? y * y : 0.0);
    }
  return loss;
}

std::vector<double> values(const Tensor& t) {
  const Tensor c = t.detach().contiguous();
  return std::vector<double>(c.data<double>(), c.data<double>() + c.numel());
}

}  // namespace

// Writes through two views of one tensor (a block of columns, and a column reached through a
// transpose), then a write into the tensor itself, then a read through the first view, whose
// node is by then out of date: every leaf's gradient must be what central differences of the
// loop above give.
TEST(Ch03_Autograd, InPlaceWritesThroughViewsMatchFiniteDifferences) {
  TINY_SEEDED(rng);
  const Tensor x = random_values(rng, {3, 4}).requires_grad_();
  const Tensor w = random_values(rng, {3, 2}).requires_grad_();
  const Tensor z = random_values(rng, {3}).requires_grad_();
  const Tensor c = random_values(rng, {3, 4});
  Tensor y = x * 2 + 1;
  Tensor block = y.slice(1, 1, 3);
  block.mul_(w);
  y.t().select(0, 0).add_(z);
  y.tanh_();
  EXPECT_EQ(y.grad_fn()->name(), "TanhBackward0");
  EXPECT_EQ(block.grad_fn()->name(), "AsStridedBackward0");
  ((y * c).sum() + (block * block).sum()).backward();

  std::vector<std::vector<double>> in = {values(x), values(w), values(z)};
  const std::vector<Tensor> leaves = {x, w, z};
  const std::vector<double> cv = values(c);
  for (size_t k = 0; k < in.size(); ++k) {
    const std::vector<double> grad = values(leaves[k].grad());
    for (size_t i = 0; i < in[k].size(); ++i) {
      const double h = 1e-6, keep = in[k][i];
      in[k][i] = keep + h;
      const double up = written_in_place_reference(in[0], in[1], in[2], cv);
      in[k][i] = keep - h;
      const double down = written_in_place_reference(in[0], in[1], in[2], cv);
      in[k][i] = keep;
      // Central differences of a smooth function of order-1 values: truncation ~h^2 (1e-12)
      // plus rounding ~1e-16 / h (1e-10), well inside 1e-8.
      EXPECT_NEAR(grad[i], (up - down) / (2 * h), 1e-8) << "leaf " << k << " element " << i;
    }
  }
}

// The cases PyTorch refuses, refused with its texts; and a tensor saved for backward, then
// written, fails at backward naming the op that produced it then.
TEST(Ch03_Autograd, InPlaceWritesPyTorchRefuses) {
  const Tensor leaf = tensor({1.0, 2.0, 3.0}).requires_grad_();
  EXPECT_TRUE(throws_with<RuntimeError>(
      [&] { leaf.slice(0, 0, 2).mul_(2); },
      "a view of a leaf Variable that requires grad is being used in an in-place operation."));
  Tensor made_without_grad;
  {
    NoGradGuard no_grad;
    made_without_grad = leaf.slice(0, 0, 2);
  }
  EXPECT_TRUE(made_without_grad.requires_grad());
  EXPECT_TRUE(throws_with<RuntimeError>([&] { made_without_grad.mul_(2); },
                                        "A view was created in no_grad mode"));
  Tensor y = leaf * 2;
  const Tensor z = y * y;  // keeps y
  y.add_(1);
  EXPECT_TRUE(throws_with<RuntimeError>([&] { z.sum().backward(); },
                                        "which is output 0 of Add, is at version 1; expected "
                                        "version 0 instead."));
  // Integer views are not tracked: writing into one is plain arithmetic.
  const Tensor ints = arange(6).view({2, 3});
  ints.select(0, 1).add_(10);
  EXPECT_FALSE(ints.is_view());
  EXPECT_EQ(ints.index({1, 2}).item<int64_t>(), 15);
}

// nll_loss and cross_entropy over the shapes PyTorch takes, against a float64 loop: one sample
// (C,), a batch (N, C), and a class per position (N, C, d1, ...), with targets of -100 (the
// default ignore_index) and of a chosen ignore_index left out of the mean. The gradient puts
// -1/count on each picked element.
TEST(Losses, NllLossOverEveryShapeWithIgnoredTargets) {
  TINY_SEEDED(rng);
  const std::vector<Shape> shapes = {{4}, {3, 4}, {2, 4, 3}, {2, 4, 2, 3}, {2, 4, 1, 2, 2}};
  for (int trial = 0; trial < 40; ++trial) {
    const Shape shape = shapes[static_cast<size_t>(trial) % shapes.size()];
    const int64_t C = shape.size() == 1 ? shape[0] : shape[1];
    Shape tshape;  // the target: the shape without its class dimension
    for (size_t d = 0; d < shape.size(); ++d)
      if (d != (shape.size() == 1 ? 0u : 1u)) tshape.push_back(shape[d]);
    const bool custom = trial % 3 == 2;  // then class 1 is the one ignored
    const int64_t ignore = custom ? 1 : -100;
    Tensor target = empty(tshape, kInt64);
    for (int64_t i = 0; i < target.numel(); ++i)
      target.data<int64_t>()[i] = uniform_int(rng, 0, 3) == 0 ? ignore : uniform_int(rng, 0, C - 1);
    const Tensor x = random_values(rng, shape).requires_grad_();
    const Tensor loss = nll_loss(x, target, ignore);
    // The reference: walk the target; its element k sits at (n, rest) with the class at dim 1.
    const Tensor xc = x.detach().contiguous();
    const int64_t inner = shape.size() <= 2 ? 1 : target.numel() / shape[0];
    double total = 0;
    int64_t count = 0;
    std::vector<double> grad(static_cast<size_t>(x.numel()), 0.0);
    std::vector<int64_t> picked;
    for (int64_t k = 0; k < target.numel(); ++k) {
      const int64_t c = target.data<int64_t>()[k];
      if (c == ignore) continue;
      const int64_t n = k / inner, rest = k % inner;
      const int64_t flat = (n * C + c) * inner + rest;
      total += xc.data<double>()[flat];
      picked.push_back(flat);
      ++count;
    }
    const double expected = -total / static_cast<double>(count);
    if (count == 0) {
      EXPECT_TRUE(std::isnan(loss.item()));
      continue;
    }
    EXPECT_NEAR(loss.item(), expected, 1e-12) << "shape " << format_tuple(shape);
    EXPECT_EQ(loss.grad_fn()->name(), shape.size() <= 2 ? "NllLossBackward0" : "NllLoss2DBackward0");
    loss.backward();
    for (int64_t flat : picked) grad[static_cast<size_t>(flat)] = -1.0 / static_cast<double>(count);
    const Tensor g = x.grad().contiguous();
    for (int64_t i = 0; i < x.numel(); ++i)
      ASSERT_EQ(g.data<double>()[i], grad[static_cast<size_t>(i)]) << "element " << i;
    // cross_entropy is nll_loss of log_softmax over the class dimension.
    const int64_t class_dim = shape.size() == 1 ? 0 : 1;
    EXPECT_NEAR(cross_entropy(x.detach(), target, ignore).item(),
                nll_loss(log_softmax(x.detach(), class_dim), target, ignore).item(), 0);
  }
  // Every target ignored: 0 / 0, NaN, as in PyTorch.
  EXPECT_TRUE(std::isnan(nll_loss(zeros({2, 3}), tensor({-100, -100})).item()));
  // Class probabilities per position: -sum p log q over everything, over N * positions.
  const Tensor logits = tensor({{{0.5, -1.0}, {2.0, 0.0}, {1.0, 1.0}}}, kFloat64);  // (1, 3, 2)
  const Tensor p = full({1, 3, 2}, 1.0 / 3, kFloat64);
  double reference = 0;
  for (int64_t j = 0; j < 2; ++j) {
    double m = -INFINITY, z = 0;
    for (int64_t c = 0; c < 3; ++c) m = std::max(m, logits.at({0, c, j}));
    for (int64_t c = 0; c < 3; ++c) z += std::exp(logits.at({0, c, j}) - m);
    for (int64_t c = 0; c < 3; ++c) reference -= (logits.at({0, c, j}) - m - std::log(z)) / 3;
  }
  EXPECT_NEAR(cross_entropy(logits, p).item(), reference / 2, 1e-12);
}

// retain_grad, each case as PyTorch 2.15 answers it: a computed tensor's gradient kept in its
// .grad, added up over passes, following the tensor through in-place writes (its own and those
// through a view of it); a no-op on a leaf; refused without requires_grad; and the warning
// PyTorch gives when an intermediate's .grad is read without it.
TEST(Autograd, RetainGradKeepsAnIntermediatesGradientAsPyTorchDoes) {
  auto values = [](const Tensor& t) { return t.to(kFloat64).tolist(); };
  using V = std::vector<double>;
  {
    const Tensor x = tensor({1.0, 2.0}).requires_grad_();
    const Tensor y = x * 3;
    y.retain_grad();
    y.retain_grad();  // twice is once
    backward((y * y).sum(), Tensor(), /*retain_graph=*/true);
    EXPECT_EQ(values(y.grad()), (V{6, 12}));  // 2y
    EXPECT_TRUE(y.retains_grad());
    EXPECT_FALSE(x.retains_grad());
    (y * 2).sum().backward();
    EXPECT_EQ(values(y.grad()), (V{8, 14}));  // and 2 more: it adds up like a leaf's
  }
  {
    const Tensor x = tensor({1.0, 2.0}).requires_grad_();
    x.retain_grad();  // a leaf keeps its gradient anyway
    EXPECT_FALSE(x.retains_grad());
    (x * 2).sum().backward();
    EXPECT_EQ(values(x.grad()), (V{2, 2}));
  }
  EXPECT_TRUE(throws_with<RuntimeError>([] { ones({2}).retain_grad(); },
                                        "can't retain_grad on Tensor that has requires_grad=False"));
  {
    // Written in place after retain_grad: the gradient is that of the new value, y = 6x.
    const Tensor x = tensor({1.0, 2.0}).requires_grad_();
    Tensor y = x * 3;
    y.retain_grad();
    y.mul_(2);
    (y * y).sum().backward();
    EXPECT_EQ(values(y.grad()), (V{12, 24}));
  }
  {
    // Written through a view: y becomes [2, 4, 3], its gradient 2y.
    const Tensor x = tensor({1.0, 2.0, 3.0}).requires_grad_();
    const Tensor y = x * 1;
    y.retain_grad();
    y.slice(0, 0, 2).mul_(2);
    (y * y).sum().backward();
    EXPECT_EQ(values(y.grad()), (V{4, 8, 6}));
  }
  {
    // A view that retains its own gradient.
    const Tensor x = tensor({1.0, 2.0, 3.0}).requires_grad_();
    const Tensor v = (x * 1).slice(0, 0, 2);
    v.retain_grad();
    (v * 5).sum().backward();
    EXPECT_EQ(values(v.grad()), (V{5, 5}));
  }
  {
    // Read without retain_grad: undefined, with PyTorch's warning; a tensor outside the graph
    // is a leaf and reads quietly.
    const Tensor x = tensor({1.0, 2.0}).requires_grad_();
    const Tensor y = x * 3;
    (y * y).sum().backward();
    WarningCapture caught;
    EXPECT_FALSE(y.grad().defined());
    EXPECT_FALSE((ones({2}) * 3).grad().defined());
    ASSERT_EQ(caught.messages().size(), 1u);
    EXPECT_EQ(caught.messages()[0].rfind("The .grad attribute of a Tensor that is not a leaf "
                                         "Tensor is being accessed. Its .grad attribute won't be "
                                         "populated during autograd.backward().",
                                         0),
              0u);
  }
}
