// Chapter 10: when one device is not enough.
//
// Data parallelism gives every device a copy of the model and a slice of the batch; after
// backward the devices average their gradients, so each takes the step one device would have
// taken on the whole batch. The price is communication: an all-reduce of every gradient, every
// step. This program does the napkin math for the documents' 70B model on 1,024 GPUs, then trains
// a real model in 1, 2 and 4 processes that talk through MPI (as GPUs talk through NCCL), checks
// that they follow one process's loss curve, times the step's compute and its communication,
// measures what sharding the optimizer state (ZeRO) saves per rank, and reloads a sharded
// checkpoint at another number of processes.
//
//   make ch10 && ./ch10_parallel
//
// The program starts its own processes: it runs itself under mpirun with TINY_CH10_RUN naming
// the experiment, and each run's rank 0 prints its results for this process to read.
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "tiny/tiny.h"

using namespace tiny;

// ---- 1. napkin math -----------------------------------------------------------------------------

static void napkin() {
  std::printf("== Napkin math: what data parallelism sends every step ==\n");
  //! [ring]
  // A ring all-reduce cuts the gradient into N chunks; a reduce-scatter and an all-gather each
  // pass N - 1 chunks to the next rank, so every rank sends 2(N-1)/N of the gradient's bytes.
  std::printf("bytes each rank sends per parameter, ring all-reduce of the gradients:\n");
  std::printf("   ranks   FP32 gradients   BF16 gradients\n");
  for (const int64_t n : {2, 8, 64, 1024})
    std::printf("  %6lld   %14.2f   %14.2f\n", static_cast<long long>(n),
                dist::ring_all_reduce_bytes(n, 4), dist::ring_all_reduce_bytes(n, 2));
  //! [ring]
  //! [seventy_b]
  // Seed document 004's run: 70B parameters on 1,024 H100s at 50% of 990 TFLOP/s; a step of
  // 1,024 sequences of 4,096 tokens (4 tokens per GPU would be too few to be efficient, 4M in
  // total is what such runs use).
  const double params = 70e9, gpus = 1024, tokens = 1024 * 4096.0;
  const double flops_per_gpu = 990e12 * 0.5;
  const double compute_s = 6 * params * tokens / (gpus * flops_per_gpu);
  std::printf("70B parameters on 1,024 H100s, %s tokens per step:\n",
              with_commas(static_cast<int64_t>(tokens)).c_str());
  std::printf("  compute: 6 x 70e9 x %.3g / (1,024 x %.3g FLOP/s) = %.2f s per step\n", tokens,
              flops_per_gpu, compute_s);
  // Datasheet bandwidths, one direction: NVLink 4 gives an H100 SXM 900 GB/s in both directions
  // together; a ConnectX-7 InfiniBand NDR port gives each GPU 400 Gb/s.
  const double nvlink = 450e9, infiniband = 50e9;
  const double fp32 = dist::ring_all_reduce_bytes(1024, 4 * params);
  const double bf16 = dist::ring_all_reduce_bytes(1024, 2 * params);
  // Within an 8-GPU node NVLink reduces first; between the 128 nodes each GPU's own NIC then
  // carries an eighth of the gradient.
  const double fp32_node = dist::ring_all_reduce_bytes(128, 4 * params / 8);
  const double bf16_node = dist::ring_all_reduce_bytes(128, 2 * params / 8);
  std::printf("  all-reduce, bytes each GPU sends:    FP32 %5.0f GB    BF16 %5.0f GB\n",
              fp32 / 1e9, bf16 / 1e9);
  std::printf("    one ring over InfiniBand (50 GB/s)     %6.2f s         %6.2f s\n",
              fp32 / infiniband, bf16 / infiniband);
  std::printf("    one ring if it were all NVLink (450 GB/s) %4.2f s       %6.2f s\n",
              fp32 / nvlink, bf16 / nvlink);
  std::printf("    NVLink in the node, then 1/8 each over IB %4.2f s       %6.2f s\n",
              fp32_node / infiniband, bf16_node / infiniband);
  //! [seventy_b]
  std::printf("\n");
}

// ---- the experiments' model and data ------------------------------------------------------------

// A 256 -> 1024 -> 1024 -> 256 MLP: 1.6 million parameters, 6.3 MB of float32 gradients, enough
// for communication to take time next to the compute.
static std::shared_ptr<nn::Sequential> make_model() {
  manual_seed(0);
  return std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(256, 1024), std::make_shared<nn::GELU>(),
      std::make_shared<nn::Linear>(1024, 1024), std::make_shared<nn::GELU>(),
      std::make_shared<nn::Linear>(1024, 256)});
}

