// Chapter 03: autograd is a tape.
//
// During the forward pass, record each operation and what it was applied to; during the
// backward pass, walk the record from the loss back to the inputs, applying each operation's
// rule for gradients. This program writes that idea out in about 55 lines ("ours"), checks it
// against PyTorch's own gradients for the same networks (pytorch_gradients.h, written by the
// script beside it), against the library's autograd and against finite differences, then looks
// at the graph the library records and at what its backward pass costs.
//
//   make ch03 && ./ch03_autograd
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include "pytorch_gradients.h"  // PyTorch's answers: pytorch::kXorLoss, pytorch::kRandom, ...
#include "tiny/tiny.h"

using namespace tiny;

// The tape is laid out by hand, to fit on one screen.
// clang-format off
//! [tape]
// ---- ours: the whole tape -------------------------------------------------------------------
// A Var is an array (a plain library Tensor, used like a NumPy array: it records nothing) that
// remembers how it was made: its parents, and a rule mapping the gradient arriving at it to the
// gradients of its parents.
struct Var;
using VarPtr = std::shared_ptr<Var>;
struct Var {
  Tensor data, grad;  // grad stays undefined until backward reaches this Var
  std::vector<VarPtr> parents;
  std::function<std::vector<Tensor>(const Tensor&)> rule;
};
VarPtr var(Tensor data, std::vector<VarPtr> parents = {}) {
  return std::make_shared<Var>(Var{std::move(data), Tensor(), std::move(parents), nullptr});
}

// Broadcasting used `g`'s extra leading dimensions and stretched size-1 ones: sum them back.
Tensor unbroadcast(Tensor g, const Shape& shape) {
  while (g.dim() > static_cast<int64_t>(shape.size())) g = g.sum({0});
  for (size_t d = 0; d < shape.size(); ++d)
    if (shape[d] == 1 && g.size(d) != 1) g = g.sum({static_cast<int64_t>(d)}, true);
  return g;
}

VarPtr operator+(const VarPtr& a, const VarPtr& b) {
  VarPtr out = var(a->data + b->data, {a, b});
  out->rule = [a, b](const Tensor& g) {
    return std::vector<Tensor>{unbroadcast(g, a->data.shape()), unbroadcast(g, b->data.shape())};
  };
  return out;
}

VarPtr matmul(const VarPtr& a, const VarPtr& b) {
  VarPtr out = var(matmul(a->data, b->data), {a, b});
  out->rule = [a, b](const Tensor& g) {  // dA = dC B^T, dB = A^T dC
    return std::vector<Tensor>{matmul(g, b->data.T()), matmul(a->data.T(), g)};
  };
  return out;
}

VarPtr relu(const VarPtr& a) {
  VarPtr out = var(relu(a->data), {a});
  out->rule = [a](const Tensor& g) { return std::vector<Tensor>{g * (a->data > 0.0).to(g.dtype())}; };
  return out;
}

// Mean log-loss of sigmoid(z) against labels y, as one operation. (Naive: log(p) overflows for
// huge logits; the library's version is the stable one.)
VarPtr bce_with_logits(const VarPtr& z, const Tensor& y) {
  const Tensor p = sigmoid(z->data);
  VarPtr out = var(-(y * log(p) + (1.0 - y) * log(1.0 - p)).mean(), {z});
  out->rule = [p, y](const Tensor& g) { return std::vector<Tensor>{g * (p - y) / double(y.numel())}; };
  return out;
}

void backward(const VarPtr& loss) {
  std::vector<Var*> order;  // every Var after all the Vars it was computed from
  std::unordered_set<Var*> seen;
  std::function<void(Var*)> visit = [&](Var* v) {
    if (!seen.insert(v).second) return;
    for (const VarPtr& p : v->parents) visit(p.get());
    order.push_back(v);
  };
  visit(loss.get());
  loss->grad = ones(loss->data.shape(), loss->data.dtype());
  for (auto it = order.rbegin(); it != order.rend(); ++it) {  // from the loss back to the inputs
    Var* v = *it;
    if (!v->rule) continue;
    const std::vector<Tensor> grads = v->rule(v->grad);
    for (size_t i = 0; i < grads.size(); ++i) {  // a Var used twice adds up both gradients
      Var* p = v->parents[i].get();
      p->grad = p->grad.defined() ? p->grad + grads[i] : grads[i];
    }
  }
}
// ---- end of the tape --------------------------------------------------------------------------
//! [tape]
// clang-format on

