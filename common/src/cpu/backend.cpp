// cpu/backend.cpp: the CPU's row of the backend table (backend.h), and the small pieces of it
// that have no file of their own: raw memory, zeroing, and where().
#include <cstdlib>
#include <sys/mman.h>

#include <atomic>
#include <cstring>

#include "../cuda_backend.h"
#include "../internal.h"
#include "cpu.h"

namespace tiny::detail {

namespace cpu {

namespace {

// Blocks are aligned for the widest vector loads (AVX-512: 64 bytes); the allocator rounds every
// size to a multiple of this.
constexpr size_t kAlignment = 64;

// Large blocks start on a 2 MiB boundary and are offered to the kernel for transparent huge
// pages (huge_pages(), cpu.h, says why and when).
constexpr size_t kHugePage = size_t(2) << 20;

std::atomic<bool>& huge_pages_wanted() {
  static std::atomic<bool> on{[] {
    const char* want = std::getenv("TINY_HUGE_PAGES");
    return want != nullptr && std::strcmp(want, "1") == 0;
  }()};
  return on;
}

void* allocate(size_t nbytes, int, bool pinned) {
  // Page-locked memory comes from the CUDA driver (which is what can lock pages for a GPU's copy
  // engines); without one, cuda::pinned_malloc raises the driver's reason.
  if (pinned) return cuda::pinned_malloc(nbytes);
  const size_t rounded = (nbytes + kAlignment - 1) / kAlignment * kAlignment;
  if (nbytes >= kHugePage && huge_pages()) {
    // posix_memalign, unlike aligned_alloc, takes a size that is not a multiple of the
    // alignment. Only the whole 2 MiB pieces of the block are advised: the piece past them may
    // share its last page with another block. The advice may go unheeded (huge pages switched
    // off, or none to spare), and then the block keeps its 4 KiB pages: nothing to report.
    void* p = nullptr;
    if (posix_memalign(&p, kHugePage, rounded) != 0) return nullptr;
    madvise(p, rounded / kHugePage * kHugePage, MADV_HUGEPAGE);
    return p;
  }
  return std::aligned_alloc(kAlignment, rounded);
}

void release(void* ptr, int, bool pinned) {
  if (pinned) cuda::pinned_free(ptr);
  else std::free(ptr);
}

void zero_bytes(void* ptr, size_t nbytes, int) { std::memset(ptr, 0, nbytes); }

void synchronize(int) {}  // CPU work is done when the call returns

}  // namespace

bool huge_pages() { return huge_pages_wanted().load(std::memory_order_relaxed); }

bool set_huge_pages(bool on) { return huge_pages_wanted().exchange(on); }

void where(const Tensor& out, const Tensor& condition, const Tensor& a, const Tensor& b) {
  const Shape& shape = out.shape();
  const Strides sc = broadcast_strides(condition, shape);
  const Strides sa = broadcast_strides(a, shape);
  const Strides sb = broadcast_strides(b, shape);
  dispatch_dtype(out.dtype(), [&]<typename T>() {
    T* po = out.data<T>();
    const bool* pc = condition.data<bool>();
    const T* px = a.data<T>();
    const T* py = b.data<T>();
    parallel_for_each_row<4>(
        shape, {&out.strides(), &sc, &sa, &sb}, [&](int64_t n, const auto& off, const auto& st) {
          for (int64_t i = 0; i < n; ++i)
            po[off[0] + i * st[0]] =
                pc[off[1] + i * st[1]] ? px[off[2] + i * st[2]] : py[off[3] + i * st[3]];
        });
  });
}

}  // namespace cpu

extern const Backend kCpuBackend = {
    "cpu",     cpu::allocate, cpu::release, cpu::zero_bytes, cpu::synchronize,
    cpu::copy, cpu::where,    cpu::sum,     cpu::max_rows,   cpu::matmul,
    cpu::optimizer_update,
};

}  // namespace tiny::detail
