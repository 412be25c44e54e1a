// Chapter 04: where numbers live, and why GPU timings lie.
//
// A tensor lives on a device, and an op runs where its inputs are. Moving numbers between
// devices is an explicit copy over a bus far slower than either side's memory, so the rule is:
// move once, then stay. The subtler lesson is about time. A GPU call returns as soon as its work
// is queued, not when it is done; that is what keeps the GPU busy while the host prepares the
// next call, and it is why a timer that does not wait for the device measures the wrong thing.
//
// On a machine without a GPU, every lesson still runs: the CPU rows of the tables are real, and
// a worker thread plays the GPU's part (calls queue work for it and return at once), so the
// same timing mistakes show the same way, at the CPU's scale.
//
//   make ch04 && ./ch04_devices
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tiny/tiny.h"

using namespace tiny;

// ---- a queue of work --------------------------------------------------------------------------

//! [worker]
// Without a GPU, a worker thread stands in for one: enqueue() hands it work and returns at once,
// as a CUDA call does, and synchronize() waits until everything handed over is done.
class WorkerStream {
 public:
  WorkerStream() : worker_([this] { run(); }) {}
  ~WorkerStream() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    worker_.join();
  }
  void enqueue(std::function<void()> work) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      queue_.push_back(std::move(work));
      ++unfinished_;
    }
    wake_.notify_all();
  }
  void synchronize() {
    std::unique_lock<std::mutex> lock(mutex_);
    idle_.wait(lock, [&] { return unfinished_ == 0; });
  }

 private:
  void run() {
    while (true) {
      std::function<void()> work;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;
        work = std::move(queue_.front());
        queue_.pop_front();
      }
      work();
      std::lock_guard<std::mutex> lock(mutex_);
      if (--unfinished_ == 0) idle_.notify_all();
    }
  }
  std::mutex mutex_;
  std::condition_variable wake_, idle_;
  std::deque<std::function<void()>> queue_;
  int unfinished_ = 0;
  bool stopping_ = false;
  std::thread worker_;  // last: it starts running once everything above exists
};
//! [worker]

// Where the chapter's asynchronous lessons run: CUDA's stream when there is a GPU (a call
// queues its kernel and returns), the worker thread otherwise.
struct Queue {
  Device device;
  WorkerStream* worker = nullptr;  // null on a GPU
  std::string name() const { return worker ? "a CPU worker thread" : device.str(); }
  void launch(const std::function<void()>& work) const {
    if (worker) worker->enqueue(work);
    else work();
  }
  void wait() const {
    if (worker) worker->synchronize();
    else cuda::synchronize(device.index);
  }
  // The honest timer: the clock may only stop once the queued work is done. tiny::timed waits
  // for a CUDA device itself; for the worker, waiting is part of each timed call.
  double time(const std::function<void()>& work, int trials = 10) const {
    // BEGIN SOLUTION ch04 honest_timer
    if (!worker) return timed(work, device, trials);
    return timed(
        [&] {
          launch(work);
          wait();
        },
        Device::cpu(), trials);
    // END SOLUTION ch04 honest_timer
  }
};

static double tflops(int64_t n, double seconds) { return 2.0 * n * n * n / seconds / 1e12; }

// ---- 1. where numbers live --------------------------------------------------------------------

static void where_numbers_live() {
  std::printf("== where numbers live ==\n");
  //! [devices]
  if (!cuda::available()) {
    std::printf("cuda: not available (%s)\n", cuda::unavailable_reason().c_str());
  } else {
    for (int i = 0; i < cuda::device_count(); ++i)
      std::printf("cuda:%d %s\n", i, cuda::get_device_properties(i).str().c_str());
  }
  //! [devices]

  // Two 32 x 32 float32 matrices on the device: one moved there, one made there (which needs no
  // copy from the host). The allocator's count grows by exactly their bytes.
  //! [allocated]
  const Device device = cuda::available() ? Device::cuda(0) : Device::cpu();
  const Tensor x = ones({32, 32});
  const int64_t before = memory_allocated(device);
  const Tensor y = device.is_cpu() ? x.clone() : x.to(device);  // on the CPU: a copy, to count it
  const Tensor z = zeros({32, 32}, kFloat32, device);
  const int64_t used = memory_allocated(device) - before;
  std::printf("memory_allocated(%s) grew by %lld bytes = 2 x (32 x 32 x 4): %s\n",
              device.str().c_str(), static_cast<long long>(used),
              used == 2 * (32 * 32 * 4) ? "yes" : "NO");
  //! [allocated]
  std::printf("y is on %s, z is on %s; x stays on %s\n", y.device().str().c_str(),
              z.device().str().c_str(), x.device().str().c_str());
}

