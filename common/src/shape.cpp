// shape.cpp: the rules about shapes and strides that views and ops share: sizes, row-major
// strides, wrapping negative dims, broadcasting, inferring a -1 size, and the view rule
// (chapter 02's exercises are here).
#include <algorithm>
#include <optional>

#include "internal.h"
#include "tiny/tensor.h"

namespace tiny {

// ---- shape helpers ----------------------------------------------------------------------------

int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t s : shape)
    if (detail::mul_overflows(n, s, &n))
      throw RuntimeError("numel: integer multiplication overflow");
  return n;
}

Strides contiguous_strides(const Shape& shape) {
  Strides strides(shape.size());
  int64_t step = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = step;
    // Only a shape holding a 0 can have strides past int64 (a tensor with elements has its
    // bytes checked when it is made); it never steps along them, so they saturate.
    if (detail::mul_overflows(step, std::max<int64_t>(shape[i], 1), &step)) step = INT64_MAX;
  }
  return strides;
}

int64_t wrap_dim(int64_t dim, int64_t ndim, bool wrap_scalar) {
  if (ndim == 0 && !wrap_scalar)
    throw IndexError("Dimension specified as " + std::to_string(dim) +
                     " but tensor has no dimensions");
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
  bool overflow = false;  // the known sizes multiply past int64: no numel can match them
  std::optional<size_t> unknown;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      if (unknown) throw RuntimeError("only one dimension can be inferred");
      unknown = i;
    } else if (shape[i] < 0) {
      throw RuntimeError("invalid shape dimension " + std::to_string(shape[i]) + " at index " +
                         std::to_string(i) + " of shape " + detail::shape_str(shape));
    } else {
      overflow |= detail::mul_overflows(known, shape[i], &known);
    }
  }
  if (!unknown) {
    // Sizes that multiply past int64 cannot match a non-empty tensor; with an empty one, they
    // are PyTorch's numel overflow.
    if (!overflow && known == numel) return out;
    if (overflow && numel == 0) throw RuntimeError("numel: integer multiplication overflow");
  } else if (numel == 0 && (known == 0 || overflow)) {
    throw RuntimeError("cannot reshape tensor of 0 elements into shape " +
                       detail::shape_str(shape) +
                       " because the unspecified dimension size -1 can be any value and is "
                       "ambiguous");
  } else if (!overflow && known != 0 && numel % known == 0) {
    out[*unknown] = numel / known;
    return out;
  }
  throw RuntimeError("shape '" + detail::shape_str(shape) + "' is invalid for input of size " +
                     std::to_string(numel));
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

}  // namespace detail

}  // namespace tiny