constexpr int64_t kGlobalBatch = 64;
constexpr int kSteps = 12, kWarmup = 2;

struct Batch {
  Tensor x, y;
};

// Step `step`'s global batch, the same in every process; `rows` picks this rank's share.
static Batch global_batch(int step) {
  Generator gen(1000 + static_cast<uint64_t>(step));
  Tensor x = randn({kGlobalBatch, 256}, kFloat32, gen);
  return {x, randn({kGlobalBatch, 256}, kFloat32, gen) * 0.5 + x.narrow(1, 0, 256) * 0.5};
}

static Batch my_rows(const Batch& b, int rank, int world) {
  const auto [begin, end] = dist::shard_range(kGlobalBatch, rank, world);
  return {b.x.narrow(0, begin, end - begin), b.y.narrow(0, begin, end - begin)};
}

static double ms(double seconds) { return seconds * 1e3; }

static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// ---- the runs inside mpirun (rank 0 prints "key values..." lines) -------------------------------
// Losses go out with 17 significant digits, which read back as the very double computed, so that
// "bit for bit" below compares bits and not rounded text.

// One process, the whole batch, no communication: the curve data parallelism must follow. (It
// runs under mpirun like the others, so that every run computes with the same threads.)
static void run_one_process() {
  auto model = make_model();
  optim::AdamW opt(model->parameters(), {.lr = 1e-3});
  for (int step = 0; step < kSteps; ++step) {
    const Batch b = global_batch(step);
    opt.zero_grad();
    Tensor loss = mse_loss((*model)(b.x), b.y);
    loss.backward();
    opt.step();
    std::printf("loss %d %.17g\n", step, loss.item<double>());
  }
}

// Data-parallel training: each rank's share of the batch, DDP averaging the gradients. On the
// CPU through MPI, or with the model on a GPU per rank and NCCL between them (`gpu`).
static void run_train(bool overlap, bool gpu) {
  const int rank = dist::get_rank(), world = dist::get_world_size();
  const Device device = gpu ? Device::cuda(rank % cuda::device_count()) : Device::cpu();
  auto model = make_model();
  model->to(device);
  dist::DistributedDataParallel ddp(model, {.bucket_cap_bytes = 1 << 20, .overlap = overlap});
  optim::AdamW opt(model->parameters(), {.lr = 1e-3});
  std::vector<double> step_s, wait_s, busy_s;
  for (int step = 0; step < kSteps; ++step) {
    const Batch mine = my_rows(global_batch(step), rank, world);
    const Tensor x = mine.x.to(device), y = mine.y.to(device);
    dist::reset_comm_stats();
    synchronize(device);  // a GPU's clock starts when its queue is empty (chapter 04)
    const auto start = std::chrono::steady_clock::now();
    opt.zero_grad();
    Tensor loss = mse_loss(ddp(x), y);
    loss.backward();
    opt.step();
    synchronize(device);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double busy = dist::comm_stats().busy_seconds;
    // The global batch's loss: the mean of the ranks' means (their shares are equal).
    Tensor global = loss.detach().clone();
    dist::all_reduce(global, dist::ReduceOp::AVG);
    if (rank == 0) std::printf("loss %d %.17g\n", step, global.item<double>());
    if (step >= kWarmup) {
      step_s.push_back(seconds);
      wait_s.push_back(ddp.last_wait_seconds());
      busy_s.push_back(busy);
    }
  }
  if (rank == 0)
    std::printf("time %.6f %.6f %.6f %zu\n", median(step_s), median(wait_s), median(busy_s),
                ddp.buckets().size());
}

// Bytes per parameter each rank holds after one step: plain DDP + AdamW (stage 0), ZeRO 1, 2.
static void run_memory() {
  const int rank = dist::get_rank(), world = dist::get_world_size();
  for (int stage = 0; stage <= 2; ++stage) {
    const MemoryStats before = memory_stats();
    auto model = make_model();
    int64_t params = 0;
    for (const Tensor& p : model->parameters()) params += p.numel();
    const Batch mine = my_rows(global_batch(0), rank, world);
    std::unique_ptr<dist::DistributedDataParallel> ddp;
    std::unique_ptr<optim::AdamW> adamw;
    std::unique_ptr<dist::ZeroAdamW> zero;
    if (stage == 0) {
      ddp = std::make_unique<dist::DistributedDataParallel>(model);
      adamw = std::make_unique<optim::AdamW>(model->parameters(), optim::AdamWOptions{});
      mse_loss((*ddp)(mine.x), mine.y).backward();
      adamw->step();
    } else {
      zero = std::make_unique<dist::ZeroAdamW>(model->parameters(), optim::AdamWOptions{}, stage);
      mse_loss((*model)(mine.x), mine.y).backward();
      zero->step();
    }
    const MemoryStats after = memory_stats();
    auto grown = [&](MemoryCategory c) {
      const int k = static_cast<int>(c);
      return after.category_requested[k] - before.category_requested[k];
    };
    if (rank == 0)
      std::printf("mem %d %lld %lld %lld %lld\n", stage, static_cast<long long>(params),
                  static_cast<long long>(grown(MemoryCategory::weights)),
                  static_cast<long long>(grown(MemoryCategory::gradients)),
                  static_cast<long long>(grown(MemoryCategory::optimizer_state)));
  }
}

