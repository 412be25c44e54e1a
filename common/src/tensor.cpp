// tensor.cpp: Storage, the Tensor handle, views, and creation.
#include "tiny/tensor.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include "autograd_internal.h"
#include "cuda_backend.h"
#include "internal.h"
#include "tiny/allocator.h"
#include "tiny/format.h"
#include "tiny/ops.h"

namespace tiny {

// ---- Storage ----------------------------------------------------------------------------------

Storage::Storage(size_t nbytes, Device device, bool pinned)
    : nbytes_(nbytes), device_(device), pinned_(pinned) {
  data_ = detail::allocate(nbytes, device, pinned);
}

Storage::~Storage() { detail::deallocate(data_, nbytes_, device_, pinned_); }

// ---- Scalar and IndexList ---------------------------------------------------------------------

DType Scalar::default_dtype() const {
  switch (kind_) {
    case Kind::Bool: return kBool;
    case Kind::Int: return kInt64;
    case Kind::Float: return kFloat32;
  }
  return kFloat32;
}

IndexList::IndexList(std::initializer_list<std::variant<int, int64_t, Slice>> list) {
  for (const auto& item : list) {
    if (std::holds_alternative<int>(item)) items.emplace_back(int64_t(std::get<int>(item)));
    else if (std::holds_alternative<int64_t>(item)) items.emplace_back(std::get<int64_t>(item));
    else items.emplace_back(std::get<Slice>(item));
  }
}

// ---- shape helpers ----------------------------------------------------------------------------

int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

Strides contiguous_strides(const Shape& shape) {
  Strides strides(shape.size());
  int64_t step = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = step;
    step *= std::max<int64_t>(shape[i], 1);
  }
  return strides;
}

int64_t wrap_dim(int64_t dim, int64_t ndim) {
  const int64_t n = std::max<int64_t>(ndim, 1);  // a 0-dim tensor accepts dim 0 and -1
  if (dim < -n || dim >= n)
    throw IndexError("Dimension out of range (expected to be in range of [" + std::to_string(-n) +
                     ", " + std::to_string(n - 1) + "], but got " + std::to_string(dim) + ")");
  return dim < 0 ? dim + n : dim;
}

Shape broadcast_shapes(const Shape& a, const Shape& b) {
  const size_t n = std::max(a.size(), b.size());
  Shape out(n);
  // Dimensions align at the right; like PyTorch, check from the last one, so the error names
  // the last mismatching dimension (counted from the left of the result).
  // BEGIN SOLUTION ch02 broadcast_shape
  for (size_t i = n; i-- > 0;) {
    const int64_t offset = static_cast<int64_t>(n - 1 - i);
    const int64_t da = static_cast<int64_t>(a.size()) - 1 - offset;
    const int64_t db = static_cast<int64_t>(b.size()) - 1 - offset;
    const int64_t sa = da >= 0 ? a[da] : 1;
    const int64_t sb = db >= 0 ? b[db] : 1;
    if (sa != sb && sa != 1 && sb != 1)
      throw RuntimeError("The size of tensor a (" + std::to_string(sa) +
                         ") must match the size of tensor b (" + std::to_string(sb) +
                         ") at non-singleton dimension " + std::to_string(i));
    out[i] = sa == 1 ? sb : sa;
  }
  // END SOLUTION ch02 broadcast_shape
  return out;
}

Shape infer_size(const Shape& shape, int64_t numel) {
  Shape out = shape;
  int64_t known = 1;
  std::optional<size_t> unknown;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      if (unknown) throw RuntimeError("only one dimension can be inferred");
      unknown = i;
    } else if (shape[i] < 0) {
      throw RuntimeError("invalid shape dimension " + std::to_string(shape[i]));
    } else {
      known *= shape[i];
    }
  }
  if (unknown && known != 0 && numel % known == 0) out[*unknown] = numel / known;
  else if (unknown && known == 0 && numel == 0) out[*unknown] = 0;  // ambiguous; PyTorch errors too
  if (shape_numel(out) != numel || (unknown && known == 0))
    throw RuntimeError("shape '" + detail::shape_str(shape) + "' is invalid for input of size " +
                       std::to_string(numel));
  return out;
}

