// GradScaler (amp.h) against PyTorch 2.5.1's torch.amp.GradScaler: the runs, misuse cases and
// facts that tests/fixtures/grad_scaler_pytorch.py recorded in grad_scaler_pytorch.txt are
// replayed here and compared line by line; then what the fixture cannot show (a CUDA scaler
// without CUDA, checkpoints).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "test_util.h"
#include "tiny/tiny.h"

namespace tiny {
namespace {

using amp::GradScaler;
using testing::TempDir;

// ---- the fixture --------------------------------------------------------------------------------

std::vector<std::string> split(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

// A number as the fixture writes it: Python's repr, and "nan" for every NaN.
std::string num(double x) { return std::isnan(x) ? "nan" : repr(x); }

std::string nums(const Tensor& t) {
  std::string out;
  for (double v : t.detach().to(kFloat64).contiguous().tolist()) {
    if (!out.empty()) out += ' ';
    out += num(v);
  }
  return out;
}

// One training run: the lines that set it up, and the lines it produced.
struct Scenario {
  double tolerance = 0;
  std::vector<std::vector<std::string>> setup;  // scaler, load, mode, param, optimizer, input
  std::vector<std::string> expected;            // step, grad, value, state_dict
};

struct Fixture {
  std::map<std::string, Scenario> scenarios;
  std::map<std::string, std::pair<std::string, std::string>> errors;  // case: (type, message)
  std::map<std::string, std::string> facts;                           // name: the rest

  static const Fixture& get() {
    static const Fixture fixture = load();
    return fixture;
  }

 private:
  static Fixture load() {
    const std::string path =
        std::string(TINY_SOURCE_DIR) + "/tests/fixtures/grad_scaler_pytorch.txt";
    std::ifstream in(path);
    if (!in) throw std::runtime_error(path + " is missing");
    Fixture f;
    Scenario* open = nullptr;
    for (std::string line; std::getline(in, line);) {
      const std::vector<std::string> w = split(line);
      if (w.empty()) continue;
      const std::string rest = line.substr(std::min(line.size(), w[0].size() + 1));
      if (w[0] == "scenario") {
        open = &f.scenarios[w.at(1)];
        open->tolerance = std::stod(w.at(2));
      } else if (w[0] == "end") {
        open = nullptr;
      } else if (w[0] == "error") {
        // The message runs to the end of the line, spaces and all.
        const size_t at = line.find(' ', line.find(' ', 6) + 1);
        f.errors[w.at(1)] = {w.at(2), line.substr(at + 1)};
      } else if (w[0] == "fact") {
        f.facts[w.at(1)] = rest.substr(w.at(1).size() + 1);
      } else if (open &&
                 (w[0] == "step" || w[0] == "grad" || w[0] == "value" || w[0] == "state_dict")) {
        open->expected.push_back(line);
      } else if (open) {
        open->setup.push_back(w);
      } else {
        throw std::runtime_error("unexpected fixture line: " + line);
      }
    }
    return f;
  }
};

// Compares two lines word by word; words that are both numbers may differ by `tolerance`
// relative to max(1, |expected|), and nan matches nan.
void expect_same_line(const std::string& got, const std::string& want, double tolerance) {
  const std::vector<std::string> a = split(got), b = split(want);
  bool same = a.size() == b.size();
  for (size_t i = 0; same && i < a.size(); ++i) {
    if (a[i] == b[i]) continue;
    char* end_a = nullptr;
    char* end_b = nullptr;
    const double x = std::strtod(a[i].c_str(), &end_a);
    const double y = std::strtod(b[i].c_str(), &end_b);
    same = *end_a == '\0' && *end_b == '\0' && !std::isnan(x) && !std::isnan(y) &&
           std::isfinite(y) && std::fabs(x - y) <= tolerance * std::max(1.0, std::fabs(y));
  }
  EXPECT_TRUE(same) << "tiny:    " << got << "\nPyTorch: " << want;
}

// ---- replaying a run ----------------------------------------------------------------------------

Tensor values_tensor(const std::vector<std::string>& words, size_t from, DType dtype) {
  std::vector<double> v;
  for (size_t i = from; i < words.size(); ++i) v.push_back(std::strtod(words[i].c_str(), nullptr));
  return from_vector(v, {static_cast<int64_t>(v.size())}).to(dtype);
}

DType dtype_named(const std::string& name) {
  if (name == "float32") return kFloat32;
  if (name == "bfloat16") return kBFloat16;
  throw std::runtime_error("no dtype " + name);
}

// Runs the scenario with tiny and returns the lines it produces, in the fixture's format.
std::vector<std::string> replay(const Scenario& s) {
  GradScaler::Options options;
  std::optional<amp::GradScalerState> load;
  bool explicit_unscale = false;
  std::vector<std::pair<std::string, Tensor>> params;  // in the fixture's order
  std::vector<std::unique_ptr<optim::Optimizer>> optimizers;
  std::map<int, std::map<std::string, std::vector<std::string>>> inputs;
  auto param = [&](const std::string& name) {
    for (auto& [n, t] : params)
      if (n == name) return t;
    throw std::runtime_error("no parameter " + name);
  };
  for (const auto& w : s.setup) {
    if (w[0] == "scaler" || w[0] == "load") {
      amp::GradScalerState state;
      for (size_t i = 1; i + 1 < w.size(); i += 2) {
        const double v = std::stod(w[i + 1]);
        if (w[i] == "init_scale") options.init_scale = v;
        else if (w[i] == "scale") state.scale = v;
        else if (w[i] == "growth_factor") options.growth_factor = state.growth_factor = v;
        else if (w[i] == "backoff_factor") options.backoff_factor = state.backoff_factor = v;
        else if (w[i] == "growth_interval")
          options.growth_interval = state.growth_interval = static_cast<int64_t>(v);
        else if (w[i] == "_growth_tracker") state.growth_tracker = static_cast<int64_t>(v);
        else throw std::runtime_error("unknown scaler setting " + w[i]);
      }
      if (w[0] == "load") load = state;
    } else if (w[0] == "mode") {
      explicit_unscale = w.at(1) == "explicit_unscale";
    } else if (w[0] == "param") {
      Tensor t = values_tensor(w, 3, dtype_named(w.at(2)));
      t.requires_grad_();
      params.emplace_back(w[1], t);
    } else if (w[0] == "optimizer") {
      if (w.at(2) != "lr" || w.at(4) != "params") throw std::runtime_error("optimizer line");
      std::vector<Tensor> group;
      for (size_t i = 5; i < w.size(); ++i) group.push_back(param(w[i]));
      const double lr = std::stod(w[3]);
      if (w[1] == "SGD")
        optimizers.push_back(std::make_unique<optim::SGD>(group, optim::SGD::Options{.lr = lr}));
      else if (w[1] == "AdamW")
        optimizers.push_back(
            std::make_unique<optim::AdamW>(group, optim::AdamW::Options{.lr = lr}));
      else throw std::runtime_error("unknown optimizer " + w[1]);
    } else if (w[0] == "input") {
      inputs[std::stoi(w.at(1))][w.at(2)] = w;
    }
  }

  GradScaler scaler(Device::Type::CPU, options);
  if (load) scaler.load_state_dict(load);
  std::vector<std::string> lines;
  for (const auto& [step, coefficients] : inputs) {
    for (auto& opt : optimizers) opt->zero_grad();
    Tensor loss;
    for (const auto& [name, p] : params) {
      const Tensor term = (p * values_tensor(coefficients.at(name), 3, p.dtype())).sum();
      loss = loss.defined() ? loss + term : term;
    }
    const double used = scaler.get_scale();
    scaler.scale(loss).backward();
    if (explicit_unscale)
      for (auto& opt : optimizers) scaler.unscale_(*opt);
    std::string skipped;
    for (auto& opt : optimizers) {
      std::vector<Tensor> before;
      for (const auto& g : opt->param_groups())
        for (const Tensor& p : g.params) before.push_back(p.detach().clone());
      scaler.step(*opt);
      bool unchanged = true;
      size_t k = 0;
      for (const auto& g : opt->param_groups())
        for (const Tensor& p : g.params) unchanged = unchanged && equal(before[k++], p.detach());
      skipped += unchanged ? " 1" : " 0";
    }
    scaler.update();
    lines.push_back("step " + std::to_string(step) + " scale " + num(used) + " skipped" + skipped +
                    " next_scale " + num(scaler.get_scale()) + " tracker " +
                    std::to_string(scaler.growth_tracker()));
    for (const auto& [name, p] : params)
      lines.push_back("grad " + std::to_string(step) + " " + name + " " + nums(p.grad()));
    for (const auto& [name, p] : params)
      lines.push_back("value " + std::to_string(step) + " " + name + " " + nums(p));
  }
  const amp::GradScalerState sd = scaler.state_dict().value();
  lines.push_back("state_dict scale " + num(sd.scale) + " growth_factor " + num(sd.growth_factor) +
                  " backoff_factor " + num(sd.backoff_factor) + " growth_interval " +
                  std::to_string(sd.growth_interval) + " _growth_tracker " +
                  std::to_string(sd.growth_tracker));
  return lines;
}

const char* const kScenarios[] = {"sgd_interval3",         "adamw_default",  "odd_factors",
                                  "growth_capped",         "two_optimizers", "explicit_unscale",
                                  "tracker_past_interval", "bfloat16"};

TEST(GradScaler, TheFixtureHoldsEveryRunThisTestReplays) {
  std::set<std::string> names(std::begin(kScenarios), std::end(kScenarios));
  std::set<std::string> in_file;
  for (const auto& entry : Fixture::get().scenarios) in_file.insert(entry.first);
  EXPECT_EQ(names, in_file);
}

class PyTorchRun : public ::testing::TestWithParam<const char*> {};

// Step by step: the scale each step ran with, which steps were skipped, the scale and the
// tracker after update(), the unscaled gradients and the parameters.
TEST_P(PyTorchRun, MatchesPyTorchStepByStep) {
  const Scenario& s = Fixture::get().scenarios.at(GetParam());
  const std::vector<std::string> got = replay(s);
  ASSERT_EQ(got.size(), s.expected.size());
  for (size_t i = 0; i < got.size(); ++i) expect_same_line(got[i], s.expected[i], s.tolerance);
}

INSTANTIATE_TEST_SUITE_P(GradScaler, PyTorchRun, ::testing::ValuesIn(kScenarios),
                         [](const auto& info) { return std::string(info.param); });

// ---- misuse: PyTorch's exception and message ----------------------------------------------------

void expect_pytorch_error(const std::string& name, const std::function<void()>& fn) {
  SCOPED_TRACE(name);
  const auto& [type, message] = Fixture::get().errors.at(name);
  try {
    fn();
  } catch (const Error& e) {
    EXPECT_EQ(testing::python_exception_name(e) + ": " + e.what(), type + ": " + message);
    return;
  }
  ADD_FAILURE() << "no error; PyTorch raises " << type << ": " << message;
}

// A scaler and an SGD optimizer over one parameter whose gradient has been scaled: the
// fixture's setup().
struct Scaled {
  Tensor p = tensor({1.0, 2.0}).requires_grad_();
  optim::SGD opt{{p}, optim::SGD::Options{.lr = 0.25}};
  GradScaler scaler{Device::Type::CPU};
  Scaled() { scaler.scale((p * 2.0).sum()).backward(); }
};

TEST(GradScaler, RefusesCallsOutOfOrderAsPyTorchDoes) {
  expect_pytorch_error("unscale_twice", [] {
    Scaled s;
    s.scaler.unscale_(s.opt);
    s.scaler.unscale_(s.opt);
  });
  expect_pytorch_error("unscale_after_step", [] {
    Scaled s;
    s.scaler.step(s.opt);
    s.scaler.unscale_(s.opt);
  });
  expect_pytorch_error("step_twice", [] {
    Scaled s;
    s.scaler.step(s.opt);
    s.scaler.step(s.opt);
  });
  expect_pytorch_error("update_without_step", [] {
    Scaled s;
    s.scaler.update();
  });
  expect_pytorch_error("step_without_grads", [] {
    Scaled s;
    s.p.set_grad(Tensor());
    s.scaler.step(s.opt);
  });
  for (const std::string method : {"unscale_", "step", "update"})
    expect_pytorch_error((method == "unscale_" ? "unscale" : method) + "_before_scale", [&] {
      Tensor p = tensor({1.0}).requires_grad_();
      p.set_grad(ones({1}));
      optim::SGD opt({p}, {.lr = 0.25});
      GradScaler scaler(Device::Type::CPU);
      if (method == "unscale_") scaler.unscale_(opt);
      if (method == "step") scaler.step(opt);
      if (method == "update") scaler.update();
    });
}

TEST(GradScaler, RefusesFloat16GradientsAndChangesNone) {
  Tensor p = tensor({1.0, 2.0}, kFloat16).requires_grad_();
  Tensor q = tensor({1.0, 2.0}).requires_grad_();
  optim::SGD opt({q, p}, {.lr = 0.25});
  GradScaler scaler(Device::Type::CPU);
  scaler.scale(ones({}));
  p.set_grad(ones({2}, kFloat16));
  q.set_grad(full({2}, 4.0));
  expect_pytorch_error("fp16_grads", [&] { scaler.step(opt); });
  EXPECT_EQ(nums(q.grad()), "4.0 4.0");  // checked before anything was unscaled
  EXPECT_EQ(nums(q), "1.0 2.0");
}

TEST(GradScaler, ChecksItsArgumentsOnlyWhenEnabled) {
  expect_pytorch_error("growth_factor_1",
                       [] { GradScaler(Device::Type::CPU, {.growth_factor = 1.0}); });
  expect_pytorch_error("backoff_factor_1",
                       [] { GradScaler(Device::Type::CPU, {.backoff_factor = 1.0}); });
  expect_pytorch_error("both_factors_wrong", [] {
    GradScaler(Device::Type::CPU, {.growth_factor = 0.5, .backoff_factor = 2.0});
  });
  EXPECT_NO_THROW(GradScaler(Device::Type::CPU, {.growth_factor = 0.5, .enabled = false}));
}

TEST(GradScaler, LoadingAnEmptyStateIsRefused) {
  expect_pytorch_error("load_empty",
                       [] { GradScaler(Device::Type::CPU).load_state_dict(std::nullopt); });
}

TEST(GradScaler, UpdateTakesANewScale) {
  const auto& facts = Fixture::get().facts;
  {
    Scaled s;
    s.scaler.step(s.opt);
    s.scaler.update(1024.0);
    EXPECT_EQ("get_scale " + num(s.scaler.get_scale()) + " tracker " +
                  std::to_string(s.scaler.growth_tracker()),
              facts.at("update_new_scale"));
    // The iteration is over: a new one may step again.
    s.scaler.scale((s.p * 2.0).sum()).backward();
    EXPECT_NO_THROW(s.scaler.step(s.opt));
  }
  {
    Scaled s;
    s.scaler.step(s.opt);
    s.scaler.update(full({}, 0.1));
    EXPECT_EQ("get_scale " + num(s.scaler.get_scale()), facts.at("update_new_scale_tensor"));
  }
  const auto new_scale = [](Tensor t) {
    return [t] {
      Scaled s;
      s.scaler.step(s.opt);
      s.scaler.update(t);
    };
  };
  expect_pytorch_error("new_scale_two_elements", new_scale(ones({2})));
  expect_pytorch_error("new_scale_requires_grad", new_scale(ones({1}).requires_grad_()));
  expect_pytorch_error("new_scale_shape_1", new_scale(full({1}, 0.1)));
}

// ---- facts --------------------------------------------------------------------------------------

TEST(GradScaler, ScaleMultipliesByA0DimFloat32Tensor) {
  const auto& facts = Fixture::get().facts;
  GradScaler s(Device::Type::CPU);
  Tensor out = s.scale(scalar_tensor(3.0).requires_grad_());
  EXPECT_EQ("shape " + std::string(out.dim() == 0 ? "[]" : "[?]") + " dtype " +
                dtype_name(out.dtype()) + " value " + num(out.item()) + " grad_fn " +
                out.grad_fn()->name(),
            facts.at("scale_of_0dim_loss"));
  EXPECT_EQ("dtype " + std::string(dtype_name(s.scale(scalar_tensor(3.0, kFloat16)).dtype())),
            facts.at("scale_of_float16_0dim"));
  EXPECT_EQ("dtype " + std::string(dtype_name(s.scale(ones({2}, kFloat16)).dtype())),
            facts.at("scale_of_float16_vector"));
  const std::vector<Tensor> outs = s.scale(std::vector<Tensor>{ones({2}), full({}, 0.5)});
  EXPECT_EQ("values " + nums(outs[0]) + " " + nums(outs[1]), facts.at("scale_of_list"));
  EXPECT_TRUE(s.scale(std::vector<Tensor>{}).empty());
}

TEST(GradScaler, GetScaleIsInitScaleUntilTheFirstScale) {
  const auto& facts = Fixture::get().facts;
  GradScaler s(Device::Type::CPU, {.init_scale = 0.1});
  const double before = s.get_scale();
  s.scale(ones({}));
  EXPECT_EQ("before " + num(before) + " after " + num(s.get_scale()), facts.at("get_scale_of_0.1"));
  GradScaler fresh(Device::Type::CPU, {.init_scale = 3.0});
  EXPECT_EQ("scale " + num(fresh.state_dict()->scale) + " _growth_tracker " +
                std::to_string(fresh.state_dict()->growth_tracker),
            facts.at("fresh_state_dict"));
}

TEST(GradScaler, LoadStateDictBeforeTheFirstScaleSetsWhereItStarts) {
  GradScaler s(Device::Type::CPU);
  s.load_state_dict(amp::GradScalerState{0.1, 3.0, 0.25, 7, 4});
  const double before = s.get_scale();
  s.scale(ones({}));
  EXPECT_EQ("get_scale " + num(before) + " after_scale " + num(s.get_scale()) + " tracker " +
                std::to_string(s.growth_tracker()) + " growth_factor " +
                num(s.get_growth_factor()) + " backoff_factor " + num(s.get_backoff_factor()) +
                " growth_interval " + std::to_string(s.get_growth_interval()),
            Fixture::get().facts.at("load_before_scale"));
  // After the first scale(), loading overwrites the tensors themselves.
  s.load_state_dict(amp::GradScalerState{512.0, 2.0, 0.5, 3, 2});
  EXPECT_EQ(s.get_scale(), 512.0);
  EXPECT_EQ(s.growth_tracker(), 2);
  EXPECT_EQ(s.scale(ones({})).item(), 512.0);
}

TEST(GradScaler, ADisabledScalerPassesEverythingThrough) {
  GradScaler s(Device::Type::CPU, {.growth_factor = 0.5, .enabled = false});
  Tensor x = scalar_tensor(2.0).requires_grad_();
  Tensor p = tensor({1.0, 2.0}).requires_grad_();
  optim::SGD opt({p}, {.lr = 0.25});
  (s.scale(x) * 1.0).backward();
  p.set_grad(tensor({INFINITY, 4.0}));
  s.unscale_(opt);
  s.step(opt);
  s.update();
  s.load_state_dict(std::nullopt);
  const Tensor same = s.scale(x);
  const bool is_x = same.shares_storage_with(x) && same.autograd_meta() == x.autograd_meta();
  EXPECT_EQ(std::string("same_tensor ") + (is_x ? "True" : "False") + " get_scale " +
                num(s.get_scale()) + " state_dict_size " + (s.state_dict() ? "5" : "0") +
                " tracker " + std::to_string(s.growth_tracker()) + " enabled " +
                (s.is_enabled() ? "True" : "False") + " param " + nums(p) + " grad " +
                nums(p.grad()),
            Fixture::get().facts.at("disabled"));
}

// PyTorch disables a CUDA scaler when CUDA cannot run (and warns); so does tiny (silently).
TEST(GradScaler, ACudaScalerWithoutCudaIsDisabled) {
  GradScaler s(Device::Type::CUDA, {.growth_factor = 0.5});  // unchecked when disabled
  EXPECT_EQ(s.is_enabled(), cuda::available());
}

// ---- checkpoints --------------------------------------------------------------------------------

// A Linear layer trained with SGD under a scaler that grows every 2 clean steps; every third
// step's loss is multiplied by 2^126, which overflows float32 once scaled.
struct ScaledRun {
  std::unique_ptr<nn::Linear> model;
  std::unique_ptr<optim::SGD> opt;
  std::unique_ptr<GradScaler> scaler;
  std::vector<std::string> log;
  ScaledRun(uint64_t seed, double init_scale) {
    Generator g(seed);
    model = std::make_unique<nn::Linear>(4, 3, true, kFloat32, g);
    opt = std::make_unique<optim::SGD>(std::vector<Tensor>{model->weight, model->bias},
                                       optim::SGD::Options{.lr = 0.1, .momentum = 0.9});
    scaler = std::make_unique<GradScaler>(
        Device::Type::CPU, GradScaler::Options{.init_scale = init_scale, .growth_interval = 2});
  }
  void train(int from, int to) {
    for (int step = from; step < to; ++step) {
      Generator g(100 + step);
      Tensor loss = (*model)(randn({5, 4}, kFloat32, g)).square().mean();
      if (step % 3 == 2) loss = loss * std::ldexp(1.0, 126);
      opt->zero_grad();
      scaler->scale(loss).backward();
      scaler->step(*opt);
      scaler->update();
      log.push_back(num(scaler->get_scale()) + " " + std::to_string(scaler->growth_tracker()));
    }
  }
};

TEST(GradScaler, ACheckpointResumesTheScaleAndTheRunExactly) {
  TempDir dir;
  const std::string path = dir.file("scaled.safetensors");
  ScaledRun straight(1, 1024.0);
  straight.train(0, 14);
  ScaledRun first(1, 1024.0);
  first.train(0, 7);
  save_checkpoint(path, *first.model, *first.opt, *first.scaler, {{"step", "7"}});
  ScaledRun resumed(2, 8.0);  // another init and another scale: both come from the file
  const auto extra = load_checkpoint(path, *resumed.model, *resumed.opt, *resumed.scaler);
  EXPECT_EQ(extra, (std::map<std::string, std::string>{{"step", "7"}}));
  EXPECT_EQ(resumed.scaler->get_scale(), first.scaler->get_scale());
  EXPECT_EQ(resumed.scaler->growth_tracker(), first.scaler->growth_tracker());
  resumed.train(7, 14);
  const std::vector<std::string> tail(straight.log.begin() + 7, straight.log.end());
  EXPECT_EQ(resumed.log, tail);
  EXPECT_TRUE(equal(straight.model->weight.detach(), resumed.model->weight.detach()));
  EXPECT_TRUE(equal(straight.model->bias.detach(), resumed.model->bias.detach()));
  // The resumed part both backed off and grew.
  int backoffs = 0, growths = 0;
  for (size_t i = 7; i < straight.log.size(); ++i) {
    const double before = std::stod(straight.log[i - 1]), after = std::stod(straight.log[i]);
    backoffs += after < before;
    growths += after > before;
  }
  EXPECT_GT(backoffs, 0);
  EXPECT_GT(growths, 0);
}

// A model, its optimizer and a scaler, for the checkpoint tests.
struct Trio {
  nn::Linear model{2, 1};
  optim::SGD opt{{model.weight, model.bias}, optim::SGD::Options{.lr = 0.25}};
  GradScaler scaler;
  explicit Trio(GradScaler::Options options = {}) : scaler(Device::Type::CPU, options) {}
};

// The metadata is the JSON Python's json.dumps writes for PyTorch's state_dict, so
// `scaler.load_state_dict(json.loads(metadata["grad_scaler"]))` reads it back.
TEST(GradScaler, TheCheckpointHoldsPyTorchsStateDictAsJson) {
  TempDir dir;
  const std::string path = dir.file("ck.safetensors");
  Trio t;
  t.scaler.load_state_dict(amp::GradScalerState{16384.0, 2.0, 0.5, 3, 1});
  save_checkpoint(path, t.model, t.opt, t.scaler);
  EXPECT_EQ(load_safetensors(path).metadata.at("grad_scaler"),
            Fixture::get().facts.at("state_dict_json"));
  // The plain loader ignores it; the scaler's loader needs it.
  EXPECT_EQ(load_checkpoint(path, t.model, t.opt).count("grad_scaler"), 0u);
  save_checkpoint(path, t.model, t.opt);
  try {
    load_checkpoint(path, t.model, t.opt, t.scaler);
    ADD_FAILURE() << "loaded a scaler from a checkpoint without one";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("has no \"grad_scaler\" metadata"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(save_checkpoint(path, t.model, t.opt, {{"grad_scaler", "{}"}}), ValueError);
}

TEST(GradScaler, ADisabledScalersCheckpointCannotFeedAnEnabledOne) {
  TempDir dir;
  const std::string path = dir.file("ck.safetensors");
  Trio saved({.enabled = false});
  save_checkpoint(path, saved.model, saved.opt, saved.scaler);
  EXPECT_EQ(load_safetensors(path).metadata.at("grad_scaler"), "{}");
  EXPECT_NO_THROW(load_checkpoint(path, saved.model, saved.opt, saved.scaler));
  Trio target;
  target.model.weight.detach().fill_(7.0);
  expect_pytorch_error("load_empty",
                       [&] { load_checkpoint(path, target.model, target.opt, target.scaler); });
  EXPECT_EQ(target.model.weight.detach().at({0, 0}), 7.0);  // refused before anything changed
  EXPECT_EQ(target.scaler.get_scale(), 65536.0);
}

// A hand-edited checkpoint: the interval must be a whole number an int64 holds, the tracker one
// an int32 holds (it is an int32 tensor, as in PyTorch); a refused file changes nothing.
TEST(GradScaler, TheCheckpointsCountsAreWholeNumbersOfTheirTypes) {
  TempDir dir;
  const std::string path = dir.file("ck.safetensors");
  Trio t;
  save_checkpoint(path, t.model, t.opt, t.scaler);
  TensorFile file = load_safetensors(path);
  auto write = [&](const std::string& interval, const std::string& tracker) {
    file.metadata["grad_scaler"] =
        "{\"scale\": 8.0, \"growth_factor\": 2.0, \"backoff_factor\": "
        "0.5, \"growth_interval\": " +
        interval + ", \"_growth_tracker\": " + tracker + "}";
    save_safetensors(path, file.tensors, file.metadata);
  };
  struct Case {
    const char *interval, *tracker, *refused;  // refused: the text after "got", or null
  };
  const Case cases[] = {{"3", "1.5", "1.5"},
                        {"3", "2147483648", "2147483648"},
                        {"3", "-2147483649", "-2147483649"},
                        {"3", "1e300", "1e300"},
                        {"9223372036854775808", "0", "9223372036854775808"},
                        {"-9.3e18", "0", "-9.3e18"},
                        {"3", "0", nullptr},
                        {"3", "-2147483648", nullptr},
                        {"3", "2147483647", nullptr},
                        {"-9223372036854775808", "0", nullptr},
                        {"4611686018427387904", "0", nullptr}};
  for (const Case& c : cases) {
    write(c.interval, c.tracker);
    Trio target;
    if (c.refused) {
      try {
        load_checkpoint(path, target.model, target.opt, target.scaler);
        ADD_FAILURE() << "accepted " << c.interval << ", " << c.tracker;
      } catch (const RuntimeError& e) {
        EXPECT_NE(std::string(e.what()).find(" holds, got " + std::string(c.refused)),
                  std::string::npos)
            << e.what();
      }
      EXPECT_EQ(target.scaler.get_scale(), 65536.0);
    } else {
      load_checkpoint(path, target.model, target.opt, target.scaler);
      EXPECT_EQ(target.scaler.get_scale(), 8.0);
      EXPECT_EQ(target.scaler.state_dict()->growth_interval, std::stoll(c.interval));
      EXPECT_EQ(target.scaler.state_dict()->growth_tracker, std::stoll(c.tracker));
    }
  }
}

TEST(GradScaler, AScaleJsonCannotHoldIsRefused) {
  TempDir dir;
  Trio t;
  t.scaler.scale(ones({}));
  t.scaler.update(INFINITY);
  EXPECT_THROW(save_checkpoint(dir.file("ck.safetensors"), t.model, t.opt, t.scaler), ValueError);
}

}  // namespace
}  // namespace tiny