// ZeRO-2 training that saves a sharded checkpoint after step 2 and goes on (save), or starts
// from that checkpoint (load); both print the losses of steps 3 to 5.
static void run_checkpoint(const std::string& dir, bool save) {
  const int rank = dist::get_rank(), world = dist::get_world_size();
  auto model = make_model();
  dist::ZeroAdamW opt(model->parameters(), {.lr = 1e-3}, 2);
  auto step = [&](int s) {
    const Batch mine = my_rows(global_batch(s), rank, world);
    Tensor loss = mse_loss((*model)(mine.x), mine.y);
    loss.backward();
    opt.step();
    opt.zero_grad();
    Tensor global = loss.detach().clone();
    dist::all_reduce(global, dist::ReduceOp::AVG);
    return global.item<double>();
  };
  if (save) {
    for (int s = 0; s < 3; ++s) step(s);
    dist::save_sharded_checkpoint(dir, *model, opt);
  } else {
    dist::load_sharded_checkpoint(dir, *model, opt);
  }
  for (int s = 3; s < 6; ++s) {
    const double loss = step(s);
    if (rank == 0) std::printf("loss %d %.17g\n", s, loss);
  }
}

static int run_in_group(const std::string& run) {
  dist::init_process_group(run == "train_cuda" ? "nccl" : "mpi");
  // Every process computes on one thread: the ranks share this machine's cores.
  set_num_threads(1);
  const char* dir = std::getenv("TINY_CH10_DIR");
  if (run == "one_process") run_one_process();
  else if (run == "train" || run == "train_no_overlap" || run == "train_cuda")
    run_train(run != "train_no_overlap", run == "train_cuda");
  else if (run == "memory") run_memory();
  else if ((run == "save" || run == "load") && dir) run_checkpoint(dir, run == "save");
  else throw ValueError("TINY_CH10_RUN: unknown run '" + run + "'");
  std::fflush(stdout);
  dist::destroy_process_group();
  return 0;
}

// ---- the chapter's own process: starts the runs and reads what they print -----------------------

struct RunOutput {
  std::map<int, double> loss;               // by step
  std::vector<std::vector<double>> time;    // "time" lines
  std::vector<std::vector<double>> memory;  // "mem" lines
};

// Runs this program in `processes` processes under mpirun, as `run`.
static RunOutput launch(const std::string& run, int processes, const std::string& dir = "") {
  // Root may start MPI processes here (containers); more ranks than cores are allowed; each
  // rank's BLAS uses one thread.
  if (geteuid() == 0) {
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  }
  setenv("OMPI_MCA_rmaps_base_oversubscribe", "1", 1);
  setenv("OPENBLAS_NUM_THREADS", "1", 1);
  setenv("TINY_CH10_RUN", run.c_str(), 1);
  setenv("TINY_CH10_DIR", dir.c_str(), 1);
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  const std::string command = dist::mpirun_path() + " -n " + std::to_string(processes) + " '" +
                              self + "' 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) throw RuntimeError("could not start " + command);
  std::string text;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) text.append(buf.data(), n);
  const int status = pclose(pipe);
  unsetenv("TINY_CH10_RUN");
  if (status != 0)
    throw RuntimeError("the run '" + run + "' in " + std::to_string(processes) +
                       " processes failed:\n" + text);
  RunOutput out;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::string key;
    words >> key;
    std::vector<double> values;
    for (double v; words >> v;) values.push_back(v);
    if (key == "loss" && values.size() == 2) out.loss[static_cast<int>(values[0])] = values[1];
    if (key == "time") out.time.push_back(values);
    if (key == "mem") out.memory.push_back(values);
  }
  return out;
}

