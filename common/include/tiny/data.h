/// @file data.h
/// @brief Training data on disk: raw token files, NumPy's .npy files, memory maps, and batches.
///
/// A language model's training set is one long sequence of token ids, often far larger than the
/// machine's memory. It is kept on disk as raw integers (NumPy's `ndarray.tofile`) or as a .npy
/// file, and read through a memory map: the tensor's storage *is* the file, and the operating
/// system reads a page from disk only when an element on it is touched. get_batch() then picks
/// random windows of it, the only part of the data a training step needs in memory.
///
/// Memory maps made here are copy-on-write (mmap's MAP_PRIVATE, NumPy's mode 'c'): a write
/// through the tensor changes a private copy of the page it lands on, never the file, and never
/// faults. That keeps a stray in-place op from corrupting a data set, and from crashing the
/// process, which a read-only mapping would do on the first write through a raw pointer.
#pragma once
#include <optional>
#include <string>

#include "tiny/random.h"
#include "tiny/tensor.h"

namespace tiny {

/// Writes the elements' bytes to `path` in row-major order, with no header (NumPy's
/// `ndarray.tofile`): int32 values 1..10 make a 40-byte file. A tensor on a GPU, or one that is
/// not contiguous, is copied to a contiguous CPU tensor first. The bytes are the machine's
/// (little-endian on every platform this builds on).
void tofile(const Tensor& tensor, const std::string& path);

/// Writes `tensor` as a .npy file (format 1.0; 2.0 only for a header too long for 1.0) whose
/// bytes are those `numpy.save` writes for the same array: float64, float32, float16, int64,
/// int32 and bool. bfloat16 raises TypeError, since NumPy has no such dtype (convert with
/// `to(kFloat32)`, or keep the raw bits with tofile()).
void save_npy(const Tensor& tensor, const std::string& path);

/// Maps the raw file `path` as elements of `dtype` (`np.memmap(path, dtype=...)`): nothing is
/// read until an element is touched. `shape` may hold one -1, inferred from the file size; the
/// default reads the whole file as one dimension. RuntimeError when the file is missing or
/// empty, when its size is not a whole number of elements, or when `shape` does not describe
/// exactly the elements it holds. Writes through the tensor stay in memory (see the file
/// comment); the mapping goes away with the last tensor that uses it. Elements are not checked
/// (that would read the file), except a bool file's: it is read once, and a byte other than 0
/// or 1 raises ValueError. A file truncated by another process while mapped makes reads past
/// its new end fault.
Tensor memmap(const std::string& path, DType dtype, const Shape& shape = {-1});

/// Reads a .npy file (format 1.0, 2.0 or 3.0; little-endian float64, float32, float16, int64,
/// int32 or bool, C order). With `mmap` the tensor's storage is a copy-on-write memory map of
/// the file's body, read lazily as memmap() reads; without, the body is read into fresh memory.
/// When `dtype` is given, a file holding another dtype raises TypeError. A wrong magic string,
/// an unknown version, a header that is not NumPy's dictionary, Fortran order, a big-endian or
/// unsupported dtype, or a body shorter than the header promises each raise an error naming
/// the file.
Tensor load_npy(const std::string& path, bool mmap = true,
                std::optional<DType> dtype = std::nullopt);

/// A (batch_size, sequence_length) batch of windows of the 1-D tensor `data`, with data's
/// dtype, on `device`. The start of each window is drawn as
/// `randint(len(data) - sequence_length, (batch_size,))` from `generator`, so a seed gives
/// the windows PyTorch's get_batch gives (the last window, starting at len - sequence_length,
/// is never drawn, as in that code). For a CUDA device the batch is first copied into pinned
/// host memory and then sent with non_blocking = true: the copy is queued and the host goes on
/// to prepare the next batch while the GPU works. ValueError when batch_size or
/// sequence_length is not positive or the data is not longer than sequence_length;
/// RuntimeError when data is not 1-D.
Tensor get_batch(const Tensor& data, int64_t batch_size, int64_t sequence_length,
                 Device device = Device::cpu(), Generator& generator = default_generator());

}  // namespace tiny