// The rule behind view(): walk the old dimensions from the last, grouping them into chunks
// that are contiguous with each other (each stride is the next one times its size). Memory in
// one chunk is evenly spaced, so any new dimensions whose sizes multiply to the chunk's size can
// read it. A new shape fits only if it can be cut into such groups, chunk by chunk.
std::optional<Strides> view_strides(const Shape& old_shape, const Strides& old_strides,
                                    const Shape& new_shape) {
  Strides out(new_shape.size(), 0);
  if (shape_numel(old_shape) == 0) return contiguous_strides(new_shape);
  if (old_shape.empty()) {  // a 0-dim tensor: every new dimension has size 1
    for (auto& s : out) s = 1;
    return out;
  }
  // The common case, row-major memory, can take any shape with row-major strides.
  if (old_strides == contiguous_strides(old_shape)) return contiguous_strides(new_shape);
  // BEGIN SOLUTION ch02 view_rule
  int64_t view_d = static_cast<int64_t>(new_shape.size()) - 1;
  int64_t chunk_base_stride = old_strides.back();
  int64_t tensor_numel = 1;
  int64_t view_numel = 1;
  for (int64_t d = static_cast<int64_t>(old_shape.size()) - 1; d >= 0; --d) {
    tensor_numel *= old_shape[d];
    // A chunk ends at the first dimension, or where the next-outer dimension is not laid out
    // right after this chunk (size-1 dimensions never end a chunk: their stride is irrelevant).
    const bool chunk_ends =
        d == 0 || (old_shape[d - 1] != 1 && old_strides[d - 1] != tensor_numel * chunk_base_stride);
    if (!chunk_ends) continue;
    while (view_d >= 0 && (view_numel < tensor_numel || new_shape[view_d] == 1)) {
      out[view_d] = view_numel * chunk_base_stride;
      view_numel *= new_shape[view_d];
      --view_d;
    }
    if (view_numel != tensor_numel) return std::nullopt;
    if (d > 0) {
      chunk_base_stride = old_strides[d - 1];
      tensor_numel = 1;
      view_numel = 1;
    }
  }
  if (view_d != -1) return std::nullopt;
  return out;
  // END SOLUTION ch02 view_rule
}

namespace detail {

std::string shape_str(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

Strides broadcast_strides(const Tensor& t, const Shape& shape) {
  Strides out(shape.size(), 0);
  const size_t lead = shape.size() - t.shape().size();
  for (size_t i = 0; i < t.shape().size(); ++i)
    out[lead + i] = t.shape()[i] == 1 ? 0 : t.strides()[i];
  return out;
}

namespace {
// The conversions between float32 and the 16-bit floats are the hot loops of mixed precision.
// Each is compiled twice, for AVX2 and for any x86-64, and the loader picks one at run time.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define TINY_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define TINY_CLONES
#endif
TINY_CLONES void convert_row_portable(Half* __restrict d, const float* __restrict s, int64_t n) {
  for (int64_t i = 0; i < n; ++i) d[i] = Half(s[i]);
}
TINY_CLONES void convert_row_portable(float* __restrict d, const Half* __restrict s, int64_t n) {
  for (int64_t i = 0; i < n; ++i) d[i] = float(s[i]);
}

#if defined(__x86_64__) && defined(__GNUC__)
// x86 processors since 2012 convert 8 floats to float16 in one instruction (F16C), with the same
// rounding (nearest, ties to even) and the same results except for NaN payloads.
__attribute__((target("avx,f16c"))) void convert_row_f16c(Half* d, const float* s, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(s + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  for (; i < n; ++i) d[i] = Half(s[i]);
}
__attribute__((target("avx,f16c"))) void convert_row_f16c(float* d, const Half* s, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(d + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i))));
  for (; i < n; ++i) d[i] = float(s[i]);
}
const bool kHaveF16c = __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx");
#endif

template <typename D, typename S> void convert_row(D* d, const S* s, int64_t n)
  requires((std::is_same_v<D, Half> && std::is_same_v<S, float>) ||
           (std::is_same_v<D, float> && std::is_same_v<S, Half>))
{
#if defined(__x86_64__) && defined(__GNUC__)
  if (kHaveF16c) return convert_row_f16c(d, s, n);
#endif
  convert_row_portable(d, s, n);
}
TINY_CLONES void convert_row(BFloat16* __restrict d, const float* __restrict s, int64_t n) {
  for (int64_t i = 0; i < n; ++i) d[i] = BFloat16(s[i]);
}
TINY_CLONES void convert_row(float* __restrict d, const BFloat16* __restrict s, int64_t n) {
  for (int64_t i = 0; i < n; ++i) d[i] = float(s[i]);
}
}  // namespace

