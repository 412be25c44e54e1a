// nn_test.cpp: modules: registration order and names, state_dict round trips and PyTorch's
// load errors, moving, the repr, and the layers' init and forward against float64 references.
#include <gtest/gtest.h>

#include "test_util.h"
#include "tiny/tiny.h"

using namespace tiny;
using tiny::testing::throws_with;

namespace {

// A small model with nesting, a shared layer and a bias turned off, to exercise the naming rule.
struct Net : nn::Module {
  std::shared_ptr<nn::Linear> first, second;
  std::shared_ptr<nn::Sequential> body;
  Net() : Module("Net") {
    first = register_module("first", std::make_shared<nn::Linear>(3, 4));
    body = register_module(
        "body", std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
                    std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(4, 2, false)}));
    second = register_module("second", first);  // the same layer twice: its tensors count once
  }
  Tensor forward(const Tensor& x) override { return body->forward(first->forward(x)); }
};

std::vector<std::string> names(const nn::Module& m) {
  std::vector<std::string> out;
  for (const auto& [name, t] : m.named_parameters()) out.push_back(name);
  return out;
}

}  // namespace

TEST(Nn, CruncherHasTheDocumentsNamesAndSizes) {
  manual_seed(0);
  nn::Cruncher model(64, 2);
  const auto sd = model.state_dict();
  ASSERT_EQ(sd.size(), 3u);
  EXPECT_EQ(sd[0].first, "layers.0.weight");
  EXPECT_EQ(sd[0].second.numel(), 64 * 64);
  EXPECT_EQ(sd[1].first, "layers.1.weight");
  EXPECT_EQ(sd[1].second.numel(), 64 * 64);
  EXPECT_EQ(sd[2].first, "final.weight");
  EXPECT_EQ(sd[2].second.shape(), (Shape{64, 1}));
  EXPECT_EQ(model.num_parameters(), 8256);  // PYTORCH_FACTS.md: D*D*2 + D
  EXPECT_EQ(model(randn({8, 64})).shape(), Shape{8});
  EXPECT_EQ(
      model.repr(),
      "Cruncher(\n  (layers): ModuleList(\n    (0): XavierLinear()\n    (1): XavierLinear()\n  )\n"
      "  (final): XavierLinear()\n)");
}

TEST(Nn, ParametersAreNamedByPathInRegistrationOrderAndEachOnce) {
  Net net;
  EXPECT_EQ(names(net), (std::vector<std::string>{"first.weight", "first.bias", "body.1.weight"}));
  EXPECT_EQ(net.parameters().size(), 3u);
  for (const Tensor& p : net.parameters()) EXPECT_TRUE(p.requires_grad() && p.is_leaf());
  EXPECT_EQ(
      net.repr(),
      "Net(\n  (first): Linear(in_features=3, out_features=4, bias=True)\n"
      "  (body): Sequential(\n    (0): ReLU()\n    (1): Linear(in_features=4, out_features=2, "
      "bias=False)\n  )\n  (second): Linear(in_features=3, out_features=4, bias=True)\n)");
}

TEST(Nn, StateDictSharesMemoryAndLoadCopies) {
  Net a, b;
  const auto sd = a.state_dict();
  EXPECT_FALSE(sd[0].second.requires_grad());  // detached, like PyTorch's
  EXPECT_TRUE(sd[0].second.shares_storage_with(a.first->weight));
  b.load_state_dict(sd);
  EXPECT_TRUE(equal(b.first->weight.detach(), a.first->weight.detach()));
  EXPECT_FALSE(b.first->weight.shares_storage_with(a.first->weight));  // copied, not shared
  EXPECT_TRUE(b.first->weight.requires_grad());
}

TEST(Nn, LoadStateDictListsEveryProblemAsPyTorchDoes) {
  manual_seed(0);
  nn::Cruncher model(64, 2);
  auto sd = model.state_dict();
  sd.erase(sd.begin() + 2);  // final.weight
  sd.emplace_back("extra", zeros({1}));
  sd[0].second = zeros({64, 32});
  // The exact text of PyTorch 1.13's RuntimeError for the same three problems.
  EXPECT_TRUE(throws_with<RuntimeError>(
      [&] { model.load_state_dict(sd); },
      "Error(s) in loading state_dict for Cruncher:\n\tMissing key(s) in state_dict: "
      "\"final.weight\". \n\tUnexpected key(s) in state_dict: \"extra\". \n\tsize mismatch for "
      "layers.0.weight: copying a param with shape torch.Size([64, 32]) from checkpoint, the shape "
      "in current model is torch.Size([64, 64])."));
  // Not strict: missing and unexpected names are fine, a wrong shape is still an error.
  auto partial = model.state_dict();
  partial.erase(partial.begin());
  partial.emplace_back("extra", zeros({1}));
  EXPECT_NO_THROW(model.load_state_dict(partial, false));
}

