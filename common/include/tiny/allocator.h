/// @file allocator.h
/// @brief A caching allocator for tensor memory, with its bytes accounted.
///
/// Fresh memory is expensive to touch (the kernel maps each 4 KiB page on first write), so a
/// library that asked the system for every result would time page faults, not its kernels.
/// Like PyTorch's allocators, this one keeps freed blocks and hands them out again. On a GPU the
/// reason is stronger still: cudaMalloc and cudaFree synchronise the whole device, so a library
/// that called them per tensor would serialise every op with the host.
///
/// Three caches share one implementation: pageable CPU memory, pinned (page-locked) CPU memory
/// for fast copies to a GPU, and one per CUDA device. memory_allocated(Device::cpu()) counts
/// pageable memory only; pinned blocks are accounted separately (pinned_memory_stats()).
#pragma once
#include <cstddef>
#include <cstdint>

#include "tiny/device.h"

namespace tiny {

/// What a block of memory is for, in a training step. Every storage the allocator gives out is
/// in exactly one category; its bytes move when its role changes.
enum class MemoryCategory : uint8_t {
  weights,          ///< parameters (nn::Parameter, or any tensor an optimizer updates)
  gradients,        ///< the .grad of a leaf, written by backward()
  optimizer_state,  ///< what an optimizer keeps per parameter (Adam's m and v, step counts)
  activations,      ///< tensors the autograd graph keeps for backward (and are none of the above)
  temporaries,      ///< everything else: inputs, results nobody saved, scratch
};
/// How many categories there are.
inline constexpr int kMemoryCategories = 5;
/// The category's name as printed: "weights", "gradients", "optimizer state", "activations",
/// "temporaries".
const char* memory_category_name(MemoryCategory category);

/// Counters of one device's allocator, as torch.cuda.memory_stats reports them, and split by
/// category (indexed by static_cast<int>(MemoryCategory)).
struct MemoryStats {
  int64_t allocated = 0;        ///< bytes held by live storages (rounded up to 512, as PyTorch)
  int64_t max_allocated = 0;    ///< the peak of `allocated` since the last reset
  int64_t requested = 0;        ///< bytes the live storages asked for (not rounded)
  int64_t reserved = 0;         ///< bytes obtained from the system, in use or cached
  int64_t allocations = 0;      ///< number of allocate() calls served
  int64_t cache_hits = 0;       ///< of those, served from the cache without asking the system
  /// `allocated`, per category; the entries add up to `allocated`.
  int64_t category_allocated[kMemoryCategories] = {};
  /// The peak of each category's `allocated` since the last reset (each on its own: the peaks
  /// need not be simultaneous, so they may add up to more than max_allocated).
  int64_t category_max_allocated[kMemoryCategories] = {};
  /// `requested`, per category: exactly the bytes of the tensors' storages.
  int64_t category_requested[kMemoryCategories] = {};
};

/// Bytes held by live tensors on `device` (torch.cuda.memory_allocated()).
int64_t memory_allocated(Device device = Device::cpu());
/// The peak of memory_allocated() since the last reset (torch.cuda.max_memory_allocated()).
int64_t max_memory_allocated(Device device = Device::cpu());
/// Bytes held by live tensors of one category on `device` (rounded as memory_allocated()).
int64_t memory_allocated(MemoryCategory category, Device device = Device::cpu());
/// The peak of memory_allocated(category, device) since the last reset.
int64_t max_memory_allocated(MemoryCategory category, Device device = Device::cpu());
/// Starts a new peak at the current allocation, for the total and for every category
/// (torch.cuda.reset_peak_memory_stats()).
void reset_peak_memory_stats(Device device = Device::cpu());
/// All counters of `device`'s allocator.
MemoryStats memory_stats(Device device = Device::cpu());
/// Returns cached, unused blocks to the system (torch.cuda.empty_cache()).
void empty_cache(Device device = Device::cpu());

/// Counters of the pinned host memory cache.
MemoryStats pinned_memory_stats();

namespace detail {
/// Allocates `nbytes` on `device` (pinned host memory when `pinned`), from the cache when a
/// block fits. CPU blocks are 64-byte aligned, CUDA blocks 256-byte aligned.
void* allocate(size_t nbytes, Device device, bool pinned = false);
/// Gives back a block that allocate(nbytes, device, pinned) returned; `category` is the one its
/// bytes were last counted in.
void deallocate(void* ptr, size_t nbytes, Device device, bool pinned = false,
                MemoryCategory category = MemoryCategory::temporaries);
/// Moves a live block's bytes from one category's counters to another's. New blocks start in
/// MemoryCategory::temporaries.
void recategorize(size_t nbytes, Device device, bool pinned, MemoryCategory from,
                  MemoryCategory to);
/// The peak of memory_allocated(device) since the previous call (for MemoryTimeline).
int64_t take_interval_peak(Device device);
}  // namespace detail

}  // namespace tiny
