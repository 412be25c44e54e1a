// cpu/cpu.h: the CPU backend's functions, which cpu/backend.cpp gathers into its Backend row
// (backend.h says what each one does). Not part of the public API.
#pragma once
#include <vector>

#include "../backend.h"

namespace tiny::detail::cpu {

void copy(const Tensor& dst, const Tensor& src);  // cpu/copy.cpp
// n contiguous elements between float32 and a 16-bit float, at about the speed of memcpy (SIMD
// where the processor has it, chosen at run time); copy() and the 16-bit matmul use them.
void convert_row(Half* d, const float* s, int64_t n);      // cpu/copy.cpp
void convert_row(float* d, const Half* s, int64_t n);      // cpu/copy.cpp
void convert_row(BFloat16* d, const float* s, int64_t n);  // cpu/copy.cpp
void convert_row(float* d, const BFloat16* s, int64_t n);  // cpu/copy.cpp
void where(const Tensor& out, const Tensor& condition, const Tensor& a,
           const Tensor& b);                                                     // cpu/backend.cpp
void sum(const Tensor& out, const Tensor& a, const std::vector<bool>& reduce,
         double divisor);                                                        // cpu/reduce.cpp
void max_rows(const Tensor& values, const Tensor& indices, const Tensor& rows);  // cpu/reduce.cpp
void matmul(const Tensor& out, const Tensor& a, const Tensor& b);                // cpu/matmul.cpp
void optimizer_update(const UpdateArgs& args);                                   // cpu/optim.cpp

// Whether the CPU's blocks of 2 MiB and more start on a 2 MiB boundary and are offered to the
// kernel for transparent huge pages (madvise MADV_HUGEPAGE): off unless TINY_HUGE_PAGES=1, as
// PyTorch's THP_MEM_ALLOC_ENABLE=1 is. One 2 MiB page stands for 512 of 4 KiB, so a pass over a
// large tensor misses the TLB far less often (each miss is dearer in a virtual machine, whose
// page walks go through two tables). It is an option, not the default, for PyTorch's reasons:
// finding a free huge page can make the kernel compact memory inside the allocation that asked,
// and a block's memory is then committed 2 MiB at a time. The README's
// benchmark section has what it measured. set_huge_pages returns the old answer; blocks already
// obtained (the cache's too) keep the pages they had (cpu/backend.cpp).
bool huge_pages();
bool set_huge_pages(bool on);

}  // namespace tiny::detail::cpu
