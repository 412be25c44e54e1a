// parallel.h: the thread pool the CPU kernels split large loops across, not part of the public
// API (tiny/parallel.h sets its size).
//
// parallel_for(begin, end, grain, fn) is ATen's at::parallel_for: it cuts [begin, end) into at
// most get_num_threads() contiguous chunks of at least `grain` indices and calls fn(b, e) once
// per chunk, the calling thread taking the first chunk and the pool's threads the others; it
// returns when every chunk is done, and rethrows the first exception a chunk threw. It runs
// fn(begin, end) inline, with no thread involved, when the range is no larger than the grain,
// when one thread is asked for, when called from inside a chunk (no nesting: the pool's threads
// are all busy already) or while another thread of the program has the pool.
//
// The chunks must write disjoint memory, and a chunk must not allocate tensors (the caching
// allocator is not shared between threads): allocate before the loop, fill inside it.
#pragma once
#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "tiny/parallel.h"

namespace tiny::detail {

/// ATen's GRAIN_SIZE: loops over fewer elements than this run on one thread, because waking a
/// second one (a few microseconds) costs more than it saves.
constexpr int64_t kGrainSize = 32768;

/// True on a thread that is running a chunk of a parallel_for (the caller's included).
bool in_parallel_region();

/// How many threads the pool has started in this process (tests check that small ops start none).
int pool_threads();

/// A non-owning reference to a callable taking (int64_t, int64_t): parallel_for's argument, passed
/// to the pool without copying it or allocating.
class RangeFn {
 public:
  template <typename F>
  explicit RangeFn(F& f)
      : obj_(const_cast<void*>(static_cast<const void*>(&f))),
        call_([](void* o, int64_t b, int64_t e) { (*static_cast<F*>(o))(b, e); }) {}
  void operator()(int64_t b, int64_t e) const { call_(obj_, b, e); }

 private:
  void* obj_;
  void (*call_)(void*, int64_t, int64_t);
};

/// Runs fn(b, e) over `chunks` chunks of [begin, end), each `chunk` indices long (the last one
/// shorter), on the pool; parallel_for decides when it is worth it.
void run_on_pool(int64_t begin, int64_t end, int64_t chunk, int64_t chunks, RangeFn fn);

/// at::parallel_for: fn(b, e) over chunks of [begin, end), each at least `grain` long, split
/// across get_num_threads() threads (see the top of this file).
template <typename F> void parallel_for(int64_t begin, int64_t end, int64_t grain, F&& fn) {
  const int64_t range = end - begin;
  if (range <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  if (range > grain && !in_parallel_region()) {
    const int64_t threads = std::min<int64_t>(get_num_threads(), (range + grain - 1) / grain);
    if (threads > 1) {
      const int64_t chunk = (range + threads - 1) / threads;
      run_on_pool(begin, end, chunk, (range + chunk - 1) / chunk, RangeFn(fn));
      return;
    }
  }
  fn(begin, end);
}

}  // namespace tiny::detail
