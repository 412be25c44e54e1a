// tensor.cpp: Storage, the Tensor handle, and views (new shape, strides and offset over the same
// memory, each recorded on the tape as PyTorch names it). Shape rules are in shape.cpp, copies
// between dtypes and devices in copy.cpp, creation in factories.cpp.
#include "tiny/tensor.h"

#include <algorithm>

#include "autograd_internal.h"
#include "capture_internal.h"
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

Storage::Storage(void* data, size_t nbytes, Device device, std::shared_ptr<void> owner)
    : owner_(std::move(owner)), data_(data), nbytes_(nbytes), device_(device) {
  if (!owner_) throw ValueError("Storage: external memory needs an owner that releases it");
}

// External memory is released by its owner (the shared_ptr member); only the allocator's own
// blocks go back to it.
Storage::~Storage() {
  if (!owner_) detail::deallocate(data_, nbytes_, device_, pinned_, category());
}

void Storage::set_role(MemoryCategory role) {
  if (role == MemoryCategory::activations)
    throw ValueError("activations is not a role: a tensor becomes one by being saved for backward");
  if (static_cast<int>(role) >= kMemoryCategories)
    memory_category_name(role);  // raises for a value outside the enum
  const MemoryCategory before = category();
  role_ = role;
  recount(before);
}

void Storage::add_saved(int delta) {
  const MemoryCategory before = category();
  saved_ += delta;
  recount(before);
}

// Memory from outside the allocator (a mapped file) is in no counter, so it has nothing to move.
void Storage::recount(MemoryCategory before) {
  const MemoryCategory now = category();
  if (!owner_ && now != before) detail::recategorize(nbytes_, device_, pinned_, before, now);
}

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
// ---- Tensor: what it is -----------------------------------------------------------------------

namespace {

// Refuses a layout that reads outside `storage` (PyTorch's checks in as_strided / setStorage):
// every view the library makes passes, so only a hand-made layout can fail.
void check_layout(const Storage& storage, DType dtype, const Shape& shape, const Strides& strides,
                  int64_t offset) {
  if (shape.size() != strides.size()) throw RuntimeError("mismatch in length of strides and shape");
  // A size the element count overflows is refused as PyTorch refuses it, even where every
  // stride is 0 and the storage would hold the one element read.
  (void)shape_numel(shape);
  for (int64_t st : strides)
    if (st < 0)
      throw RuntimeError(
          "as_strided: Negative strides are not supported at the moment, got "
          "strides: " +
          detail::shape_str(strides));
  if (offset < 0) throw RuntimeError("Tensor: invalid storage offset " + std::to_string(offset));
  // The storage must hold the farthest element: offset + sum (size - 1) * stride, plus one.
  // A tensor with no element needs no storage (and never steps along its strides).
  int64_t needed = 1;  // elements, from the offset on
  bool overflow = false, empty = false;
  for (int64_t size : shape) {
    overflow |= size < 0;
    empty |= size == 0;
  }
  for (size_t d = 0; d < shape.size() && !empty && !overflow; ++d) {
    int64_t reach = 0;
    overflow |= detail::mul_overflows(shape[d] - 1, strides[d], &reach) ||
                __builtin_add_overflow(needed, reach, &needed);
  }
  const int64_t itemsize = static_cast<int64_t>(element_size(dtype));
  int64_t bytes = 0;
  if (!empty && !overflow)
    overflow |= __builtin_add_overflow(needed, offset, &bytes) ||
                detail::mul_overflows(bytes, itemsize, &bytes);
  if (overflow)
    throw RuntimeError("Storage size calculation overflowed with sizes=" +
                       detail::shape_str(shape) + " and strides=" + detail::shape_str(strides));
  if (bytes > static_cast<int64_t>(storage.nbytes()))
    throw RuntimeError("setStorage: sizes " + detail::shape_str(shape) + ", strides " +
                       detail::shape_str(strides) + ", storage offset " + std::to_string(offset) +
                       ", and itemsize " + std::to_string(itemsize) +
                       " requiring a storage size of " + std::to_string(bytes) +
                       " are out of bounds for storage of size " +
                       std::to_string(storage.nbytes()));
}

}  // namespace