void copy_elements(const Tensor& dst, const Tensor& src) {
  if (dst.device().is_cuda()) {
    // The same bytes in the same order: the driver's copy, as PyTorch's copy_ does.
    if (src.device() == dst.device() && src.dtype() == dst.dtype() && src.is_contiguous() &&
        dst.is_contiguous() && src.shape() == dst.shape())
      return cuda::copy_bytes(dst.data_ptr(), dst.device(), src.data_ptr(), src.device(),
                              dst.nbytes(), true, false);
    return cuda::unary<ops::Identity>(dst, src);
  }
  dispatch_dtype(dst.dtype(), [&]<typename D>() {
    dispatch_dtype(src.dtype(), [&]<typename S>() {
      D* d = static_cast<D*>(dst.data_ptr());
      const S* s = static_cast<const S*>(src.data_ptr());
      // A transpose (rows of dst are columns of src): copy square tiles, reading src along its
      // own rows, so that both sides touch few cache lines per tile; reading src column by
      // column instead costs a cache line per element. The tile is small (8 x 8) because the
      // rows of a power-of-two-wide matrix all fall into the same cache sets, and an 8-way
      // cache holds only 8 of them: on 4096 x 4096 float32, tiles of 8 take 23 ms, 16 take 53.
      const auto loop = coalesce<2>(dst.shape(), {&dst.strides(), &src.strides()});
      if (!loop.empty && loop.sizes.size() == 2 && loop.steps[1][0] == 1 && loop.steps[0][1] == 1 &&
          loop.steps[1][1] != 1) {
        const int64_t rows = loop.sizes[0], cols = loop.sizes[1];
        const int64_t drow = loop.steps[0][0], scol = loop.steps[1][1];
        constexpr int64_t kTile = 8;
        for (int64_t i0 = 0; i0 < rows; i0 += kTile)
          for (int64_t j0 = 0; j0 < cols; j0 += kTile) {
            const int64_t i1 = std::min(rows, i0 + kTile), j1 = std::min(cols, j0 + kTile);
            for (int64_t j = j0; j < j1; ++j)
              for (int64_t i = i0; i < i1; ++i) d[i * drow + j] = convert<D>(s[i + j * scol]);
          }
        return;
      }
      for_each_row<2>(dst.shape(), {&dst.strides(), &src.strides()},
                      [&](int64_t n, const auto& off, const auto& step) {
                        D* dp = d + off[0];
                        const S* sp = s + off[1];
                        if (step[0] == 1 && step[1] == 1) {
                          if constexpr (requires { convert_row(dp, sp, n); }) convert_row(dp, sp, n);
                          else for (int64_t i = 0; i < n; ++i) dp[i] = convert<D>(sp[i]);
                        } else {
                          for (int64_t i = 0; i < n; ++i)
                            dp[i * step[0]] = convert<D>(sp[i * step[1]]);
                        }
                      });
    });
  });
}

}  // namespace detail

// ---- autograd for views ------------------------------------------------------------------------

namespace {
// Makes `out` (a view or copy of `in`) part of the graph when `in` is: `back` maps the gradient
// of `out` to the gradient of `in`.
Tensor recorded(Tensor out, const Tensor& in, const char* name,
                std::function<Tensor(const Tensor&)> back) {
  if (detail::should_record({&in}))
    detail::record(out, name, {in},
                   [back = std::move(back)](const Tensor& g) { return std::vector<Tensor>{back(g)}; }, 0, 0);
  return out;
}
}  // namespace

// ---- Tensor: what it is -----------------------------------------------------------------------

Tensor::Tensor(std::shared_ptr<Storage> storage, DType dtype, Shape shape, Strides strides,
               int64_t offset)
    : storage_(std::move(storage)),
      dtype_(dtype),
      shape_(std::move(shape)),
      strides_(std::move(strides)),
      offset_(offset) {}

Device Tensor::device() const { return storage_ ? storage_->device() : Device::cpu(); }
int64_t Tensor::size(int64_t d) const { return shape_[wrap_dim(d, dim())]; }
int64_t Tensor::stride(int64_t d) const { return strides_[wrap_dim(d, dim())]; }
int64_t Tensor::numel() const { return shape_numel(shape_); }

void* Tensor::data_ptr() const {
  if (!storage_) return nullptr;
  return static_cast<char*>(storage_->data()) + offset_ * static_cast<int64_t>(element_size());
}

