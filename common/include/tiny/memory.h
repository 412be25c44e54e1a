/// @file memory.h
/// @brief What a training step keeps in memory: a timeline of bytes by category, the tensors
/// the autograd graph saves for backward, and activation checkpointing.
///
/// The allocator (allocator.h) counts every live block in one category: weights, gradients,
/// optimizer state, activations (kept by the graph for backward) or temporaries. This header
/// watches those counters move:
///
/// - MemoryTimeline samples them after every recorded op of the forward pass, every node of the
///   backward pass, each optimizer step and each zero_grad, labelled with the phase of the step
///   and the op. It is this library's version of PyTorch's
///   `torch.cuda.memory._record_memory_history()` and its snapshot viewer: a CSV a student can
///   read, and a figure drawn from it.
/// - SavedTensorLog lists what the graph keeps, with the node that kept it, through the
///   saved-tensor hooks (autograd.h), as `torch.autograd.graph.saved_tensors_hooks` lets a
///   PyTorch user do.
/// - checkpoint() trades memory for compute: the region keeps only its inputs and is run again
///   during backward (`torch.utils.checkpoint.checkpoint(fn, x, use_reentrant=False)`).
///   (Saving a model to a file is checkpoint.h.)
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tiny/allocator.h"
#include "tiny/autograd.h"
#include "tiny/tensor.h"

namespace tiny {

/// Names the phase of a training step for its lifetime, on this thread: samples of a
/// MemoryTimeline taken meanwhile carry it. backward() runs in "backward", the library's
/// optimizers step in "optimizer step", zero_grad() runs in "zero_grad", and a checkpointed
/// region runs again in "recompute"; anything else is in "forward" unless a MemoryPhase says
/// otherwise. Nests; the previous phase comes back.
class MemoryPhase {
 public:
  /// Enters phase `name`.
  explicit MemoryPhase(std::string name);
  ~MemoryPhase();
  MemoryPhase(const MemoryPhase&) = delete;
  MemoryPhase& operator=(const MemoryPhase&) = delete;
  /// The phase this thread is in now.
  static const char* current();

 private:
  std::string name_;
  const char* previous_;
};

/// One point of a MemoryTimeline.
struct MemorySample {
  int64_t index = 0;   ///< 0, 1, 2, ... in the order taken
  std::string phase;   ///< "forward", "backward", "recompute", "optimizer step", "zero_grad", ...
  std::string op;      ///< what had just run: "mm", "relu" (forward), "MmBackward0" (backward)
  /// memory_allocated(category, device) at this point, indexed by MemoryCategory.
  int64_t bytes[kMemoryCategories] = {};
  int64_t allocated = 0;  ///< memory_allocated(device): the sum of `bytes`
  /// The highest memory_allocated(device) since the previous sample: a temporary that came and
  /// went inside one op shows here, not in `allocated`.
  int64_t peak = 0;
};

/// While alive, records a MemorySample on every event of a training step on `device` (see the
/// file comment). Samples from every thread go to every live timeline.
class MemoryTimeline {
 public:
  /// Starts recording, with a first sample labelled "start".
  explicit MemoryTimeline(Device device = Device::cpu());
  ~MemoryTimeline();
  MemoryTimeline(const MemoryTimeline&) = delete;
  MemoryTimeline& operator=(const MemoryTimeline&) = delete;

  /// Adds a sample labelled `label` now (in the current phase).
  void mark(const std::string& label);
  /// The samples so far, in order.
  const std::vector<MemorySample>& samples() const { return samples_; }
  /// The highest memory_allocated(device) seen while recording.
  int64_t peak() const;
  /// The device it watches.
  Device device() const { return device_; }
  /// Writes the samples to `dir`/`name` with columns index, phase, op, one per category
  /// (weights, gradients, optimizer_state, activations, temporaries), allocated and peak.
  void write_csv(const std::string& dir, const std::string& name) const;

  /// Called for every live timeline by the library (memory_internal.h).
  void sample(const char* label);

 private:
  Device device_;
  std::vector<MemorySample> samples_;
};

/// One tensor the autograd graph saved for backward.
struct SavedTensorRecord {
  std::string op;                  ///< the node that saved it ("MmBackward0")
  Shape shape;                     ///< its shape
  DType dtype = kFloat32;          ///< its dtype
  int64_t nbytes = 0;              ///< numel() * element_size() of the tensor as saved
  int64_t storage_nbytes = 0;      ///< the bytes of the whole storage it is a view of
  MemoryCategory category = MemoryCategory::temporaries;  ///< its storage's, when saved
  int64_t shares_storage_with = -1;  ///< index of an earlier record with the same storage
};

/// While alive, records every tensor the graph saves (through a saved-tensor hook, which keeps
/// nothing itself: the log does not change what is in memory).
class SavedTensorLog {
 public:
  /// Starts logging.
  SavedTensorLog();
  SavedTensorLog(const SavedTensorLog&) = delete;
  SavedTensorLog& operator=(const SavedTensorLog&) = delete;
  /// The tensors saved so far, in the order saved.
  const std::vector<SavedTensorRecord>& records() const { return records_; }
  /// The bytes of the distinct storages saved, each counted once; weights (which are in memory
  /// anyway) are left out unless `include_weights`.
  int64_t bytes(bool include_weights = false) const;

 private:
  std::vector<SavedTensorRecord> records_;
  std::vector<std::weak_ptr<Storage>> storages_;  // one per record, to tell storages apart
  SavedTensorsHooks hooks_;  // declared last: its hook writes into the members above
};

/// A region of a model, as checkpoint() runs it: inputs to outputs.
using CheckpointFunction = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

/// Runs `fn(inputs)` keeping none of the tensors its ops save for backward, only `inputs`;
/// those are saved as any op saves a tensor, so an outer saved-tensor hook (SavedTensorLog)
/// sees them and nothing else of the region, as in PyTorch 2.x. Without grad mode it is a
/// plain call of `fn`. Backward runs `fn` again, with the random generator set back to where it was, to get them
/// (torch.utils.checkpoint.checkpoint(fn, *inputs, use_reentrant=False)). Gradients are the
/// same, bit for bit, as without checkpointing; the price is a second forward pass of the
/// region. The recomputation runs under the autocast settings the first run had; after it the
/// default generator is where it was before it, so the random stream goes on as if nothing had
/// been recomputed.
///
/// Limit: `fn` must save the same tensors when run again (no branching on a random number
/// drawn from another generator, which checkpoint cannot set back); if it saves another number
/// of them, or one of another shape, dtype or device, backward raises CheckpointError with
/// PyTorch's text.
std::vector<Tensor> checkpoint(const CheckpointFunction& fn, const std::vector<Tensor>& inputs);
/// checkpoint() of a region with one input and one output.
Tensor checkpoint(const std::function<Tensor(const Tensor&)>& fn, const Tensor& input);

}  // namespace tiny