Tensor::Tensor(std::shared_ptr<Storage> storage, DType dtype, Shape shape, Strides strides,
               int64_t offset)
    : storage_(std::move(storage)),
      dtype_(dtype),
      shape_(std::move(shape)),
      strides_(std::move(strides)),
      offset_(offset) {
  if (storage_) check_layout(*storage_, dtype_, shape_, strides_, offset_);
}

Device Tensor::device() const { return storage_ ? storage_->device() : Device::cpu(); }
int64_t Tensor::size(int64_t d) const { return shape_[wrap_dim(d, dim(), false)]; }
int64_t Tensor::stride(int64_t d) const { return strides_[wrap_dim(d, dim(), false)]; }
int64_t Tensor::numel() const { return shape_numel(shape_); }

void* Tensor::data_ptr() const {
  if (!storage_) return nullptr;
  // While this thread captures a CPUGraph, host code may touch tensor memory only as part of
  // recorded work (capture_internal.h): a replay runs that work again and nothing else, so any
  // other read or write would happen once, at capture, and silently never again.
  if (detail::recording()) [[unlikely]]
    throw RuntimeError(
        "a tensor's memory was read or written on the host while a CPUGraph was capturing "
        "(data_ptr(), item(), printing, a random draw, a data loader, a compiled function): "
        "replay() repeats only the captured kernels, so this would not happen again. Do it "
        "outside the captured function");
  // A tensor with no element reads nothing, and its offset may be anything (PyTorch accepts
  // as_strided((0,), (1,), 2**62)): it points at its storage's start, not at an address far
  // outside it, or one whose byte count overflows.
  if (offset_ > 0 && numel() == 0) return storage_->data();
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
  return detail::record_view(Tensor(storage_, dtype_, shape, strides, offset_), *this,
                             "TransposeBackward0",
                             [d0, d1](const Tensor& g) { return g.transpose(d0, d1); });
}

Tensor Tensor::T() const {
  DimVector order(dim());
  for (int64_t i = 0; i < dim(); ++i) order[i] = dim() - 1 - i;
  return permute(order);
}

Tensor Tensor::t() const {
  if (dim() > 2)
    throw RuntimeError("t() expects a tensor with <= 2 dimensions, but self is " +
                       std::to_string(dim()) + "D");
  Shape shape(shape_.rbegin(), shape_.rend());
  Strides strides(strides_.rbegin(), strides_.rend());
  return detail::record_view(Tensor(storage_, dtype_, shape, strides, offset_), *this, "TBackward0",
                             [](const Tensor& g) { return g.t(); });
}

Tensor Tensor::permute(const DimVector& order) const {
  if (static_cast<int64_t>(order.size()) != dim())
    throw RuntimeError(
        "permute(sparse_coo): number of dimensions in the tensor input does not match the length "
        "of the desired ordering of dimensions i.e. input.dim() = " +
        std::to_string(dim()) + " is not equal to len(dims) = " + std::to_string(order.size()));
  Shape shape(dim());
  Strides strides(dim());
  DimVector seen(dim(), 0), inverse(dim());
  for (int64_t i = 0; i < dim(); ++i) {
    const int64_t d = wrap_dim(order[i], dim());
    if (seen[d]) throw RuntimeError("permute(): duplicate dims are not allowed.");
    seen[d] = true;
    shape[i] = shape_[d];
    strides[i] = strides_[d];
    inverse[d] = i;
  }
  return detail::record_view(Tensor(storage_, dtype_, shape, strides, offset_), *this,
                             "PermuteBackward0",
                             [inverse](const Tensor& g) { return g.permute(inverse); });
}

Tensor Tensor::select(int64_t d, int64_t i) const {
  if (dim() == 0) throw IndexError("select() cannot be applied to a 0-dim tensor.");
  d = wrap_dim(d, dim());
  const int64_t n = shape_[d];
  if (i < -n || i >= n)
    throw IndexError("select(): index " + std::to_string(i) + " out of range for tensor of size " +
                     detail::shape_str(shape_) + " at dimension " + std::to_string(d));
  if (i < 0) i += n;
  Shape shape = shape_;
  Strides strides = strides_;
  shape.erase(shape.begin() + d);
  strides.erase(strides.begin() + d);
  const Shape base = shape_;
  const DType dt = dtype_;
  // i * stride can overflow only in a tensor with no elements (a 0 elsewhere in the shape lets
  // the other sizes and strides be anything); the result is empty too, and any offset serves.
  int64_t offset = 0;
  if (detail::mul_overflows(i, strides_[d], &offset) ||
      __builtin_add_overflow(offset_, offset, &offset))
    offset = offset_;
  return detail::record_view(Tensor(storage_, dtype_, shape, strides, offset), *this,
                             "SelectBackward0", [base, dt, d, i](const Tensor& g) {
                               return detail::scatter_into_zeros(
                                   g, base, dt, [d, i](const Tensor& z) { return z.select(d, i); });
                             });
}

