// cpu/reduce.cpp: sums and maxima on the CPU.
//
// A sum walks its input once in memory order and adds each element into its output slot (an
// accumulator whose strides are 0 along the reduced dimensions), so reducing the outer dimension
// of a matrix streams through it row by row instead of striding down columns. Floating sums
// accumulate in float64, integer sums in int64.
#include <cmath>

#include "../internal.h"
#include "cpu.h"

namespace tiny::detail::cpu {

namespace {

template <typename Acc> Tensor accumulate(const Tensor& a, const std::vector<bool>& reduce) {
  Shape kept = a.shape();
  for (int64_t d = 0; d < a.dim(); ++d)
    if (reduce[d]) kept[d] = 1;
  Tensor acc = zeros(kept, dtype_of<Acc>());
  Strides acc_strides = acc.strides();
  for (int64_t d = 0; d < a.dim(); ++d)
    if (reduce[d]) acc_strides[d] = 0;  // every element along d lands in the same slot
  Acc* pacc = acc.data<Acc>();
  dispatch_dtype(a.dtype(), [&]<typename T>() {
    const T* px = static_cast<const T*>(a.data_ptr());
    for_each_row<2>(a.shape(), {&a.strides(), &acc_strides},
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

// a > b for max's purposes: NaN beats everything, so it propagates.
template <typename M> bool beats(M candidate, M best) {
  if constexpr (std::is_floating_point_v<M>)
    if (std::isnan(candidate)) return !std::isnan(best);
  return candidate > best;
}

}  // namespace

Tensor sum(const Tensor& a, const std::vector<bool>& reduce, double divisor) {
  if (!is_floating(a.dtype()))
    return accumulate<int64_t>(a, reduce);  // integers and bool sum to int64
  Tensor acc = accumulate<double>(a, reduce);
  if (divisor != 1) {
    // The mean of no elements is 0 / 0 = NaN, as in PyTorch.
    double* p = acc.data<double>();
    for (int64_t i = 0; i < acc.numel(); ++i) p[i] /= divisor;
  }
  return acc;
}

void max_rows(const Tensor& values, const Tensor& indices, const Tensor& rows) {
  dispatch_dtype(rows.dtype(), [&]<typename T>() {
    const T* p = rows.data<T>();
    T* vals = values.data<T>();
    int64_t* idx = indices.data<int64_t>();
    const int64_t m = rows.size(0), n = rows.size(1);
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

}  // namespace tiny::detail::cpu
