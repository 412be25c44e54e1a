// allocator.cpp: the caching allocators (CPU, pinned host, one per CUDA device) and their byte
// accounting.
//
// Freed blocks are kept in bins keyed by size class and handed out again, so a loop that
// computes same-sized results reuses warm, already-mapped memory instead of asking the system
// (page faults on the CPU, a device-wide synchronisation on a GPU) on every op. Sizes round up
// to a class (at most 1/8 larger than asked), so nearby sizes share blocks. When the system
// refuses, the cache is emptied and the request tried once more, as PyTorch does.
//
// Reusing a freed CUDA block right away is safe because every kernel runs on the device's one
// stream, in order: work that used the old tensor is queued before work that uses the new one.
// A pinned host block may still be read by a non-blocking copy the host has not waited for, so
// before one is handed out again the pinned cache waits for that copy (cuda_backend.h).
#include "tiny/allocator.h"

#include <array>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <vector>

#include "backend.h"
#include "cuda_backend.h"
#include "tiny/error.h"

// Under AddressSanitizer a cached block would hide the very mistakes ASan exists to catch: a
// freed tensor's memory stays mapped and unpoisoned in the cache, and a read past a tensor's
// end lands in the block's rounding instead of a redzone. So the allocator tells ASan what
// malloc would: a freed block is poisoned until it is handed out again, and the bytes between
// the size asked for and the size class are poisoned while it is in use.
#if defined(__SANITIZE_ADDRESS__)
#define TINY_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TINY_ASAN 1
#endif
#endif
#ifdef TINY_ASAN
#include <sanitizer/asan_interface.h>
#endif

namespace tiny {
namespace {

#ifdef TINY_ASAN
void poison(void* p, size_t nbytes) { ASAN_POISON_MEMORY_REGION(p, nbytes); }
void unpoison(void* p, size_t nbytes) { ASAN_UNPOISON_MEMORY_REGION(p, nbytes); }
#else
void poison(void*, size_t) {}
void unpoison(void*, size_t) {}
#endif

constexpr size_t kAlignment =
    64;  // a cache line, AVX-512's vector width, and the CPU backend's alignment

// PyTorch accounts allocations in multiples of 512 bytes; so do we, so that the numbers of
// memory_allocated() mean the same thing.
int64_t accounted_bytes(size_t nbytes) { return static_cast<int64_t>((nbytes + 511) / 512 * 512); }

// The size class of a request: 64-byte multiples below 4 KiB, then eight classes per power of
// two, so no block is more than 12.5% larger than what was asked.
size_t size_class(size_t nbytes) {
  if (nbytes <= 4096) return (nbytes + kAlignment - 1) / kAlignment * kAlignment;
  size_t top = size_t(1) << (63 - __builtin_clzll(nbytes - 1));  // largest power of 2 < nbytes
  size_t step = top / 8;
  return (nbytes + step - 1) / step * step;
}

std::string human_bytes(size_t n) {
  char buf[32];
  if (n >= (size_t(1) << 30))
    std::snprintf(buf, sizeof buf, "%.2f GiB", double(n) / double(1 << 30));
  else std::snprintf(buf, sizeof buf, "%.2f MiB", double(n) / double(1 << 20));
  return buf;
}

// How one kind of memory is obtained from and returned to the system.
struct Source {
  Device device;
  bool pinned = false;
  size_t max_cached = ~size_t(0);  // beyond this many cached bytes, freed blocks go back

  void* obtain(size_t nbytes) const {
    return detail::backend(device).allocate(nbytes, device.index, pinned);
  }
  void release(void* p) const { detail::backend(device).release(p, device.index, pinned); }
  // ASan's shadow memory covers host memory only (pageable and pinned), never a GPU's.
  void hand_out(void* p, size_t nbytes, size_t cls) const {
    if (!device.is_cpu()) return;
    unpoison(p, nbytes);
    poison(static_cast<char*>(p) + nbytes, cls - nbytes);
  }
  void take_back(void* p, size_t cls) const {
    if (device.is_cpu()) poison(p, cls);
  }
  void give_up(void* p, size_t cls) const {  // before the block goes back to the system
    if (device.is_cpu()) unpoison(p, cls);
    release(p);
  }
  std::string out_of_memory(size_t nbytes) const {
    if (!device.is_cpu())
      return "CUDA out of memory. Tried to allocate " + human_bytes(nbytes) + " (GPU " +
             std::to_string(device.index) + ")";
    return std::string(pinned ? "pinned " : "") + "CPU out of memory: tried to allocate " +
           std::to_string(nbytes) + " bytes";
  }
};

class CachingAllocator {
 public:
  explicit CachingAllocator(Source source) : source_(source) {}

