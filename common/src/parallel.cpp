// parallel.cpp: the CPU kernels' thread pool (parallel.h) and its size (tiny/parallel.h).
//
// The pool is a handful of threads that sleep on a condition variable until a parallel_for
// publishes a job: a range cut into chunks. The caller and the woken threads claim chunks one at a
// time under the pool's mutex and run them outside it; the caller returns once every chunk has
// finished and every thread has let go of the job, so nothing touches the job's callable after
// parallel_for returns. The threads are started on the first job that needs them, so a program
// that only ever runs small ops never starts one.
//
// Two facts of a process's life shape the rest. A child made by fork() has only the thread that
// called fork, so the pool it inherited has no workers and perhaps a mutex held by a thread that
// no longer exists: the child forgets that pool (it is leaked, a few hundred bytes) and builds a
// new one when it first needs it. And at exit the threads are stopped and joined by a static
// object's destructor, after which parallel_for runs everything inline.
#include "parallel.h"

#include <pthread.h>

#include <atomic>
#include <climits>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "tiny/error.h"

#ifdef TINY_HAS_OPENBLAS
#include <cblas.h>
#endif

namespace tiny {

namespace detail {

namespace {

thread_local bool t_in_region = false;

// Marks the current thread as running a chunk for as long as it lives.
struct RegionGuard {
  bool saved = t_in_region;
  RegionGuard() { t_in_region = true; }
  ~RegionGuard() { t_in_region = saved; }
};

// OMP_NUM_THREADS as PyTorch reads it (a positive integer, else ignored), or the hardware threads.
int default_num_threads() {
  if (const char* v = std::getenv("OMP_NUM_THREADS")) {
    char* end = nullptr;
    const long n = std::strtol(v, &end, 10);
    if (end != v && *end == '\0' && n > 0 && n <= INT_MAX) return static_cast<int>(n);
  }
  const unsigned hw = std::thread::hardware_concurrency();
  return hw > 0 ? static_cast<int>(hw) : 1;
}

// 0 until the default is first read or a size is set.
std::atomic<int> g_num_threads{0};

class Pool {
 public:
  ~Pool() {
    {
      std::lock_guard<std::mutex> lock(m_);
      stop_ = true;
    }
    wake_.notify_all();
    for (std::thread& t : workers_) t.join();
  }

  int threads() {
    std::lock_guard<std::mutex> lock(m_);
    return static_cast<int>(workers_.size());
  }

  // Runs the job on the caller and the pool; false (having run nothing) when another thread of
  // the program is using the pool, so that the caller runs the range inline instead of waiting.
  bool run(int64_t begin, int64_t end, int64_t chunk, int64_t chunks, RangeFn fn) {
    std::unique_lock<std::mutex> busy(busy_, std::try_to_lock);
    if (!busy.owns_lock()) return false;
    std::unique_lock<std::mutex> lock(m_);
    // One worker per chunk beyond the caller's, started the first time they are needed.
    while (static_cast<int64_t>(workers_.size()) < chunks - 1)
      workers_.emplace_back([this] { worker(); });
    begin_ = begin;
    end_ = end;
    chunk_ = chunk;
    chunks_ = chunks;
    fn_ = &fn;
    next_ = 0;
    pending_ = chunks;
    error_ = nullptr;
    ++generation_;
    wake_.notify_all();
    {
      RegionGuard region;
      claim_chunks(lock);
    }
    done_.wait(lock, [this] { return pending_ == 0 && active_ == 0; });
    fn_ = nullptr;
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
    return true;
  }

 private:
  // Claims and runs chunks until none is left; `lock` holds m_ on entry and on exit.
  void claim_chunks(std::unique_lock<std::mutex>& lock) {
    while (next_ < chunks_) {
      const int64_t b = begin_ + next_ * chunk_, e = std::min(end_, b + chunk_);
      ++next_;
      const RangeFn fn = *fn_;
      lock.unlock();
      std::exception_ptr error;
      try {
        fn(b, e);
      } catch (...) {
        error = std::current_exception();
      }
      lock.lock();
      if (error && !error_) error_ = error;  // the first one thrown is the one rethrown
      --pending_;
    }
  }

  void worker() {
    t_in_region = true;  // a chunk that calls parallel_for runs its loop inline
    std::unique_lock<std::mutex> lock(m_);
    uint64_t seen = generation_;
    while (true) {
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      ++active_;
      claim_chunks(lock);
      --active_;
      if (pending_ == 0 && active_ == 0) done_.notify_all();
    }
  }

  std::mutex busy_;  // held by the thread whose job the pool is running
  std::mutex m_;     // guards everything below
  std::condition_variable wake_, done_;
  std::vector<std::thread> workers_;
  bool stop_ = false;
  uint64_t generation_ = 0;  // counts jobs, so a worker can tell a new one from a spurious wake
  // The job: [begin_, end_) in chunks_ chunks of chunk_ indices, next_ the first unclaimed one.
  int64_t begin_ = 0, end_ = 0, chunk_ = 0, chunks_ = 0, next_ = 0;
  int64_t pending_ = 0;  // chunks not finished
  int active_ = 0;       // workers inside the job
  const RangeFn* fn_ = nullptr;
  std::exception_ptr error_;
};

std::atomic<Pool*> g_pool{nullptr};
std::atomic<bool> g_shut_down{false};

// Runs in a child of fork(): the inherited pool has no threads; a new one is built on demand.
void forget_pool_after_fork() { g_pool.store(nullptr); }

// The pool, built (and the fork handler registered) on first use without a lock, which a
// forked child could find held: two threads racing here both build one, and one is discarded.
Pool* pool() {
  Pool* p = g_pool.load(std::memory_order_acquire);
  if (p) return p;
  static const bool registered = [] {
    pthread_atfork(nullptr, nullptr, forget_pool_after_fork);
    return true;
  }();
  (void)registered;
  Pool* fresh = new Pool;
  if (g_pool.compare_exchange_strong(p, fresh, std::memory_order_acq_rel)) return fresh;
  delete fresh;
  return p;
}

// Stops and joins the pool's threads when the program exits (static destruction).
struct ShutDownAtExit {
  ~ShutDownAtExit() {
    g_shut_down.store(true);
    delete g_pool.exchange(nullptr);
  }
} g_shut_down_at_exit;

}  // namespace

bool in_parallel_region() { return t_in_region; }

int pool_threads() {
  Pool* p = g_pool.load(std::memory_order_acquire);
  return p ? p->threads() : 0;
}

void run_on_pool(int64_t begin, int64_t end, int64_t chunk, int64_t chunks, RangeFn fn) {
  if (!g_shut_down.load(std::memory_order_relaxed) && pool()->run(begin, end, chunk, chunks, fn))
    return;
  RegionGuard region;  // the pool is busy or gone: the whole range here, still without nesting
  fn(begin, end);
}

}  // namespace detail

void set_num_threads(int n) {
  if (n <= 0) throw RuntimeError("set_num_threads expects a positive integer");
  detail::g_num_threads.store(n);
#ifdef TINY_HAS_OPENBLAS
  openblas_set_num_threads(n);
#endif
}

int get_num_threads() {
  int n = detail::g_num_threads.load(std::memory_order_relaxed);
  if (n == 0) {
    int expected = 0;
    detail::g_num_threads.compare_exchange_strong(expected, detail::default_num_threads());
    n = detail::g_num_threads.load(std::memory_order_relaxed);
  }
  return n;
}

}  // namespace tiny
