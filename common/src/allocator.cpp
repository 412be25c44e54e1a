// allocator.cpp: the CPU caching allocator and its byte accounting.
//
// Freed blocks are kept in bins keyed by size class and handed out again, so a loop that
// computes same-sized results reuses warm, already-mapped memory instead of faulting in new
// pages on every op. Sizes round up to a class (at most 1/8 larger than asked), so nearby
// sizes share blocks. The cache gives memory back to the system when it exceeds a cap, and on
// empty_cache().
#include "tiny/allocator.h"

#include <cstdlib>
#include <map>
#include <mutex>
#include <new>
#include <vector>

#include "tiny/error.h"

namespace tiny {
namespace {

constexpr size_t kAlignment = 64;                 // a cache line, and AVX-512's vector width
constexpr size_t kMaxCachedBytes = size_t(2) << 30;  // beyond this, freed blocks go back

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

struct CpuCache {
  std::mutex mutex;
  std::map<size_t, std::vector<void*>> free_blocks;  // size class -> cached blocks
  size_t cached_bytes = 0;
  MemoryStats stats;

  void* allocate(size_t nbytes) {
    const size_t cls = size_class(nbytes == 0 ? 1 : nbytes);
    std::lock_guard<std::mutex> lock(mutex);
    ++stats.allocations;
    stats.allocated += accounted_bytes(nbytes);
    stats.max_allocated = std::max(stats.max_allocated, stats.allocated);
    auto it = free_blocks.find(cls);
    if (it != free_blocks.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      cached_bytes -= cls;
      ++stats.cache_hits;
      return p;
    }
    void* p = std::aligned_alloc(kAlignment, cls);
    if (p == nullptr) {
      release_all_locked();  // try once more with the cache emptied
      p = std::aligned_alloc(kAlignment, cls);
    }
    if (p == nullptr) {
      stats.allocated -= accounted_bytes(nbytes);
      throw RuntimeError("CPU out of memory: tried to allocate " + std::to_string(nbytes) +
                         " bytes");
    }
    stats.reserved += static_cast<int64_t>(cls);
    return p;
  }

  void free(void* p, size_t nbytes) {
    const size_t cls = size_class(nbytes == 0 ? 1 : nbytes);
    std::lock_guard<std::mutex> lock(mutex);
    stats.allocated -= accounted_bytes(nbytes);
    if (cached_bytes + cls > kMaxCachedBytes) {
      std::free(p);
      stats.reserved -= static_cast<int64_t>(cls);
      return;
    }
    free_blocks[cls].push_back(p);
    cached_bytes += cls;
  }

  void release_all_locked() {
    for (auto& [cls, blocks] : free_blocks) {
      for (void* p : blocks) std::free(p);
      stats.reserved -= static_cast<int64_t>(cls * blocks.size());
    }
    free_blocks.clear();
    cached_bytes = 0;
  }
};

CpuCache& cpu_cache() {
  // Never destroyed: storages that outlive static destruction may still free into it.
  static CpuCache* cache = new CpuCache();
  return *cache;
}

void require_cpu(Device device) {
  if (!device.is_cpu())
    throw RuntimeError("memory statistics for " + device.str() +
                       " need the CUDA backend, which this build does not have yet");
}

}  // namespace

namespace detail {
void* cpu_allocate(size_t nbytes) { return cpu_cache().allocate(nbytes); }
void cpu_free(void* ptr, size_t nbytes) { cpu_cache().free(ptr, nbytes); }
}  // namespace detail

MemoryStats memory_stats(Device device) {
  require_cpu(device);
  std::lock_guard<std::mutex> lock(cpu_cache().mutex);
  return cpu_cache().stats;
}

int64_t memory_allocated(Device device) { return memory_stats(device).allocated; }
int64_t max_memory_allocated(Device device) { return memory_stats(device).max_allocated; }

void reset_peak_memory_stats(Device device) {
  require_cpu(device);
  std::lock_guard<std::mutex> lock(cpu_cache().mutex);
  cpu_cache().stats.max_allocated = cpu_cache().stats.allocated;
}

void empty_cache(Device device) {
  require_cpu(device);
  std::lock_guard<std::mutex> lock(cpu_cache().mutex);
  cpu_cache().release_all_locked();
}

}  // namespace tiny