Tensor Tensor::slice(int64_t d, std::optional<int64_t> start, std::optional<int64_t> stop,
                     int64_t step) const {
  if (dim() == 0) throw IndexError("slice() cannot be applied to a 0-dim tensor.");
  d = wrap_dim(d, dim());
  if (step == 0) throw ValueError("slice step cannot be zero");
  if (step < 0) throw ValueError("step must be greater than zero");
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
  // ceil((e - b) / step), written so that a huge step cannot overflow.
  shape[d] = e == b ? 0 : (e - b - 1) / step + 1;
  // A step past the end leaves at most one element, whose stride is never used (and the
  // product could overflow); otherwise the product is within the storage, except beside a 0
  // elsewhere in the shape, where nothing is read and an overflowing stride saturates.
  if (shape[d] > 1 && detail::mul_overflows(strides_[d], step, &strides[d]))
    strides[d] = INT64_MAX;
  // Within the storage for any slice that reads something; only an empty tensor's saturated
  // strides can take it past int64, and an empty slice reads nothing, so its offset stays put.
  int64_t offset = 0;
  if (detail::mul_overflows(b, strides_[d], &offset) ||
      __builtin_add_overflow(offset, offset_, &offset))
    offset = offset_;
  const Shape base = shape_;
  const DType dt = dtype_;
  return detail::record_view(
      Tensor(storage_, dtype_, shape, strides, offset), *this, "SliceBackward0",
      [base, dt, d, b, e, step](const Tensor& g) {
        return detail::scatter_into_zeros(
            g, base, dt, [d, b, e, step](const Tensor& z) { return z.slice(d, b, e, step); });
      });
}

Tensor Tensor::diagonal(int64_t offset, int64_t dim1, int64_t dim2) const {
  const int64_t d1 = wrap_dim(dim1, dim()), d2 = wrap_dim(dim2, dim());
  if (d1 == d2)
    throw RuntimeError("diagonal dimensions cannot be identical " + std::to_string(dim1) + ", " +
                       std::to_string(dim2));
  // The diagonal's length: how many (i, i + offset) pairs fit, none when the offset is past the
  // edge. Compared without forming i + offset, which can overflow for a huge offset.
  const int64_t n1 = shape_[d1], n2 = shape_[d2];
  int64_t length = 0;
  if (offset >= 0) length = offset >= n2 ? 0 : std::min(n1, n2 - offset);
  else length = offset <= -n1 ? 0 : std::min(n1 + offset, n2);
  // Its first element, (0, offset) or (-offset, 0). As in select(), the arithmetic can overflow
  // only in a tensor with no elements (whose strides may be anything); it reads nothing, and its
  // offset and last stride stay put.
  int64_t start = 0, step = 0;
  const bool skip =
      length == 0 || (offset >= 0 ? detail::mul_overflows(offset, strides_[d2], &start)
                                  : detail::mul_overflows(-offset, strides_[d1], &start));
  if (skip || __builtin_add_overflow(offset_, start, &start)) start = offset_;
  if (__builtin_add_overflow(strides_[d1], strides_[d2], &step)) step = INT64_MAX;
  Shape shape;
  Strides strides;
  for (int64_t d = 0; d < dim(); ++d)
    if (d != d1 && d != d2) {
      shape.push_back(shape_[d]);
      strides.push_back(strides_[d]);
    }
  shape.push_back(length);
  strides.push_back(step);
  const Shape base = shape_;
  const DType dt = dtype_;
  return detail::record_view(
      Tensor(storage_, dtype_, shape, strides, start), *this, "DiagonalBackward0",
      [base, dt, offset, d1, d2](const Tensor& g) {
        return detail::scatter_into_zeros(
            g, base, dt, [offset, d1, d2](const Tensor& z) { return z.diagonal(offset, d1, d2); });
      });
}

