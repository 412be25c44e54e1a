// The process group (MPI; NCCL for CUDA tensors in common/cuda/nccl.cpp), and what chapter 10
// builds on its collectives: DistributedDataParallel, ZeroAdamW and sharded checkpoints.
//
// One communication thread per process runs the collectives, in the order they were called, so
// that an async call (async_op = true) returns at once and the thread does the exchange while
// the caller computes: that is how DDP overlaps backward with its all-reduces. Only that
// thread calls MPI between MPI_Init_thread and MPI_Finalize (MPI_THREAD_SERIALIZED), and it
// never calls the library's ops (whose thread pool belongs to the caller's thread): what it must
// compute, an average, it computes with plain loops.
#include "tiny/distributed.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <functional>
#include <mutex>
#include <thread>

#include "tiny/autograd.h"
#include "tiny/checkpoint.h"
#include "tiny/format.h"

#ifndef TINY_HAS_MPI
#define TINY_HAS_MPI 0
#endif
#if TINY_HAS_MPI
// MPI's C interface; its long-deprecated C++ bindings stay out.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif
// NCCL for CUDA tensors: built with CUDA when NCCL is installed (it comes with the toolkit).
#ifndef TINY_HAS_NCCL
#define TINY_HAS_NCCL 0
#endif
#if TINY_HAS_NCCL
#include <cuda_runtime.h>
#include <nccl.h>
#endif

namespace tiny::dist {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// The collectives, as the fingerprint names them.
enum class Call : int64_t { all_reduce, broadcast, all_gather, reduce_scatter, barrier };

const char* call_name(Call c) {
  switch (c) {
    case Call::all_reduce: return "all_reduce";
    case Call::broadcast: return "broadcast";
    case Call::all_gather: return "all_gather_into_tensor";
    case Call::reduce_scatter: return "reduce_scatter_tensor";
    case Call::barrier: return "barrier";
  }
  return "?";
}

const char* op_name(ReduceOp op) { return op == ReduceOp::SUM ? "SUM" : "AVG"; }

// What every rank must agree on before a collective runs: the call, its place in the
// sequence, the element count and dtype of the tensor each rank hands it, and the reduce op or
// source rank.
struct Fingerprint {
  int64_t call, seq, numel, dtype, arg;
  bool operator==(const Fingerprint&) const = default;
};
constexpr int kFingerprintWords = sizeof(Fingerprint) / sizeof(int64_t);

[[maybe_unused]] std::string describe(const Fingerprint& f) {
  const Call call = static_cast<Call>(f.call);
  std::string s = call_name(call);
  if (call == Call::barrier) return s + "()";
  s += "(" + std::to_string(f.numel) + " " + dtype_name(static_cast<DType>(f.dtype)) +
       " elements";
  if (call == Call::all_reduce || call == Call::reduce_scatter)
    s += std::string(", ") + op_name(static_cast<ReduceOp>(f.arg));
  if (call == Call::broadcast) s += ", src " + std::to_string(f.arg);
  return s + ")";
}

}  // namespace

namespace detail {

// A collective's state, shared by its Work handles and the communication thread.
struct WorkState {
  std::mutex m;
  std::condition_variable cv;
  bool done = false;
  std::string error;
  double seconds = 0;
};

}  // namespace detail

bool Work::is_completed() const {
  if (!state_) return true;
  std::lock_guard lock(state_->m);
  return state_->done;
}

void Work::wait() {
  if (!state_) return;
  std::unique_lock lock(state_->m);
  state_->cv.wait(lock, [&] { return state_->done; });
  if (!state_->error.empty()) throw RuntimeError(state_->error);
}

double Work::seconds() const {
  if (!state_) return 0;
  std::lock_guard lock(state_->m);
  return state_->seconds;
}

double ring_all_reduce_bytes(int64_t world_size, double bytes) {
  if (world_size < 1)
    throw ValueError("ring_all_reduce_bytes: world_size must be at least 1, got " +
                     std::to_string(world_size));
  if (!(bytes >= 0)) throw ValueError("ring_all_reduce_bytes: bytes must be >= 0");
  // BEGIN SOLUTION ch10 ring_all_reduce_bytes
  // The tensor is cut into N chunks. Reduce-scatter: in each of N - 1 steps every rank sends one
  // chunk to its neighbour, which adds it to its own; afterwards each rank holds one chunk's
  // full sum. All-gather: N - 1 more steps pass the finished chunks around the ring.
  const double chunk = bytes / static_cast<double>(world_size);
  return 2.0 * static_cast<double>(world_size - 1) * chunk;
  // END SOLUTION ch10 ring_all_reduce_bytes
}

std::pair<int64_t, int64_t> shard_range(int64_t batch, int rank, int world_size) {
  if (world_size < 1) throw ValueError("shard_range: world_size must be at least 1");
  if (rank < 0 || rank >= world_size)
    throw ValueError("shard_range: rank " + std::to_string(rank) + " is not in [0, " +
                     std::to_string(world_size) + ")");
  if (batch < 0) throw ValueError("shard_range: batch must be >= 0");
  const int64_t base = batch / world_size, extra = batch % world_size;
  const int64_t begin = rank * base + std::min<int64_t>(rank, extra);
  return {begin, begin + base + (rank < extra ? 1 : 0)};
}

// ---- the process group --------------------------------------------------------------------------

namespace {

struct Group;

// One queued collective.
struct Job {
  Fingerprint fingerprint;
  std::shared_ptr<detail::WorkState> state;
  int64_t bytes = 0;
  Tensor keep;  // the tensors stay alive until the collective is over
  Tensor keep2;
#if TINY_HAS_MPI
  std::function<int(MPI_Request*)> start;  // posts the nonblocking MPI call
#endif
  std::function<void()> finish;  // runs on the communication thread once it has completed
  // A CUDA tensor's collective (NCCL): launches it and waits for it until the deadline;
  // returns "" when done, "timeout", or the error.
  std::function<std::string(Group&, Clock::time_point deadline)> device_work;
};

struct Group {
  int rank = 0, size = 1;
  std::string backend;
  double timeout_s = 300;
  int64_t seq = 0;  // collectives called so far (the caller's thread)

