/// @file parallel.h
/// @brief How many CPU threads the library's own loops use: PyTorch's set_num_threads and
/// get_num_threads.
///
/// Large elementwise ops, copies, dtype conversions and sums on the CPU split their work across a
/// pool of threads; small ones (under 32,768 elements, PyTorch's grain size) run on the calling
/// thread alone, as they always did. Every result is the same for any number of threads: an
/// elementwise op computes each element the same way wherever its range is cut, and a sum adds
/// fixed blocks in a fixed order, so only the time changes.
#pragma once

namespace tiny {

/// Sets how many threads the CPU kernels use, the caller's included (torch.set_num_threads).
/// With OpenBLAS it also sets the matrix multiply's threads, as PyTorch sets MKL's. Raises
/// RuntimeError("set_num_threads expects a positive integer") for n <= 0, as PyTorch does.
void set_num_threads(int n);

/// The number of threads the CPU kernels use (torch.get_num_threads): the value last given to
/// set_num_threads; before any call, OMP_NUM_THREADS when it is set to a positive integer (as
/// PyTorch reads it; other values are ignored), else the number of hardware threads.
int get_num_threads();

}  // namespace tiny