TEST(Nn, LinearInitAndForwardMatchTheirDefinitions) {
  manual_seed(0);
  nn::Linear layer(5, 3);
  // kaiming_uniform_(a = sqrt(5)) gives U(-1/sqrt(5), 1/sqrt(5)); the bias the same bound.
  const double bound = 1 / std::sqrt(5.0);
  for (double w : layer.weight.detach().tolist()) EXPECT_LE(std::fabs(w), bound);
  for (double b : layer.bias.detach().tolist()) EXPECT_LE(std::fabs(b), bound);
  Tensor x = randn({2, 5});
  Tensor y = layer(x);
  ASSERT_EQ(y.shape(), (Shape{2, 3}));
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 3; ++j) {
      double ref = layer.bias.detach().at({j});
      for (int64_t k = 0; k < 5; ++k) ref += x.at({i, k}) * layer.weight.detach().at({j, k});
      EXPECT_NEAR(y.at({i, j}), ref, 1e-6) << i << "," << j;
    }
  EXPECT_TRUE(throws_with<RuntimeError>(
      [&] {
        layer(randn({2, 4}));
      },
      "mat1 and mat2 shapes cannot be multiplied (2x4 and 5x3)"));
}

TEST(Nn, LinearStartsWithPyTorchsNumbers) {
  // torch.manual_seed(0); torch.nn.Linear(5, 3): weight then bias, from PyTorch 1.13 (float.hex).
  const double weight[15] = {-0x1.b6db36p-9, 0x1.eb533ep-3,  -0x1.78e92cp-2, -0x1.510558p-2,
                             -0x1.60c2a6p-3, 0x1.eb3506p-4,  -0x1.225922p-7, 0x1.6b19e4p-2,
                             -0x1.451ed0p-5, 0x1.e4b6bcp-4,  -0x1.14cb84p-3, -0x1.6810dep-4,
                             -0x1.b57facp-2, -0x1.2f4a38p-2, -0x1.798d6cp-3};
  const double bias[3] = {0x1.0f6c78p-6, 0x1.6a15bcp-3, 0x1.12c74ap-2};
  manual_seed(0);
  nn::Linear layer(5, 3);
  const std::vector<double> w = layer.weight.detach().flatten().tolist();
  for (int i = 0; i < 15; ++i) EXPECT_EQ(w[i], weight[i]) << "weight element " << i;
  for (int64_t i = 0; i < 3; ++i) EXPECT_EQ(layer.bias.detach().at({i}), bias[i]) << "bias " << i;
}

TEST(Nn, ToConvertsEveryParameterAndKeepsThemTrainable) {
  Net net;
  net.to(kFloat64);
  for (const Tensor& p : net.parameters()) {
    EXPECT_EQ(p.dtype(), kFloat64);
    EXPECT_TRUE(p.requires_grad());
  }
  EXPECT_EQ(net.first->weight.dtype(), kFloat64);  // the member itself moved
  EXPECT_TRUE(throws_with<TypeError>([&] { net.to(kInt64); }, "only accepts floating point"));
  if (cuda::available()) {
    net.to(Device::cuda());
    EXPECT_TRUE(net.first->weight.device().is_cuda());
  }
}

TEST(Nn, GradientsFlowToEveryParameterAndZeroGradClearsThem) {
  Net net;
  Tensor loss = net(randn({6, 3})).sum();
  loss.backward();
  for (const Tensor& p : net.parameters()) EXPECT_TRUE(p.grad().defined());
  net.zero_grad();
  for (const Tensor& p : net.parameters()) EXPECT_FALSE(p.grad().defined());
}

TEST(Nn, ModesAndErrors) {
  Net net;
  net.eval();
  EXPECT_FALSE(net.body->is_training());
  net.train();
  EXPECT_TRUE(net.first->is_training());
  nn::ModuleList list;
  EXPECT_TRUE(throws_with<NotImplementedError>(
      [&] { list(zeros({1})); },
      "Module [ModuleList] is missing the required \"forward\" function"));
  EXPECT_TRUE(throws_with<IndexError>([&] { list[0]; }, "index 0 is out of range"));
  EXPECT_TRUE(throws_with<RuntimeError>([&] { nn::Parameter(zeros({2}, kInt64)); },
                                        "Only Tensors of floating point"));
  EXPECT_EQ(nn::GELU().repr(), "GELU(approximate='none')");
}