// Largest |a - b| over all elements.
static double largest_gap(const Tensor& a, const Tensor& b) { return abs(a - b).max().item(); }

// PyTorch's numbers, from the fixture, as a float64 tensor of `shape`.
static Tensor pytorch_values(const double* values, const Shape& shape) {
  return from_vector<double>(std::vector<double>(values, values + shape_numel(shape)), shape);
}

// A gradient rounded to 4 decimals, as a Python list (adding 0.0 turns -0.0 into 0.0).
static std::string rounded(const Tensor& t) {
  std::vector<double> values = t.reshape({-1}).tolist();
  for (double& v : values) v = std::round(v * 1e4) / 1e4 + 0.0;
  return format_list(values);
}

// Part 1: one step of the XOR network, by our tape, checked against PyTorch's gradients.
static void xor_step() {
  std::printf("== ours against PyTorch: one XOR step ==\n");
  const Tensor x = tensor({{1.0, 0.0}}, kFloat64), y = tensor({{1.0}}, kFloat64);
  const Tensor W1 = tensor({{0.5, -0.4}, {0.3, 0.8}}, kFloat64), b1 = tensor({0.0, 0.1}, kFloat64);
  const Tensor w2 = tensor({{0.7}, {-0.6}}, kFloat64), b2 = tensor({0.1}, kFloat64);

  //! [xor]
  // Ours: the parameters as Vars, the forward pass through our operations, our backward.
  std::vector<VarPtr> ours = {var(W1.clone()), var(b1.clone()), var(w2.clone()), var(b2.clone())};
  VarPtr loss =
      bce_with_logits(matmul(relu(matmul(var(x), ours[0]) + ours[1]), ours[2]) + ours[3], y);
  backward(loss);

  // The library: the same network on tensors that require gradients.
  std::vector<Tensor> theirs = {W1.clone().requires_grad_(), b1.clone().requires_grad_(),
                                w2.clone().requires_grad_(), b2.clone().requires_grad_()};
  Tensor h = relu(matmul(x, theirs[0]) + theirs[1]);
  Tensor ref = binary_cross_entropy_with_logits(matmul(h, theirs[2]) + theirs[3], y);
  ref.backward();
  //! [xor]

  // PyTorch's loss and gradients for the same step (pytorch_gradients.h).
  const Tensor pytorch[] = {pytorch_values(pytorch::kXorW1, {2, 2}),
                            pytorch_values(pytorch::kXorB1, {2}),
                            pytorch_values(pytorch::kXorW2, {2, 1}),
                            pytorch_values(pytorch::kXorB2, {1})};
  std::printf("loss: ours %.4f, PyTorch %.4f\n", loss->data.item(), pytorch::kXorLoss);
  const char* names[] = {"W1", "b1", "w2", "b2"};
  double library_gap = std::fabs(ref.item() - pytorch::kXorLoss);
  for (size_t i = 0; i < 4; ++i) {
    std::printf("dL/d%s: %s   largest gap to PyTorch %.1e\n", names[i],
                rounded(ours[i]->grad).c_str(), largest_gap(ours[i]->grad, pytorch[i]));
    library_gap = std::max(library_gap, largest_gap(theirs[i].grad(), pytorch[i]));
  }
  std::printf("the library's autograd, same step: largest gap to PyTorch %.1e\n", library_gap);
}

