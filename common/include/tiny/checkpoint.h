/// @file checkpoint.h
/// @brief Checkpoints: named tensors in a safetensors file, written so that a crash never
/// leaves a broken one.
///
/// Training runs for days; a checkpoint is what a crash costs at most. It must hold every
/// number needed to resume (the model's parameters and the optimizer's state, each a named
/// tensor) and it must be trustworthy: a checkpoint half-written when the process was killed
/// must not replace the last good one, and a damaged file must be refused, not half-read.
///
/// The format is Hugging Face's safetensors, which Python reads with
/// `safetensors.torch.load_file`: an 8-byte little-endian length, a JSON header mapping each
/// name to its dtype, shape and byte range, and then the bytes. Unlike a pickle (torch.save) it
/// holds only data, so loading a file can never run code.
///
/// save_safetensors() writes a temporary file beside the target, flushes it to the disk, and
/// renames it over the target: a rename is atomic, so a reader sees the old file or the new
/// one, never a mixture. load_safetensors() checks every field and every byte range before it
/// reads a tensor.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tiny/tensor.h"

namespace tiny {

/// Named tensors in order, as a state dict lists them: {"layers.0.weight", w}, ...
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

/// What a safetensors file holds.
struct TensorFile {
  NamedTensors tensors;                         ///< in the order of the file's header
  std::map<std::string, std::string> metadata;  ///< the header's "__metadata__" (may be empty)

  /// True when a tensor has this name.
  bool contains(const std::string& name) const;
  /// The tensor with this name; KeyError-like RuntimeError ("no tensor named 'x' in ...") if none.
  const Tensor& at(const std::string& name) const;
};

/// Writes `tensors` and `metadata` to `path` as a safetensors file, atomically: the bytes go to
/// a hidden temporary file in the same folder (".<name>.tmp-XXXXXX"), are flushed to the disk
/// (fsync), and the file is renamed over `path`. A process killed before the rename leaves the
/// previous file at `path` whole (and possibly the temporary file, which no loader mistakes for
/// the checkpoint). Tensors may be on any device and in any layout; they are copied to
/// contiguous CPU memory. Supported dtypes: float64, float32, float16, bfloat16, int64, int32,
/// bool. ValueError for an empty or repeated name, a name "__metadata__", or an undefined
/// tensor; RuntimeError when a file operation fails (the target is then untouched).
void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const std::map<std::string, std::string>& metadata = {});

/// Reads a safetensors file, written by save_safetensors() or by Python's safetensors. Every
/// part is checked first: the header length against the file size, the header as strict JSON
/// (nesting at most 64 deep), each entry's fields, its dtype, and its byte range (inside the
/// data, matching shape times element size, with no overlap, no gap and nothing after the
/// last). Any fault raises RuntimeError naming the file and what is wrong (TypeError for a
/// dtype tiny lacks, such as I8), so a damaged file is never half-read.
TensorFile load_safetensors(const std::string& path);

/// One tensor a model expects: its name, shape and dtype.
struct TensorSpec {
  std::string name;                       ///< "layers.0.weight"
  Shape shape;                            ///< {64, 32}
  std::optional<DType> dtype = kFloat32;  ///< unset: any dtype (load_state_dict converts)
};

/// The names that load_state_dict(strict = false) would report (PyTorch's _IncompatibleKeys).
struct IncompatibleKeys {
  std::vector<std::string> missing_keys;     ///< expected, but not in the checkpoint
  std::vector<std::string> unexpected_keys;  ///< in the checkpoint, but not expected
};