bool Tensor::is_contiguous() const {
  // BEGIN SOLUTION ch02 is_contiguous
  if (numel() == 0) return true;
  int64_t expected = 1;
  for (int64_t d = dim() - 1; d >= 0; --d) {
    if (shape_[d] == 1) continue;  // a size-1 dimension is never stepped along
    if (strides_[d] != expected) return false;
    expected *= shape_[d];
  }
  return true;
  // END SOLUTION ch02 is_contiguous
}

// ---- Tensor: views ----------------------------------------------------------------------------

Tensor Tensor::transpose(int64_t d0, int64_t d1) const {
  d0 = wrap_dim(d0, dim());
  d1 = wrap_dim(d1, dim());
  if (dim() == 0) return *this;
  Shape shape = shape_;
  Strides strides = strides_;
  std::swap(shape[d0], shape[d1]);
  std::swap(strides[d0], strides[d1]);
  return recorded(Tensor(storage_, dtype_, shape, strides, offset_), *this, "TransposeBackward0",
                  [d0, d1](const Tensor& g) { return g.transpose(d0, d1); });
}

Tensor Tensor::T() const {
  std::vector<int64_t> order(dim());
  for (int64_t i = 0; i < dim(); ++i) order[i] = dim() - 1 - i;
  return permute(order);
}

Tensor Tensor::permute(const std::vector<int64_t>& order) const {
  if (static_cast<int64_t>(order.size()) != dim())
    throw RuntimeError("permute(): number of dims don't match in permute (the tensor has " +
                       std::to_string(dim()) + ", the order names " +
                       std::to_string(order.size()) + ")");
  Shape shape(dim());
  Strides strides(dim());
  std::vector<bool> seen(dim(), false);
  std::vector<int64_t> inverse(dim());
  for (int64_t i = 0; i < dim(); ++i) {
    const int64_t d = wrap_dim(order[i], dim());
    if (seen[d]) throw RuntimeError("permute(): duplicate dims are not allowed.");
    seen[d] = true;
    shape[i] = shape_[d];
    strides[i] = strides_[d];
    inverse[d] = i;
  }
  return recorded(Tensor(storage_, dtype_, shape, strides, offset_), *this, "PermuteBackward0",
                  [inverse](const Tensor& g) { return g.permute(inverse); });
}

Tensor Tensor::select(int64_t d, int64_t i) const {
  if (dim() == 0)
    throw IndexError("invalid index of a 0-dim tensor. Use `tensor.item()` in Python or "
                     "`tensor.item<T>()` in C++ to convert a 0-dim tensor to a number");
  d = wrap_dim(d, dim());
  const int64_t n = shape_[d];
  if (i < -n || i >= n)
    throw IndexError("index " + std::to_string(i) + " is out of bounds for dimension " +
                     std::to_string(d) + " with size " + std::to_string(n));
  if (i < 0) i += n;
  Shape shape = shape_;
  Strides strides = strides_;
  shape.erase(shape.begin() + d);
  strides.erase(strides.begin() + d);
  const Shape base = shape_;
  const DType dt = dtype_;
  return recorded(Tensor(storage_, dtype_, shape, strides, offset_ + i * strides_[d]), *this,
                  "SelectBackward0", [base, dt, d, i](const Tensor& g) {
                    return detail::scatter_into_zeros(g, base, dt, [d, i](const Tensor& z) { return z.select(d, i); });
                  });
}

Tensor Tensor::slice(int64_t d, std::optional<int64_t> start, std::optional<int64_t> stop,
                     int64_t step) const {
  if (dim() == 0) throw IndexError("slice() cannot be applied to a 0-dim tensor.");
  d = wrap_dim(d, dim());
  if (step <= 0) throw ValueError("step must be greater than zero");
  const int64_t n = shape_[d];
  // Python's rules: negative bounds count from the end, and bounds clamp to [0, n].
  auto clamp = [n](std::optional<int64_t> v, int64_t fallback) {
    if (!v) return fallback;
    int64_t x = *v < 0 ? *v + n : *v;
    return std::clamp<int64_t>(x, 0, n);
  };
  const int64_t b = clamp(start, 0);
  const int64_t e = std::max(clamp(stop, n), b);
  Shape shape = shape_;
  Strides strides = strides_;
  shape[d] = (e - b + step - 1) / step;
  strides[d] = strides_[d] * step;
  const Shape base = shape_;
  const DType dt = dtype_;
  return recorded(Tensor(storage_, dtype_, shape, strides, offset_ + b * strides_[d]), *this,
                  "SliceBackward0", [base, dt, d, b, e, step](const Tensor& g) {
                    return detail::scatter_into_zeros(
                        g, base, dt, [d, b, e, step](const Tensor& z) { return z.slice(d, b, e, step); });
                  });
}

