/// @file distributed.h
/// @brief Chapter 10: several processes training one model. A process group over MPI (CPU
/// tensors) and NCCL (CUDA tensors) with torch.distributed's collectives, data parallelism with
/// bucketed gradient all-reduce during backward (PyTorch's DDP), optimizer state sharded across
/// ranks (ZeRO stages 1 and 2), and sharded checkpoints that load at any world size.
///
/// The processes are started by `mpirun -n N ./program` (Open MPI); a program started alone is a
/// group of one. Every collective is checked before it runs: all ranks exchange what they are
/// about to do (the call, its sequence number, the element count and dtype), as PyTorch does with
/// TORCH_DISTRIBUTED_DEBUG=DETAIL, so that ranks that disagree fail with a message naming both
/// sides instead of exchanging garbage. Every collective has a deadline: a rank that never joins
/// (it failed, or took another path) makes the others raise "timed out" instead of hanging. Each
/// error begins with "[rank R]".
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tiny/nn.h"
#include "tiny/optim.h"
#include "tiny/tensor.h"

namespace tiny::dist {

/// How a collective combines the ranks' tensors (torch.distributed.ReduceOp).
enum class ReduceOp {
  SUM,  ///< the elementwise sum over the ranks
  AVG,  ///< the sum divided by the world size (floating-point tensors only)
};

/// True when the library was built with MPI (torch.distributed.is_mpi_available()).
bool is_mpi_available();
/// True when the library was built with NCCL (and CUDA).
bool is_nccl_available();
/// The `mpirun` the library was built against ("" without MPI): the chapter and the tests start
/// their processes with it.
std::string mpirun_path();

/// Starts this process's group. `backend`: "mpi" (CPU tensors) or "nccl" (CUDA tensors through
/// NCCL; CPU tensors still go through MPI, which also hands NCCL its unique id). The rank and
/// world size come from mpirun; a process started alone is rank 0 of 1. `timeout_s` bounds every
/// collective (0: the environment's TINY_DIST_TIMEOUT in seconds, else 300). RuntimeError when
/// already initialised, when the backend is unknown or missing, or when torchrun's variables
/// (WORLD_SIZE > 1) are set in a process mpirun did not start.
void init_process_group(const std::string& backend = "mpi", double timeout_s = 0);
/// True between init_process_group() and destroy_process_group().
bool is_initialized();
/// Waits for the outstanding collectives and ends the group (MPI_Finalize). A rank that ends
/// without calling it makes mpirun stop the whole job: that is how one failing rank stops the
/// others.
void destroy_process_group();
/// This process's rank, 0 .. world size - 1 (RuntimeError before init_process_group()).
int get_rank();
/// How many processes the group has.
int get_world_size();
/// "mpi" or "nccl", as given to init_process_group().
std::string get_backend();
/// Every collective's deadline, in seconds.
double get_timeout();

namespace detail {
struct WorkState;
}

/// A collective that may still be running (torch.distributed's Work): a call with
/// async_op = true returns at once and the communication thread (MPI) or the NCCL stream does
/// the work while the caller goes on.
class Work {
 public:
  Work() = default;
  /// For the library: wraps a collective's shared state.
  explicit Work(std::shared_ptr<detail::WorkState> state) : state_(std::move(state)) {}
  /// True once the collective has finished (or failed).
  bool is_completed() const;
  /// Blocks until the collective has finished; raises its error if it failed (timed out, ranks
  /// disagreed).
  void wait();
  /// Seconds the collective took, from the start of its exchange to its end (0 before then).
  double seconds() const;

 private:
  std::shared_ptr<detail::WorkState> state_;
};

/// Reduces `tensor` over all ranks, in place, leaving the result on every rank. `tensor` must
/// be contiguous, on the backend's device, and the same size and dtype on every rank.
Work all_reduce(const Tensor& tensor, ReduceOp op = ReduceOp::SUM, bool async_op = false);
/// Copies `src`'s tensor into `tensor` on every other rank, in place.
Work broadcast(const Tensor& tensor, int src, bool async_op = false);
/// Concatenates every rank's `input`, in rank order, into `output` (world size x its numel).
Work all_gather_into_tensor(const Tensor& output, const Tensor& input, bool async_op = false);
/// Reduces `input` (world size x `output`'s numel) over the ranks and leaves rank r the r-th
/// slice of the result in `output`.
Work reduce_scatter_tensor(const Tensor& output, const Tensor& input, ReduceOp op = ReduceOp::SUM,
                           bool async_op = false);
/// Returns when every rank has called it.
void barrier();

/// What this process's collectives have done since the last reset_comm_stats().
struct CommStats {
  int64_t calls = 0;          ///< collectives run
  int64_t bytes = 0;          ///< the bytes of the tensors handed to them
  double busy_seconds = 0;    ///< time the collectives took, overlapped with compute or not
};
/// This process's counters.
CommStats comm_stats();
/// Zeroes the counters.
void reset_comm_stats();

/// The bytes each rank sends in a ring all-reduce of a tensor of `bytes` bytes over
/// `world_size` ranks: a reduce-scatter and an all-gather, each sending N - 1 chunks of
/// bytes / N, so 2 (N - 1) / N x bytes (0 for one rank). ValueError for world_size < 1 or
/// negative bytes.
double ring_all_reduce_bytes(int64_t world_size, double bytes);

/// The split of a global batch: the rows [begin, end) that `rank` of `world_size` takes of
/// `batch` rows, contiguous and as even as possible (the first batch % world_size ranks take one
/// row more), as a DistributedSampler splits a dataset. ValueError for a bad rank or world size.
std::pair<int64_t, int64_t> shard_range(int64_t batch, int rank, int world_size);

// ---- data parallelism -------------------------------------------------------------------------

/// How DistributedDataParallel groups and sends gradients.
struct DDPOptions {
  /// Gradients are sent in buckets of about this many bytes (PyTorch's bucket_cap_mb, 25 MiB).
  int64_t bucket_cap_bytes = int64_t{25} << 20;
  /// true: a bucket's all-reduce starts as soon as its last gradient is ready, while backward
  /// goes on; false: every bucket is sent after backward has finished.
  bool overlap = true;
};

/// Data parallelism (torch.nn.parallel.DistributedDataParallel): every rank holds the whole
/// model and runs its own share of the batch; during backward each parameter's gradient is
/// averaged over the ranks, so after backward every rank holds the gradient of the global
/// batch, and the same optimizer step keeps the copies identical.
///
/// Construction broadcasts rank 0's parameters to every rank and groups the parameters into
/// buckets in reverse registration order (backward produces the last layer's gradients first).
/// A hook on each parameter's AccumulateGrad marks it ready; a full bucket is copied into one
/// flat buffer and all-reduced (async, on the communication thread), and when the last bucket
/// is ready the hook waits for all of them and copies the averages back into the .grad tensors.
class DistributedDataParallel {
 public:
  /// Wraps `module` (its parameters must be contiguous, on one device, and the same on every
  /// rank in number, order and size). RuntimeError when the group is not initialised.
  explicit DistributedDataParallel(std::shared_ptr<nn::Module> module, DDPOptions options = {});
  ~DistributedDataParallel();
  DistributedDataParallel(const DistributedDataParallel&) = delete;
  DistributedDataParallel& operator=(const DistributedDataParallel&) = delete;

