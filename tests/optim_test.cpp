// optim_test.cpp: every optimizer against PyTorch's own results, bit for bit
// (tests/fixtures/optim_fixtures.txt, written by the script beside it), against float64
// references written from the equations, and its state_dict, groups and errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include "test_util.h"
#include "tiny/optim.h"
#include "tiny/tiny.h"

using namespace tiny;
using tiny::testing::throws_with;

// The statement throws E, and its message contains `text`.
#define EXPECT_THROW_MSG(statement, E, text) EXPECT_TRUE(throws_with<E>([&] { statement; }, text))

namespace {

// A trainable leaf holding `t`'s values (what nn::Parameter makes).
Tensor leaf(const Tensor& t) {
  Tensor p = t.detach().clone();
  p.requires_grad_(true);
  return p;
}

// ---- the PyTorch fixture ------------------------------------------------------------------

struct Fixture {
  // "float32 param 0" -> bits; "float32 grad 3 1" -> bits; "fused adamw float32 param 0" and
  // "fused adamw float32 state 0 exp_avg" -> bits.
  std::map<std::string, std::vector<uint64_t>> records;
};

const Fixture& fixture() {
  static const Fixture f = [] {
    Fixture out;
    std::ifstream in(std::string(TINY_SOURCE_DIR) + "/tests/fixtures/optim_fixtures.txt");
    if (!in) throw std::runtime_error("tests/fixtures/optim_fixtures.txt is missing");
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty() || line[0] == '#') continue;
      std::istringstream words(line);
      std::string kind, w, key;
      words >> kind;
      const int fields = kind == "input" ? (line.find(" grad ") != std::string::npos ? 4 : 3)
                                         : (line.find(" state ") != std::string::npos ? 6 : 5);
      for (int i = 0; i < fields && words >> w; ++i) key += (i ? " " : "") + w;
      std::vector<uint64_t> bits;
      while (words >> w) bits.push_back(std::stoull(w, nullptr, 16));
      out.records[key] = bits;
    }
    return out;
  }();
  return f;
}

DType dtype_named(const std::string& name) {
  if (name == "float32") return kFloat32;
  if (name == "float64") return kFloat64;
  return kBFloat16;
}

Tensor from_bits(const std::vector<uint64_t>& bits, DType dtype) {
  Tensor t = empty({static_cast<int64_t>(bits.size())}, dtype);
  for (size_t i = 0; i < bits.size(); ++i) {
    char* p = static_cast<char*>(t.data_ptr()) + i * t.element_size();
    std::memcpy(p, &bits[i], t.element_size());  // little-endian: the low bytes
  }
  return t;
}

std::vector<uint64_t> to_bits(const Tensor& t) {
  const Tensor c = t.detach().cpu().contiguous();
  std::vector<uint64_t> bits(c.numel(), 0);
  for (int64_t i = 0; i < c.numel(); ++i)
    std::memcpy(&bits[i], static_cast<const char*>(c.data_ptr()) + i * c.element_size(),
                c.element_size());
  return bits;
}

// The fixture's blocks: "plain" for PyTorch's default kernels, "avx2" and "avx512" for its
// vectorised ones (the last only where the machine that wrote the fixture had AVX-512).
bool fixture_has(const std::string& block) {
  return fixture().records.count(block + " sgd float32 param 0") > 0;
}