Tensor Tensor::narrow(int64_t d, int64_t start, int64_t length) const {
  d = wrap_dim(d, dim());
  const int64_t n = shape_[d];
  if (start < 0) start += n;
  if (start < 0 || length < 0 || start + length > n)
    throw IndexError("start (" + std::to_string(start) + ") + length (" +
                     std::to_string(length) + ") exceeds dimension size (" + std::to_string(n) +
                     ").");
  return slice(d, start, start + length);
}

Tensor Tensor::index(const IndexList& indices) const {
  if (static_cast<int64_t>(indices.items.size()) > dim())
    throw IndexError("too many indices for tensor of dimension " + std::to_string(dim()));
  Tensor out = *this;
  int64_t d = 0;  // the output dimension the next index applies to
  for (const TensorIndex& idx : indices.items) {
    if (std::holds_alternative<int64_t>(idx)) {
      out = out.select(d, std::get<int64_t>(idx));  // removes dimension d
    } else {
      const Slice& s = std::get<Slice>(idx);
      out = out.slice(d, s.start, s.stop, s.step);
      ++d;
    }
  }
  return out;
}

Tensor Tensor::expand(const Shape& shape) const {
  const int64_t n = static_cast<int64_t>(shape.size());
  auto fail = [&](const std::string& why) {
    throw RuntimeError(why + "  Target sizes: " + detail::shape_str(shape) +
                       ".  Tensor sizes: " + detail::shape_str(shape_));
  };
  if (n < dim())
    fail("expand: the number of sizes provided (" + std::to_string(n) +
         ") must be greater or equal to the number of dimensions in the tensor (" +
         std::to_string(dim()) + ").");
  Shape out_shape(n);
  Strides out_strides(n);
  for (int64_t i = n - 1; i >= 0; --i) {
    const int64_t j = i - (n - dim());  // the matching dimension of this tensor, if any
    if (j < 0) {
      if (shape[i] < 0)
        fail("The expanded size of the tensor (" + std::to_string(shape[i]) +
             ") isn't allowed in a leading, non-existing dimension " + std::to_string(i) + ".");
      out_shape[i] = shape[i];
      out_strides[i] = 0;
      continue;
    }
    const int64_t target = shape[i] == -1 ? shape_[j] : shape[i];
    if (shape_[j] == target) {
      out_shape[i] = target;
      out_strides[i] = strides_[j];
    } else if (shape_[j] == 1) {
      out_shape[i] = target;
      out_strides[i] = 0;  // every index along i reads the same element
    } else {
      fail("The expanded size of the tensor (" + std::to_string(target) +
           ") must match the existing size (" + std::to_string(shape_[j]) +
           ") at non-singleton dimension " + std::to_string(i) + ".");
    }
  }
  // The gradient of a broadcast is summed back by the tape (see autograd_internal.h).
  return recorded(Tensor(storage_, dtype_, out_shape, out_strides, offset_), *this,
                  "ExpandBackward0", [](const Tensor& g) { return g; });
}

Tensor Tensor::squeeze() const {
  Shape shape;
  Strides strides;
  for (int64_t d = 0; d < dim(); ++d) {
    if (shape_[d] == 1) continue;
    shape.push_back(shape_[d]);
    strides.push_back(strides_[d]);
  }
  const Shape in = shape_;
  return recorded(Tensor(storage_, dtype_, shape, strides, offset_), *this, "SqueezeBackward0",
                  [in](const Tensor& g) { return g.reshape(in); });
}

Tensor Tensor::squeeze(int64_t d) const {
  d = wrap_dim(d, dim());
  if (dim() == 0 || shape_[d] != 1) return *this;
  Shape shape = shape_;
  Strides strides = strides_;
  shape.erase(shape.begin() + d);
  strides.erase(strides.begin() + d);
  return recorded(Tensor(storage_, dtype_, shape, strides, offset_), *this, "SqueezeBackward1",
                  [d](const Tensor& g) { return g.unsqueeze(d); });
}

Tensor Tensor::unsqueeze(int64_t d) const {
  d = wrap_dim(d, dim() + 1);
  Shape shape = shape_;
  Strides strides = strides_;
  const int64_t stride = d >= dim() ? 1 : shape_[d] * strides_[d];
  shape.insert(shape.begin() + d, 1);
  strides.insert(strides.begin() + d, stride);
  return recorded(Tensor(storage_, dtype_, shape, strides, offset_), *this, "UnsqueezeBackward0",
                  [d](const Tensor& g) { return g.squeeze(d); });
}