  std::mutex m;
  std::condition_variable cv;
  std::deque<Job> queue;
  bool stopping = false;
  std::string broken;  // the first failure; later collectives fail at once
  // Set at exit when the group was not destroyed: a collective still waiting gives up at once
  // (the process is leaving, and mpirun will stop the others).
  std::atomic<bool> abandon{false};
  CommStats stats;
  std::thread worker;
#if TINY_HAS_MPI
  MPI_Op sum_half = MPI_OP_NULL, sum_bfloat16 = MPI_OP_NULL;
#endif
#if TINY_HAS_NCCL
  ncclComm_t nccl = nullptr;
  cudaStream_t stream = nullptr;  // NCCL's own stream, which does not wait for the default one
#endif
  int cuda_device = -1;  // the GPU this rank's NCCL communicator uses

  std::string prefix() const { return "[rank " + std::to_string(rank) + "] "; }
  void run();
  void execute(Job& job);
};

std::unique_ptr<Group> g_group;

// The group; PyTorch's error, word for word, before init_process_group() (a ValueError in 2.x,
// a RuntimeError in 1.13).
Group& group() {
  if (!g_group)
    throw ValueError("Default process group has not been initialized, please make sure to call "
                       "init_process_group.");
  return *g_group;
}

void complete(Job& job, std::string error, double seconds) {
  std::lock_guard lock(job.state->m);
  job.state->done = true;
  job.state->error = std::move(error);
  job.state->seconds = seconds;
  job.state->cv.notify_all();
}

void Group::run() {
  for (;;) {
    Job job;
    {
      std::unique_lock lock(m);
      cv.wait(lock, [&] { return stopping || !queue.empty(); });
      if (queue.empty()) return;
      job = std::move(queue.front());
      queue.pop_front();
    }
    execute(job);
  }
}

#if TINY_HAS_MPI

// Tests the request until it completes or the deadline passes. Between tests the thread
// yields, then sleeps briefly, so that a rank waiting for a slow one leaves the cores to those
// still computing (four ranks share two cores here).
bool wait_for(MPI_Request* request, Clock::time_point deadline, const std::atomic<bool>& abandon) {
  for (int spins = 0;; ++spins) {
    int flag = 0;
    MPI_Test(request, &flag, MPI_STATUS_IGNORE);
    if (flag) return true;
    if (Clock::now() > deadline || abandon) return false;
    if (spins < 50) std::this_thread::yield();
    else std::this_thread::sleep_for(std::chrono::microseconds(spins < 1000 ? 20 : 200));
  }
}

void Group::execute(Job& job) {
  const std::string what = describe(job.fingerprint);
  const std::string name = call_name(static_cast<Call>(job.fingerprint.call));
  {
    std::lock_guard lock(m);
    if (!broken.empty()) {
      complete(job, prefix() + name + ": the process group cannot be used after an earlier " +
                        "failure: " + broken, 0);
      return;
    }
  }
  const auto t0 = Clock::now();
  const auto deadline = t0 + std::chrono::duration_cast<Clock::duration>(
                                 std::chrono::duration<double>(timeout_s));
  auto fail = [&](std::string message) {
    {
      std::lock_guard lock(m);
      if (broken.empty()) broken = message;
    }
    complete(job, std::move(message), seconds_since(t0));
  };
  auto timed_out = [&](const char* stage) {
    fail(prefix() + name + " (collective #" + std::to_string(job.fingerprint.seq) + ", " + what +
         ") timed out after " + strprintf("%g", timeout_s) + " s " + stage +
         ": a rank failed, or took another path and never called it (TINY_DIST_TIMEOUT sets "
         "the limit in seconds)");
  };
  // 1. Every rank says what it is about to do.
  std::vector<Fingerprint> all(static_cast<size_t>(size));
  MPI_Request request;
  MPI_Iallgather(&job.fingerprint, kFingerprintWords, MPI_INT64_T, all.data(), kFingerprintWords,
                 MPI_INT64_T, MPI_COMM_WORLD, &request);
  if (!wait_for(&request, deadline, abandon))
    return timed_out("waiting for the other ranks to reach it");
  for (int r = 0; r < size; ++r)
    if (!(all[static_cast<size_t>(r)] == job.fingerprint)) {
      const Fingerprint& theirs = all[static_cast<size_t>(r)];
      return fail(prefix() + "the ranks do not call the same collective: rank " +
                  std::to_string(rank) + " calls " + what + " as collective #" +
                  std::to_string(job.fingerprint.seq) + ", rank " + std::to_string(r) +
                  " calls " + describe(theirs) + " as collective #" + std::to_string(theirs.seq));
    }
  // 2. The collective itself: a CUDA tensor's through NCCL (device_work), a CPU tensor's through
  //    MPI (start).
  if (job.device_work) {
    const std::string error = job.device_work(*this, deadline);
    if (error == "timeout") return timed_out("in the exchange");
    if (!error.empty()) return fail(prefix() + name + ": " + error);
  } else if (job.start) {
    const int rc = job.start(&request);
    if (rc != MPI_SUCCESS) {
      char text[MPI_MAX_ERROR_STRING];
      int length = 0;
      MPI_Error_string(rc, text, &length);
      return fail(prefix() + name + ": MPI failed: " + std::string(text, length));
    }
    if (!wait_for(&request, deadline, abandon)) return timed_out("in the exchange");
  }
  if (job.finish) job.finish();
  const double seconds = seconds_since(t0);
  {
    std::lock_guard lock(m);
    ++stats.calls;
    stats.bytes += job.bytes;
    stats.busy_seconds += seconds;
  }
  complete(job, "", seconds);
}

// MPI has no 16-bit floats: their sums are user-defined operations that add in float and round
// back, as every backend does for them.
template <typename T> void sum16(void* in, void* inout, int* len, MPI_Datatype*) {
  const T* a = static_cast<const T*>(in);
  T* b = static_cast<T*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = T(static_cast<float>(a[i]) + static_cast<float>(b[i]));
}

MPI_Datatype mpi_type(DType dtype) {
  switch (dtype) {
    case DType::Float32: return MPI_FLOAT;
    case DType::Float64: return MPI_DOUBLE;
    case DType::Int32: return MPI_INT32_T;
    case DType::Int64: return MPI_INT64_T;
    case DType::Int16: return MPI_INT16_T;
    case DType::Int8: return MPI_INT8_T;
    case DType::UInt8: return MPI_UINT8_T;
    case DType::Float16:
    case DType::BFloat16: return MPI_UINT16_T;
    case DType::Bool: return MPI_UINT8_T;
  }
  return MPI_BYTE;
}

// The datatype that moves the elements without looking at them (broadcast, all-gather).
MPI_Datatype mpi_raw_type(DType dtype) {
  switch (element_size(dtype)) {
    case 1: return MPI_UINT8_T;
    case 2: return MPI_UINT16_T;
    case 4: return MPI_UINT32_T;
    default: return MPI_UINT64_T;
  }
}

MPI_Op mpi_sum(const Group& g, DType dtype) {
  if (dtype == DType::Float16) return g.sum_half;
  if (dtype == DType::BFloat16) return g.sum_bfloat16;
  return MPI_SUM;
}

#else

void Group::execute(Job& job) { complete(job, prefix() + "built without MPI", 0); }

#endif

// Divides the n elements at `data` by `divisor` in place (ReduceOp.AVG after the sum).
[[maybe_unused]] void divide_in_place(void* data, int64_t n, DType dtype, int divisor) {
  dispatch_floating(dtype, "all_reduce AVG", [&]<typename T>() {
    T* p = static_cast<T*>(data);
    using M = opmath_t<T>;
    for (int64_t i = 0; i < n; ++i) p[i] = T(static_cast<M>(p[i]) / static_cast<M>(divisor));
  });
}

// Checks one tensor handed to a collective, on the caller's thread.
void check_tensor(const Group& g, const char* call, const Tensor& t, const char* which) {
  const std::string where = g.prefix() + call + ": ";
  if (!t.defined()) throw ValueError(where + "the " + which + " tensor is undefined");
  if (!t.is_contiguous()) throw ValueError(where + "Tensors must be contiguous");
  if (t.device().is_cuda()) {
    if (g.backend != "nccl")
      throw RuntimeError(where + "the " + which + " tensor is on " + t.device().str() +
                         ": CUDA tensors go through NCCL, and this group was started with the "
                         "\"" + g.backend + "\" backend (init_process_group(\"nccl\"))");
    if (t.device().index != g.cuda_device)
      throw RuntimeError(where + "the " + which + " tensor is on " + t.device().str() +
                         ", but this rank's NCCL communicator uses cuda:" +
                         std::to_string(g.cuda_device) + " (its local rank modulo the GPUs)");
  }
  if (t.numel() > INT_MAX)
    throw ValueError(where + "the " + which + " tensor has " + std::to_string(t.numel()) +
                     " elements; one MPI call moves at most 2^31 - 1");
}

// An output tensor must hold what the input holds, where the input is.
void check_same_kind(const Group& g, const char* call, const Tensor& output, const Tensor& input) {
  if (output.dtype() != input.dtype())
    throw TypeError(g.prefix() + call + ": output is " + dtype_name(output.dtype()) +
                    ", input is " + dtype_name(input.dtype()));
  if (output.device() != input.device())
    throw RuntimeError(g.prefix() + call + ": output is on " + output.device().str() +
                       ", input on " + input.device().str());
}

void check_reduction(const Group& g, const char* call, const Tensor& t, ReduceOp op) {
  if (t.dtype() == kBool)
    throw TypeError(g.prefix() + call + ": bool tensors cannot be reduced with ReduceOp." +
                    op_name(op));
  if (op == ReduceOp::AVG && !is_floating(t.dtype()))
    throw TypeError(g.prefix() + call + ": ReduceOp.AVG needs a floating-point tensor, got " +
                    dtype_name(t.dtype()));
}

#if TINY_HAS_NCCL

std::string nccl_error(ncclResult_t r) { return std::string("NCCL error: ") + ncclGetErrorString(r); }

ncclDataType_t nccl_type(DType dtype) {
  switch (dtype) {
    case DType::Float32: return ncclFloat32;
    case DType::Float64: return ncclFloat64;
    case DType::Float16: return ncclFloat16;
    case DType::BFloat16: return ncclBfloat16;
    case DType::Int32: return ncclInt32;
    case DType::Int64: return ncclInt64;
    case DType::Int8: return ncclInt8;
    case DType::UInt8:
    case DType::Bool: return ncclUint8;
    case DType::Int16: break;
  }
  throw TypeError(std::string("NCCL has no ") + dtype_name(dtype) +
                  " type: convert the tensor (to int32, say) before the collective");
}

ncclRedOp_t nccl_op(ReduceOp op) { return op == ReduceOp::SUM ? ncclSum : ncclAvg; }

// A CUDA tensor's collective. An event recorded now, on the default stream where the library's
// kernels run, marks the moment the tensor is ready; the communication thread makes NCCL's stream
// wait for it, launches the collective there (so it overlaps the kernels queued after it), and
// polls its end until the deadline. A collective that misses it aborts the communicator.
Job nccl_job(Group& g, std::function<ncclResult_t(cudaStream_t)> launch) {
  cudaEvent_t ready = nullptr;
  const cudaError_t err = cudaSetDevice(g.cuda_device) == cudaSuccess
                              ? cudaEventCreateWithFlags(&ready, cudaEventDisableTiming)
                              : cudaErrorInvalidDevice;
  if (err != cudaSuccess || cudaEventRecord(ready, nullptr) != cudaSuccess)
    throw RuntimeError(g.prefix() + "CUDA error before a collective: " +
                       cudaGetErrorString(cudaGetLastError()));
  Job job;
  job.device_work = [ready, launch = std::move(launch)](Group& group,
                                                        Clock::time_point deadline) {
    cudaSetDevice(group.cuda_device);
    std::string error;
    cudaEvent_t done = nullptr;
    if (!group.nccl) error = "the NCCL communicator was aborted by an earlier failure";
    if (error.empty() && cudaStreamWaitEvent(group.stream, ready, 0) != cudaSuccess)
      error = std::string("CUDA error: ") + cudaGetErrorString(cudaGetLastError());
    if (error.empty()) {
      const ncclResult_t r = launch(group.stream);
      if (r != ncclSuccess) error = nccl_error(r);
    }
    if (error.empty() && (cudaEventCreateWithFlags(&done, cudaEventDisableTiming) != cudaSuccess ||
                          cudaEventRecord(done, group.stream) != cudaSuccess))
      error = std::string("CUDA error: ") + cudaGetErrorString(cudaGetLastError());
    for (int spins = 0; error.empty(); ++spins) {
      const cudaError_t q = cudaEventQuery(done);
      if (q == cudaSuccess) break;
      if (q != cudaErrorNotReady) {
        error = std::string("CUDA error: ") + cudaGetErrorString(q);
        break;
      }
      ncclResult_t async = ncclSuccess;
      ncclCommGetAsyncError(group.nccl, &async);
      if (async != ncclSuccess) {
        error = nccl_error(async);
        break;
      }
      if (Clock::now() > deadline || group.abandon) {
        ncclCommAbort(group.nccl);
        group.nccl = nullptr;
        error = "timeout";
        break;
      }
      if (spins < 50) std::this_thread::yield();
      else std::this_thread::sleep_for(std::chrono::microseconds(spins < 1000 ? 20 : 200));
    }
    if (done) cudaEventDestroy(done);
    cudaEventDestroy(ready);
    return error;
  };
  return job;
}

#endif

Work enqueue(Group& g, Call call, const Tensor& t, int64_t arg, Job job, bool async_op) {
  job.fingerprint = {static_cast<int64_t>(call), g.seq++, t.defined() ? t.numel() : 0,
                     t.defined() ? static_cast<int64_t>(t.dtype()) : 0, arg};
  job.state = std::make_shared<detail::WorkState>();
  Work work(job.state);
  {
    std::lock_guard lock(g.m);
    g.queue.push_back(std::move(job));
  }
  g.cv.notify_one();
  if (!async_op) work.wait();
  return work;
}

}  // namespace