  void* allocate(size_t nbytes) {
    const size_t cls = size_class(nbytes == 0 ? 1 : nbytes);
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = free_blocks_.find(cls);
    if (it != free_blocks_.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      cached_bytes_ -= cls;
      if (source_.pinned) detail::cuda::pinned_wait_idle(p);
      source_.hand_out(p, nbytes, cls);
      count(nbytes);
      ++stats_.cache_hits;
      return p;
    }
    void* p = source_.obtain(cls);
    if (p == nullptr) {
      release_all_locked();  // try once more with the cache emptied
      p = source_.obtain(cls);
    }
    if (p == nullptr) throw RuntimeError(source_.out_of_memory(nbytes));
    source_.hand_out(p, nbytes, cls);
    count(nbytes);
    stats_.reserved += static_cast<int64_t>(cls);
    return p;
  }

  void free(void* p, size_t nbytes, MemoryCategory category) {
    const size_t cls = size_class(nbytes == 0 ? 1 : nbytes);
    std::lock_guard<std::mutex> lock(mutex_);
    const int64_t bytes = accounted_bytes(nbytes);
    stats_.allocated -= bytes;
    stats_.requested -= static_cast<int64_t>(nbytes);
    stats_.category_allocated[index(category)] -= bytes;
    stats_.category_requested[index(category)] -= static_cast<int64_t>(nbytes);
    if (cached_bytes_ + cls > source_.max_cached) {
      source_.give_up(p, cls);
      stats_.reserved -= static_cast<int64_t>(cls);
      return;
    }
    source_.take_back(p, cls);
    free_blocks_[cls].push_back(p);
    cached_bytes_ += cls;
  }

  void recategorize(size_t nbytes, MemoryCategory from, MemoryCategory to) {
    if (from == to) return;
    const int64_t bytes = accounted_bytes(nbytes);
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.category_allocated[index(from)] -= bytes;
    stats_.category_requested[index(from)] -= static_cast<int64_t>(nbytes);
    int64_t& now = stats_.category_allocated[index(to)];
    now += bytes;
    stats_.category_requested[index(to)] += static_cast<int64_t>(nbytes);
    int64_t& peak = stats_.category_max_allocated[index(to)];
    peak = std::max(peak, now);
  }

  MemoryStats stats() {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
  }
  void reset_peak() {
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.max_allocated = stats_.allocated;
    for (int c = 0; c < kMemoryCategories; ++c)
      stats_.category_max_allocated[c] = stats_.category_allocated[c];
  }
  // The peak of `allocated` since the previous call (a timeline's samples each report the
  // highest point reached since the sample before, so no transient peak goes unseen).
  int64_t take_interval_peak() {
    std::lock_guard<std::mutex> lock(mutex_);
    const int64_t peak = interval_max_;
    interval_max_ = stats_.allocated;
    return peak;
  }
  void release_all() {
    std::lock_guard<std::mutex> lock(mutex_);
    release_all_locked();
  }

 private:
  static int index(MemoryCategory c) { return static_cast<int>(c); }

