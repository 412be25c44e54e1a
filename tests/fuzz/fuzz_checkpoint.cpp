// fuzz_checkpoint: load_checkpoint (tiny/checkpoint.h) into a small model, its AdamW and a
// GradScaler. The first byte chooses the loader (bit 1: with the scaler's state or without) and
// the kind of input (bit 0):
//   - 0: the bytes after it as the file (the safetensors reader, then everything after it);
//   - 1: a well-formed checkpoint of the right model in which the fuzzer rewrites what a damaged
//     or hand-edited file would: the three metadata entries the loader parses (the optimizer's
//     name, its groups as JSON, the scaler's state as JSON), and tensors dropped, renamed,
//     reshaped or given another dtype.
// The promise checked: a refused file changes nothing (the parameters' bits, the optimizer's
// state and settings, the scaler's scale), and an accepted one leaves a model and optimizer that
// can take a training step without crashing.
#include <cstring>

#include "fuzz_util.h"
#include "tiny/amp.h"
#include "tiny/checkpoint.h"
#include "tiny/nn.h"
#include "tiny/optim.h"
#include "tiny/random.h"

namespace {

// The model, its optimizer (two groups, as a real run with no decay on biases has) and a scaler.
struct Run {
  tiny::Generator g{7};
  tiny::nn::Linear model{3, 2, true, tiny::kFloat32, g};
  tiny::optim::AdamW opt{
      std::vector<tiny::optim::GroupSpec>{{{model.weight}, {{"weight_decay", 0.1}}},
                                          {{model.bias}, {{"weight_decay", 0.0}}}},
      tiny::optim::AdamW::Options{.lr = 0.01}};
  tiny::amp::GradScaler scaler{tiny::Device::Type::CPU};

  void step() {
    tiny::Generator batch(11);
    tiny::Tensor loss = model(tiny::randn({4, 3}, tiny::kFloat32, batch)).square().mean();
    opt.zero_grad();
    loss.backward();
    opt.step();
  }
};

// What a failed load must leave as it was.
struct Snapshot {
  std::vector<std::vector<uint8_t>> param_bytes;
  size_t state_entries = 0;
  std::vector<tiny::optim::Settings> settings;
  double scale = 0;

  explicit Snapshot(const Run& run) {
    for (const auto& [name, p] : run.model.named_parameters()) {
      const auto* b = static_cast<const uint8_t*>(p.contiguous().data_ptr());
      param_bytes.emplace_back(b, b + p.nbytes());
    }
    for (const auto& [index, entries] : run.opt.state_dict().state) state_entries += entries.size();
    for (const auto& group : run.opt.param_groups()) settings.push_back(group.settings);
    scale = run.scaler.get_scale();
  }
  bool operator==(const Snapshot&) const = default;
};

// A real checkpoint of Run after one step, with the scaler's state: the structured inputs'
// starting point.
const tiny::TensorFile& base_checkpoint() {
  static const tiny::TensorFile file = [] {
    Run run;
    run.step();
    const std::string path = "/tmp/tiny_fuzz_base_" + std::to_string(::getpid()) + ".safetensors";
    tiny::save_checkpoint(path, run.model, run.opt, run.scaler, {{"step", "1"}});
    tiny::TensorFile f = tiny::load_safetensors(path);
    std::remove(path.c_str());
    return f;
  }();
  return file;
}

// The structured input: the base checkpoint with the fuzzer's edits, written as a file.
std::string edited_checkpoint(FuzzedDataProvider& in) {
  tiny::TensorFile file = base_checkpoint();
  const char* const keys[] = {"optimizer", "optimizer.param_groups", "grad_scaler", "step"};
  for (const char* key : keys) {
    const uint8_t what = in.ConsumeIntegral<uint8_t>() % 4;
    if (what == 1) file.metadata[key] = in.ConsumeRandomLengthString(256);
    if (what == 2) file.metadata.erase(key);
  }
  for (auto& [name, t] : file.tensors) {
    switch (in.ConsumeIntegral<uint8_t>() % 8) {
      case 1:
        t = tiny::zeros(
            {in.ConsumeIntegralInRange<int64_t>(0, 4), in.ConsumeIntegralInRange<int64_t>(0, 4)},
            t.dtype());
        break;
      case 2: t = t.to(in.ConsumeBool() ? tiny::kFloat64 : tiny::kInt64); break;
      case 3: name = in.ConsumeRandomLengthString(32); break;
      case 4: t = t.reshape({-1}); break;
      default: break;
    }
  }
  if (in.ConsumeBool() && !file.tensors.empty()) file.tensors.pop_back();
  const std::string path = "/tmp/tiny_fuzz_" + std::to_string(::getpid()) + ".safetensors";
  // Edits the writer itself refuses (an empty or repeated name) are not files anyone has.
  if (!fuzz::accepted([&] { tiny::save_safetensors(path, file.tensors, file.metadata); }))
    return "";
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
  if (size == 0) return 0;
  std::string path;
  if ((bytes[0] & 1) == 0) {
    path = fuzz::write_file(bytes + 1, size - 1, ".safetensors");
  } else {
    FuzzedDataProvider in(bytes + 1, size - 1);
    path = edited_checkpoint(in);
    if (path.empty()) return 0;
  }
  Run run;
  const Snapshot before(run);
  const bool with_scaler = (bytes[0] & 2) != 0;
  const bool loaded = fuzz::accepted([&] {
    if (with_scaler) tiny::load_checkpoint(path, run.model, run.opt, run.scaler);
    else tiny::load_checkpoint(path, run.model, run.opt);
  });
  if (!loaded) {
    fuzz::require(Snapshot(run) == before,
                  "a refused checkpoint changed the model, optimizer or scaler");
    return 0;
  }
  // Settings a file may legally hold can still make a step refuse (the optimizer's own checks);
  // what must not happen is a crash or a sanitizer report.
  fuzz::accepted([&] { run.step(); });
  return 0;
}
