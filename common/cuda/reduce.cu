// reduce.cu: sums (and means) of rows, and the largest element of each row with its index, on
// the GPU. The backend's sum (cuda_backend.cpp) and max (reduce.cpp) have already moved the
// reduced dimensions last and made them contiguous, so every output is one contiguous row.
//
// A block of threads reads a row together (neighbouring threads, neighbouring elements) and
// combines its partial results in shared memory. When there are few rows and they are long (the
// sum of a whole tensor is one row), one block per row would leave most of the GPU idle, so each
// row is cut into pieces, one block per piece, and a second pass adds the pieces.
#include <type_traits>

#include "../src/cuda_backend.h"
#include "elementwise.cuh"

namespace tiny::detail::cuda {
namespace {

// Sums rows[row, piece * chunk .. (piece + 1) * chunk) into out[row * pieces + piece], times
// `scale` when there is a single piece.
template <typename Acc, typename T>
__global__ void __launch_bounds__(kThreads)
    sum_pieces(Acc* out, const T* rows, int64_t n, int64_t chunk, double scale) {
  const int64_t row = blockIdx.x, piece = blockIdx.y, pieces = gridDim.y;
  const int64_t lo = piece * chunk, hi = min(n, lo + chunk);
  const T* r = rows + row * n;
  Acc total = 0;
  for (int64_t j = lo + threadIdx.x; j < hi; j += kThreads)
    total += static_cast<Acc>(static_cast<opmath_t<T>>(r[j]));
  __shared__ Acc partial[kThreads];
  partial[threadIdx.x] = total;
  __syncthreads();
  for (int width = kThreads / 2; width > 0; width /= 2) {  // a tree: log2(256) = 8 steps
    if (threadIdx.x < width) partial[threadIdx.x] += partial[threadIdx.x + width];
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    Acc result = partial[0];
    if constexpr (std::is_floating_point_v<Acc>)
      if (pieces == 1) result *= scale;
    out[row * pieces + piece] = result;
  }
}

int multiprocessors(int device) {
  int count = 0;
  TINY_CUDA_CHECK(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device));
  return count;
}

template <typename M> __device__ bool beats(M candidate, M best) {
  if constexpr (std::is_floating_point_v<M>)
    if (isnan(candidate)) return !isnan(best);
  return candidate > best;
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    max_of_rows(T* values, int64_t* indices, const T* rows, int64_t n) {
  using M = opmath_t<T>;
  const T* r = rows + static_cast<int64_t>(blockIdx.x) * n;
  M best = static_cast<M>(r[0]);
  int64_t at = 0;
  for (int64_t j = threadIdx.x; j < n; j += kThreads) {
    const M v = static_cast<M>(r[j]);
    if (beats(v, best)) best = v, at = j;
  }
  __shared__ M best_value[kThreads];
  __shared__ int64_t best_index[kThreads];
  best_value[threadIdx.x] = best;
  best_index[threadIdx.x] = at;
  __syncthreads();
  for (int width = kThreads / 2; width > 0; width /= 2) {
    if (threadIdx.x < width) {
      const M v = best_value[threadIdx.x + width];
      const int64_t i = best_index[threadIdx.x + width];
      const M mine = best_value[threadIdx.x];
      // The larger value wins; between equals (or two NaNs), the first index, as on the CPU.
      if (beats(v, mine) || (!beats(mine, v) && i < best_index[threadIdx.x])) {
        best_value[threadIdx.x] = v;
        best_index[threadIdx.x] = i;
      }
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    values[blockIdx.x] = convert<T>(best_value[0]);
    indices[blockIdx.x] = best_index[0];
  }
}

}  // namespace

void sum_rows(const Tensor& out, const Tensor& rows, double scale) {
  const int64_t m = rows.size(0), n = rows.size(1);
  if (m == 0) return;
  const int device = out.device().index;
  DeviceGuard guard(device);
  dispatch_dtype(out.dtype(), [&]<typename Acc>() {
    if constexpr (std::is_same_v<Acc, double> || std::is_same_v<Acc, int64_t>) {
      // Enough blocks to fill every multiprocessor a few times over, but no piece shorter than
      // 16 elements per thread.
      const int64_t want =
          std::max<int64_t>(1, 4 * multiprocessors(device) / std::max<int64_t>(m, 1));
      const int64_t pieces =
          std::min<int64_t>({want, std::max<int64_t>(1, n / (kThreads * 16)), 65535});
      const int64_t chunk = (n + pieces - 1) / pieces;
      Acc* target = static_cast<Acc*>(out.data_ptr());
      Tensor partials;
      if (pieces > 1) {
        partials = empty({m, pieces}, out.dtype(), out.device());
        target = static_cast<Acc*>(partials.data_ptr());
      }
      const dim3 grid(static_cast<unsigned>(m), static_cast<unsigned>(pieces));
      dispatch_dtype(rows.dtype(), [&]<typename T>() {
        sum_pieces<Acc, T><<<grid, kThreads>>>(target, static_cast<const T*>(rows.data_ptr()), n,
                                               std::max<int64_t>(chunk, 1), scale);
      });
      TINY_KERNEL_CHECK();
      if (pieces > 1) {
        sum_pieces<Acc, Acc><<<dim3(static_cast<unsigned>(m), 1), kThreads>>>(
            static_cast<Acc*>(out.data_ptr()), static_cast<const Acc*>(partials.data_ptr()), pieces,
            pieces, scale);
        TINY_KERNEL_CHECK();
      }
    } else {
      throw RuntimeError("sum_rows: accumulator must be float64 or int64");
    }
  });
}

void max_rows(const Tensor& values, const Tensor& indices, const Tensor& rows) {
  const int64_t m = rows.size(0), n = rows.size(1);
  if (m == 0) return;
  DeviceGuard guard(values.device().index);
  dispatch_dtype(rows.dtype(), [&]<typename T>() {
    max_of_rows<T><<<static_cast<unsigned>(m), kThreads>>>(
        static_cast<T*>(values.data_ptr()), static_cast<int64_t*>(indices.data_ptr()),
        static_cast<const T*>(rows.data_ptr()), n);
  });
  TINY_KERNEL_CHECK();
}

}  // namespace tiny::detail::cuda