Tensor Tensor::flatten(int64_t start, int64_t end) const {
  if (dim() == 0) return reshape({1});
  start = wrap_dim(start, dim());
  end = wrap_dim(end, dim());
  if (start > end) throw RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim");
  Shape shape(shape_.begin(), shape_.begin() + start);
  int64_t merged = 1;
  for (int64_t d = start; d <= end; ++d) merged *= shape_[d];
  shape.push_back(merged);
  shape.insert(shape.end(), shape_.begin() + end + 1, shape_.end());
  return reshape(shape);
}

Tensor Tensor::view(const Shape& shape) const {
  const Shape target = infer_size(shape, numel());
  auto strides = view_strides(shape_, strides_, target);
  if (!strides)
    throw RuntimeError(
        "view size is not compatible with input tensor's size and stride (at least one "
        "dimension spans across two contiguous subspaces). Use .reshape(...) instead.");
  const Shape in = shape_;
  return recorded(Tensor(storage_, dtype_, target, *strides, offset_), *this, "ViewBackward0",
                  [in](const Tensor& g) { return g.reshape(in); });
}

Tensor Tensor::reshape(const Shape& shape) const {
  const Shape target = infer_size(shape, numel());
  const Shape in = shape_;
  auto back = [in](const Tensor& g) { return g.reshape(in); };
  // PyTorch 1.13 names the two cases differently: an alias when a view works, an "unsafe view"
  // of a clone when the strides force a copy.
  if (auto strides = view_strides(shape_, strides_, target))
    return recorded(Tensor(storage_, dtype_, target, *strides, offset_), *this, "ReshapeAliasBackward0", back);
  const Tensor copy = clone();
  return recorded(Tensor(copy.storage_, dtype_, target, contiguous_strides(target), 0), copy,
                  "UnsafeViewBackward0", back);
}

Tensor Tensor::contiguous() const { return is_contiguous() ? *this : clone(); }

// ---- Tensor: data -----------------------------------------------------------------------------

Tensor Tensor::clone() const {
  detail::op_device("clone", {this});
  Tensor out = empty(shape_, dtype_, device());
  detail::copy_elements(out, *this);
  return recorded(out, *this, "CloneBackward0", [](const Tensor& g) { return g; });
}

namespace {

// Copies `src` (already expanded to dst's shape) into `dst` on another device. Bytes cross
// between devices only as one contiguous block; a change of dtype or layout is done on the
// source's side before (so fewer bytes may travel) or on the destination's side after, by the
// ordinary copy kernel.
void copy_across_devices(const Tensor& dst, const Tensor& src, bool non_blocking) {
  const Tensor block = src.to(dst.dtype()).contiguous();
  const Tensor landing = dst.is_contiguous() ? dst : empty(dst.shape(), dst.dtype(), dst.device());
  const bool pinned = (block.device().is_cpu() ? block : landing).is_pinned();
  detail::cuda::copy_bytes(landing.data_ptr(), landing.device(), block.data_ptr(), block.device(),
                           block.nbytes(), non_blocking, pinned);
  if (!landing.shares_storage_with(dst)) detail::copy_elements(dst, landing);
}

}  // namespace

Tensor& Tensor::copy_(const Tensor& src, bool non_blocking) {
  if (!defined() || !src.defined()) throw RuntimeError("copy_(): got an undefined tensor");
  if (grad_mode_enabled()) {
    // The tape records out-of-place ops only; an in-place write into a tensor it tracks (or of
    // a tracked tensor into an untracked one) would silently lose gradients, so it is refused.
    if (requires_grad() && is_leaf())
      throw RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.");
    if (requires_grad())
      throw RuntimeError("in-place operation on a tensor that is part of the autograd graph "
                         "(grad_fn=" + grad_fn()->name() + "): this tape records out-of-place "
                         "operations only; compute the result out of place");
    if (src.requires_grad())
      throw RuntimeError("copy_ of a tensor that requires grad into one that does not: the "
                         "gradient would be lost; use the source directly, or detach() it");
  }
  storage_->bump_version();
  Tensor source = src.detach().expand(shape_);
  // A copy between devices moves bytes over the bus; a 0-dim CPU source into a GPU tensor is a
  // number, which the fill kernel takes by value.
  if (!(device() == src.device()) && !(src.dim() == 0 && src.device().is_cpu() && device().is_cuda())) {
    copy_across_devices(*this, source, non_blocking);
    return *this;
  }
  // If the source's memory overlaps ours (x.copy_(x.T)), writing could clobber elements not yet
  // read; copy it aside first so the result is what a reader expects.
  if (source.storage_ == storage_ && numel() > 0 && source.numel() > 0) source = source.clone();
  detail::copy_elements(*this, source);
  return *this;
}