/// Compares a checkpoint's tensors with what a model expects, the way PyTorch's
/// load_state_dict does, and raises one RuntimeError listing every problem in its words:
///
///     Error(s) in loading state_dict for Linear:
///         Missing key(s) in state_dict: "bias".
///         Unexpected key(s) in state_dict: "extra".
///         size mismatch for weight: copying a param with shape torch.Size([64, 64]) from
///         checkpoint, the shape in current model is torch.Size([64, 32]).
///
/// (each item on one line, after a tab). A dtype that differs is reported the same way ("dtype
/// mismatch for weight: copying a param with dtype torch.float16 from checkpoint, the dtype in
/// current model is torch.float32."), since tiny does not convert silently. With `strict` false,
/// missing and unexpected names are returned instead of raised; shape and dtype faults still
/// raise. `model_name` is the name after "for".
IncompatibleKeys check_tensors(const NamedTensors& tensors, const std::vector<TensorSpec>& expected,
                               const std::string& model_name = "model", bool strict = true);

// ---- a training run's checkpoint ------------------------------------------------------------

namespace nn {
class Module;
}
namespace optim {
class Optimizer;
}
namespace amp {
class GradScaler;
}

/// Saves a model and its optimizer in one safetensors file (atomically, as save_safetensors):
///   - every parameter as "model.<name>" (model.state_dict()'s names);
///   - every optimizer state tensor as "optimizer.state.<index>.<key>" ("optimizer.state.0.exp_avg");
///   - in the metadata, "optimizer" (its name, "AdamW") and "optimizer.param_groups" (each
///     group's settings and parameter indices, as JSON: [{"lr": 0.01, "betas": [0.9, 0.999],
///     ..., "params": [0]}]), and every entry of `extra` (a step count, a seed) as given.
/// Python reads it with safetensors.torch.load_file (and json.loads for the groups).
void save_checkpoint(const std::string& path, const nn::Module& model,
                     const optim::Optimizer& optimizer,
                     const std::map<std::string, std::string>& extra = {});

/// Loads a file written by save_checkpoint into `model` and `optimizer`, after checking all of
/// it: the parameters' names, shapes and dtypes (one error listing every problem, in
/// load_state_dict's words), the optimizer's name, its groups, and each state tensor's shape and
/// dtype. Nothing is changed unless everything fits. Returns the file's metadata (`extra`).
std::map<std::string, std::string> load_checkpoint(const std::string& path, nn::Module& model,
                                                   optim::Optimizer& optimizer);

/// save_checkpoint() with a GradScaler's state as well, so that a run with loss scaling resumes
/// with the same scale and the same count towards its next growth. The state goes into the
/// metadata under "grad_scaler", as the JSON of PyTorch's scaler.state_dict():
/// {"scale": 65536.0, "growth_factor": 2.0, "backoff_factor": 0.5, "growth_interval": 2000,
/// "_growth_tracker": 0} (or {} for a disabled scaler), which Python hands back with
/// `scaler.load_state_dict(json.loads(metadata["grad_scaler"]))`. Save after scaler.update(),
/// when the iteration is over. ValueError for a scale that JSON cannot hold (inf or NaN).
void save_checkpoint(const std::string& path, const nn::Module& model,
                     const optim::Optimizer& optimizer, const amp::GradScaler& scaler,
                     const std::map<std::string, std::string>& extra = {});

/// load_checkpoint() that also restores `scaler` from the file's "grad_scaler" metadata
/// (scaler.load_state_dict). RuntimeError when the file has none or it is not the five numbers
/// of a state_dict(); an empty one ({}, from a disabled scaler) raises load_state_dict's
/// RuntimeError. Everything is checked before anything is changed. (The overload without a
/// scaler ignores a saved scaler's state.)
std::map<std::string, std::string> load_checkpoint(const std::string& path, nn::Module& model,
                                                   optim::Optimizer& optimizer,
                                                   amp::GradScaler& scaler);

namespace detail {
/// A test's window into save_safetensors(): called after each block of the temporary file is
/// written, with the bytes written so far and the file's total size. Null (the default) calls
/// nothing. The crash test sets one that kills the process halfway through a save.
using SaveProgressHook = void (*)(uint64_t written, uint64_t total);
/// Sets the hook; returns the previous one.
SaveProgressHook set_save_progress_hook(SaveProgressHook hook);
}  // namespace detail

}  // namespace tiny