std::unique_ptr<optim::Optimizer> make(const std::string& name, std::vector<Tensor> ps) {
  using namespace optim;
  if (name == "sgd") return std::make_unique<SGD>(ps, SGD::Options{.lr = 0.1});
  if (name == "sgd_momentum")
    return std::make_unique<SGD>(
        ps, SGD::Options{.lr = 0.1, .momentum = 0.9, .dampening = 0.1, .weight_decay = 0.01});
  if (name == "sgd_nesterov")
    return std::make_unique<SGD>(
        ps, SGD::Options{.lr = 0.05, .momentum = 0.9, .weight_decay = 0.01, .nesterov = true});
  if (name == "sgd_maximize")
    return std::make_unique<SGD>(ps, SGD::Options{.lr = 0.1, .momentum = 0.5, .maximize = true});
  if (name == "adagrad") return std::make_unique<Adagrad>(ps, Adagrad::Options{.lr = 0.1});
  if (name == "adagrad_decay")
    return std::make_unique<Adagrad>(
        ps,
        Adagrad::Options{
            .lr = 0.1, .lr_decay = 0.01, .weight_decay = 0.01, .initial_accumulator_value = 0.1});
  if (name == "adagrad_document") return std::make_unique<AdaGrad>(ps, AdaGrad::Options{.lr = 0.1});
  if (name == "rmsprop") return std::make_unique<RMSprop>(ps, RMSprop::Options{.lr = 0.01});
  if (name == "rmsprop_centered")
    return std::make_unique<RMSprop>(
        ps, RMSprop::Options{
                .lr = 0.01, .alpha = 0.9, .weight_decay = 0.01, .momentum = 0.5, .centered = true});
  if (name == "adam") return std::make_unique<Adam>(ps, Adam::Options{.lr = 0.01});
  if (name == "adam_amsgrad")
    return std::make_unique<Adam>(ps,
                                  Adam::Options{.lr = 0.01, .weight_decay = 0.1, .amsgrad = true});
  if (name == "adamw")
    return std::make_unique<AdamW>(ps, AdamW::Options{.lr = 1e-2, .weight_decay = 0.1});
  if (name == "adamw_amsgrad")
    return std::make_unique<AdamW>(ps, AdamW::Options{.lr = 1e-3,
                                                      .beta1 = 0.8,
                                                      .beta2 = 0.99,
                                                      .eps = 1e-6,
                                                      .amsgrad = true,
                                                      .maximize = true});
  throw std::runtime_error("unknown case " + name);
}

// Runs case `name` in `dtype` on `device` for the fixture's five steps and compares the
// parameters and every state tensor, bit for bit, with PyTorch's in the fixture's `block`.
void expect_pytorch_bits(const std::string& name, const std::string& dtype_name, Device device,
                         const std::string& block) {
  const auto& rec = fixture().records;
  const DType dtype = dtype_named(dtype_name);
  std::vector<Tensor> ps;
  for (int k = 0; k < 2; ++k)
    ps.push_back(
        leaf(from_bits(rec.at(dtype_name + " param " + std::to_string(k)), dtype).to(device)));
  auto opt = make(name, ps);
  for (int t = 1; t <= 5; ++t) {
    for (int k = 0; k < 2; ++k)
      ps[k].set_grad(
          from_bits(rec.at(dtype_name + " grad " + std::to_string(t) + " " + std::to_string(k)),
                    dtype)
              .to(device));
    opt->step();
  }
  const std::string prefix = block + " " + name + " " + dtype_name;
  auto compare = [&](const std::string& what, const Tensor& value,
                     const std::vector<uint64_t>& want) {
    const auto got = to_bits(value);
    ASSERT_EQ(got.size(), want.size()) << what;
    const Tensor ours = value.detach().cpu().to(kFloat64);
    const Tensor theirs = from_bits(want, dtype).to(kFloat64);
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_EQ(got[i], want[i]) << prefix << ": " << what << " element " << i << " is "
                                 << ours.at({static_cast<int64_t>(i)}) << ", PyTorch's "
                                 << theirs.at({static_cast<int64_t>(i)});
  };
  // Parameter 0 has 64 elements; parameter 1 has 37, a tail after the last full vector.
  for (int k = 0; k < 2; ++k) {
    compare("parameter " + std::to_string(k), ps[k],
            rec.at(prefix + " param " + std::to_string(k)));
    for (const auto& [key, value] : opt->state(ps[k])) {
      if (key == "step") continue;
      const std::string rk = prefix + " state " + std::to_string(k) + " " + key;
      ASSERT_TRUE(rec.count(rk)) << rk << " is not in PyTorch's state";
      compare(key + " of parameter " + std::to_string(k), value, rec.at(rk));
    }
  }
}

const char* kCases[] = {"sgd",
                        "sgd_momentum",
                        "sgd_nesterov",
                        "sgd_maximize",
                        "adagrad",
                        "adagrad_decay",
                        "adagrad_document",
                        "rmsprop",
                        "rmsprop_centered",
                        "adam",
                        "adam_amsgrad",
                        "adamw",
                        "adamw_amsgrad"};

const char* kDTypes[] = {"float32", "float64", "bfloat16"};

}  // namespace

TEST(Optim, EveryOptimizerEqualsPyTorchsVectorisedKernelsBitForBit) {
  // PyTorch's AVX2 and AVX-512 builds give the same bits here (the library's one fused loop
  // imitates both): fused multiply-adds, and for bfloat16 the scalar rounding of add_'s alpha
  // product in the last n mod 32 elements.
  if (cpu_capability() != CpuCapability::Avx2)
    GTEST_SKIP() << "this processor lacks AVX2 and FMA, which the vectorised kernels need";
  for (const char* block : {"avx2", "avx512"}) {
    if (!fixture_has(block)) continue;  // written on a processor without AVX-512
    for (const char* name : kCases)
      for (const char* dtype : kDTypes) {
        SCOPED_TRACE(std::string(name) + " " + dtype + " (" + block + ")");
        expect_pytorch_bits(name, dtype, Device::cpu(), block);
      }
  }
}