// Part 2: the same comparison on 200 random networks, in which one weight matrix serves two
// layers and the bias is stretched from shape (1, 5) to 8 rows; then a third opinion, from
// finite differences. Generator(0) draws the numbers torch.Generator().manual_seed(0) draws, so
// these are the networks PyTorch answered for in pytorch_gradients.h.
static void random_networks() {
  std::printf("\n== 200 random networks, and finite differences ==\n");
  Generator gen(0);
  double worst = 0, worst_library = 0, worst_fd = 0;
  for (int trial = 0; trial < 200; ++trial) {
    const Tensor x = randn({8, 5}, kFloat64, gen), W = randn({5, 5}, kFloat64, gen);
    const Tensor b = randn({1, 5}, kFloat64, gen), v = randn({5, 1}, kFloat64, gen);
    const Tensor y = (rand({8, 1}, kFloat64, gen) > 0.5).to(kFloat64);
    // z = relu(relu(x W + b) W) v: W is used by two layers.
    VarPtr oW = var(W.clone()), ob = var(b.clone()), ov = var(v.clone());
    backward(bce_with_logits(matmul(relu(matmul(relu(matmul(var(x), oW) + ob), oW)), ov), y));
    Tensor tW = W.clone().requires_grad_(), tb = b.clone().requires_grad_(),
           tv = v.clone().requires_grad_();
    auto library_loss = [&] {
      return binary_cross_entropy_with_logits(
          matmul(relu(matmul(relu(matmul(x, tW) + tb), tW)), tv), y);
    };
    library_loss().backward();
    const double* row = pytorch::kRandom[trial];
    const Tensor pW = pytorch_values(row, {5, 5}), pb = pytorch_values(row + 25, {1, 5}),
                 pv = pytorch_values(row + 30, {5, 1});
    worst = std::max({worst, largest_gap(oW->grad, pW), largest_gap(ob->grad, pb),
                      largest_gap(ov->grad, pv)});
    worst_library = std::max({worst_library, largest_gap(tW.grad(), pW),
                              largest_gap(tb.grad(), pb), largest_gap(tv.grad(), pv)});
    if (trial == 0) {
      // Central differences on every element of W: (L(W + h) - L(W - h)) / 2h.
      NoGradGuard no_grad;
      const double step = 1e-6;
      for (int64_t i = 0; i < 5; ++i)
        for (int64_t j = 0; j < 5; ++j) {
          Tensor cell = tW.index({i, j});
          const double keep = cell.item();
          cell.fill_(keep + step);
          const double up = library_loss().item();
          cell.fill_(keep - step);
          const double down = library_loss().item();
          cell.fill_(keep);
          worst_fd = std::max(worst_fd, std::fabs((up - down) / (2 * step) - oW->grad.at({i, j})));
        }
    }
  }
  std::printf("200 random cases, shared weight and (1, 5) bias: largest gap to PyTorch %.1e\n",
              worst);
  std::printf("the library's autograd, same networks: largest gap to PyTorch %.1e\n",
              worst_library);
  std::printf("finite differences (h = 1e-6) on the shared weight: largest gap %.1e\n", worst_fd);
}

// Part 3: the graph the library recorded, walked from the output back.
static void walk(const std::shared_ptr<Node>& fn, int depth) {
  if (!fn) return;
  std::printf("%*s%s\n", 2 * depth, "", fn->name().c_str());
  for (const Edge& next : fn->next_functions()) walk(next.fn, depth + 1);
}

static void recorded_graph() {
  std::printf("\n== the graph the library records ==\n");
  const Tensor x = tensor({{1.0, 0.0}});
  Tensor W1 = tensor({{0.5, -0.4}, {0.3, 0.8}}).requires_grad_();
  Tensor w2 = tensor({{0.7}, {-0.6}}).requires_grad_();
  //! [graph]
  Tensor z = matmul(relu(matmul(x, W1)), w2);
  walk(z.grad_fn(), 0);

  // Each forward pass records a new graph, so plain control flow decides its shape.
  Tensor W = eye(2).requires_grad_();
  for (int repeats : {1, 3}) {
    Tensor h = x;
    for (int i = 0; i < repeats; ++i) h = relu(matmul(h, W));
    std::printf("layer applied %dx: %zu nodes in the graph\n", repeats, graph_nodes(h).size());
  }
  {
    NoGradGuard no_grad;  // nothing is recorded, and nothing is saved for a backward pass
    std::printf("under no_grad: grad_fn = %s\n", relu(matmul(x, W1)).grad_fn() ? "a node" : "None");
  }
  //! [graph]
}

