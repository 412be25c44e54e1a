// reduce.cpp: sum, mean and max, over all elements or over chosen dimensions: the checks,
// dtypes and autograd records, for every device; the loops are the backends' (Backend::sum and
// Backend::max_rows: common/src/cpu/reduce.cpp, common/cuda/reduce.cu).
#include <cmath>
#include <limits>

#include "autograd_internal.h"
#include "backend.h"
#include "capture_internal.h"
#include "dispatch.h"
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
      throw RuntimeError("dim " + std::to_string(w) +
                         " appears multiple times in the list of dims");
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

int64_t reduced_count(const Tensor& a, const std::vector<bool>& reduce) {
  int64_t count = 1;
  for (int64_t d = 0; d < a.dim(); ++d)
    if (reduce[d]) count *= a.shape()[d];
  return count;
}

// The sum (divisor 1) or mean (divisor: the count) on the input's backend, in the result dtype:
// the input's for floats (accumulated in float64), int64 for integers and bool.
Tensor reduce_values(const Tensor& a, const std::vector<bool>& reduce, bool keepdim,
                     double divisor) {
  const Device device = detail::op_device("sum", {&a});
  Shape kept = a.shape();
  for (int64_t d = 0; d < a.dim(); ++d)
    if (reduce[d]) kept[d] = 1;
  Tensor acc = empty(kept, is_floating(a.dtype()) ? kFloat64 : kInt64, device);
  {
    NoGradGuard plain;
    detail::launch(detail::backend(device).sum, acc, a, reduce, divisor);
  }
  count_op_cost(static_cast<double>(a.numel()),
                     static_cast<double>(a.nbytes() + acc.numel() * a.element_size()));
  if (is_floating(a.dtype())) acc = acc.to(a.dtype());
  return acc.view(reduced_shape(a, reduce, keepdim));
}

void require_floating_mean(const Tensor& a) {
  if (!is_floating(a.dtype()))
    throw NotImplementedError(std::string("mean(): could not infer output dtype. Input dtype must be "
                                   "either a floating point or complex dtype. Got: ") +
                       dtype_legacy_name(a.dtype()));
}

// The gradient of a sum reaches every element it added: the output's gradient, with the reduced
// dimensions put back as size 1, broadcast over the input (the tape sums nothing here; it
// expands). A mean is a sum divided by the count (`divisor`: 1 for a sum).
Tensor record_reduction(Tensor out, const Tensor& a, const std::vector<bool>& reduce,
                        const char* name, double divisor) {
  if (!detail::should_record({&a})) return out;
  const Shape kept = reduced_shape(a, reduce, true), in = a.shape();
  detail::record(
      out, name, {a},
      [kept, in, divisor](const Tensor& g) {
        Tensor spread = g.reshape(kept).expand(in);
        if (divisor != 1) spread = div(spread, detail::number_tensor(divisor, g.dtype()));
        return std::vector<Tensor>{spread};
      },
      static_cast<double>(a.numel()), divisor != 1 ? static_cast<double>(a.numel()) : 0);
  return out;
}

// Autocast runs sums in float32 on CUDA (PyTorch's CUDA fp32 list; its CPU list leaves sums
// alone); means run in their input's dtype on both.
Tensor sum_impl(const Tensor& input, const std::vector<bool>& reduce, bool keepdim,
                const char* node) {
  const Tensor a = detail::autocast(input, detail::kAutocastFloat32OnCuda);
  return record_reduction(reduce_values(a, reduce, keepdim, 1.0), a, reduce, node, 1.0);
}

Tensor mean_impl(const Tensor& a, const std::vector<bool>& reduce, bool keepdim, const char* node) {
  detail::op_device("mean", {&a});
  require_floating_mean(a);
  const double count = static_cast<double>(reduced_count(a, reduce));
  return record_reduction(reduce_values(a, reduce, keepdim, count), a, reduce, node, count);
}

}  // namespace

Tensor sum(const Tensor& a) {
  return sum_impl(a, std::vector<bool>(a.dim(), true), false, "SumBackward0");
}
Tensor sum(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim) {
  return sum_impl(a, reduced_dims(a, dims), keepdim, "SumBackward1");
}
Tensor mean(const Tensor& a) {
  return mean_impl(a, std::vector<bool>(a.dim(), true), false, "MeanBackward0");
}
Tensor mean(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim) {
  return mean_impl(a, reduced_dims(a, dims), keepdim, "MeanBackward1");
}

Tensor max(const Tensor& a) {
  detail::op_device("max", {&a});
  if (a.numel() == 0)
    throw RuntimeError(
        "max(): Expected reduction dim to be specified for input.numel() == 0. "
        "Specify the reduction dim with the 'dim' argument.");
  Tensor out;
  {
    NoGradGuard inside;  // recorded below as one node
    out = max(a.reshape({-1}), 0).values;
  }
  if (detail::should_record({&a})) {
    // Every element equal to the maximum shares its gradient (ties split evenly), as PyTorch's
    // max() does.
    detail::SavedTensor sa(a, "MaxBackward1"), so(out, "MaxBackward1", /*is_output=*/true);
    detail::record(
        out, "MaxBackward1", {a},
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
  const int64_t m = rows.numel() / n;
  detail::launch(detail::backend(device).max_rows, r.values.view({m}), r.indices.view({m}),
                 rows.view({m, n}));
  count_op_cost(static_cast<double>(a.numel()),
                     static_cast<double>(a.nbytes() + r.values.nbytes() + r.indices.nbytes()));
  if (detail::should_record({&a})) {
    // The gradient goes to the one element each maximum came from.
    const Tensor where_from = keepdim || a.dim() == 0 ? r.indices : r.indices.unsqueeze(dim);
    const Shape kept = a.dim() == 0 ? Shape{} : reduced_shape(x, reduce, true), in = a.shape();
    Shape positions_shape(static_cast<size_t>(x.dim()), 1);
    positions_shape[dim] = n;
    detail::record(
        r.values, "MaxBackward0", {a},
        [where_from, kept, in, positions_shape, n](const Tensor& g) {
          const Tensor positions = arange(n, std::nullopt, g.device()).view(positions_shape);
          const Tensor hit = eq(positions, where_from.reshape(kept)).to(g.dtype());
          return std::vector<Tensor>{mul(hit, g.reshape(kept)).reshape(in)};
        },
        static_cast<double>(a.numel()), 0);
  }
  return r;
}

}  // namespace tiny