// A module that registers whatever it is told to, as torch.nn.Module's add_module and
// register_parameter let a Python user do.
struct Registrar : nn::Module {
  Tensor a = nn::Parameter(ones({1})), b = nn::Parameter(zeros({2}));
  Registrar() : Module("Registrar") {}
  void param(const std::string& name, Tensor* slot) { register_parameter(name, slot); }
  void child(const std::string& name, std::shared_ptr<Module> m) { register_module(name, m); }
};

TEST(Nn, NamesAreCheckedAndReRegisteringReplacesAsInPyTorch) {
  Registrar m;
  m.param("w", &m.a);
  m.child("act", std::make_shared<nn::ReLU>());
  // The same name again, of the same kind, replaces the entry and keeps its place.
  m.param("w", &m.b);
  m.child("act", std::make_shared<nn::GELU>());
  const auto named = m.named_parameters();
  ASSERT_EQ(named.size(), 1u);
  EXPECT_EQ(named[0].first, "w");
  EXPECT_EQ(named[0].second.shape(), (Shape{2}));
  EXPECT_EQ(m.repr(), "Registrar(\n  (act): GELU(approximate='none')\n)");
  // A name of the other kind, or one PyTorch's dotted paths could not spell, is a KeyError.
  EXPECT_TRUE(
      throws_with<KeyError>([&] { m.param("act", &m.a); }, "attribute 'act' already exists"));
  EXPECT_TRUE(throws_with<KeyError>([&] { m.child("w", std::make_shared<nn::ReLU>()); },
                                    "attribute 'w' already exists"));
  EXPECT_TRUE(throws_with<KeyError>([&] { m.child("a.b", std::make_shared<nn::ReLU>()); },
                                    "module name can't contain \".\", got: a.b"));
  EXPECT_TRUE(throws_with<KeyError>([&] { m.param("", &m.a); },
                                    "parameter name can't be empty string \"\""));
  EXPECT_EQ(m.named_parameters().size(), 1u);  // nothing was registered by the failed calls
}

TEST(Nn, TrainingOnTheGpuFollowsTheCpu) {
  if (!cuda::available()) GTEST_SKIP() << "no CUDA device: " << cuda::unavailable_reason();
  // The documents' train_loop, once per device from the same start and batches. cuBLAS and the
  // CPU's BLAS add the 16 products of each row in other orders, so the losses agree to float32
  // rounding carried through ten steps, not bit for bit.
  std::vector<double> losses[2];
  for (int k = 0; k < 2; ++k) {
    const Device device = k == 0 ? Device::cpu() : Device::cuda();
    manual_seed(0);
    nn::Cruncher model(16, 0);
    model.to(device);
    optim::SGD opt(model.parameters(), {.lr = 0.01});
    const Tensor true_w = arange(0, 16, 1, kFloat32).to(device);
    for (int t = 0; t < 10; ++t) {
      Tensor x = randn({4, 16}).to(device);
      Tensor loss = mse_loss(model(x), matmul(x, true_w));
      loss.backward();
      opt.step();
      opt.zero_grad();
      losses[k].push_back(loss.item());
    }
  }
  for (int t = 0; t < 10; ++t) EXPECT_NEAR(losses[1][t], losses[0][t], 1e-4 * losses[0][t]) << t;
}

// Linear's graph reads as PyTorch's: one AddmmBackward0 for the product and the bias, whose
// inputs are the bias, the input (which needs no gradient: no edge) and weight.t(), a TBackward0
// node in front of the weight's AccumulateGrad.
TEST(Nn, LinearTransposesItsWeightWithT) {
  nn::Linear layer(3, 2);
  const Tensor y = layer.forward(ones({4, 3}));
  std::vector<std::string> names;
  for (const auto& node : graph_nodes(y)) names.push_back(node->name());
  EXPECT_EQ(names, (std::vector<std::string>{"AddmmBackward0", "AccumulateGrad", "TBackward0",
                                             "AccumulateGrad"}));
  const auto& next = y.grad_fn()->next_functions();
  ASSERT_EQ(next.size(), 3u);
  EXPECT_EQ(next[1].fn, nullptr);
  // Any other contiguous input is flattened into the same addmm, viewed back as PyTorch 2.x's
  // _unsafe_view (1.13: ViewBackward0 for 3-D, matmul and then the bias for the others); a
  // strided one goes through matmul and adds the bias after (AddBackward0).
  EXPECT_EQ(layer.forward(ones({5, 4, 3})).grad_fn()->name(), "UnsafeViewBackward0");
  EXPECT_EQ(layer.forward(ones({3})).grad_fn()->name(), "UnsafeViewBackward0");
  EXPECT_EQ(layer.forward(ones({5, 3, 4}).transpose(1, 2)).grad_fn()->name(), "AddBackward0");
}