  // A new block is a temporary until something (a parameter, a gradient, a saved tensor) says
  // otherwise.
  void count(size_t nbytes) {
    const int64_t bytes = accounted_bytes(nbytes);
    ++stats_.allocations;
    stats_.allocated += bytes;
    stats_.requested += static_cast<int64_t>(nbytes);
    stats_.max_allocated = std::max(stats_.max_allocated, stats_.allocated);
    interval_max_ = std::max(interval_max_, stats_.allocated);
    const int t = index(MemoryCategory::temporaries);
    stats_.category_allocated[t] += bytes;
    stats_.category_requested[t] += static_cast<int64_t>(nbytes);
    stats_.category_max_allocated[t] =
        std::max(stats_.category_max_allocated[t], stats_.category_allocated[t]);
  }
  void release_all_locked() {
    for (auto& [cls, blocks] : free_blocks_) {
      for (void* p : blocks) source_.give_up(p, cls);
      stats_.reserved -= static_cast<int64_t>(cls * blocks.size());
    }
    free_blocks_.clear();
    cached_bytes_ = 0;
  }

  Source source_;
  std::mutex mutex_;
  std::map<size_t, std::vector<void*>> free_blocks_;  // size class -> cached blocks
  size_t cached_bytes_ = 0;
  int64_t interval_max_ = 0;
  MemoryStats stats_;
};

constexpr int kMaxDevices = 64;

// The allocators are never destroyed: storages that outlive static destruction may still free
// into them.
CachingAllocator& allocator_for(Device device, bool pinned) {
  if (device.is_cpu()) {
    static CachingAllocator* pageable =
        new CachingAllocator(Source{Device::cpu(), false, size_t(2) << 30});
    static CachingAllocator* locked =
        new CachingAllocator(Source{Device::cpu(), true, size_t(1) << 30});
    return pinned ? *locked : *pageable;
  }
  if (device.index < 0 || device.index >= kMaxDevices || device.index >= cuda::device_count())
    cuda::require_device(device.index);
  static std::array<std::unique_ptr<CachingAllocator>, kMaxDevices>* per_device =
      new std::array<std::unique_ptr<CachingAllocator>, kMaxDevices>();
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  auto& slot = (*per_device)[device.index];
  if (!slot) slot = std::make_unique<CachingAllocator>(Source{device, false});
  return *slot;
}

}  // namespace

namespace detail {
void* allocate(size_t nbytes, Device device, bool pinned) {
  if (pinned && !device.is_cpu()) throw RuntimeError("only CPU memory can be pinned");
  return allocator_for(device, pinned).allocate(nbytes);
}
void deallocate(void* ptr, size_t nbytes, Device device, bool pinned, MemoryCategory category) {
  allocator_for(device, pinned).free(ptr, nbytes, category);
}
void recategorize(size_t nbytes, Device device, bool pinned, MemoryCategory from,
                  MemoryCategory to) {
  allocator_for(device, pinned).recategorize(nbytes, from, to);
}
int64_t take_interval_peak(Device device) {
  return allocator_for(device, false).take_interval_peak();
}
}  // namespace detail

const char* memory_category_name(MemoryCategory category) {
  switch (category) {
    case MemoryCategory::weights: return "weights";
    case MemoryCategory::gradients: return "gradients";
    case MemoryCategory::optimizer_state: return "optimizer state";
    case MemoryCategory::activations: return "activations";
    case MemoryCategory::temporaries: return "temporaries";
  }
  throw ValueError("unknown memory category " + std::to_string(static_cast<int>(category)));
}

int64_t memory_allocated(MemoryCategory category, Device device) {
  const int c = static_cast<int>(category);
  if (c >= kMemoryCategories) memory_category_name(category);  // raises
  return memory_stats(device).category_allocated[c];
}
int64_t max_memory_allocated(MemoryCategory category, Device device) {
  const int c = static_cast<int>(category);
  if (c >= kMemoryCategories) memory_category_name(category);
  return memory_stats(device).category_max_allocated[c];
}

MemoryStats memory_stats(Device device) { return allocator_for(device, false).stats(); }
MemoryStats pinned_memory_stats() { return allocator_for(Device::cpu(), true).stats(); }
int64_t memory_allocated(Device device) { return memory_stats(device).allocated; }
int64_t max_memory_allocated(Device device) { return memory_stats(device).max_allocated; }
void reset_peak_memory_stats(Device device) { allocator_for(device, false).reset_peak(); }
void empty_cache(Device device) { allocator_for(device, false).release_all(); }

}  // namespace tiny