static double largest_gap(const std::map<int, double>& a, const std::map<int, double>& b) {
  double gap = 0;
  for (const auto& [step, loss] : a) gap = std::max(gap, std::abs(loss - b.at(step)));
  return gap;
}

static void same_curve(std::map<int, RunOutput>& runs) {
  std::printf("== The same model in 1, 2 and 4 processes (global batch %lld, AdamW) ==\n",
              static_cast<long long>(kGlobalBatch));
  //! [curve]
  const std::map<int, double> one = launch("one_process", 1).loss;
  for (const int n : {1, 2, 4}) runs[n] = launch("train", n);
  std::printf("  step   one process   DDP, 1 process   DDP, 2 processes   DDP, 4 processes\n");
  for (int step = 0; step < kSteps; step += 3)
    std::printf("  %4d   %11.6f   %14.6f   %16.6f   %16.6f\n", step, one.at(step),
                runs[1].loss.at(step), runs[2].loss.at(step), runs[4].loss.at(step));
  for (const int n : {1, 2, 4}) {
    const double gap = largest_gap(runs[n].loss, one);
    const std::string who = std::to_string(n) + (n == 1 ? " process:" : " processes:");
    std::printf("  %-13s largest gap to one process over %d steps: %s\n", who.c_str(), kSteps,
                gap == 0 ? "0 (bit for bit)" : strprintf("%.1e", gap).c_str());
  }
  //! [curve]
  std::printf("\n");
}

static void step_time(std::map<int, RunOutput>& runs, const std::optional<std::string>& csv_dir) {
  std::printf("== Time per step: compute and communication (this machine: %ld cores) ==\n",
              sysconf(_SC_NPROCESSORS_ONLN));
  // The text below says that overlap shortens the wait. Other work on the machine during one
  // run can make it look otherwise; then both runs are measured again.
  std::map<int, RunOutput> no_overlap;
  auto measure = [&] {
    for (const int n : {2, 4}) {
      runs[n].time = launch("train", n).time;
      no_overlap[n] = launch("train_no_overlap", n);
    }
  };
  for (const int n : {2, 4}) no_overlap[n] = launch("train_no_overlap", n);
  const bool agree = remeasure_while(
      [&] {
        for (const int n : {2, 4})
          if (runs[n].time.at(0)[1] >= no_overlap[n].time.at(0)[1]) return true;
        return false;
      },
      measure);
  std::optional<CsvFile> csv;
  if (csv_dir)
    csv.emplace(*csv_dir, "ch10_step_time.csv",
                std::vector<std::string>{"processes", "overlap", "step_ms", "waiting_ms",
                                         "communicating_ms"});
  std::printf("  processes  overlap   step ms   waiting for comm ms   communicating ms  buckets\n");
  auto row = [&](int n, bool overlap, const std::vector<double>& t) {
    std::printf("  %9d  %-7s  %8.1f   %19.1f   %16.1f  %7.0f\n", n, overlap ? "yes" : "no",
                ms(t[0]), ms(t[1]), ms(t[2]), t[3]);
    if (csv) csv->row(n, overlap ? "yes" : "no", ms(t[0]), ms(t[1]), ms(t[2]));
  };
  row(1, true, runs[1].time.at(0));
  for (const int n : {2, 4}) {
    row(n, true, runs[n].time.at(0));
    row(n, false, no_overlap[n].time.at(0));
  }
  std::printf("  (medians of %d steps; \"waiting\" is the part of the step spent only waiting for "
              "the all-reduces)%s\n",
              kSteps - kWarmup, busy_note(agree, "overlap did not shorten the wait").c_str());
  std::printf("\n");
}

// On a machine with GPUs: the same DDP training, a GPU per rank, NCCL between them. Two lines
// either way.
static void on_gpus() {
  std::printf("== On GPUs: the same training with NCCL ==\n");
  if (!dist::is_nccl_available() || !cuda::available()) {
    std::printf("skipped: %s\n", dist::is_nccl_available()
                                     ? cuda::unavailable_reason().c_str()
                                     : "this build has no NCCL (a CUDA build has it where NCCL "
                                       "is installed; the toolkit ships it)");
    std::printf("(with GPUs this trains the model above on each GPU, one process per GPU, the "
                "gradients all-reduced by NCCL)\n\n");
    return;
  }
  const int n = std::min(cuda::device_count(), 4);
  const RunOutput cpu = launch("one_process", 1);
  const RunOutput run = launch("train_cuda", n);
  std::printf("%d GPU%s, a process each: step %.2f ms, waiting for NCCL %.2f ms; largest loss gap "
              "to one CPU process %.1e\n",
              n, n == 1 ? "" : "s", ms(run.time.at(0)[0]), ms(run.time.at(0)[1]),
              largest_gap(run.loss, cpu.loss));
  // What more GPUs would add: this model's float32 gradients in a ring of 8 over NVLink.
  int64_t params = 0;
  for (const Tensor& p : make_model()->parameters()) params += p.numel();
  const double bytes = dist::ring_all_reduce_bytes(8, 4.0 * static_cast<double>(params));
  std::printf("(on 8 GPUs of one node each would send %.1f MB per step, %.0f us at NVLink's "
              "450 GB/s, hidden under backward by the buckets)\n\n",
              bytes / 1e6, bytes / 450e9 * 1e6);
}