Tensor Tensor::narrow(int64_t d, int64_t start, int64_t length) const {
  // PyTorch 2.x's checks, in its order: a 0-dim tensor, the length, the dimension, the start
  // (in [-n, n], wrapped like a dimension), and the end.
  if (dim() == 0) throw RuntimeError("narrow() cannot be applied to a 0-dim tensor.");
  if (length < 0) throw RuntimeError("narrow(): length must be non-negative.");
  d = wrap_dim(d, dim());
  const int64_t n = shape_[d];
  if (start < -n || start > n)
    throw IndexError("start out of range (expected to be in range of [" + std::to_string(-n) +
                     ", " + std::to_string(n) + "], but got " + std::to_string(start) + ")");
  if (start < 0) start += n;
  // Compared as length > n - start, because start + length can overflow.
  if (length > n - start)
    throw RuntimeError("start (" + std::to_string(start) + ") + length (" + std::to_string(length) +
                       ") exceeds dimension size (" + std::to_string(n) + ").");
  return slice(d, start, start + length);
}

Tensor Tensor::index(const IndexList& indices) const {
  if (dim() == 0 && !indices.items.empty() && std::holds_alternative<int64_t>(indices.items[0]))
    throw IndexError(
        "invalid index of a 0-dim tensor. Use `tensor.item()` in Python or "
        "`tensor.item<T>()` in C++ to convert a 0-dim tensor to a number");
  if (dim() == 0 && !indices.items.empty())  // a slice: PyTorch's slice() text
    throw IndexError("slice() cannot be applied to a 0-dim tensor.");
  if (static_cast<int64_t>(indices.items.size()) > dim())
    throw IndexError("too many indices for tensor of dimension " + std::to_string(dim()));
  // The views below are made from a copy of this handle; the autograd record must be this
  // tensor's own, so that a write through the view (x.index({0}) = y) reaches it.
  if (is_floating(dtype_)) ensure_autograd_meta();
  Tensor out = *this;
  int64_t d = 0;  // the output dimension the next index applies to
  for (size_t k = 0; k < indices.items.size(); ++k) {
    const TensorIndex& idx = indices.items[k];
    if (std::holds_alternative<int64_t>(idx)) {
      // Python's t[i] names the dimension of this tensor it indexes (k), where select would
      // name the dimension of the partly indexed one.
      const int64_t i = std::get<int64_t>(idx), n = out.size(d);
      if (i < -n || i >= n)
        throw IndexError("index " + std::to_string(i) + " is out of bounds for dimension " +
                         std::to_string(k) + " with size " + std::to_string(n));
      out = out.select(d, i);  // removes dimension d
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
  if (n < dim()) {
    // PyTorch names the tensor by its legacy type here: torch.FloatTensor, torch.cuda.LongTensor.
    std::string type = device().is_cuda() ? "torch.cuda." : "torch.";
    type += dtype_legacy_name(dtype_);
    throw RuntimeError("expand(" + type + "Tensor{" + detail::shape_str(shape_) +
                       "}, size=" + detail::shape_str(shape) + "): the number of sizes provided (" +
                       std::to_string(n) +
                       ") must be greater or equal to the number of dimensions in the tensor (" +
                       std::to_string(dim()) + ")");
  }
  // A 0-dim tensor has no size for -1 to keep; PyTorch (1.13) reports any negative size of it as
  // the overflow of the result's element count.
  if (dim() == 0)
    for (int64_t size : shape)
      if (size < 0) throw RuntimeError("numel: integer multiplication overflow");
  Shape out_shape(n);
  Strides out_strides(n);
  for (int64_t i = n - 1; i >= 0; --i) {
    const int64_t j = i - (n - dim());  // the matching dimension of this tensor, if any
    if (j < 0) {
      if (shape[i] == -1)
        throw RuntimeError(
            "The expanded size of the tensor (-1) isn't allowed in a leading, "
            "non-existing dimension " +
            std::to_string(i));
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
  // Any other negative size (-2 where a size-1 dimension or a new one is) is refused the way
  // PyTorch 1.13 refuses it: its numel, computed unsigned, overflows. So does a true overflow.
  for (int64_t s : out_shape)
    if (s < 0) throw RuntimeError("numel: integer multiplication overflow");
  shape_numel(out_shape);
  // The gradient of a broadcast is summed back by the tape (see autograd_internal.h).
  return detail::record_view(Tensor(storage_, dtype_, out_shape, out_strides, offset_), *this,
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
  return detail::record_view(Tensor(storage_, dtype_, shape, strides, offset_), *this,
                             "SqueezeBackward0", [in](const Tensor& g) { return g.reshape(in); });
}

Tensor Tensor::squeeze(int64_t d) const {
  d = wrap_dim(d, dim());
  if (dim() == 0 || shape_[d] != 1) return *this;
  Shape shape = shape_;
  Strides strides = strides_;
  shape.erase(shape.begin() + d);
  strides.erase(strides.begin() + d);
  return detail::record_view(Tensor(storage_, dtype_, shape, strides, offset_), *this,
                             "SqueezeBackward1", [d](const Tensor& g) { return g.unsqueeze(d); });
}

Tensor Tensor::unsqueeze(int64_t d) const {
  d = wrap_dim(d, dim() + 1);
  Shape shape = shape_;
  Strides strides = strides_;
  int64_t stride = 1;
  // Only an empty tensor's sizes and strides can multiply past int64 (its strides are unused).
  if (d < dim() && detail::mul_overflows(shape_[d], strides_[d], &stride)) stride = INT64_MAX;
  shape.insert(shape.begin() + d, 1);
  strides.insert(strides.begin() + d, stride);
  return detail::record_view(Tensor(storage_, dtype_, shape, strides, offset_), *this,
                             "UnsqueezeBackward0", [d](const Tensor& g) { return g.squeeze(d); });
}

Tensor Tensor::flatten(int64_t start, int64_t end) const {
  if (dim() == 0) {
    // A 0-dim tensor flattens to one element; its dims still must be 0 or -1, as in PyTorch.
    (void)wrap_dim(start, 0);
    (void)wrap_dim(end, 0);
    return reshape({1});
  }
  start = wrap_dim(start, dim());
  end = wrap_dim(end, dim());
  if (start > end)
    throw RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim");
  // Nothing to merge: PyTorch returns the tensor itself, strides and all (a reshape would give
  // an empty tensor fresh strides).
  if (start == end) return *this;
  Shape shape(shape_.begin(), shape_.begin() + start);
  // Beside a 0 elsewhere the merged sizes can multiply past int64; PyTorch wraps the product
  // silently (to 0 for 2^62 * 2^62), tiny refuses it.
  int64_t merged = 1;
  for (int64_t d = start; d <= end; ++d)
    if (detail::mul_overflows(merged, shape_[d], &merged))
      throw RuntimeError("flatten(): the sizes " + detail::shape_str(shape_) + " from dim " +
                         std::to_string(start) + " to " + std::to_string(end) +
                         " multiply past int64");
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
  return detail::record_view(Tensor(storage_, dtype_, target, *strides, offset_), *this,
                             "ViewBackward0", [in](const Tensor& g) { return g.reshape(in); });
}

Tensor Tensor::reshape(const Shape& shape) const {
  const Shape target = infer_size(shape, numel());
  const Shape in = shape_;
  auto back = [in](const Tensor& g) { return g.reshape(in); };
  // PyTorch 2.x names the two cases as what they are: a view when the strides allow one (1.13
  // called it ReshapeAliasBackward0), an "unsafe view" of a clone when they force a copy.
  if (auto strides = view_strides(shape_, strides_, target))
    return detail::record_view(Tensor(storage_, dtype_, target, *strides, offset_), *this,
                               "ViewBackward0", back);
  const Tensor copy = clone();
  return detail::record_copy(Tensor(copy.storage_, dtype_, target, contiguous_strides(target), 0),
                             copy, "UnsafeViewBackward0", back);
}

Tensor Tensor::contiguous() const { return is_contiguous() ? *this : clone(); }

// ---- Tensor: where an element lives, and printing ---------------------------------------------

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

std::string Tensor::str() const { return format_tensor(*this); }
std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.str(); }

}  // namespace tiny
