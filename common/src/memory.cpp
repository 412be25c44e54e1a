// memory.cpp: phases of a step, memory timelines, the saved-tensor log, and activation
// checkpointing.
#include "tiny/memory.h"

#include <algorithm>
#include <cctype>
#include <mutex>

#include "autograd_internal.h"
#include "internal.h"
#include "memory_internal.h"
#include "tiny/amp.h"
#include "tiny/chapter.h"
#include "tiny/random.h"

namespace tiny {

namespace detail {

std::atomic<int> g_live_timelines{0};

namespace {
std::mutex& timelines_mutex() {
  static std::mutex* m = new std::mutex;
  return *m;
}
std::vector<MemoryTimeline*>& live_timelines() {
  static auto* list = new std::vector<MemoryTimeline*>;
  return *list;
}
thread_local const char* t_phase = "forward";
}  // namespace

void timeline_sample_slow(const char* label) {
  std::lock_guard<std::mutex> lock(timelines_mutex());
  for (MemoryTimeline* t : live_timelines()) t->sample(label);
}

const char* memory_phase() { return t_phase; }

}  // namespace detail

// ---- phases and timelines ---------------------------------------------------------------------

MemoryPhase::MemoryPhase(std::string name) : name_(std::move(name)), previous_(detail::t_phase) {
  detail::t_phase = name_.c_str();
}
MemoryPhase::~MemoryPhase() { detail::t_phase = previous_; }
const char* MemoryPhase::current() { return detail::t_phase; }

MemoryTimeline::MemoryTimeline(Device device) : device_(device) {
  memory_stats(device);  // raises now, for a device that does not exist
  detail::take_interval_peak(device);
  std::lock_guard<std::mutex> lock(detail::timelines_mutex());
  detail::live_timelines().push_back(this);
  detail::g_live_timelines.fetch_add(1);
  sample("start");
}

MemoryTimeline::~MemoryTimeline() {
  std::lock_guard<std::mutex> lock(detail::timelines_mutex());
  auto& list = detail::live_timelines();
  list.erase(std::find(list.begin(), list.end(), this));
  detail::g_live_timelines.fetch_sub(1);
}

void MemoryTimeline::mark(const std::string& label) {
  std::lock_guard<std::mutex> lock(detail::timelines_mutex());
  sample(label.c_str());
}

// Forward samples are labelled with the node an op recorded, as PyTorch's op names read:
// "MmBackward0" -> "mm". Backward samples keep the node's name.
void MemoryTimeline::sample(const char* label) {
  std::string op = label;
  const char* phase = detail::memory_phase();
  if (std::string_view(phase) != "backward") {
    if (const size_t at = op.find("Backward"); at != std::string::npos && at > 0) {
      op.resize(at);
      for (char& c : op) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
  }
  const MemoryStats stats = memory_stats(device_);
  MemorySample s;
  s.index = static_cast<int64_t>(samples_.size());
  s.phase = phase;
  s.op = std::move(op);
  for (int c = 0; c < kMemoryCategories; ++c) s.bytes[c] = stats.category_allocated[c];
  s.allocated = stats.allocated;
  s.peak = std::max(detail::take_interval_peak(device_), stats.allocated);
  samples_.push_back(std::move(s));
}

int64_t MemoryTimeline::peak() const {
  int64_t peak = 0;
  for (const MemorySample& s : samples_) peak = std::max(peak, s.peak);
  return peak;
}

void MemoryTimeline::write_csv(const std::string& dir, const std::string& name) const {
  CsvFile csv(dir, name,
              {"index", "phase", "op", "weights", "gradients", "optimizer_state", "activations",
               "temporaries", "allocated", "peak"});
  for (const MemorySample& s : samples_)
    csv.row(s.index, s.phase, s.op, s.bytes[0], s.bytes[1], s.bytes[2], s.bytes[3], s.bytes[4],
            s.allocated, s.peak);
}

// ---- the saved-tensor log ---------------------------------------------------------------------

SavedTensorLog::SavedTensorLog()
    : hooks_(
          [this](const Tensor& t) {
            SavedTensorRecord r;
            const char* op = detail::saving_op();
            r.op = op ? op : "";
            r.shape = t.shape();
            r.dtype = t.dtype();
            r.nbytes = t.nbytes();
            r.storage_nbytes = static_cast<int64_t>(t.storage()->nbytes());
            r.category = t.storage()->category();
            const std::weak_ptr<Storage> mine = t.storage();
            for (size_t i = 0; i < storages_.size(); ++i) {
              const bool same = !mine.owner_before(storages_[i]) && !storages_[i].owner_before(mine);
              if (same) {
                r.shares_storage_with = static_cast<int64_t>(i);
                break;
              }
            }
            records_.push_back(std::move(r));
            storages_.push_back(mine);
            return t;
          },
          [](const Tensor& t) { return t; }) {}

// What the saved tensors cost: the memory behind them, not their views. Two records of one
// storage (a ReLU's result, which the next matmul saves again) are one block of memory, and a
// weight is in memory whether the graph keeps it or not.
int64_t SavedTensorLog::bytes(bool include_weights) const {
  // BEGIN SOLUTION ch07 saved_bytes
  int64_t total = 0;
  for (const SavedTensorRecord& r : records_)
    if (r.shares_storage_with < 0 && (include_weights || r.category != MemoryCategory::weights))
      total += r.storage_nbytes;
  return total;
  // END SOLUTION ch07 saved_bytes
}

// ---- activation checkpointing -----------------------------------------------------------------

namespace {

// What one checkpointed region keeps: its function, its inputs, where the random generator
// stood, and the shape of every tensor its ops saved; during backward, the tensors themselves,
// recomputed, each handed out once.
class RecomputeFrame final : public detail::CheckpointFrame {
 public:
  // The inputs are saved as any op's are, before the region's own hooks take over: an outer
  // saved-tensor hook sees them (and only them), an outer checkpoint recomputes them, and
  // writing to one in place before backward is the usual version-counter error. PyTorch 2.x
  // saves them the same way; 1.13 kept them out of sight of the hooks.
  RecomputeFrame(CheckpointFunction fn, const std::vector<Tensor>& inputs)
      : fn_(std::move(fn)), rng_(default_generator()) {
    for (const Device::Type d : {Device::Type::CPU, Device::Type::CUDA})
      autocast_[static_cast<int>(d)] = {autocast_enabled(d), autocast_dtype(d)};
    for (const Tensor& t : inputs) {
      inputs_.emplace_back(t, "CheckpointFunction", false, /*for_node=*/false);
      needs_grad_.push_back(t.defined() && t.requires_grad());
    }
  }
  ~RecomputeFrame() override {
    for (Tensor& t : recomputed_) drop(t);
  }

  int64_t pack(const Tensor& t) override {
    saved_.push_back({t.shape(), t.dtype(), t.device()});
    recomputed_.emplace_back();
    return static_cast<int64_t>(saved_.size()) - 1;
  }

  Tensor unpack(int64_t index) override {
    const auto i = static_cast<size_t>(index);
    if (!recomputed_[i].defined()) recompute();
    Tensor t = std::move(recomputed_[i]);
    recomputed_[i] = Tensor();
    t.storage()->add_saved(-1);
    return t;
  }

 private:
  struct Meta {
    Shape shape;
    DType dtype;
    Device device;
    bool operator==(const Meta&) const = default;
    // As PyTorch 2.x prints a saved tensor's metadata.
    std::string str() const {
      return "{'shape': " + detail::torch_size_str(shape) + ", 'dtype': torch." +
             dtype_name(dtype) + ", 'device': device(type='" +
             (device.is_cpu() ? "cpu'" : "cuda', index=" + std::to_string(device.index)) + ")}";
    }
  };

  static void drop(Tensor& t) {
    if (t.defined()) t.storage()->add_saved(-1);
    t = Tensor();
  }

  // Runs the region again, recording (grad mode on, whatever backward set) so that its ops save
  // what they saved the first time, from the same random numbers; then puts the generator back.
  void recompute() {
    std::vector<Tensor> got;
    {
      Generator& gen = default_generator();
      struct Restore {
        Generator& gen;
        Generator state;
        ~Restore() { gen = state; }
      } restore{gen, gen};
      gen = rng_;
      detail::GradModeGuard grad(true);
      MemoryPhase phase("recompute");  // a timeline shows the second forward pass as such
      // Autocast as it was in the first forward pass, whatever it is during backward, so that
      // every op runs in the same dtype again.
      const AutocastGuard cpu(Device::Type::CPU, autocast_[0].dtype, autocast_[0].enabled);
      const AutocastGuard gpu(Device::Type::CUDA, autocast_[1].dtype, autocast_[1].enabled);
      SavedTensorsHooks capture(
          [&got](const Tensor& t) {
            got.push_back(t);
            return t;
          },
          [](const Tensor& t) { return t; });
      std::vector<Tensor> inputs;
      for (size_t k = 0; k < inputs_.size(); ++k) {
        Tensor in = inputs_[k].unpack();
        if (in.defined()) in = in.detach();
        if (needs_grad_[k]) in.requires_grad_(true);
        inputs.push_back(std::move(in));
      }
      fn_(inputs);  // the outputs, and the graph they head, are thrown away
    }
    // PyTorch's two checks, with its texts up to the tips that follow them there.
    if (got.size() != saved_.size())
      throw CheckpointError(
          "torch.utils.checkpoint: A different number of tensors was saved during the original "
          "forward and recomputation.\nNumber of tensors saved during forward: " +
          std::to_string(saved_.size()) +
          "\nNumber of tensors saved during recomputation: " + std::to_string(got.size()) + ".");
    std::string mismatches;
    for (size_t i = 0; i < got.size(); ++i) {
      const Meta now{got[i].shape(), got[i].dtype(), got[i].device()};
      if (now != saved_[i])
        mismatches += "tensor at position " + std::to_string(i) +
                      ":\nsaved metadata: " + saved_[i].str() +
                      "\nrecomputed metadata: " + now.str() + "\n";
    }
    if (!mismatches.empty())
      throw CheckpointError(
          "torch.utils.checkpoint: Recomputed values for the following tensors have different "
          "metadata than during the forward pass.\n" +
          mismatches + ".");
    for (size_t i = 0; i < got.size(); ++i) {
      drop(recomputed_[i]);
      recomputed_[i] = std::move(got[i]);
      recomputed_[i].storage()->add_saved(1);  // kept by the graph until its node uses it
    }
  }

  struct Autocast {
    bool enabled = false;
    DType dtype = kBFloat16;
  };
  CheckpointFunction fn_;
  Autocast autocast_[2];  // CPU, CUDA: as the region's first run found them
  std::vector<detail::SavedTensor> inputs_;
  std::vector<bool> needs_grad_;
  Generator rng_;
  std::vector<Meta> saved_;
  std::vector<Tensor> recomputed_;
};

}  // namespace

std::vector<Tensor> checkpoint(const CheckpointFunction& fn, const std::vector<Tensor>& inputs) {
  if (!fn) throw ValueError("checkpoint: the function to run is empty");
  // Without grad mode nothing is saved, so there is nothing to recompute: a plain call.
  if (!grad_mode_enabled()) return fn(inputs);
  auto frame = std::make_shared<RecomputeFrame>(fn, inputs);
  detail::CheckpointHooks hooks(frame);
  return fn(inputs);
}

Tensor checkpoint(const std::function<Tensor(const Tensor&)>& fn, const Tensor& input) {
  if (!fn) throw ValueError("checkpoint: the function to run is empty");
  std::vector<Tensor> out = checkpoint(
      [fn](const std::vector<Tensor>& in) { return std::vector<Tensor>{fn(in[0])}; }, {input});
  return out[0];
}

}  // namespace tiny