bool is_mpi_available() { return TINY_HAS_MPI; }

std::string mpirun_path() {
#ifdef TINY_MPIEXEC
  return TINY_MPIEXEC;
#else
  return "";
#endif
}

void init_process_group(const std::string& backend, double timeout_s) {
  if (g_group) throw RuntimeError("trying to initialize the default process group twice!");
  if (backend != "mpi" && backend != "nccl")
    throw ValueError("Invalid backend: '" + backend + "' (this library has \"mpi\" and \"nccl\")");
  if (!TINY_HAS_MPI)
    throw RuntimeError(
        "Distributed package doesn't have MPI built in: install Open MPI (make deps installs "
        "it) and rebuild");
  if (backend == "nccl" && !is_nccl_available())
    throw RuntimeError("Distributed package doesn't have NCCL built in (a CUDA build with NCCL "
                       "installed has it)");
  if (timeout_s < 0 || !(timeout_s == timeout_s))
    throw ValueError("init_process_group: timeout_s must be >= 0");
  if (timeout_s == 0) {
    timeout_s = 300;
    if (const char* env = std::getenv("TINY_DIST_TIMEOUT")) {
      char* end = nullptr;
      const double v = std::strtod(env, &end);
      if (end == env || *end != '\0' || !(v > 0))
        throw ValueError(std::string("TINY_DIST_TIMEOUT must be a number of seconds > 0, got '") +
                         env + "'");
      timeout_s = v;
    }
  }
  // torchrun starts processes that find each other over TCP; these are found by mpirun.
  const char* world = std::getenv("WORLD_SIZE");
  if (world && std::atoi(world) > 1 && !std::getenv("OMPI_COMM_WORLD_SIZE") &&
      !std::getenv("PMIX_RANK"))
    throw RuntimeError(std::string("WORLD_SIZE=") + world +
                       " is set (torchrun's variables), but this process was not started by "
                       "mpirun; start the processes with `mpirun -n " + world + " ./program`");
  auto g = std::make_unique<Group>();
  g->backend = backend;
  g->timeout_s = timeout_s;
#if TINY_HAS_MPI
  int initialized = 0, finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized)
    throw RuntimeError("init_process_group: MPI was finalised by destroy_process_group() and "
                       "cannot start again in this process");
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
    if (provided < MPI_THREAD_SERIALIZED)
      throw RuntimeError("init_process_group: this MPI cannot be called from a second thread");
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &g->rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g->size);
  // Errors come back as codes, which the communication thread turns into exceptions.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Op_create(&sum16<Half>, 1, &g->sum_half);
  MPI_Op_create(&sum16<BFloat16>, 1, &g->sum_bfloat16);