TEST(Optim, ThePlainKernelsEqualPyTorchsDefaultKernels) {
  // PyTorch's kernels for processors without AVX2 round every multiply and add on their own,
  // and compute bfloat16's add_(t, alpha=a) in bfloat16: a * t is rounded before the add; so do
  // ours when asked for that family (TINY_CPU_CAPABILITY=default does it for a whole run).
  const CpuCapability before = cpu_capability();
  set_cpu_capability(CpuCapability::Default);
  for (const char* name : kCases)
    for (const char* dtype : kDTypes) {
      SCOPED_TRACE(std::string(name) + " " + dtype + " (plain)");
      expect_pytorch_bits(name, dtype, Device::cpu(), "plain");
    }
  set_cpu_capability(before);
}

TEST(Optim, OnTheGpuAsOnTheCpu) {
  if (!cuda::available()) GTEST_SKIP() << "no CUDA device: " << cuda::unavailable_reason();
  // The GPU fuses multiply-adds as the CPU's vectorised kernels do.
  for (const char* name : kCases) expect_pytorch_bits(name, "float32", Device::cuda(), "avx2");
}

// ---- float64 references written from the equations ------------------------------------------

namespace {

// AdamW as the paper writes it (Loshchilov and Hutter), in long double, for comparison with a
// tolerance: the library's float64 step must agree to a few ulps, whatever the rounding order.
struct AdamWReference {
  double lr, b1, b2, eps, wd;
  std::vector<long double> m, v;
  int t = 0;
  void step(std::vector<long double>& p, const std::vector<double>& g) {
    if (m.empty()) m.assign(p.size(), 0), v.assign(p.size(), 0);
    ++t;
    for (size_t i = 0; i < p.size(); ++i) {
      p[i] *= 1 - (long double)lr * wd;
      m[i] = b1 * m[i] + (1 - (long double)b1) * g[i];
      v[i] = b2 * v[i] + (1 - (long double)b2) * g[i] * g[i];
      const long double mhat = m[i] / (1 - std::pow((long double)b1, t));
      const long double vhat = v[i] / (1 - std::pow((long double)b2, t));
      p[i] -= lr * mhat / (std::sqrt(vhat) + eps);
    }
  }
};

}  // namespace

TEST(Optim, AdamWFollowsItsEquationsInFloat64) {
  Generator gen(7);
  const int64_t n = 257;
  Tensor w = leaf(randn({n}, kFloat64, gen));
  std::vector<long double> ref(n);
  for (int64_t i = 0; i < n; ++i) ref[i] = w.detach().at({i});
  optim::AdamW opt({w},
                   {.lr = 0.05, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.3});
  AdamWReference r{0.05, 0.9, 0.95, 1e-8, 0.3, {}, {}};
  for (int step = 0; step < 50; ++step) {
    Tensor g = randn({n}, kFloat64, gen);
    w.set_grad(g);
    opt.step();
    r.step(ref, g.tolist());
  }
  // After 50 steps the two differ by the float64 rounding of each step's few operations, carried
  // along: well under 1e-13 relative to |p| + lr (measured: about 1e-15).
  for (int64_t i = 0; i < n; ++i)
    EXPECT_NEAR(w.detach().at({i}), static_cast<double>(ref[i]),
                1e-13 * (std::fabs((double)ref[i]) + 0.05))
        << "element " << i;
}

TEST(Optim, SgdWithMomentumFollowsItsEquations) {
  Tensor w = leaf(tensor({1.0, -2.0, 3.0}, kFloat64));
  optim::SGD opt({w}, {.lr = 0.1, .momentum = 0.9});
  double p[3] = {1.0, -2.0, 3.0}, b[3] = {0, 0, 0};
  const double grads[2][3] = {{0.5, -1.0, 2.0}, {1.0, 1.0, -1.0}};
  for (int t = 0; t < 2; ++t) {
    w.set_grad(tensor({grads[t][0], grads[t][1], grads[t][2]}, kFloat64));
    opt.step();
    for (int i = 0; i < 3; ++i) {
      b[i] = t == 0 ? grads[t][i] : 0.9 * b[i] + grads[t][i];  // the first buffer is the gradient
      p[i] -= 0.1 * b[i];
    }
  }
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(w.detach().at({i}), p[i], 1e-15) << i;
}