// ---- 2. how fast: matmul TFLOP/s --------------------------------------------------------------

struct Measured {
  std::string device, dtype;
  int64_t n;
  double tflops;
};

static std::vector<Measured> throughput_table() {
  std::printf("\n== matmul throughput ==\n");
  std::vector<std::pair<Device, DType>> cases = {{Device::cpu(), kFloat32}};
  if (cuda::available())
    for (DType dt : {kFloat32, kFloat16, kBFloat16}) cases.push_back({Device::cuda(0), dt});
  std::vector<Measured> results;
  manual_seed(0);
  //! [table]
  std::vector<double> before(cases.size(), 0.0);  // each case's TFLOP/s at the size before
  for (int64_t n : {256, 1024, 4096}) {
    std::string row = strprintf("n = %4lld:", static_cast<long long>(n));
    bool agree = true;
    for (size_t c = 0; c < cases.size(); ++c) {
      const Device device = cases[c].first;
      const DType dt = cases[c].second;
      const Tensor a = randn({n, n}, dt).to(device), b = randn({n, n}, dt).to(device);
      // Ten trials, as the document's timer takes; the CPU's 4096 (0.7 s a call here) gets three.
      const int trials = device.is_cpu() && n >= 4096 ? 3 : 10;
      double rate = 0;
      auto measure = [&] { rate = tflops(n, timed([&] { matmul(a, b); }, device, trials)); };
      measure();
      // Throughput grows with n up to a plateau (the text below says why), so a larger n more
      // than 10% slower than the one before was slowed by other work: it is measured again.
      agree &= remeasure_while([&] { return rate < 0.9 * before[c]; }, measure);
      before[c] = rate;
      const std::string name = device.is_cpu() ? "cpu" : "cuda";
      row += strprintf("  %s %-8s %5.2f", name.c_str(), dtype_name(dt), rate);
      results.push_back({name, dtype_name(dt), n, rate});
    }
    std::printf("%s  TFLOP/s%s\n", row.c_str(),
                busy_note(agree, "more than 10% slower than the smaller n above").c_str());
  }
  //! [table]
  if (!cuda::available()) {
    std::printf("cuda: not available; on a GPU the rows add cuda float32, float16 and bfloat16\n");
    return results;
  }
  // The tensor cores' promise, at the size where cuBLAS gets closest to it.
  const std::string name = cuda::get_device_properties(0).name;
  const char* model = name.find("H200") != std::string::npos   ? "H200"
                      : name.find("H100") != std::string::npos ? "H100"
                      : name.find("A100") != std::string::npos ? "A100"
                                                               : nullptr;
  const int64_t n = 8192;
  const Tensor a = randn({n, n}, kBFloat16).cuda(), b = randn({n, n}, kBFloat16).cuda();
  const double rate = tflops(n, timed([&] { matmul(a, b); }, Device::cuda(0)));
  results.push_back({"cuda", "bfloat16", n, rate});
  std::printf("n = %lld: cuda bfloat16 %.1f TFLOP/s", static_cast<long long>(n), rate);
  if (model)
    std::printf(", %.0f%% of the %s's %.1f dense promise",
                100 * rate * 1e12 / promised_flop_per_sec(model, kBFloat16), model,
                promised_flop_per_sec(model, kBFloat16) / 1e12);
  std::printf("\n");
  // TF32: float32 inputs read with a 10-bit mantissa by the tensor cores; an explicit choice.
  set_float32_matmul_precision("high");
  const Tensor c = randn({4096, 4096}).cuda();
  const double tf32 = tflops(4096, timed([&] { matmul(c, c); }, Device::cuda(0)));
  set_float32_matmul_precision("highest");
  results.push_back({"cuda", "tf32", 4096, tf32});
  std::printf(
      "n = 4096: cuda float32 with set_float32_matmul_precision(\"high\") (TF32) %.1f TFLOP/s\n",
      tf32);
  return results;
}

// ---- 3. the clock only sees the launch --------------------------------------------------------

static void launch_versus_real(const Queue& q) {
  std::printf("\n== timing without waiting ==\n");
  manual_seed(0);
  const Tensor a = randn({4096, 4096}).to(q.device);
  Tensor c;
  //! [launch]
  q.launch([&] { c = matmul(a, a); });  // warm up
  q.wait();
  const auto t0 = std::chrono::steady_clock::now();
  q.launch([&] { c = matmul(a, a); });
  const double t_launch =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  q.wait();
  const double t_real = q.time([&] { c = matmul(a, a); }, 3);
  std::printf("4096 matmul on %s, no synchronize: %.2f ms 'measured', %.2f ms real\n",
              q.name().c_str(), t_launch * 1e3, t_real * 1e3);
  //! [launch]
  std::printf("the gap: %.2f ms; the first clock stopped when the work was queued\n",
              (t_real - t_launch) * 1e3);
}