#endif
#if TINY_HAS_NCCL
  if (backend == "nccl") {
    // One GPU per rank: the rank's place on its machine, modulo the GPUs there. Rank 0 makes the
    // communicator's unique id and MPI hands it to the others.
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0)
      throw RuntimeError("[rank " + std::to_string(g->rank) + "] init_process_group(\"nccl\"): "
                         "no CUDA device is visible to this process");
    const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK");
    g->cuda_device = (local ? std::atoi(local) : g->rank) % devices;
    cudaSetDevice(g->cuda_device);
    ncclUniqueId id{};
    if (g->rank == 0) {
      const ncclResult_t r = ncclGetUniqueId(&id);
      if (r != ncclSuccess) throw RuntimeError("[rank 0] ncclGetUniqueId: " + nccl_error(r));
    }
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    const ncclResult_t r = ncclCommInitRank(&g->nccl, g->size, id, g->rank);
    if (r != ncclSuccess)
      throw RuntimeError("[rank " + std::to_string(g->rank) + "] ncclCommInitRank: " +
                         nccl_error(r));
    if (cudaStreamCreateWithFlags(&g->stream, cudaStreamNonBlocking) != cudaSuccess)
      throw RuntimeError("[rank " + std::to_string(g->rank) + "] cudaStreamCreateWithFlags: " +
                         cudaGetErrorString(cudaGetLastError()));
  }
#endif
  Group* raw = g.get();
  g->worker = std::thread([raw] { raw->run(); });
  g_group = std::move(g);
}

bool is_initialized() { return g_group != nullptr; }

namespace {

// Stops the communication thread once the queue is empty.
void stop_worker(Group& g) {
  {
    std::lock_guard lock(g.m);
    g.stopping = true;
  }
  g.cv.notify_all();
  if (g.worker.joinable()) g.worker.join();
}

// At exit, a group that destroy_process_group() did not end: its thread is stopped, and MPI is
// not finalised (MPI_Finalize waits for every rank, and this one may be leaving because it
// failed): mpirun then sees a rank end without finalising and stops the job.
struct ExitGuard {
  ~ExitGuard() {
    if (!g_group) return;
    g_group->abandon = true;
    stop_worker(*g_group);
  }
} g_exit_guard;

}  // namespace

void destroy_process_group() {
  Group& g = group();
  stop_worker(g);
  const bool healthy = g.broken.empty();
#if TINY_HAS_NCCL
  if (g.nccl) (healthy ? ncclCommDestroy(g.nccl) : ncclCommAbort(g.nccl));
  if (g.stream) cudaStreamDestroy(g.stream);
#endif
#if TINY_HAS_MPI
  if (healthy) {
    MPI_Op_free(&g.sum_half);
    MPI_Op_free(&g.sum_bfloat16);
    MPI_Finalize();
  }
#endif
  const std::string broken = g.broken;
  g_group.reset();
  if (!healthy)
    throw RuntimeError("[rank " + std::to_string(g.rank) + "] destroy_process_group: the group "
                       "failed earlier (" + broken + "); MPI is left unfinalised so that mpirun "
                       "stops the other ranks");
}