// ---- groups, state, errors ------------------------------------------------------------------

TEST(Optim, ParameterGroupsKeepTheirOwnSettings) {
  Tensor w = leaf(ones({2}));
  Tensor b = leaf(ones({2}));
  optim::AdamW opt({{{w}, {{"weight_decay", 0.3}}}, {{b}, {{"weight_decay", 0.0}}}}, {.lr = 0.01});
  ASSERT_EQ(opt.param_groups().size(), 2u);
  EXPECT_EQ(opt.param_groups()[0].number("weight_decay"), 0.3);
  EXPECT_EQ(opt.param_groups()[1].number("weight_decay"), 0.0);
  EXPECT_EQ(opt.param_groups()[1].number("lr"), 0.01);
  // A zero gradient leaves the bias group alone (no decay), and only decays the weight.
  w.set_grad(zeros({2}));
  b.set_grad(zeros({2}));
  opt.step();
  EXPECT_FLOAT_EQ(w.detach().at({0}), 1.0f * static_cast<float>(1 - 0.01 * 0.3));
  EXPECT_EQ(b.detach().at({0}), 1.0);
  EXPECT_EQ(opt.repr().substr(0, 44), "AdamW (\nParameter Group 0\n    amsgrad: False");
  EXPECT_NE(opt.repr().find("    betas: (0.9, 0.999)\n"), std::string::npos);
  EXPECT_NE(opt.repr().find("\n\nParameter Group 1\n"), std::string::npos);
}

TEST(Optim, ErrorsArePyTorchs) {
  Tensor w = leaf(ones({2}));
  EXPECT_THROW_MSG(optim::AdamW({w}, {.lr = -1.0}), ValueError, "Invalid learning rate: -1.0");
  EXPECT_THROW_MSG(optim::AdamW({w}, {.eps = -1.0}), ValueError, "Invalid epsilon value: -1.0");
  EXPECT_THROW_MSG(optim::AdamW({w}, {.lr = std::nan("")}), ValueError,
                   "Invalid learning rate: nan");
  EXPECT_THROW_MSG(optim::AdamW({w}, {.beta1 = 1.0}), ValueError,
                   "Invalid beta parameter at index 0: 1.0");
  EXPECT_THROW_MSG(optim::AdamW({w}, {.beta2 = 1.0}), ValueError,
                   "Invalid beta parameter at index 1: 1.0");
  EXPECT_THROW_MSG(optim::AdamW({w}, {.weight_decay = -1.0}), ValueError,
                   "Invalid weight_decay value: -1.0");
  EXPECT_THROW_MSG(optim::SGD({w}, {.lr = 0.1, .momentum = -1.0}), ValueError,
                   "Invalid momentum value: -1.0");
  EXPECT_THROW_MSG(optim::SGD({w}, {.lr = 0.1, .nesterov = true}), ValueError,
                   "Nesterov momentum requires a momentum and zero dampening");
  EXPECT_THROW_MSG(optim::SGD(std::vector<Tensor>{}, {.lr = 0.1}), ValueError,
                   "optimizer got an empty parameter list");
  EXPECT_THROW_MSG(optim::SGD(std::vector<optim::GroupSpec>{{{w}}, {{w}}}, {.lr = 0.1}), ValueError,
                   "some parameters appear in more than one parameter group");
  EXPECT_THROW_MSG(optim::SGD({w * 2}, {.lr = 0.1}), ValueError,
                   "can't optimize a non-leaf Tensor");
  EXPECT_THROW_MSG(
      optim::SGD(std::vector<optim::GroupSpec>{{{w}, {{"momentm", 0.9}}}}, {.lr = 0.1}), ValueError,
      "SGD has no setting 'momentm'");
  EXPECT_THROW_MSG(
      optim::SGD(std::vector<optim::GroupSpec>{{{w}, {{"nesterov", 0.9}}}}, {.lr = 0.1}),
      ValueError, "setting 'nesterov' must be like False");
}