// ---- 4. waiting after every call, or queueing many ----------------------------------------------

static void waiting_versus_queued(const Queue& q) {
  std::printf("\n== one at a time, or queued ==\n");
  manual_seed(0);
  const int64_t n = 256;
  const Tensor a = randn({n, n}).to(q.device), b = randn({n, n}).to(q.device);
  //! [queued]
  const int calls = 200;
  double each = 0, queued = 0;
  auto measure = [&] {
    each = q.time([&] { matmul(a, b); });
    queued = q.time([&] { for (int i = 0; i < calls; ++i) q.launch([&] { matmul(a, b); }); }, 5) /
             calls;
  };
  measure();
  // Queueing only removes waits, so on a quiet machine it is never the slower way; on a CPU the
  // two are close (a worker thread's round trip is microseconds), hence the 5% of noise allowed.
  const bool agree = remeasure_while([&] { return queued > 1.05 * each; }, measure);
  std::printf(
      "256 matmul on %s: %.0f us per call waiting each time, %.0f us per call when %d are "
      "queued (%.2f TFLOP/s)%s\n",
      q.name().c_str(), each * 1e6, queued * 1e6, calls, tflops(n, queued),
      busy_note(agree, "queued more than 5% slower than waited").c_str());
  //! [queued]
}

// ---- 5. feeding the device: get_batch ------------------------------------------------------------

//! [get_batch]
// B random windows of L tokens from `data`, moved to `device`. With `pinned`, the batch is first
// copied into page-locked memory, which the GPU's copy engine reads directly, so the copy to the
// device can be queued (non_blocking) and the host returns at once to load the next batch.
static Tensor get_batch(const Tensor& data, int64_t B, int64_t L, Device device, bool pinned) {
  const Tensor starts = randint(data.numel() - L, {B});  // every window fits: start <= n - L - 1
  Tensor x = empty({B, L}, kInt64);
  for (int64_t i = 0; i < B; ++i) x[i] = data.narrow(0, static_cast<int64_t>(starts.at({i})), L);
  if (pinned && device.is_cuda()) x = x.pin_memory();
  return x.to(device, /*non_blocking=*/pinned);
}
//! [get_batch]

static void feeding_the_device(const Queue& q) {
  std::printf("\n== feeding the device: get_batch ==\n");
  manual_seed(0);
  const Tensor data = randint(50257, {int64_t(1) << 22});  // 4M tokens of a GPT-2-sized vocabulary
  const int64_t B = 64, L = 1024;
  const Tensor x = get_batch(data, B, L, q.device, true);
  std::printf("x: shape %s, %s, on %s%s\n", format_tuple(x.shape()).c_str(), dtype_name(x.dtype()),
              x.device().str().c_str(),
              q.worker ? "" : " (pinned on the host, copied without blocking)");
  const Tensor w = randn({L, 256}).to(q.device);
  auto compute_once = [&](const Tensor& batch) { return matmul(batch.to(kFloat32), w); };

  // Size the work per step to take about as long as loading a batch: then overlap matters most.
  const double load = q.time([&] { get_batch(data, B, L, q.device, false); }, 5);
  const double unit = q.time([&] { compute_once(x); }, 5);
  const int repeats = std::max(1, static_cast<int>(load / unit + 0.5));
  auto compute = [&](const Tensor& batch) {
    for (int r = 0; r < repeats; ++r) compute_once(batch);
  };
  const double work = unit * repeats;
  std::printf(
      "load a batch: %.2f ms; work on it: %.2f ms (%d x matmul (%lld, %lld) @ (%lld, 256), sized "
      "to match)\n",
      load * 1e3, work * 1e3, repeats, static_cast<long long>(B), static_cast<long long>(L),
      static_cast<long long>(L));

  //! [overlap]
  const int steps = 20;
  // One after the other: load, compute, wait, as a loop that reads the loss every step does.
  const double serial = timed(
                            [&] {
                              for (int s = 0; s < steps; ++s) {
                                const Tensor batch = get_batch(data, B, L, q.device, false);
                                q.launch([&] { compute(batch); });
                                q.wait();
                              }
                            },
                            Device::cpu(), 3) /
                        steps;
  // Overlapped: the work is queued and the host goes straight on to load the next batch.
  const double overlapped = timed(
                                [&] {
                                  for (int s = 0; s < steps; ++s) {
                                    const Tensor batch = get_batch(data, B, L, q.device, true);
                                    q.launch([&, batch] { compute(batch); });
                                  }
                                  q.wait();
                                },
                                Device::cpu(), 3) /
                            steps;
  //! [overlap]
  std::printf("one after the other: %.2f ms per step\n", serial * 1e3);
  std::printf(
      "next batch loads while this one computes: %.2f ms per step (at best max(load, work) = "
      "%.2f)\n",
      overlapped * 1e3, std::max(load, work) * 1e3);
  // Overlap needs idle hardware to use: a GPU computing while the host loads. A CPU whose cores
  // the matmul already keeps busy has none to spare.
  if (overlapped < 0.9 * serial)
    std::printf("overlap hid %.0f%% of the time per step\n", 100 * (1 - overlapped / serial));
  else
    std::printf(
        "no gain here: the work already keeps every core busy, so the loader only competes with "
        "it\n");
}