Tensor& Tensor::fill_(Scalar value) {
  detail::op_device("fill_", {this});
  return copy_(scalar_tensor(value, dtype_));
}

Tensor& Tensor::operator=(Scalar value) && { return fill_(value); }
Tensor& Tensor::operator=(const Tensor& src) && { return copy_(src); }

Tensor Tensor::to(DType dtype) const {
  if (dtype == dtype_) return *this;
  detail::op_device("to", {this});
  Tensor out = empty(shape_, dtype, device());
  detail::copy_elements(out, *this);
  if (!is_floating(dtype)) return out;  // integers and bools carry no gradient
  return recorded(out, *this, "ToCopyBackward0", [](const Tensor& g) { return g; });  // the tape casts back
}

Tensor Tensor::to(Device device, bool non_blocking) const {
  if (device == this->device()) return *this;
  Tensor out = empty(shape_, dtype_, device);
  {
    NoGradGuard plain;  // the move is recorded below as one node
    out.copy_(*this, non_blocking);
  }
  const Device from = this->device();
  return recorded(out, *this, "ToCopyBackward0", [from](const Tensor& g) { return g.to(from); });
}

Tensor Tensor::pin_memory() const {
  if (is_pinned()) return *this;
  if (!device().is_cpu())
    throw RuntimeError("cannot pin '" + std::string("torch.cuda.") + dtype_legacy_name(dtype_) +
                       "Tensor' only dense CPU tensors can be pinned");
  cuda::require_device(0);
  auto storage = std::make_shared<Storage>(nbytes(), Device::cpu(), /*pinned=*/true);
  Tensor out(std::move(storage), dtype_, shape_, contiguous_strides(shape_), 0);
  detail::copy_elements(out, *this);
  return out;
}

double Tensor::item() const {
  if (numel() != 1) throw ValueError("only one element tensors can be converted to Python scalars");
  // Reading a GPU value on the host waits for the work that computes it: a hidden synchronize.
  if (detail::op_device("item", {this}).is_cuda()) return cpu().item();
  return dispatch_dtype(dtype_, [&]<typename T>() -> double {
    return static_cast<double>(static_cast<opmath_t<T>>(*static_cast<const T*>(data_ptr())));
  });
}

std::vector<double> Tensor::tolist() const {
  detail::op_device("tolist", {this});
  Tensor c = contiguous().to(kFloat64).cpu();
  const double* p = c.data<double>();
  return std::vector<double>(p, p + c.numel());
}

int64_t Tensor::offset_of(const std::vector<int64_t>& index) const {
  if (static_cast<int64_t>(index.size()) != dim())
    throw IndexError("expected " + std::to_string(dim()) + " indices for a " +
                     std::to_string(dim()) + "-dim tensor, got " + std::to_string(index.size()));
  std::vector<int64_t> idx = index;
  for (int64_t d = 0; d < dim(); ++d) {
    const int64_t n = shape_[d];
    if (idx[d] < -n || idx[d] >= n)
      throw IndexError("index " + std::to_string(idx[d]) + " is out of bounds for dimension " +
                       std::to_string(d) + " with size " + std::to_string(n));
    if (idx[d] < 0) idx[d] += n;
  }
  // BEGIN SOLUTION ch02 index_to_offset
  int64_t position = offset_;
  for (int64_t d = 0; d < dim(); ++d) position += idx[d] * strides_[d];
  return position;
  // END SOLUTION ch02 index_to_offset
}

double Tensor::at(const std::vector<int64_t>& index) const {
  const int64_t position = offset_of(index);
  if (detail::op_device("at", {this}).is_cuda())
    return Tensor(storage_, dtype_, {}, {}, position).cpu().item();
  return dispatch_dtype(dtype_, [&]<typename T>() -> double {
    const T* base = static_cast<const T*>(storage_->data());
    return static_cast<double>(static_cast<opmath_t<T>>(base[position]));
  });
}

std::string Tensor::str() const { return format_tensor(*this); }
std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.str(); }

// ---- creation ---------------------------------------------------------------------------------