static void memory_per_rank() {
  std::printf("== Memory per rank after a step: AdamW, float32, sharded or not ==\n");
  //! [memory]
  std::printf("  processes   what is sharded          weights   gradients   m and v   bytes/param"
              "   the rule\n");
  const char* names[] = {"nothing (DDP)", "m and v (ZeRO-1)", "+ gradients (ZeRO-2)"};
  for (const int n : {1, 2, 4}) {
    const RunOutput run = launch("memory", n);
    for (const auto& m : run.memory) {
      const int stage = static_cast<int>(m[0]);
      const double params = m[1];
      const double w = m[2] / params, g = m[3] / params, s = m[4] / params;
      // 4 bytes of weights, 4 of gradients (divided by N from stage 2), 8 of m and v (divided
      // by N from stage 1).
      const double rule = 4 + (stage >= 2 ? 4.0 / n : 4.0) + (stage >= 1 ? 8.0 / n : 8.0);
      std::printf("  %9d   %-22s   %7.2f   %9.2f   %7.2f   %11.2f   %8.2f\n", n, names[stage], w,
                  g, s, w + g + s, rule);
    }
  }
  //! [memory]
  //! [largest_model]
  std::printf("the largest model on 8 x 80 GB, AdamW in float32 (each GPU holds its part):\n");
  const double gpu = 80e9, n = 8;
  const std::pair<const char*, double> ways[] = {
      {"data parallel, nothing sharded", 16},
      {"ZeRO-1: m and v sharded", 4 + 4 + 8 / n},
      {"ZeRO-2: gradients too", 4 + (4 + 8) / n},
      {"ZeRO-3 (FSDP): weights too", 16 / n}};
  for (const auto& [way, bytes] : ways)
    std::printf("  %-32s %5.2f bytes/param   %4.1f billion parameters\n", way, bytes,
                gpu / bytes / 1e9);
  //! [largest_model]
  std::printf("\n");
}

static void checkpoint_at_another_size() {
  std::printf("== A sharded checkpoint saved by 4 processes, loaded by 2 ==\n");
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("tiny_ch10_" + std::to_string(getpid())))
          .string();
  //! [checkpoint]
  const RunOutput saved = launch("save", 4, dir);
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    files.push_back(entry.path().filename().string());
  std::sort(files.begin(), files.end());
  std::printf("written by 4 processes (ZeRO-2):");
  for (const auto& f : files) std::printf(" %s", f.c_str());
  std::printf("\n");
  const RunOutput loaded = launch("load", 2, dir);
  std::printf("  step   4 processes, going on   2 processes, from the checkpoint\n");
  for (const auto& [step, loss] : saved.loss)
    std::printf("  %4d   %21.6f   %32.6f\n", step, loss, loaded.loss.at(step));
  std::printf("largest gap %.1e: the state is re-cut exactly; the 2 processes sum the gradients "
              "in another order\n",
              largest_gap(loaded.loss, saved.loss));
  //! [checkpoint]
  std::filesystem::remove_all(dir);
  std::printf("\n");
}

int main(int argc, char** argv) {
  // Inside mpirun: one rank of one of the runs below.
  if (const char* run = std::getenv("TINY_CH10_RUN")) {
    try {
      return run_in_group(run);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "error: %s\n", e.what());
      return 1;
    }
  }
  return run_chapter(argc, argv, [](const std::optional<std::string>& csv_dir) {
    napkin();
    if (!dist::is_mpi_available()) {
      std::printf("this build has no MPI, so the processes cannot be started: install Open MPI "
                  "(make deps) and rebuild\n");
      return;
    }
    std::map<int, RunOutput> runs;
    same_curve(runs);
    step_time(runs, csv_dir);
    on_gpus();
    memory_per_rank();
    checkpoint_at_another_size();
  });
}