int get_rank() { return group().rank; }
int get_world_size() { return group().size; }
std::string get_backend() { return group().backend; }
double get_timeout() { return group().timeout_s; }

Work all_reduce(const Tensor& tensor, ReduceOp op, bool async_op) {
  Group& g = group();
  check_tensor(g, "all_reduce", tensor, "input");
  check_reduction(g, "all_reduce", tensor, op);
  Job job;
#if TINY_HAS_NCCL
  if (tensor.device().is_cuda()) {
    void* data = tensor.data_ptr();
    const size_t n = static_cast<size_t>(tensor.numel());
    const ncclDataType_t type = nccl_type(tensor.dtype());
    job = nccl_job(g, [=](cudaStream_t s) {
      return ncclAllReduce(data, data, n, type, nccl_op(op), g_group->nccl, s);
    });
  }
#endif
  job.keep = tensor;
  job.bytes = tensor.nbytes();
#if TINY_HAS_MPI
  void* data = tensor.data_ptr();
  const int n = static_cast<int>(tensor.numel());
  const DType dtype = tensor.dtype();
  const MPI_Op sum = mpi_sum(g, dtype);
  job.start = [=](MPI_Request* r) {
    return MPI_Iallreduce(MPI_IN_PLACE, data, n, mpi_type(dtype), sum, MPI_COMM_WORLD, r);
  };
  if (op == ReduceOp::AVG && !job.device_work) {
    const int size = g.size;
    job.finish = [=] { divide_in_place(data, n, dtype, size); };
  }
#endif
  return enqueue(g, Call::all_reduce, tensor, static_cast<int64_t>(op), std::move(job), async_op);
}

Work broadcast(const Tensor& tensor, int src, bool async_op) {
  Group& g = group();
  check_tensor(g, "broadcast", tensor, "input");
  if (src < 0 || src >= g.size)
    throw ValueError(g.prefix() + "broadcast: src " + std::to_string(src) +
                     " is not a rank of this group of " + std::to_string(g.size));
  Job job;
#if TINY_HAS_NCCL
  if (tensor.device().is_cuda()) {
    void* data = tensor.data_ptr();
    const size_t n = static_cast<size_t>(tensor.numel());
    const ncclDataType_t type = nccl_type(tensor.dtype());
    job = nccl_job(g, [=](cudaStream_t s) {
      return ncclBroadcast(data, data, n, type, src, g_group->nccl, s);
    });
  }
#endif
  job.keep = tensor;
  job.bytes = tensor.nbytes();
#if TINY_HAS_MPI
  void* data = tensor.data_ptr();
  const int n = static_cast<int>(tensor.numel());
  const MPI_Datatype type = mpi_raw_type(tensor.dtype());
  job.start = [=](MPI_Request* r) { return MPI_Ibcast(data, n, type, src, MPI_COMM_WORLD, r); };
#endif
  return enqueue(g, Call::broadcast, tensor, src, std::move(job), async_op);
}

Work all_gather_into_tensor(const Tensor& output, const Tensor& input, bool async_op) {
  Group& g = group();
  check_tensor(g, "all_gather_into_tensor", input, "input");
  check_tensor(g, "all_gather_into_tensor", output, "output");
  check_same_kind(g, "all_gather_into_tensor", output, input);
  if (output.numel() != input.numel() * g.size)
    throw ValueError(g.prefix() + "all_gather_into_tensor: output tensor size must be equal to " +
                     "world_size times input tensor size (" + std::to_string(output.numel()) +
                     " != " + std::to_string(g.size) + " x " + std::to_string(input.numel()) +
                     ")");
  if (output.numel() > INT_MAX)
    throw ValueError(g.prefix() + "all_gather_into_tensor: the output has more than 2^31 - 1 "
                     "elements");
  Job job;
#if TINY_HAS_NCCL
  if (input.device().is_cuda()) {
    const void* in = input.data_ptr();
    void* out = output.data_ptr();
    const size_t n = static_cast<size_t>(input.numel());
    const ncclDataType_t type = nccl_type(input.dtype());
    job = nccl_job(g, [=](cudaStream_t s) {
      return ncclAllGather(in, out, n, type, g_group->nccl, s);
    });
  }
#endif
  job.keep = input;
  job.keep2 = output;
  job.bytes = input.nbytes();
#if TINY_HAS_MPI
  const void* in = input.data_ptr();
  void* out = output.data_ptr();
  const int n = static_cast<int>(input.numel());
  const MPI_Datatype type = mpi_raw_type(input.dtype());
  job.start = [=](MPI_Request* r) {
    return MPI_Iallgather(in, n, type, out, n, type, MPI_COMM_WORLD, r);
  };
#endif
  return enqueue(g, Call::all_gather, input, 0, std::move(job), async_op);
}

Work reduce_scatter_tensor(const Tensor& output, const Tensor& input, ReduceOp op,
                           bool async_op) {
  Group& g = group();
  check_tensor(g, "reduce_scatter_tensor", input, "input");
  check_tensor(g, "reduce_scatter_tensor", output, "output");
  check_reduction(g, "reduce_scatter_tensor", input, op);
  check_same_kind(g, "reduce_scatter_tensor", output, input);
  if (input.numel() != output.numel() * g.size)
    throw ValueError(g.prefix() + "reduce_scatter_tensor: input tensor must be the same size " +
                     "as output size times world size (" + std::to_string(input.numel()) +
                     " != " + std::to_string(g.size) + " x " + std::to_string(output.numel()) +
                     ")");
  Job job;
#if TINY_HAS_NCCL
  if (input.device().is_cuda()) {
    const void* in = input.data_ptr();
    void* out = output.data_ptr();
    const size_t n = static_cast<size_t>(output.numel());
    const ncclDataType_t type = nccl_type(input.dtype());
    job = nccl_job(g, [=](cudaStream_t s) {
      return ncclReduceScatter(in, out, n, type, nccl_op(op), g_group->nccl, s);
    });
  }
#endif
  job.keep = input;
  job.keep2 = output;
  job.bytes = input.nbytes();
#if TINY_HAS_MPI
  const void* in = input.data_ptr();
  void* out = output.data_ptr();
  const int n = static_cast<int>(output.numel());
  const DType dtype = input.dtype();
  const MPI_Op sum = mpi_sum(g, dtype);
  job.start = [=](MPI_Request* r) {
    return MPI_Ireduce_scatter_block(in, out, n, mpi_type(dtype), sum, MPI_COMM_WORLD, r);
  };
  if (op == ReduceOp::AVG && !job.device_work) {
    const int size = g.size;
    job.finish = [=] { divide_in_place(out, n, dtype, size); };
  }
#endif
  return enqueue(g, Call::reduce_scatter, input, static_cast<int64_t>(op), std::move(job),
                 async_op);
}