// ---- 6. memory bandwidth ------------------------------------------------------------------------

struct Bandwidth {
  std::string what;
  double gb_per_s;
};

static std::vector<Bandwidth> bandwidth() {
  std::printf("\n== memory bandwidth, 256 MB float32 ==\n");
  std::vector<Bandwidth> out;
  const int64_t n = int64_t(64) << 20;  // 64M floats = 256 MiB
  const double bytes = static_cast<double>(n) * 4;
  const Device device = cuda::available() ? Device::cuda(0) : Device::cpu();
  if (device.is_cuda()) {
    // Over the bus: pageable memory is staged by the driver through a pinned buffer; pinned
    // memory is read by the copy engine directly.
    const Tensor host = ones({n}), pinned = host.pin_memory(), on_gpu = host.cuda();
    Tensor back = empty({n}), back_pinned = empty({n}).pin_memory();
    const double h2d = bytes / timed([&] { host.to(device); }, device, 5);
    const double h2d_pinned = bytes / timed([&] { pinned.to(device); }, device, 5);
    const double d2h = bytes / timed([&] { back.copy_(on_gpu); }, device, 5);
    const double d2h_pinned = bytes / timed([&] { back_pinned.copy_(on_gpu); }, device, 5);
    std::printf("host -> %s: pageable %.1f GB/s, pinned %.1f GB/s\n", device.str().c_str(),
                h2d / 1e9, h2d_pinned / 1e9);
    std::printf("%s -> host: pageable %.1f GB/s, pinned %.1f GB/s\n", device.str().c_str(),
                d2h / 1e9, d2h_pinned / 1e9);
    out.insert(out.end(), {{"h2d_pageable", h2d / 1e9},
                           {"h2d_pinned", h2d_pinned / 1e9},
                           {"d2h_pageable", d2h / 1e9},
                           {"d2h_pinned", d2h_pinned / 1e9}});
  }
  // On the device itself: a copy reads and writes each byte once; x + y reads two and writes
  // one. Both are limited by memory, not arithmetic, so the fair yardstick for an elementwise
  // kernel is the copy.
  //! [bandwidth]
  const Tensor x = ones({n}, kFloat32, device), y = ones({n}, kFloat32, device);
  Tensor copy = empty({n}, kFloat32, device);
  const double copy_rate = 2 * bytes / timed([&] { copy.copy_(x); }, device);
  const double add_rate = 3 * bytes / timed([&] { add(x, y); }, device);
  std::printf("on %s: copy %.1f GB/s, x + y %.1f GB/s (%.0f%% of the copy)\n", device.str().c_str(),
              copy_rate / 1e9, add_rate / 1e9, 100 * add_rate / copy_rate);
  //! [bandwidth]
  out.insert(out.end(), {{"copy", copy_rate / 1e9}, {"add", add_rate / 1e9}});
  return out;
}

int main(int argc, char** argv) {
  return run_chapter(argc, argv, [](const std::optional<std::string>& csv_dir) {
    where_numbers_live();
    const std::vector<Measured> rates = throughput_table();
    WorkerStream worker;
    const Queue q = cuda::available() ? Queue{Device::cuda(0)} : Queue{Device::cpu(), &worker};
    launch_versus_real(q);
    waiting_versus_queued(q);
    feeding_the_device(q);
    const std::vector<Bandwidth> bw = bandwidth();
    if (csv_dir) {
      CsvFile m(*csv_dir, "ch04_matmul.csv", {"device", "dtype", "n", "tflops"});
      for (const Measured& r : rates) m.row(r.device, r.dtype, r.n, r.tflops);
      CsvFile b(*csv_dir, "ch04_bandwidth.csv", {"what", "gb_per_s"});
      for (const Bandwidth& r : bw) b.row(r.what, r.gb_per_s);
      std::printf("\nwrote %s and %s\n", m.path().c_str(), b.path().c_str());
    }
  });
}
