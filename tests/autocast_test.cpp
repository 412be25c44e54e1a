// Autocast against PyTorch itself: tests/fixtures/autocast_pytorch.txt, which the script beside
// it wrote from PyTorch 2.5 (its CUDA lists read from ATen's header, its CPU behaviour measured
// by running each op), then the weight-cast cache, gradient dtypes and scopes.
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <map>
#include <sstream>

#include "test_util.h"
#include "tiny/amp.h"
#include "tiny/functional.h"
#include "tiny/memory.h"
#include "tiny/nn.h"
#include "tiny/op_table.h"
#include "tiny/ops.h"

namespace tiny {
namespace {

using testing::throws_with;

struct Fixture {
  std::map<std::string, std::string> cuda_list;  // op -> lower_precision_fp, fp32, promote, none
  struct CpuRow {
    std::string autocast_dtype, op, input, output;
  };
  std::vector<CpuRow> cpu;
  std::map<std::string, std::string> facts;
};

const Fixture& fixture() {
  static const Fixture f = [] {
    Fixture out;
    std::ifstream in(std::string(TINY_SOURCE_DIR) + "/tests/fixtures/autocast_pytorch.txt");
    EXPECT_TRUE(in) << "tests/fixtures/autocast_pytorch.txt is missing";
    std::string line;
    while (std::getline(in, line)) {
      std::istringstream words(line);
      std::string kind;
      words >> kind;
      if (kind == "list") {
        std::string device, op, cls;
        words >> device >> op >> cls;
        out.cuda_list[op] = cls;
      } else if (kind == "cpu") {
        Fixture::CpuRow row;
        words >> row.autocast_dtype >> row.op >> row.input >> row.output;
        out.cpu.push_back(row);
      } else if (kind == "fact") {
        const size_t eq = line.rfind(" = ");
        out.facts[line.substr(5, eq - 5)] = line.substr(eq + 3);
      }
    }
    return out;
  }();
  return f;
}

DType dtype_named(const std::string& name) {
  if (name == "float32") return kFloat32;
  if (name == "bfloat16") return kBFloat16;
  if (name == "float16") return kFloat16;
  throw ValueError("unknown dtype " + name);
}

// The fixture's ops, called as its script calls them, on a 4 x 8 input `a`.
std::map<std::string, std::function<Tensor(const Tensor&)>> calls() {
  const Tensor target = zeros({4}, kInt64);
  return {
      {"neg", [](const Tensor& a) { return neg(a); }},
      {"abs", [](const Tensor& a) { return abs(a); }},
      {"relu", [](const Tensor& a) { return relu(a); }},
      {"sqrt", [](const Tensor& a) { return sqrt(a); }},
      {"rsqrt", [](const Tensor& a) { return rsqrt(a); }},
      {"exp", [](const Tensor& a) { return exp(a); }},
      {"log", [](const Tensor& a) { return log(a); }},
      {"sigmoid", [](const Tensor& a) { return sigmoid(a); }},
      {"tanh", [](const Tensor& a) { return tanh(a); }},
      {"gelu", [](const Tensor& a) { return gelu(a); }},
      {"reciprocal", [](const Tensor& a) { return reciprocal(a); }},
      {"clamp", [](const Tensor& a) { return clamp(a, 0, 1); }},
      {"add", [](const Tensor& a) { return add(a, a); }},
      {"sub", [](const Tensor& a) { return sub(a, a); }},
      {"mul", [](const Tensor& a) { return mul(a, a); }},
      {"div", [](const Tensor& a) { return div(a, a); }},
      {"pow", [](const Tensor& a) { return pow(a, 2); }},
      {"maximum", [](const Tensor& a) { return maximum(a, a); }},
      {"minimum", [](const Tensor& a) { return minimum(a, a); }},
      {"lerp", [](const Tensor& a) { return lerp(a, a, 0.5); }},
      {"addcmul", [](const Tensor& a) { return addcmul(a, a, a); }},
      {"addcdiv", [](const Tensor& a) { return addcdiv(a, a, a); }},
      {"sum", [](const Tensor& a) { return sum(a); }},
      {"mean", [](const Tensor& a) { return mean(a); }},
      {"softmax", [](const Tensor& a) { return softmax(a, 1); }},
      {"log_softmax", [](const Tensor& a) { return log_softmax(a, 1); }},
      {"matmul", [](const Tensor& a) { return matmul(a, a.t()); }},
      {"mm", [](const Tensor& a) { return matmul(a, a.t()); }},
      {"bmm", [](const Tensor& a) { return matmul(a.unsqueeze(0), a.t().unsqueeze(0)); }},
      {"addmm", [](const Tensor& a) { return addmm(a.select(1, 0), a, a.t()); }},
      {"linear", [](const Tensor& a) { return linear(a, a, a.select(1, 0)); }},
      {"mse_loss", [](const Tensor& a) { return mse_loss(a, a); }},
      {"nll_loss", [target](const Tensor& a) { return nll_loss(a, target); }},
      {"cross_entropy_loss", [target](const Tensor& a) { return cross_entropy(a, target); }},
      {"binary_cross_entropy_with_logits",
       [](const Tensor& a) { return binary_cross_entropy_with_logits(a, a); }},
  };
}

// Every op of the fixture returns PyTorch's dtype under CPU autocast, for float32 and 16-bit
// inputs, in bfloat16 and float16: matrix products in the lower precision, losses in float32,
// and everything else (exp, softmax, sum too, unlike on CUDA) in the input's dtype.
TEST(Autocast, EachOpOnTheCpuReturnsPyTorchsDtype) {
  const auto ops = calls();
  const Tensor x = add(rand({4, 8}), scalar_tensor(0.5));
  int checked = 0;
  for (const Fixture::CpuRow& row : fixture().cpu) {
    const AutocastGuard autocast(Device::Type::CPU, dtype_named(row.autocast_dtype));
    Tensor result;
    if (row.op == "add_mixed") {
      result = add(x.to(dtype_named(row.autocast_dtype)), x);
    } else if (row.op == "zeros") {
      result = zeros({4, 8});  // a factory function: not an op on inputs, never cast
    } else {
      auto call = ops.find(row.op);
      ASSERT_NE(call, ops.end()) << "no call for " << row.op;
      result = call->second(x.to(dtype_named(row.input)));
    }
    EXPECT_EQ(dtype_name(result.dtype()), row.output)
        << row.op << " on " << row.input << " under autocast(" << row.autocast_dtype << ")";
    ++checked;
  }
  EXPECT_EQ(checked, 2 * (2 * 35 + 2));  // two autocast dtypes, 35 ops x 2 inputs, 2 extras
}

// The op table's autocast column is PyTorch's CUDA list, row by row (the rows named by the
// PyTorch op they compute). The other ops' CUDA behaviour is checked on a GPU
// (AutocastCuda.ListsHoldOnTheGpu).
TEST(Autocast, TheTablesColumnIsPyTorchsCudaList) {
  const std::map<std::string, std::string> pytorch_name = {
      {"square", "pow"}, {"cube", "pow"},       {"pow_scalar", "pow"},
      {"rsub", "sub"},   {"lerp_scalar", "lerp"}};
  const std::map<AutocastClass, std::string> words = {
      {AutocastClass::None, "none"},
      {AutocastClass::LowerPrecision, "lower_precision_fp"},
      {AutocastClass::Float32, "fp32"},
      {AutocastClass::Promote, "promote"}};
  int checked = 0;
  for (const OpInfo* row : op_table()) {
    std::string name = row->name;
    if (auto it = pytorch_name.find(name); it != pytorch_name.end()) name = it->second;
    auto listed = fixture().cuda_list.find(name);
    if (listed == fixture().cuda_list.end()) {
      // Not one of PyTorch's public ops (clamp_min, the comparisons, gelu_backward): on no list.
      EXPECT_EQ(row->autocast, AutocastClass::None) << row->name;
      continue;
    }
    EXPECT_EQ(words.at(row->autocast), listed->second) << row->name;
    ++checked;
  }
  EXPECT_GE(checked, 20);
}

// Linear under autocast, as PyTorch runs it: one AddmmBackward0 in the 16-bit dtype, whose weight
// and bias come through ToCopyBackward0 casts; the weight's cast is made once per scope and
// shared by every use in it, a new scope casts again, and the gradients land in float32.
TEST(Autocast, AWeightIsCastOncePerScope) {
  const auto& facts = fixture().facts;
  Generator gen(0);
  nn::Linear layer(8, 4, true, kFloat32, gen);
  const Tensor x = randn({2, 8});
  Tensor y1, y2;
  std::shared_ptr<Node> cast1;
  {
    const AutocastGuard autocast(Device::Type::CPU, kBFloat16);
    EXPECT_EQ(autocast_cached_casts(), 0u);
    y1 = layer.forward(x);
    EXPECT_EQ(autocast_cached_casts(), 2u);  // the weight and the bias
    y2 = layer.forward(x);
    EXPECT_EQ(autocast_cached_casts(), 2u);  // reused, not cast again
    EXPECT_EQ(y1.grad_fn()->name(), facts.at("Linear under autocast: node"));
    EXPECT_EQ("torch." + std::string(dtype_name(y1.dtype())), facts.at("Linear under autocast: output dtype"));
    cast1 = y1.grad_fn()->next_functions()[2].fn->next_functions()[0].fn;
    const auto cast2 = y2.grad_fn()->next_functions()[2].fn->next_functions()[0].fn;
    EXPECT_EQ(cast1->name(), facts.at("Linear under autocast: the weight's cast node"));
    EXPECT_EQ(facts.at("two uses of one weight in a scope share one cast"), "True");
    EXPECT_EQ(cast1, cast2);
    EXPECT_EQ(y1.grad_fn()->next_functions()[0].fn->name(),
              facts.at("the bias is cast too, through"));
    // A tensor that does not require grad is not a weight: cast at each use, never kept.
    const Tensor v = randn({8, 4});
    EXPECT_EQ(facts.at("a weight that does not require grad: cast nodes"), "None");
    EXPECT_EQ(matmul(x, v).grad_fn(), nullptr);
    EXPECT_EQ(autocast_cached_casts(), 2u);
  }
  EXPECT_EQ(autocast_cached_casts(), 0u);  // the outermost guard dropped the copies
  {
    const AutocastGuard autocast(Device::Type::CPU, kBFloat16);
    const Tensor y3 = layer.forward(x);
    EXPECT_EQ(facts.at("a new scope casts again"), "True");
    EXPECT_NE(y3.grad_fn()->next_functions()[2].fn->next_functions()[0].fn, cast1);
  }
  add(sum(y1.to(kFloat32)), sum(y2.to(kFloat32))).backward();
  EXPECT_EQ("torch." + std::string(dtype_name(layer.weight.grad().dtype())), facts.at("the weight's gradient dtype"));
  EXPECT_EQ("torch." + std::string(dtype_name(layer.bias.grad().dtype())), facts.at("the bias's gradient dtype"));
  // Both uses' gradients reached the weight through the one cast: twice one use's.
  const Tensor both = layer.weight.grad().clone();
  layer.weight.set_grad(Tensor());
  {
    const AutocastGuard autocast(Device::Type::CPU, kBFloat16);
    sum(layer.forward(x).to(kFloat32)).backward();
  }
  EXPECT_TRUE(allclose(both, mul(layer.weight.grad(), scalar_tensor(2.0))));
}

// Seed document 000's step_memory model under bfloat16 autocast: the tensors the graph keeps, in
// the order PyTorch 2.15 keeps them (tests/fixtures/ch08_pytorch.txt): each matmul's bfloat16
// input before its bfloat16 weight copy, the ReLU's result, and pow's float32 input.
TEST(Autocast, StepMemoryModelSavesWhatPyTorchSaves) {
  std::ifstream in(std::string(TINY_SOURCE_DIR) + "/tests/fixtures/ch08_pytorch.txt");
  ASSERT_TRUE(in) << "tests/fixtures/ch08_pytorch.txt is missing";
  std::vector<std::string> torch_saved;
  for (std::string line; std::getline(in, line);)
    if (line.rfind("saved ", 0) == 0) torch_saved.push_back(line.substr(6));
  ASSERT_EQ(torch_saved.size(), 5u);
  manual_seed(0);
  nn::Sequential model({std::make_shared<nn::Linear>(1024, 4096), std::make_shared<nn::ReLU>(),
                        std::make_shared<nn::Linear>(4096, 1024)});
  const Tensor x = randn({64, 1024});
  std::vector<std::string> ours;
  {
    SavedTensorLog log;
    const AutocastGuard autocast(Device::Type::CPU, kBFloat16);
    const Tensor loss = model(x).to(kFloat32).pow(2).mean();
    for (const SavedTensorRecord& r : log.records()) {
      std::ostringstream line;  // as Python prints list(t.shape): [64, 1024] bfloat16
      line << "[";
      for (size_t d = 0; d < r.shape.size(); ++d) line << (d ? ", " : "") << r.shape[d];
      line << "] " << dtype_name(r.dtype);
      ours.push_back(line.str());
    }
  }
  EXPECT_EQ(ours, torch_saved);
}

// Nested guards share the outermost one's cache; cache_enabled=false casts at every use; the
// state is restored when each guard ends.
TEST(Autocast, NestingAndTheCacheSwitch) {
  const Tensor w = randn({8, 8}).requires_grad_();
  const Tensor x = randn({2, 8});
  {
    const AutocastGuard outer(Device::Type::CPU, kBFloat16);
    (void)matmul(x, w);
    {
      const AutocastGuard inner(Device::Type::CPU, kBFloat16);
      (void)matmul(x, w);
      EXPECT_EQ(autocast_cached_casts(), 1u);
    }
    EXPECT_EQ(autocast_cached_casts(), 1u);  // only the outermost guard clears
    {
      const AutocastGuard uncached(Device::Type::CPU, kBFloat16, true, /*cache_enabled=*/false);
      const Tensor a = matmul(x, w), b = matmul(x, w);
      EXPECT_NE(a.grad_fn()->next_functions()[1].fn, b.grad_fn()->next_functions()[1].fn);
    }
    // A float32 weight cast to float16 in a float16 scope is not the bfloat16 copy.
    {
      const AutocastGuard half(Device::Type::CPU, kFloat16);
      EXPECT_EQ(matmul(x, w).dtype(), kFloat16);
    }
    EXPECT_EQ(matmul(x, w).dtype(), kBFloat16);
  }
  EXPECT_EQ(autocast_cached_casts(), 0u);
  EXPECT_FALSE(autocast_enabled(Device::Type::CPU));
}

// Backward runs each node in the dtypes of its forward pass, also when called inside a scope:
// the gradients are those of a backward called outside it.
TEST(Autocast, BackwardInsideAScopeIsNotCastAgain) {
  const Tensor x = randn({4, 8});
  auto grads = [&](bool inside) {
    const Tensor w = full({8, 3}, 0.125).requires_grad_();
    std::optional<AutocastGuard> scope;
    scope.emplace(Device::Type::CPU, kBFloat16);
    const Tensor loss = sum(exp(matmul(x, w)));  // exp of bfloat16 stays bfloat16 on the CPU
    EXPECT_EQ(loss.dtype(), kBFloat16);
    if (!inside) scope.reset();
    loss.backward();
    return w.grad();
  };
  const Tensor inside = grads(true), outside = grads(false);
  EXPECT_EQ(inside.dtype(), kFloat32);
  EXPECT_TRUE(equal(inside, outside));
}

// Errors: addmm and linear check their operands with PyTorch's messages.
TEST(Autocast, AddmmChecksItsOperands) {
  EXPECT_TRUE(throws_with<RuntimeError>(
      [] { addmm(zeros({3}), ones({2, 4}), ones({5, 3})); },
      "addmm: mat1 and mat2 shapes cannot be multiplied (2x4 and 5x3)"));
  // PyTorch 2.x calls mat1 "self" in this message.
  EXPECT_TRUE(throws_with<RuntimeError>([] { addmm(zeros({3}), ones({4}), ones({4, 3})); },
                                        "addmm: self must be a matrix, got 1-D tensor"));
  EXPECT_TRUE(throws_with<RuntimeError>([] { addmm(zeros({3}), ones({2, 4}), ones({4})); },
                                        "addmm: mat2 must be a matrix, got 1-D tensor"));
  EXPECT_TRUE(throws_with<RuntimeError>(
      [] { addmm(zeros({3}, kFloat64), ones({2, 4}), ones({4, 3})); },
      "self and mat2 must have the same dtype"));
  EXPECT_TRUE(throws_with<RuntimeError>([] { addmm(zeros({4}), ones({2, 4}), ones({4, 3})); },
                                        "expanded size"));
  // The values: the bias is added to every row, and the gradients are those of the parts.
  const Tensor b = arange(3).to(kFloat32).requires_grad_();
  const Tensor m1 = arange(8).to(kFloat32).reshape({2, 4}).requires_grad_();
  const Tensor m2 = ones({4, 3}).requires_grad_();
  const Tensor y = addmm(b, m1, m2);
  EXPECT_TRUE(equal(y, add(matmul(m1.detach(), m2.detach()), b.detach())));
  sum(y).backward();
  EXPECT_TRUE(equal(b.grad(), full({3}, 2.0)));
  EXPECT_TRUE(equal(m1.grad(), full({2, 4}, 3.0)));
  EXPECT_TRUE(equal(m2.grad(), sum(m1.detach(), {0}, true).t().expand({4, 3})));
}

// On a GPU, every op of the fixture follows PyTorch's CUDA list: lower_precision_fp ops return
// the 16-bit dtype, fp32 ops float32 from 16-bit inputs, and the others their inputs' dtype.
TEST(AutocastCuda, ListsHoldOnTheGpu) {
  if (!cuda::available()) GTEST_SKIP() << "no CUDA device: " << cuda::unavailable_reason();
  const auto ops = calls();
  const Tensor x = add(rand({4, 8}), scalar_tensor(0.5)).to(Device::cuda());
  for (DType low : {kBFloat16, kFloat16}) {
    const AutocastGuard autocast(Device::Type::CUDA, low);
    for (const auto& [op, cls] : fixture().cuda_list) {
      auto call = ops.find(op);
      ASSERT_NE(call, ops.end()) << op;
      // nll_loss's target must be on the GPU too.
      if (op == "nll_loss" || op == "cross_entropy_loss") continue;
      for (DType in : {kFloat32, low}) {
        const DType got = call->second(x.to(in)).dtype();
        const DType want = cls == "lower_precision_fp" ? low : cls == "fp32" ? kFloat32 : in;
        EXPECT_EQ(got, want) << op << " (" << cls << ") on " << dtype_name(in);
      }
    }
    const Tensor target = zeros({4}, kInt64, Device::cuda());
    EXPECT_EQ(nll_loss(x.to(low), target).dtype(), kFloat32);
    EXPECT_EQ(cross_entropy(x.to(low), target).dtype(), kFloat32);  // through its parts
  }
}

}  // namespace
}  // namespace tiny