void barrier() {
  Group& g = group();
  Job job;
#if TINY_HAS_MPI
  job.start = [](MPI_Request* r) { return MPI_Ibarrier(MPI_COMM_WORLD, r); };
#endif
  enqueue(g, Call::barrier, Tensor(), 0, std::move(job), false);
}

CommStats comm_stats() {
  Group& g = group();
  std::lock_guard lock(g.m);
  return g.stats;
}

void reset_comm_stats() {
  Group& g = group();
  std::lock_guard lock(g.m);
  g.stats = {};
}

bool is_nccl_available() { return TINY_HAS_NCCL; }

// ---- DistributedDataParallel ------------------------------------------------------------------

namespace {

struct Bucket {
  std::vector<size_t> params;   // indices into State::params
  std::vector<int64_t> offsets; // where each parameter's gradient sits in `buffer`
  int64_t numel = 0;
  Tensor buffer;
  size_t pending = 0;  // gradients not yet ready in this backward
  Work work;
  bool launched = false;
};

}  // namespace

struct DistributedDataParallel::State {
  std::vector<Tensor> params;
  std::vector<Bucket> buckets;
  std::vector<size_t> bucket_of;
  std::vector<std::vector<size_t>> bucket_indices;
  std::vector<bool> ready;
  size_t ready_count = 0;
  bool overlap = true;
  int world_size = 1;
  double last_wait = 0;

  void reset() {
    std::fill(ready.begin(), ready.end(), false);
    ready_count = 0;
    for (Bucket& b : buckets) {
      b.pending = b.params.size();
      b.launched = false;
      b.work = Work();
    }
  }

  void launch(Bucket& b) {
    for (size_t k = 0; k < b.params.size(); ++k) {
      const Tensor& p = params[b.params[k]];
      b.buffer.narrow(0, b.offsets[k], p.numel()).copy_(p.grad().reshape({-1}));
    }
    // PyTorch's default DDP hook divides by the world size before summing; for 1, 2 and 4 ranks
    // the division is exact, so it equals averaging afterwards.
    if (world_size > 1) b.buffer.div_(world_size);
    b.work = all_reduce(b.buffer, ReduceOp::SUM, /*async_op=*/true);
    b.launched = true;
  }

  // The last gradient of this backward is ready: wait for every bucket and hand the averages
  // back to the .grad tensors.
  void finish() {
    const auto t0 = Clock::now();
    for (Bucket& b : buckets)
      if (!b.launched) launch(b);
    for (Bucket& b : buckets) b.work.wait();
    last_wait = seconds_since(t0);
    for (Bucket& b : buckets)
      for (size_t k = 0; k < b.params.size(); ++k) {
        const Tensor& p = params[b.params[k]];
        Tensor grad = p.grad();
        grad.copy_(b.buffer.narrow(0, b.offsets[k], p.numel()).view(p.shape()));
      }
  }

  void on_gradient(size_t i) {
    if (ready[i])
      throw RuntimeError(
          "Expected to mark a variable ready only once. This error is caused by a parameter "
          "receiving two gradients in one backward pass, or by a second backward without a "
          "forward through DistributedDataParallel in between (parameter index " +
          std::to_string(i) + ")");
    ready[i] = true;
    ++ready_count;
    Bucket& b = buckets[bucket_of[i]];
    if (--b.pending == 0 && overlap) launch(b);
    if (ready_count == params.size()) finish();
  }
};

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<nn::Module> module,
                                                 DDPOptions options)
    : module_(std::move(module)), state_(std::make_shared<State>()) {
  Group& g = group();
  if (!module_) throw ValueError("DistributedDataParallel: the module is null");
  if (options.bucket_cap_bytes <= 0)
    throw ValueError("DistributedDataParallel: bucket_cap_bytes must be > 0");
  State& s = *state_;
  s.overlap = options.overlap;
  s.world_size = g.size;
  s.params = module_->parameters();
  if (s.params.empty())
    throw RuntimeError("DistributedDataParallel is not needed when a module doesn't have any "
                       "parameter that requires a gradient.");
  const Device device = s.params[0].device();
  const DType dtype = s.params[0].dtype();
  for (const Tensor& p : s.params) {
    if (!p.is_contiguous())
      throw ValueError("DistributedDataParallel: every parameter must be contiguous");
    if (p.device() != device || p.dtype() != dtype)
      throw ValueError("DistributedDataParallel: every parameter must have the same device and "
                       "dtype (" + device.str() + ", " + dtype_name(dtype) + ")");
  }
  // Every rank starts from rank 0's weights.
  {
    NoGradGuard no_grad;
    for (const Tensor& p : s.params) broadcast(p.detach(), 0);
  }
  // Buckets in reverse order of registration: backward reaches the last layers first.
  Bucket current;
  auto close = [&] {
    if (current.params.empty()) return;
    current.buffer = zeros({current.numel}, dtype, device);
    s.buckets.push_back(std::move(current));
    current = Bucket();
  };
  for (size_t k = s.params.size(); k-- > 0;) {
    const int64_t bytes = s.params[k].nbytes();
    if (!current.params.empty() &&
        static_cast<int64_t>(element_size(dtype)) * current.numel + bytes > options.bucket_cap_bytes)
      close();
    current.offsets.push_back(current.numel);
    current.params.push_back(k);
    current.numel += s.params[k].numel();
  }
  close();
  s.bucket_of.assign(s.params.size(), 0);
  for (size_t b = 0; b < s.buckets.size(); ++b) {
    s.bucket_indices.push_back(s.buckets[b].params);
    for (size_t i : s.buckets[b].params) s.bucket_of[i] = b;
  }
  s.ready.assign(s.params.size(), false);
  s.reset();
  std::weak_ptr<State> weak = state_;
  for (size_t i = 0; i < s.params.size(); ++i)
    s.params[i].register_post_accumulate_grad_hook([weak, i](const Tensor&) {
      if (auto state = weak.lock()) state->on_gradient(i);
    });
}