  /// The wrapped module's forward. RuntimeError, with PyTorch's words, when the previous
  /// backward did not produce a gradient for every parameter (a parameter not used in the loss).
  Tensor forward(const Tensor& input);
  /// forward(input).
  Tensor operator()(const Tensor& input) { return forward(input); }
  /// The wrapped module.
  nn::Module& module() { return *module_; }
  /// The buckets' parameter indices (registration order numbering), in the order they are sent.
  const std::vector<std::vector<size_t>>& buckets() const;
  /// Seconds the last backward spent waiting for communication once its own work was done (the
  /// communication that overlap did not hide).
  double last_wait_seconds() const;

 private:
  struct State;
  std::shared_ptr<nn::Module> module_;
  std::shared_ptr<State> state_;
};

// ---- sharded optimizer state (ZeRO) ------------------------------------------------------------

/// AdamW with its state sharded across the ranks (ZeRO, Rajbhandari et al. 2020). Each
/// parameter, flattened, is cut into world-size chunks of ceil(numel / N) elements (the last
/// ones shorter or empty); rank r keeps AdamW's m and v only for chunk r of every parameter,
/// updates only that chunk, and an all-gather gives every rank the whole updated parameter.
///   stage 1: the gradients are all-reduced (every rank holds all of them), the state sharded;
///   stage 2: the gradients are reduce-scattered: each rank receives, averaged, only the chunk it
///            updates, and the full gradients are freed (set to undefined) in step().
/// The update is elementwise, so it gives the unsharded AdamW's result bit for bit on the same
/// averaged gradients. Use it on a model that is not wrapped in DistributedDataParallel: step()
/// averages the gradients itself.
class ZeroAdamW {
 public:
  /// `params` as for optim::AdamW (contiguous, on the CPU or one CUDA device); `stage` 1 or 2
  /// (ValueError otherwise). RuntimeError when the group is not initialised.
  ZeroAdamW(std::vector<Tensor> params, optim::AdamWOptions options = {}, int stage = 1);
  /// Averages the gradients over the ranks, updates this rank's chunks, gathers the parameters.
  /// Every parameter must have a gradient (RuntimeError naming the first that has none).
  void step();
  /// Clears the parameters' gradients (to undefined, as zero_grad(set_to_none=True)).
  void zero_grad();
  /// 1 or 2.
  int stage() const { return stage_; }
  /// The AdamW over this rank's chunks: its state is this rank's shard.
  optim::AdamW& local() { return *local_; }
  /// The elements [begin, end) of the flattened parameter `index` that this rank updates.
  std::pair<int64_t, int64_t> chunk(size_t index) const;
  /// The whole optimizer state gathered from every rank, as the unsharded AdamW's state_dict()
  /// would hold it after the same steps (PyTorch's consolidate_state_dict()); every rank must
  /// call it, every rank gets it.
  optim::OptimizerState consolidated_state_dict();
  /// Saves this rank's shard to `dir/optim-rankR-of-N.safetensors` (the folder is created),
  /// with the sizes that let load() re-cut it for another world size; every rank calls it.
  void save(const std::string& dir) const;
  /// Loads the shards a run of any world size saved in `dir` and keeps this rank's chunks under
  /// the current world size. RuntimeError for a missing or inconsistent shard, or parameters of
  /// other sizes.
  void load(const std::string& dir);

 private:
  std::vector<Tensor> params_;
  std::vector<Tensor> shards_;  // this rank's chunk of each parameter: a view of its memory
  std::unique_ptr<optim::AdamW> local_;
  int stage_;
};

/// Writes a data-parallel run's checkpoint to `dir`: the model's weights from rank 0
/// (`dir`/model.safetensors, the same on every rank) and each rank's optimizer shard. Every rank
/// calls it; it returns when all files are written.
void save_sharded_checkpoint(const std::string& dir, const nn::Module& model,
                             const ZeroAdamW& optimizer);
/// Loads what save_sharded_checkpoint() wrote, at this run's world size, whatever the saving
/// run's was.
void load_sharded_checkpoint(const std::string& dir, nn::Module& model, ZeroAdamW& optimizer);

}  // namespace tiny::dist
