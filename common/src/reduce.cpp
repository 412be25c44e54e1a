// reduce.cpp: sum, mean and max, over all elements or over chosen dimensions.
//
// sum and mean walk the input once in memory order and add each element into its output slot
// (an accumulator whose strides are 0 along the reduced dimensions), so reducing the outer
// dimension of a matrix streams through it row by row instead of striding down columns.
// Floating sums accumulate in float64, integer sums in int64.
#include <cmath>
#include <limits>

#include "autograd_internal.h"
#include "cuda_backend.h"
#include "internal.h"
#include "tiny/ops.h"

namespace tiny {

namespace {

// The reduced dimensions as flags, checked and wrapped; an empty list means all of them.
std::vector<bool> reduced_dims(const Tensor& a, const std::vector<int64_t>& dims) {
  std::vector<bool> reduce(a.dim(), dims.empty());
  for (int64_t d : dims) {
    const int64_t w = wrap_dim(d, a.dim());
    if (a.dim() == 0) continue;
    if (reduce[w] && !dims.empty())
      throw RuntimeError("dim " + std::to_string(w) + " appears multiple times in the list of dims");
    reduce[w] = true;
  }
  return reduce;
}

Shape reduced_shape(const Tensor& a, const std::vector<bool>& reduce, bool keepdim) {
  Shape out;
  for (int64_t d = 0; d < a.dim(); ++d) {
    if (!reduce[d]) out.push_back(a.shape()[d]);
    else if (keepdim) out.push_back(1);
  }
  return out;
}

// Sums `a` over the flagged dimensions into a contiguous accumulator of dtype Acc, shaped as the
// keepdim result.
template <typename Acc> Tensor accumulate(const Tensor& a, const std::vector<bool>& reduce) {
  const Shape kept = reduced_shape(a, reduce, /*keepdim=*/true);
  Tensor acc = zeros(kept, dtype_of<Acc>());
  Strides acc_strides = acc.strides();
  for (int64_t d = 0; d < a.dim(); ++d)
    if (reduce[d]) acc_strides[d] = 0;  // every element along d lands in the same slot
  Acc* pacc = acc.data<Acc>();
  dispatch_dtype(a.dtype(), [&]<typename T>() {
    const T* px = static_cast<const T*>(a.data_ptr());
    detail::for_each_row<2>(a.shape(), {&a.strides(), &acc_strides},
                            [&](int64_t n, const auto& off, const auto& st) {
                              const T* x = px + off[0];
                              Acc* s = pacc + off[1];
                              if (st[1] == 0) {  // reducing along the row: one running sum
                                Acc total = 0;
                                for (int64_t i = 0; i < n; ++i)
                                  total += static_cast<Acc>(static_cast<opmath_t<T>>(x[i * st[0]]));
                                *s += total;
                              } else {
                                for (int64_t i = 0; i < n; ++i)
                                  s[i * st[1]] += static_cast<Acc>(static_cast<opmath_t<T>>(x[i * st[0]]));
                              }
                            });
  });
  return acc;
}

// On a GPU: the reduced dimensions are moved last and made contiguous, so that each output is
// the sum of one contiguous row, which a block of threads reads together; `scale` turns the sum
// into a mean.
Tensor cuda_reduce_rows(const Tensor& a, const std::vector<bool>& reduce, bool keepdim, double scale) {
  std::vector<int64_t> order;
  int64_t m = 1, n = 1;
  for (int64_t d = 0; d < a.dim(); ++d)
    if (!reduce[d]) order.push_back(d), m *= a.shape()[d];
  for (int64_t d = 0; d < a.dim(); ++d)
    if (reduce[d]) order.push_back(d), n *= a.shape()[d];
  const Tensor rows = a.detach().permute(order).contiguous().view({m, n});
  Tensor acc = empty({m}, is_floating(a.dtype()) ? kFloat64 : kInt64, a.device());
  detail::cuda::sum_rows(acc, rows, scale);
  if (is_floating(a.dtype())) acc = acc.to(a.dtype());
  return acc.view(reduced_shape(a, reduce, keepdim));
}

Tensor sum_impl(const Tensor& a, const std::vector<bool>& reduce, bool keepdim) {
  if (detail::op_device("sum", {&a}).is_cuda()) return cuda_reduce_rows(a, reduce, keepdim, 1.0);
  const Shape out_shape = reduced_shape(a, reduce, keepdim);
  if (is_floating(a.dtype())) return accumulate<double>(a, reduce).to(a.dtype()).view(out_shape);
  return accumulate<int64_t>(a, reduce).view(out_shape);  // integers and bool sum to int64
}

void require_floating_mean(const Tensor& a) {
  if (!is_floating(a.dtype()))
    throw RuntimeError(std::string("mean(): could not infer output dtype. Input dtype must be "
                                   "either a floating point or complex dtype. Got: ") +
                       dtype_legacy_name(a.dtype()));
}

Tensor mean_impl(const Tensor& a, const std::vector<bool>& reduce, bool keepdim) {
  const Device device = detail::op_device("mean", {&a});
  require_floating_mean(a);
  int64_t count = 1;
  for (int64_t d = 0; d < a.dim(); ++d)
    if (reduce[d]) count *= a.shape()[d];
  if (device.is_cuda()) return cuda_reduce_rows(a, reduce, keepdim, 1.0 / static_cast<double>(count));
  Tensor acc = accumulate<double>(a, reduce);
  double* p = acc.data<double>();
  // The mean of no elements is 0 / 0 = NaN, as in PyTorch.
  for (int64_t i = 0; i < acc.numel(); ++i) p[i] /= static_cast<double>(count);
  return acc.to(a.dtype()).view(reduced_shape(a, reduce, keepdim));
}

// a > b for max's purposes: NaN beats everything, so it propagates.
template <typename M> bool beats(M candidate, M best) {
  if constexpr (std::is_floating_point_v<M>)
    if (std::isnan(candidate)) return !std::isnan(best);
  return candidate > best;
}

// The gradient of a sum reaches every element it added: the output's gradient, with the reduced
// dimensions put back as size 1, broadcast over the input (the tape sums nothing here; it
// expands). A mean is a sum scaled by 1 / count.
Tensor record_reduction(Tensor out, const Tensor& a, const std::vector<bool>& reduce, const char* name,
                        bool is_mean) {
  if (!detail::should_record({&a})) return out;
  const Shape kept = reduced_shape(a, reduce, true), in = a.shape();
  double count = 1;
  for (int64_t d = 0; d < a.dim(); ++d)
    if (reduce[d]) count *= static_cast<double>(a.shape()[d]);
  detail::record(out, name, {a},
                 [kept, in, count, is_mean](const Tensor& g) {
                   Tensor spread = g.reshape(kept).expand(in);
                   if (is_mean) spread = div(spread, scalar_tensor(count, g.dtype()));
                   return std::vector<Tensor>{spread};
                 },
                 static_cast<double>(a.numel()), is_mean ? static_cast<double>(a.numel()) : 0);
  return out;
}

}  // namespace

Tensor sum(const Tensor& a) {
  const std::vector<bool> all(a.dim(), true);
  return record_reduction(sum_impl(a, all, false), a, all, "SumBackward0", false);
}
Tensor sum(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim) {
  const auto reduce = reduced_dims(a, dims);
  return record_reduction(sum_impl(a, reduce, keepdim), a, reduce, "SumBackward1", false);
}
Tensor mean(const Tensor& a) {
  const std::vector<bool> all(a.dim(), true);
  return record_reduction(mean_impl(a, all, false), a, all, "MeanBackward0", true);
}
Tensor mean(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim) {
  const auto reduce = reduced_dims(a, dims);
  return record_reduction(mean_impl(a, reduce, keepdim), a, reduce, "MeanBackward1", true);
}

Tensor max(const Tensor& a) {
  detail::op_device("max", {&a});
  if (a.numel() == 0)
    throw RuntimeError("max(): Expected reduction dim to be specified for input.numel() == 0. "
                       "Specify the reduction dim with the 'dim' argument.");
  Tensor out;
  {
    NoGradGuard inside;  // recorded below as one node
    out = max(a.reshape({-1}), 0).values;
  }
  if (detail::should_record({&a})) {
    // Every element equal to the maximum shares its gradient (ties split evenly), as PyTorch's
    // max() does.
    detail::SavedTensor sa(a), so(out);
    detail::record(out, "MaxBackward1", {a},
                   [sa, so](const Tensor& g) {
                     const Tensor hit = eq(sa.unpack(), so.unpack()).to(g.dtype());
                     return std::vector<Tensor>{mul(hit, div(g, sum(hit)))};
                   },
                   static_cast<double>(a.numel()), static_cast<double>(a.numel()));
  }
  return out;
}

MaxResult max(const Tensor& a, int64_t dim, bool keepdim) {
  const Device device = detail::op_device("max", {&a});
  dim = wrap_dim(dim, a.dim());
  const Tensor x = (a.dim() == 0 ? a.reshape({1}) : a).detach();
  const int64_t n = x.shape()[dim];
  if (n == 0)
    throw IndexError("max(): Expected reduction dim " + std::to_string(dim) +
                     " to have non-zero size.");
  // Move the reduced dimension last and make rows of it.
  std::vector<int64_t> order;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (d != dim) order.push_back(d);
  order.push_back(dim);
  const Tensor rows = x.permute(order).contiguous();
  std::vector<bool> reduce(x.dim(), false);
  reduce[dim] = true;
  const Shape out_shape = a.dim() == 0 ? Shape{} : reduced_shape(x, reduce, keepdim);
  MaxResult r{empty(out_shape, a.dtype(), device), empty(out_shape, kInt64, device)};
  if (device.is_cuda()) {
    const int64_t m = rows.numel() / n;
    detail::cuda::max_rows(r.values.view({m}), r.indices.view({m}), rows.view({m, n}));
  } else {
    dispatch_dtype(a.dtype(), [&]<typename T>() {
      const T* p = rows.data<T>();
      T* vals = r.values.data<T>();
      int64_t* idx = r.indices.data<int64_t>();
      const int64_t m = rows.numel() / n;
      for (int64_t row = 0; row < m; ++row) {
        const T* v = p + row * n;
        int64_t best = 0;
        for (int64_t i = 1; i < n; ++i)
          if (beats(static_cast<opmath_t<T>>(v[i]), static_cast<opmath_t<T>>(v[best]))) best = i;
        vals[row] = v[best];
        idx[row] = best;
      }
    });
  }
  if (detail::should_record({&a})) {
    // The gradient goes to the one element each maximum came from.
    const Tensor where_from = keepdim || a.dim() == 0 ? r.indices : r.indices.unsqueeze(dim);
    const Shape kept = a.dim() == 0 ? Shape{} : reduced_shape(x, reduce, true), in = a.shape();
    Shape positions_shape(static_cast<size_t>(x.dim()), 1);
    positions_shape[dim] = n;
    detail::record(r.values, "MaxBackward0", {a},
                   [where_from, kept, in, positions_shape, n](const Tensor& g) {
                     const Tensor positions = arange(n).to(g.device()).view(positions_shape);
                     const Tensor hit = eq(positions, where_from.reshape(kept)).to(g.dtype());
                     return std::vector<Tensor>{mul(hit, g.reshape(kept)).reshape(in)};
                   },
                   static_cast<double>(a.numel()), 0);
  }
  return r;
}

}  // namespace tiny