DistributedDataParallel::~DistributedDataParallel() {
  // A bucket still in flight holds its buffer alive in the job; wait so that no collective
  // outlives the object that started it.
  for (Bucket& b : state_->buckets) {
    try {
      b.work.wait();
    } catch (const std::exception&) {
    }
  }
}

Tensor DistributedDataParallel::forward(const Tensor& input) {
  State& s = *state_;
  if (s.ready_count != 0 && s.ready_count != s.params.size()) {
    std::string unused;
    for (size_t i = 0; i < s.params.size(); ++i)
      if (!s.ready[i]) unused += (unused.empty() ? "" : ", ") + std::to_string(i);
    throw RuntimeError(
        "Expected to have finished reduction in the prior iteration before starting a new one. "
        "This error indicates that your module has parameters that were not used in producing "
        "loss. Parameter indices which did not receive grad for rank " +
        std::to_string(get_rank()) + ": " + unused);
  }
  s.reset();
  return module_->forward(input);
}

const std::vector<std::vector<size_t>>& DistributedDataParallel::buckets() const {
  return state_->bucket_indices;
}

double DistributedDataParallel::last_wait_seconds() const { return state_->last_wait; }

// ---- ZeroAdamW ------------------------------------------------------------------------------------

namespace {

// ceil(numel / N): every rank's chunk is this long, the last ones padded.
int64_t chunk_size(int64_t numel, int world_size) {
  return (numel + world_size - 1) / world_size;
}

std::pair<int64_t, int64_t> chunk_range(int64_t numel, int rank, int world_size) {
  const int64_t c = chunk_size(numel, world_size);
  const int64_t begin = std::min(numel, c * rank);
  return {begin, std::min(numel, begin + c)};
}

// `shard`'s elements in a buffer of `c`, zeros after them.
Tensor padded(const Tensor& shard, int64_t c) {
  Tensor out = zeros({c}, shard.dtype(), shard.device());
  if (shard.numel() > 0) out.narrow(0, 0, shard.numel()).copy_(shard);
  return out;
}

// Every rank's chunk of a flattened tensor of `numel` elements gathered into one tensor.
Tensor gather_chunks(const Tensor& shard, int64_t numel, int world_size) {
  const int64_t c = chunk_size(numel, world_size);
  Tensor all = empty({c * world_size}, shard.dtype(), shard.device());
  all_gather_into_tensor(all, padded(shard, c));
  return all.narrow(0, 0, numel);
}

}  // namespace

ZeroAdamW::ZeroAdamW(std::vector<Tensor> params, optim::AdamWOptions options, int stage)
    : params_(std::move(params)), stage_(stage) {
  Group& g = group();
  if (stage != 1 && stage != 2)
    throw ValueError("ZeroAdamW: stage must be 1 or 2, got " + std::to_string(stage));
  for (const Tensor& p : params_) {
    if (!p.defined()) throw ValueError("optimizer got an undefined tensor as a parameter");
    if (!p.is_contiguous()) throw ValueError("ZeroAdamW: every parameter must be contiguous");
    const auto [begin, end] = chunk_range(p.numel(), g.rank, g.size);
    // A view of the parameter's own memory: AdamW's in-place update of the chunk is the update
    // of the parameter, and its m and v have the chunk's size.
    Tensor shard = p.detach().view({-1}).narrow(0, begin, end - begin);
    shard.requires_grad_();
    shards_.push_back(shard);
  }
  local_ = std::make_unique<optim::AdamW>(shards_, options);
}

std::pair<int64_t, int64_t> ZeroAdamW::chunk(size_t index) const {
  if (index >= params_.size())
    throw IndexError("ZeroAdamW.chunk: index " + std::to_string(index) + " out of range for " +
                     std::to_string(params_.size()) + " parameters");
  return chunk_range(params_[index].numel(), get_rank(), get_world_size());
}

void ZeroAdamW::step() {
  Group& g = group();
  const int n = g.size;
  for (size_t i = 0; i < params_.size(); ++i)
    if (!params_[i].grad().defined())
      throw RuntimeError(g.prefix() + "ZeroAdamW.step: parameter " + std::to_string(i) +
                         " has no gradient (every rank must have every gradient to average)");
  NoGradGuard no_grad;
  // 1. Average the gradients: all of each (stage 1) or only this rank's chunk (stage 2). The
  //    calls are queued at once and the communication thread works through them.
  std::vector<Work> works;
  std::vector<Tensor> received(params_.size());
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i];
    Tensor grad = p.grad();
    if (!grad.is_contiguous()) {
      grad = grad.contiguous();
      p.set_grad(grad);
    }
    if (n > 1) grad.div_(n);
    if (stage_ == 1) {
      works.push_back(all_reduce(grad, ReduceOp::SUM, true));
    } else {
      const int64_t c = chunk_size(p.numel(), n);
      Tensor in = padded(grad.view({-1}), c * n);
      received[i] = empty({c}, grad.dtype(), grad.device());
      works.push_back(reduce_scatter_tensor(received[i], in, ReduceOp::SUM, true));
    }
  }
  for (Work& w : works) w.wait();
  for (size_t i = 0; i < params_.size(); ++i) {
    const int64_t len = shards_[i].numel();
    if (stage_ == 1) {
      const auto [begin, end] = chunk_range(params_[i].numel(), g.rank, n);
      shards_[i].set_grad(params_[i].grad().view({-1}).narrow(0, begin, end - begin));
    } else {
      shards_[i].set_grad(received[i].narrow(0, 0, len).clone());
      params_[i].set_grad(Tensor());  // stage 2 keeps no full gradient
    }
  }
  // 2. Update this rank's chunks; 3. gather every rank's chunks into every parameter.
  local_->step();
  works.clear();
  std::vector<Tensor> gathered(params_.size());
  for (size_t i = 0; i < params_.size(); ++i) {
    const int64_t c = chunk_size(params_[i].numel(), n);
    gathered[i] = empty({c * n}, params_[i].dtype(), params_[i].device());
    works.push_back(all_gather_into_tensor(gathered[i], padded(shards_[i].detach(), c), true));
  }
  for (size_t i = 0; i < params_.size(); ++i) {
    works[i].wait();
    params_[i].detach().view({-1}).copy_(gathered[i].narrow(0, 0, params_[i].numel()));
  }
}

void ZeroAdamW::zero_grad() {
  for (const Tensor& p : params_) p.set_grad(Tensor());
  local_->zero_grad();
}