TEST(Optim, EveryOptimizerResumesBitIdenticallyFromItsStateDict) {
  Generator gen(3);
  const Tensor w0 = randn({33}, kFloat32, gen);
  std::vector<Tensor> grads;
  for (int t = 0; t < 6; ++t) grads.push_back(randn({33}, kFloat32, gen));
  for (const char* name : kCases) {
    SCOPED_TRACE(name);
    // Six steps straight through.
    Tensor a = leaf(w0);
    auto straight = make(name, {a});
    for (int t = 0; t < 6; ++t) a.set_grad(grads[t]), straight->step();
    // Three steps, then the state dict into a fresh optimizer, then three more.
    Tensor b = leaf(w0);
    optim::OptimizerState saved;
    {
      auto first = make(name, {b});
      for (int t = 0; t < 3; ++t) b.set_grad(grads[t]), first->step();
      saved = first->state_dict();
    }
    ASSERT_EQ(saved.param_groups.size(), 1u);
    EXPECT_EQ(saved.param_groups[0].second, std::vector<int64_t>{0});
    if (saved.state.count(0) && saved.state.at(0).count("step")) {
      EXPECT_EQ(saved.state.at(0).at("step").item(), 3.0);
    }
    auto second = make(name, {b});
    second->param_groups()[0].set("lr", 123.0);  // overwritten by the saved groups
    second->load_state_dict(saved);
    EXPECT_EQ(second->param_groups()[0].settings, saved.param_groups[0].first);
    for (int t = 3; t < 6; ++t) b.set_grad(grads[t]), second->step();
    EXPECT_EQ(to_bits(a), to_bits(b));
  }
}

TEST(Optim, LoadStateDictRefusesWhatDoesNotFit) {
  Tensor w = leaf(ones({4}));
  optim::Adam opt({w});
  w.set_grad(ones({4}));
  opt.step();
  optim::OptimizerState s = opt.state_dict();
  optim::OptimizerState no_groups = s;
  no_groups.param_groups.clear();
  EXPECT_THROW_MSG(opt.load_state_dict(no_groups), ValueError,
                   "loaded state dict has a different number of parameter groups");
  optim::OptimizerState bigger = s;
  bigger.param_groups[0].second.push_back(1);
  EXPECT_THROW_MSG(opt.load_state_dict(bigger), ValueError,
                   "loaded state dict contains a parameter group that doesn't match the size of "
                   "optimizer's group");
  optim::OptimizerState wrong_shape = s;
  wrong_shape.state[0]["exp_avg"] = zeros({3});
  EXPECT_THROW_MSG(opt.load_state_dict(wrong_shape), ValueError,
                   "'exp_avg' has shape [3] but the parameter has shape [4]");
  // A failed load changes nothing: the next step still runs on the old state.
  opt.step();
  EXPECT_EQ(opt.state(w).at("step").item(), 2.0);
  // A state tensor replaced by hand with the wrong size is caught before the kernel runs.
  opt.state(w)["exp_avg"] = zeros({2});
  EXPECT_THROW_MSG(opt.step(), RuntimeError, "optimizer state 'exp_avg' does not match");
}

// A state that has some entries but lacks one the optimizer makes together with the others
// (a state dict edited by hand, or amsgrad switched on after steps) is PyTorch's KeyError at the
// step, never a silent fresh zero: torch 2.15's Adam raises KeyError 'exp_avg' for the first.
TEST(Optim, AStateMissingAnEntryIsAKeyError) {
  Tensor w = leaf(ones({4}));
  optim::Adam adam({w});
  w.set_grad(ones({4}));
  adam.step();
  optim::OptimizerState s = adam.state_dict();
  s.state[0].erase("exp_avg");
  optim::Adam loaded({w});
  loaded.load_state_dict(s);
  EXPECT_THROW_MSG(loaded.step(), KeyError, "'exp_avg'");
  adam.param_groups()[0].settings["amsgrad"] = true;
  EXPECT_THROW_MSG(adam.step(), KeyError, "'max_exp_avg_sq'");
  optim::RMSprop rms({w}, {.centered = true});
  rms.step();
  rms.state(w).erase("step");
  EXPECT_THROW_MSG(rms.step(), KeyError, "'step'");
  // SGD makes its momentum buffer whenever it has none, as PyTorch's does.
  optim::SGD sgd({w}, {.lr = 0.1, .momentum = 0.9});
  sgd.step();
  sgd.state(w).erase("momentum_buffer");
  sgd.step();
  EXPECT_EQ(sgd.state(w).count("momentum_buffer"), 1u);
}

TEST(Optim, ZeroGradClearsOrZeroes) {
  Tensor w = leaf(ones({2}));
  optim::SGD opt({w}, {.lr = 0.1});
  w.set_grad(ones({2}));
  opt.zero_grad(false);
  ASSERT_TRUE(w.grad().defined());
  EXPECT_EQ(w.grad().at({1}), 0.0);
  opt.zero_grad();
  EXPECT_FALSE(w.grad().defined());
  opt.step();  // no gradient: nothing happens
  EXPECT_EQ(w.detach().at({0}), 1.0);
}