// Part 4: a gradient by hand, and gradients that accumulate.
static void gradients_accumulate() {
  std::printf("\n== gradients: by hand, accumulated, freed ==\n");
  //! [basics]
  Tensor x = tensor({1., 2, 3});
  Tensor w = tensor({1., 1, 1}).requires_grad_();
  Tensor loss = 0.5 * (matmul(x, w) - 5).pow(2);  // pred = x.w = 6; dL/dw = (6 - 5) x
  loss.backward(Tensor(), /*retain_graph=*/true);
  std::printf("loss = 0.5 (x.w - 5)^2 with x = [1, 2, 3]: w.grad = %s\n", w.grad().str().c_str());
  loss.backward();  // no zero_grad in between: the second gradient is added to the first
  std::printf("after a second backward without zero_grad: w.grad = %s\n", w.grad().str().c_str());
  zero_grad({w});
  std::printf("after zero_grad: w.grad = %s\n",
              w.grad().defined() ? w.grad().str().c_str() : "None");
  //! [basics]
  try {
    loss.backward();  // the second call freed what the graph had saved
  } catch (const RuntimeError& e) {
    const std::string message = e.what();
    std::printf("a third backward: %s\n", message.substr(0, message.find(" (")).c_str());
  }
}

// Part 5: what a backward pass costs, counted by the tape.
static void backward_flops(const std::optional<std::string>& csv_dir) {
  std::printf("\n== FLOPs: forward and backward, counted by the tape ==\n");
  const int64_t B = 1024, D = 256, K = 64;
  manual_seed(0);
  //! [flops]
  Tensor x = randn({B, D}).requires_grad_();  // activations from earlier layers need gradients too
  Tensor w1 = randn({D, D}).requires_grad_(), w2 = randn({D, K}).requires_grad_();
  Tensor loss = matmul(matmul(x, w1), w2).pow(2).mean();
  double forward = 0, backward = 0;
  for (const auto& node : graph_nodes(loss)) {
    if (node->name() == "AccumulateGrad") continue;  // adds into .grad: no FLOPs counted
    std::printf("%-16s forward %11.0f   backward %11.0f\n", node->name().c_str(),
                node->forward_flops(), node->backward_flops());
    if (node->name() == "MmBackward0") {
      forward += node->forward_flops();
      backward += node->backward_flops();
    }
  }
  //! [flops]
  std::printf("matmuls: forward %.0f = 2BDD + 2BDK, backward %.0f = %.0f x forward\n", forward,
              backward, backward / forward);
  std::printf("together %.0f = 6 x %lld data points x %lld parameters\n", forward + backward,
              static_cast<long long>(B), static_cast<long long>(D * D + D * K));
  Tensor first = matmul(x.detach(), w1);
  std::printf(
      "a first layer, whose input needs no gradient, skips dL/dx: backward %.0f instead of %.0f\n",
      first.grad_fn()->backward_flops(), 2 * first.grad_fn()->forward_flops());
  if (csv_dir) {
    CsvFile csv(*csv_dir, "ch03_flops.csv", {"node", "forward", "backward"});
    for (const auto& node : graph_nodes(loss))
      if (node->name() != "AccumulateGrad")
        csv.row(node->name(), node->forward_flops(), node->backward_flops());
    std::printf("\nwrote %s\n", csv.path().c_str());
  }
}

int main(int argc, char** argv) {
  return run_chapter(argc, argv, [](const std::optional<std::string>& csv_dir) {
    xor_step();
    random_networks();
    recorded_graph();
    gradients_accumulate();
    backward_flops(csv_dir);
  });
}