optim::OptimizerState ZeroAdamW::consolidated_state_dict() {
  const int n = get_world_size();
  optim::OptimizerState local = local_->state_dict();
  optim::OptimizerState full;
  full.param_groups = local.param_groups;
  for (size_t i = 0; i < params_.size(); ++i) {
    auto it = local.state.find(static_cast<int64_t>(i));
    // Every rank steps every chunk (an empty one too), so the ranks agree on which state exists.
    if (it == local.state.end()) continue;
    std::map<std::string, Tensor> entry;
    for (const auto& [key, value] : it->second) {
      if (key == "step") {
        entry[key] = value.clone();
        continue;
      }
      entry[key] = gather_chunks(value.reshape({-1}), params_[i].numel(), n)
                       .view(params_[i].shape())
                       .clone();
    }
    full.state[static_cast<int64_t>(i)] = std::move(entry);
  }
  return full;
}

namespace {

std::string shard_file(const std::string& dir, int rank, int world_size) {
  return dir + "/optim-rank" + std::to_string(rank) + "-of-" + std::to_string(world_size) +
         ".safetensors";
}

}  // namespace

void ZeroAdamW::save(const std::string& dir) const {
  const int rank = get_rank(), n = get_world_size();
  std::filesystem::create_directories(dir);
  NamedTensors tensors;
  std::map<std::string, std::string> metadata{{"world_size", std::to_string(n)},
                                              {"rank", std::to_string(rank)},
                                              {"params", std::to_string(params_.size())}};
  const optim::OptimizerState local = local_->state_dict();
  for (size_t i = 0; i < params_.size(); ++i) {
    metadata["numel." + std::to_string(i)] = std::to_string(params_[i].numel());
    auto it = local.state.find(static_cast<int64_t>(i));
    if (it == local.state.end()) continue;
    for (const auto& [key, value] : it->second)
      tensors.emplace_back(std::to_string(i) + "." + key, value);
  }
  save_safetensors(shard_file(dir, rank, n), tensors, metadata);
  barrier();  // every shard is on disk when any rank returns
}

void ZeroAdamW::load(const std::string& dir) {
  const int rank = get_rank(), n = get_world_size();
  // The saving run's world size, from the first shard (every shard names it).
  std::string first;
  int saved_world = 0;
  for (int m = 1; m <= 4096 && first.empty(); ++m)
    if (std::filesystem::exists(shard_file(dir, 0, m))) {
      first = shard_file(dir, 0, m);
      saved_world = m;
    }
  if (first.empty())
    throw RuntimeError("[rank " + std::to_string(rank) + "] ZeroAdamW.load: no optimizer shard " +
                       "in '" + dir + "' (optim-rank0-of-<N>.safetensors)");
  std::vector<TensorFile> files;
  for (int r = 0; r < saved_world; ++r) {
    const std::string path = shard_file(dir, r, saved_world);
    if (!std::filesystem::exists(path))
      throw RuntimeError("[rank " + std::to_string(rank) + "] ZeroAdamW.load: '" + path +
                         "' is missing: the run saved " + std::to_string(saved_world) +
                         " shards");
    files.push_back(load_safetensors(path));
    const auto& meta = files.back().metadata;
    auto field = [&](const std::string& key) {
      auto it = meta.find(key);
      return it == meta.end() ? std::string() : it->second;
    };
    if (field("world_size") != std::to_string(saved_world) || field("rank") != std::to_string(r) ||
        field("params") != std::to_string(params_.size()))
      throw RuntimeError("[rank " + std::to_string(rank) + "] ZeroAdamW.load: '" + path +
                         "' is not shard " + std::to_string(r) + " of " +
                         std::to_string(saved_world) + " for " + std::to_string(params_.size()) +
                         " parameters");
    for (size_t i = 0; i < params_.size(); ++i)
      if (field("numel." + std::to_string(i)) != std::to_string(params_[i].numel()))
        throw RuntimeError("[rank " + std::to_string(rank) + "] ZeroAdamW.load: parameter " +
                           std::to_string(i) + " has " + std::to_string(params_[i].numel()) +
                           " elements here and " + field("numel." + std::to_string(i)) +
                           " in '" + path + "'");
  }
  optim::OptimizerState state = local_->state_dict();
  state.state.clear();
  for (size_t i = 0; i < params_.size(); ++i) {
    const std::string prefix = std::to_string(i) + ".";
    std::map<std::string, Tensor> entry;
    for (const auto& [name, tensor] : files[0].tensors) {
      if (name.rfind(prefix, 0) != 0) continue;
      const std::string key = name.substr(prefix.size());
      if (key == "step") {
        entry[key] = tensor;
        continue;
      }
      // The whole state of parameter i, re-cut for this world size.
      const int64_t numel = params_[i].numel();
      Tensor whole = empty({numel}, tensor.dtype());
      int64_t at = 0;
      for (int r = 0; r < saved_world; ++r) {
        const Tensor piece = files[static_cast<size_t>(r)].at(name).reshape({-1});
        const auto [begin, end] = chunk_range(numel, r, saved_world);
        if (piece.numel() != end - begin)
          throw RuntimeError("[rank " + std::to_string(rank) + "] ZeroAdamW.load: '" + name +
                             "' of shard " + std::to_string(r) + " has " +
                             std::to_string(piece.numel()) + " elements, not " +
                             std::to_string(end - begin));
        if (piece.numel() > 0) whole.narrow(0, at, piece.numel()).copy_(piece);
        at += piece.numel();
      }
      const auto [begin, end] = chunk_range(params_[i].numel(), rank, n);
      entry[key] = whole.narrow(0, begin, end - begin).clone();
    }
    if (!entry.empty()) state.state[static_cast<int64_t>(i)] = std::move(entry);
  }
  local_->load_state_dict(state);
}

void save_sharded_checkpoint(const std::string& dir, const nn::Module& model,
                             const ZeroAdamW& optimizer) {
  std::filesystem::create_directories(dir);
  // The weights are the same on every rank after a step; rank 0 writes them.
  if (get_rank() == 0) save_safetensors(dir + "/model.safetensors", model.state_dict());
  optimizer.save(dir);
}

void load_sharded_checkpoint(const std::string& dir, nn::Module& model, ZeroAdamW& optimizer) {
  const TensorFile weights = load_safetensors(dir + "/model.safetensors");
  model.load_state_dict(weights.tensors);
  optimizer.load(dir);
}

}  // namespace tiny::dist