Tensor empty(const Shape& shape, DType dtype, Device device) {
  for (int64_t s : shape)
    if (s < 0)
      throw RuntimeError("Trying to create tensor with negative dimension " + std::to_string(s) +
                         ": " + detail::shape_str(shape));
  const int64_t n = shape_numel(shape);
  auto storage = std::make_shared<Storage>(static_cast<size_t>(n) * element_size(dtype), device);
  return Tensor(std::move(storage), dtype, shape, contiguous_strides(shape), 0);
}

Tensor zeros(const Shape& shape, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  // All-zero bits are 0 in every dtype.
  if (device.is_cuda()) detail::cuda::zero_bytes(t.data_ptr(), t.nbytes(), device.index);
  else std::memset(t.data_ptr(), 0, t.nbytes());
  return t;
}

Tensor ones(const Shape& shape, DType dtype, Device device) {
  return empty(shape, dtype, device).fill_(1);
}

Tensor full(const Shape& shape, Scalar value, std::optional<DType> dtype) {
  return empty(shape, dtype.value_or(value.default_dtype())).fill_(value);
}

Tensor arange(Scalar end, std::optional<DType> dtype) { return arange(0, end, 1, dtype); }

Tensor arange(Scalar start, Scalar end, Scalar step, std::optional<DType> dtype) {
  const bool any_float = start.kind() == Scalar::Kind::Float ||
                         end.kind() == Scalar::Kind::Float || step.kind() == Scalar::Kind::Float;
  const DType dt = dtype.value_or(any_float ? kFloat32 : kInt64);
  const double b = start.to_double(), e = end.to_double(), s = step.to_double();
  if (s == 0) throw RuntimeError("step must be nonzero");
  if ((s > 0 && e < b) || (s < 0 && e > b))
    throw RuntimeError("upper bound and larger bound inconsistent with step sign");
  const int64_t n = static_cast<int64_t>(std::ceil((e - b) / s));
  Tensor out = empty({n}, dt);
  dispatch_dtype(dt, [&]<typename T>() {
    T* p = out.data<T>();
    for (int64_t i = 0; i < n; ++i) p[i] = detail::convert<T>(b + static_cast<double>(i) * s);
  });
  return out;
}

Tensor eye(int64_t n, int64_t m, DType dtype) {
  if (m < 0) m = n;
  Tensor out = zeros({n, m}, dtype);
  for (int64_t i = 0; i < std::min(n, m); ++i) out.index({i, i}) = 1;
  return out;
}

Tensor tensor(const NestedList& values, std::optional<DType> dtype) {
  // First pass: the shape, from the first element at each depth, and the widest kind of number.
  Shape shape;
  for (const NestedList* level = &values; !level->is_leaf();) {
    shape.push_back(static_cast<int64_t>(level->items().size()));
    if (level->items().empty()) break;
    level = &level->items().front();
  }
  Scalar::Kind widest = Scalar::Kind::Bool;
  std::vector<Scalar> flat;
  // Second pass: every list at depth d must have shape[d] items, as torch.tensor demands.
  auto walk = [&](auto&& self, const NestedList& node, size_t depth) -> void {
    if (node.is_leaf()) {
      if (depth != shape.size())
        throw ValueError("expected sequence of length " + std::to_string(shape[depth]) +
                         " at dim " + std::to_string(depth) + " (got a number)");
      flat.push_back(node.leaf());
      widest = std::max(widest, node.leaf().kind());
      return;
    }
    if (depth >= shape.size()) throw ValueError("too many dimensions: a list where a number was expected at dim " + std::to_string(depth));
    if (static_cast<int64_t>(node.items().size()) != shape[depth])
      throw ValueError("expected sequence of length " + std::to_string(shape[depth]) +
                       " at dim " + std::to_string(depth) + " (got " +
                       std::to_string(node.items().size()) + ")");
    for (const NestedList& item : node.items()) self(self, item, depth + 1);
  };
  walk(walk, values, 0);
  const DType dt = dtype.value_or(widest == Scalar::Kind::Float ? kFloat32
                                  : widest == Scalar::Kind::Int ? kInt64
                                                                : kBool);
  Tensor out = empty(shape, dt);
  dispatch_dtype(dt, [&]<typename T>() {
    T* p = out.data<T>();
    for (size_t i = 0; i < flat.size(); ++i) {
      if (flat[i].kind() == Scalar::Kind::Float) p[i] = detail::convert<T>(flat[i].to_double());
      else p[i] = detail::convert<T>(flat[i].to_int());
    }
  });
  return out;
}

}  // namespace tiny
