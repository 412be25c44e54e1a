/// @file tensor.h
/// @brief Storage and Tensor: a block of memory, and a way of reading it (shape, strides, offset).
///
/// A Tensor is a shared handle. Copying a Tensor copies the handle, not the numbers; views
/// (transpose, slices, view, expand, ...) share the Storage and differ only in shape, strides
/// and offset. Strides count elements, as PyTorch's do (NumPy's count bytes).
#pragma once
#include <concepts>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <limits>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <variant>
#include <vector>

#include "tiny/allocator.h"
#include "tiny/device.h"
#include "tiny/dim_vector.h"
#include "tiny/dtype.h"
#include "tiny/error.h"

namespace tiny {

class Node;
struct AutogradMeta;

/// A tensor's sizes, one per dimension (kept inside the handle up to six dimensions).
using Shape = DimVector;
/// A tensor's strides, in elements, one per dimension.
using Strides = DimVector;

/// A block of memory on one device. Tensors share it through std::shared_ptr; it goes back to
/// the allocator when the last view of it is gone.
class Storage {
 public:
  /// Allocates `nbytes` on `device` (contents undefined); `pinned` asks for page-locked host
  /// memory, which a GPU can copy from while the host goes on (CPU only).
  Storage(size_t nbytes, Device device, bool pinned = false);
  /// Wraps memory the allocator did not give out (a memory-mapped file, say): `owner` keeps it
  /// alive and is released, unmapping or freeing it, when the last tensor using it is gone.
  Storage(void* data, size_t nbytes, Device device, std::shared_ptr<void> owner);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  /// Start of the block.
  void* data() const { return data_; }
  /// Size of the block in bytes.
  size_t nbytes() const { return nbytes_; }
  /// Where the block lives.
  Device device() const { return device_; }
  /// True for page-locked host memory.
  bool pinned() const { return pinned_; }
  /// How many times the block was written in place; autograd checks it was not changed between
  /// saving a tensor for backward and using it.
  uint64_t version() const { return version_; }
  /// Records an in-place write.
  void bump_version() { ++version_; }
  /// True when the memory came from outside the allocator (the constructor with an owner).
  bool external() const { return owner_ != nullptr; }

  /// The category the allocator counts this block's bytes in: its role, except that a
  /// temporary the autograd graph keeps for backward counts as an activation while it is kept.
  MemoryCategory category() const {
    return role_ == MemoryCategory::temporaries && saved_ > 0 ? MemoryCategory::activations : role_;
  }
  /// Gives the block a role: weights, gradients, optimizer state, or temporaries again.
  /// (MemoryCategory::activations is not a role: saving a tensor for backward makes it one.)
  void set_role(MemoryCategory role);
  /// One more (`delta` = 1) or one fewer (-1) autograd node keeps this block for backward.
  void add_saved(int delta);

 private:
  // Moves the bytes between the allocator's category counters after a change of category.
  void recount(MemoryCategory before);

  MemoryCategory role_ = MemoryCategory::temporaries;
  int32_t saved_ = 0;
  std::shared_ptr<void> owner_;  // set for external memory, which the allocator must not free
  void* data_ = nullptr;
  size_t nbytes_ = 0;
  Device device_;
  bool pinned_ = false;
  uint64_t version_ = 0;
};

/// A number that is not a tensor: a bool, an integer or a float. Ops take it where PyTorch takes
/// a Python number, and it promotes the way a Python number does (`int64 * 2` stays int64,
/// `int64 * 0.5` becomes float32).
class Scalar {
 public:
  /// The three kinds of number, ordered as type promotion orders them.
  enum class Kind { Bool, Int, Float };
  /// A bool.
  Scalar(bool b) : kind_(Kind::Bool), i_(b), d_(b) {}  // NOLINT: implicit on purpose
  /// Any integer type. An unsigned value above int64's range raises ValueError, as
  /// torch.tensor does for a Python int it cannot hold ("Overflow when unpacking long long").
  template <std::integral I>
  requires(!std::same_as<I, bool>) Scalar(I i)
      : kind_(Kind::Int), i_(checked_int(i)), d_(static_cast<double>(i)) {}  // NOLINT
  /// Any floating-point type.
  template <std::floating_point F>
  Scalar(F f)
      : kind_(Kind::Float),
        i_(truncate(static_cast<double>(f))),
        d_(static_cast<double>(f)) {}  // NOLINT

  /// Which kind of number this is.
  Kind kind() const { return kind_; }
  /// The value as a double.
  double to_double() const { return d_; }
  /// The value as an integer (truncated for floats; INT64_MIN for NaN, infinities and floats
  /// outside int64's range, as x86 and so PyTorch's float-to-int64 casts give).
  int64_t to_int() const { return i_; }
  /// The dtype PyTorch gives a tensor made from this number alone: float32, int64 or bool.
  DType default_dtype() const;

 private:
  // An unsigned integer cast to int64 would wrap silently (UINT64_MAX to -1).
  template <std::integral I> static int64_t checked_int(I i) {
    if constexpr (std::is_unsigned_v<I> && sizeof(I) >= sizeof(int64_t))
      if (i > static_cast<I>(std::numeric_limits<int64_t>::max()))
        throw ValueError("Overflow when unpacking long long");
    return static_cast<int64_t>(i);
  }
  // A C++ cast of a float outside int64's range (or of NaN) is undefined; this one is not.
  static int64_t truncate(double f) {
    return truncation_fits<int64_t>(f) ? static_cast<int64_t>(f) : INT64_MIN;
  }

  Kind kind_;
  int64_t i_;
  double d_;
};

/// A nested list of numbers, as `torch.tensor([[1., 2], [3, 4]])` takes: `tensor({{1., 2}, {3, 4}})`.
class NestedList {
 public:
  /// A single number (a leaf): any bool, integer or floating-point value.
  template <typename N>
  requires std::is_arithmetic_v<N> NestedList(N n)
      : leaf_(Scalar(n)) {}  // NOLINT: implicit, so `{1, 2.5}` reads naturally
  /// A list of lists or numbers.
  NestedList(std::initializer_list<NestedList> items) : items_(items) {}
  /// True for a number, false for a list.
  bool is_leaf() const { return leaf_.has_value(); }
  /// The number of a leaf.
  const Scalar& leaf() const { return *leaf_; }
  /// The items of a list.
  const std::vector<NestedList>& items() const { return items_; }

 private:
  std::optional<Scalar> leaf_;
  std::vector<NestedList> items_;
};

/// A Python slice `start:stop:step`; an unset bound means "from the start" / "to the end".
struct Slice {
  std::optional<int64_t> start = std::nullopt;  ///< first index (may be negative); unset: 0
  std::optional<int64_t> stop =
      std::nullopt;  ///< one past the last index (may be negative); unset: the size
  int64_t step = 1;  ///< positive step
};

/// One entry of an index expression: an integer (selects, removing the dimension) or a Slice.
using TensorIndex = std::variant<int64_t, Slice>;

/// Reads `tensor[ ... ]` written as `x.index({Slice{}, 1})` for `x[:, 1]`.
struct IndexList {
  std::vector<TensorIndex> items;  ///< one entry per indexed dimension
  /// Builds the list from integers and slices.
  IndexList(std::initializer_list<std::variant<int, int64_t, Slice>> list);  // NOLINT
};

/// A tensor: Storage plus dtype, shape, strides (in elements) and an offset into the storage.
class Tensor {
 public:
  /// An undefined tensor (defined() is false), like an empty handle.
  Tensor() = default;
  /// A tensor reading `storage` as `dtype` with the given layout.
  Tensor(std::shared_ptr<Storage> storage, DType dtype, Shape shape, Strides strides,
         int64_t offset);

  Tensor(const Tensor&) = default;  ///< another handle to the same memory (copies nothing)
  Tensor(Tensor&&) = default;       ///< takes over the handle
  /// Rebinds this handle (an lvalue `a = b` makes `a` refer to b's memory, copying nothing).
  Tensor& operator=(const Tensor&) & = default;
  /// Rebinds this handle.
  Tensor& operator=(Tensor&&) & = default;
  /// Writes `value` into every element this view sees: `x.index({0, 1}) = 100.0` (like
  /// `x[0, 1] = 100` in Python). Only on temporaries, so `a = b` keeps its usual meaning.
  Tensor& operator=(Scalar value) &&;
  /// Copies `src` (broadcast and converted) into the elements this view sees: `x[0] = y`.
  Tensor& operator=(const Tensor& src) &&;

  // ---- what the tensor is -----------------------------------------------------------------
  /// False for a default-constructed handle.
  bool defined() const { return storage_ != nullptr; }
  /// Element type.
  DType dtype() const { return dtype_; }
  /// Device of the storage.
  Device device() const;
  /// Sizes, one per dimension.
  const Shape& shape() const { return shape_; }
  /// Strides in elements, one per dimension.
  const Strides& strides() const { return strides_; }
  /// Number of dimensions.
  int64_t dim() const { return static_cast<int64_t>(shape_.size()); }
  /// Size of dimension `d` (negative counts from the end).
  int64_t size(int64_t d) const;
  /// Stride of dimension `d` (negative counts from the end).
  int64_t stride(int64_t d) const;
  /// Number of elements (1 for a 0-dimensional tensor).
  int64_t numel() const;
  /// Bytes per element.
  size_t element_size() const { return tiny::element_size(dtype_); }
  /// numel() * element_size(): the bytes this tensor's elements take.
  size_t nbytes() const {
    // BEGIN SOLUTION ch01 tensor_bytes
    return static_cast<size_t>(numel()) * element_size();
    // END SOLUTION ch01 tensor_bytes
  }
  /// Offset of the first element in the storage, in elements.
  int64_t storage_offset() const { return offset_; }
  /// True when the elements lie in row-major order with no gaps (size-1 dims' strides ignored).
  bool is_contiguous() const;
  /// Address of the first element (PyTorch's data_ptr()): two views with equal data_ptr()
  /// start at the same byte.
  void* data_ptr() const;
  /// Typed address of the first element; throws if T does not match dtype().
  template <typename T> T* data() const {
    if (dtype_of<T>() != dtype_)
      throw RuntimeError(std::string("expected scalar type ") + dtype_legacy_name(dtype_of<T>()) +
                         " but found " + dtype_legacy_name(dtype_));
    return static_cast<T*>(data_ptr());
  }
  /// The shared storage.
  const std::shared_ptr<Storage>& storage() const { return storage_; }
  /// True when both tensors view the same Storage (the lecture's same_storage()).
  bool shares_storage_with(const Tensor& other) const { return storage_ == other.storage_; }

  // ---- views: new shape/strides/offset, same memory ---------------------------------------
  /// Swaps two dimensions.
  Tensor transpose(int64_t d0, int64_t d1) const;
  /// Reverses the dimensions (Python's `x.T`; for a matrix, the transpose). Recorded as
  /// PermuteBackward0, as PyTorch records `x.T`.
  Tensor T() const;
  /// The transpose of a matrix (torch.Tensor.t()); a tensor of fewer than two dimensions comes
  /// back as it is. Recorded as TBackward0. RuntimeError for more than two dimensions.
  Tensor t() const;
  /// Reorders the dimensions: result dim i is this tensor's dim `order[i]`.
  Tensor permute(const DimVector& order) const;
  /// Picks index `i` along `dim`, removing that dimension.
  Tensor select(int64_t dim, int64_t i) const;
  /// `x[i]`: index({i}) (select(0, i), with Python's "index 5 is out of bounds" message).
  Tensor operator[](int64_t i) const { return index({i}); }
  /// `x[start:stop:step]` along `dim`, Python's clamping rules.
  Tensor slice(int64_t dim, std::optional<int64_t> start, std::optional<int64_t> stop,
               int64_t step = 1) const;
  /// `length` elements along `dim` starting at `start` (torch.narrow).
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  /// The elements whose indices along `dim1` and `dim2` differ by `offset` (torch.diagonal): a
  /// view without those two dimensions and with a last one along the diagonal, whose stride is
  /// the sum of theirs. einsum's repeated subscript ("i i -> i") is this view.
  Tensor diagonal(int64_t offset = 0, int64_t dim1 = 0, int64_t dim2 = 1) const;
  /// Python indexing with integers and slices: `x.index({Slice{}, 1})` is `x[:, 1]`.
  Tensor index(const IndexList& indices) const;
  /// Repeats size-1 dimensions (and adds leading ones) without copying: stride 0. -1 keeps a size.
  Tensor expand(const Shape& shape) const;
  /// expand() to the shape `shape` (torch.broadcast_to).
  Tensor broadcast_to(const Shape& shape) const { return expand(shape); }
  /// Removes every size-1 dimension.
  Tensor squeeze() const;
  /// Removes dimension `dim` if its size is 1.
  Tensor squeeze(int64_t dim) const;
  /// Inserts a size-1 dimension at `dim`.
  Tensor unsqueeze(int64_t dim) const;
  /// Merges dimensions start..end into one: a view when the strides allow, else a copy.
  Tensor flatten(int64_t start = 0, int64_t end = -1) const;
  /// Reads the same memory with a new shape; throws when strides cannot express it.
  /// One size may be -1 (inferred).
  Tensor view(const Shape& shape) const;
  /// view() when the strides allow it, otherwise a contiguous copy with the new shape.
  Tensor reshape(const Shape& shape) const;
  /// This tensor if already contiguous, otherwise a row-major copy.
  Tensor contiguous() const;

  // ---- data -------------------------------------------------------------------------------
  /// A new tensor with the same values in fresh, contiguous memory.
  Tensor clone() const;
  /// Copies `src` into this tensor's elements (broadcasting src, converting its dtype, and
  /// moving it between devices; `non_blocking` as for to()).
  Tensor& copy_(const Tensor& src, bool non_blocking = false);
  /// Sets every element to `value`.
  Tensor& fill_(Scalar value);
  /// Sets every element to 0.
  Tensor& zero_();

  // ---- in place: the op's result written into this tensor (ops.h; recorded as PyTorch does) -
  Tensor& add_(const Tensor& other, Scalar alpha = 1);  ///< this += alpha * other
  Tensor& add_(Scalar other);                           ///< this += other
  Tensor& sub_(const Tensor& other, Scalar alpha = 1);  ///< this -= alpha * other
  Tensor& sub_(Scalar other);                           ///< this -= other
  Tensor& mul_(const Tensor& other);                    ///< this *= other
  Tensor& mul_(Scalar other);                           ///< this *= other
  Tensor& div_(const Tensor& other);                    ///< this /= other (a floating tensor)
  Tensor& div_(Scalar other);                           ///< this /= other (a floating tensor)
  Tensor& pow_(const Tensor& exponent);                 ///< this = this ** exponent
  Tensor& pow_(Scalar exponent);                        ///< this = this ** exponent
  Tensor& neg_();                                       ///< this = -this
  Tensor& abs_();                                       ///< this = |this|
  Tensor& sqrt_();                                      ///< this = sqrt(this)
  Tensor& rsqrt_();                                     ///< this = 1 / sqrt(this)
  Tensor& exp_();                                       ///< this = e^this
  Tensor& log_();                                       ///< this = ln(this)
  Tensor& log1p_();                                     ///< this = ln(1 + this)
  Tensor& expm1_();                                     ///< this = e^this - 1
  Tensor& erf_();                                       ///< this = erf(this)
  Tensor& relu_();                                      ///< this = max(this, 0)
  Tensor& sigmoid_();                                   ///< this = sigmoid(this)
  Tensor& tanh_();                                      ///< this = tanh(this)
  Tensor& square_();                                    ///< this = this * this
  Tensor& reciprocal_();                                ///< this = 1 / this
  /// this = clamp(this, min, max).
  Tensor& clamp_(std::optional<Scalar> min, std::optional<Scalar> max = std::nullopt);
  Tensor& clamp_min_(Scalar min);                          ///< this = clamp(this, min)
  Tensor& clamp_max_(Scalar max);                          ///< this = clamp(this, nullopt, max)
  Tensor& lerp_(const Tensor& end, Scalar weight);         ///< this = lerp(this, end, weight)
  Tensor& lerp_(const Tensor& end, const Tensor& weight);  ///< this = lerp(this, end, weight)
  /// this += value * t1 * t2.
  Tensor& addcmul_(const Tensor& t1, const Tensor& t2, Scalar value = 1);
  /// this += value * t1 / t2.
  Tensor& addcdiv_(const Tensor& t1, const Tensor& t2, Scalar value = 1);
  /// A copy converted to `dtype` (this tensor itself if it already has that dtype).
  Tensor to(DType dtype) const;
  /// The tensor on `device` (this tensor itself if it is already there). With `non_blocking`, a
  /// copy between pinned host memory and a GPU is only queued: the call returns at once, the
  /// GPU's later work on the result is ordered after it, but the host must synchronize before
  /// it reads a result copied to the CPU.
  Tensor to(Device device, bool non_blocking = false) const;
  /// to(Device::cpu()).
  Tensor cpu() const { return to(Device::cpu()); }
  /// to(Device::cuda(index)).
  Tensor cuda(int index = 0) const { return to(Device::cuda(index)); }
  /// A copy in pinned (page-locked) host memory (this tensor itself if it is already pinned).
  /// Needs a CUDA device, as in PyTorch: the driver is what locks the pages.
  Tensor pin_memory() const;
  /// True when the tensor's memory is pinned host memory.
  bool is_pinned() const { return storage_ && storage_->pinned(); }
  /// The single element as a double; RuntimeError unless numel() == 1 (PyTorch 2.x's text).
  double item() const;
  /// The single element converted to T; RuntimeError, as PyTorch's item<T>() raises, when T is
  /// an integer type that cannot hold it (NaN, infinity, out of range).
  template <typename T> T item() const {
    const double v = item();
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>)
      return truncate_checked<T>(v, sizeof(T) == 8 ? "int64_t" : "int");
    else return static_cast<T>(v);
  }
  /// All elements in row-major order, as doubles (Python's tolist() of a 1-D tensor).
  std::vector<double> tolist() const;
  /// Where the element at `index` lives: storage_offset() plus each index times its stride.
  /// Negative indices count from the end; IndexError when one is out of range.
  int64_t offset_of(const std::vector<int64_t>& index) const;
  /// Element at a full index, as a double: `x.at({1, 2})`.
  double at(const std::vector<int64_t>& index) const;

  // ---- arithmetic, as methods (free functions in ops.h) ------------------------------------
  Tensor pow(const Tensor& exponent) const;  ///< elementwise power
  Tensor pow(Scalar exponent) const;         ///< elementwise power
  Tensor sqrt() const;                       ///< elementwise square root
  Tensor rsqrt() const;                      ///< elementwise 1 / sqrt
  Tensor exp() const;                        ///< elementwise e^x
  Tensor log() const;                        ///< elementwise natural log
  Tensor abs() const;                        ///< elementwise |x|
  Tensor relu() const;                       ///< max(x, 0)
  Tensor sigmoid() const;                    ///< 1 / (1 + e^-x)
  Tensor tanh() const;                       ///< hyperbolic tangent
  Tensor square() const;                     ///< this * this
  /// Each element limited to [min, max] (see tiny::clamp).
  Tensor clamp(std::optional<Scalar> min, std::optional<Scalar> max = std::nullopt) const;
  Tensor sum() const;  ///< sum of all elements
  Tensor sum(const std::vector<int64_t>& dims, bool keepdim = false) const;  ///< sum over dims
  Tensor mean() const;  ///< mean of all elements
  Tensor mean(const std::vector<int64_t>& dims, bool keepdim = false) const;  ///< mean over dims
  Tensor max() const;                                                         ///< largest element
  Tensor matmul(const Tensor& other) const;  ///< matrix product (see tiny::matmul)
  Tensor triu(int64_t diagonal = 0) const;   ///< upper triangle of the last two dims
  Tensor tril(int64_t diagonal = 0) const;   ///< lower triangle of the last two dims

  // ---- autograd (autograd.h) ---------------------------------------------------------------
  /// True when gradients flow to or through this tensor.
  bool requires_grad() const;
  /// Marks a leaf as needing its gradient (only floating-point leaves can).
  Tensor& requires_grad_(bool requires_grad = true);
  /// The accumulated gradient of a leaf (undefined until a backward pass reaches it). A tensor
  /// computed by recorded ops has one only after retain_grad(); asked without it, it warns as
  /// PyTorch does (the usual mistake: reading an intermediate's .grad instead of a leaf's).
  /// Later backward passes add into this same tensor in place, as PyTorch's do, so a handle
  /// taken now sees their sums.
  Tensor grad() const;
  /// Has backward passes store this computed tensor's gradient in its .grad too, adding up over
  /// passes like a leaf's (torch.Tensor.retain_grad). Nothing to do for a leaf; RuntimeError for
  /// a tensor that does not require grad. The duty follows the tensor through in-place writes.
  void retain_grad() const;
  /// True after retain_grad() on a computed tensor (false for leaves, as in PyTorch).
  bool retains_grad() const;
  /// Replaces the stored gradient (an undefined tensor clears it); later backward passes add
  /// into the tensor given. RuntimeError, with PyTorch's texts, for a gradient of another dtype
  /// or size, or for the tensor itself.
  void set_grad(const Tensor& grad) const;
  /// Calls `hook` each time a backward pass has added a gradient into this leaf's .grad, with
  /// that accumulated gradient, hooks in the order registered: PyTorch's
  /// register_post_accumulate_grad_hook, the moment data parallelism starts sending a gradient.
  /// (PyTorch's hook receives the parameter; this one receives its .grad, since a hook that
  /// held the parameter would keep it alive for ever.) RuntimeError, with PyTorch's words, on a
  /// tensor that does not require grad or is not a leaf.
  void register_post_accumulate_grad_hook(std::function<void(const Tensor& grad)> hook) const;
  /// The node that computed this tensor, or null for a leaf. For a view whose memory has been
  /// written in place since its node was recorded, a new node that takes the gradient to the
  /// base's current history (AsStridedBackward0, as in PyTorch).
  std::shared_ptr<Node> grad_fn() const;
  /// True for a view of a floating tensor (PyTorch's `_base is not None`).
  bool is_view() const;
  /// True for tensors that no recorded op produced.
  bool is_leaf() const { return grad_fn() == nullptr; }
  /// tiny::backward(*this): the gradient of this one-element tensor with respect to the leaves.
  void backward() const;
  /// tiny::backward(*this, gradient, retain_graph).
  void backward(const Tensor& gradient, bool retain_graph = false) const;
  /// The same memory as a new leaf outside the graph (requires_grad false).
  Tensor detach() const;
  /// The shared autograd state (null until something needs it); for the library's internals.
  const std::shared_ptr<AutogradMeta>& autograd_meta() const { return autograd_; }
  /// Creates the autograd state if missing and returns it; for the library's internals.
  AutogradMeta& ensure_autograd_meta() const;
  /// True for a view made with grad mode off of a tensor that needs no gradient. Such a view
  /// keeps no autograd state, only this mark, so that a write into it with grad mode on can be
  /// refused as PyTorch refuses it; for the library's internals.
  bool made_without_grad() const { return made_without_grad_; }
  /// Sets that mark; for the library's internals (views).
  void mark_made_without_grad() { made_without_grad_ = true; }

  /// PyTorch's printed form: `tensor([[1., 2.], [3., 4.]])`.
  std::string str() const;

 private:
  // Shared by every copy of this handle, like the rest of the tensor: `Tensor b = a;` makes b
  // the same tensor, with the same .grad. (mutable: handles are const, the state is shared.)
  mutable std::shared_ptr<AutogradMeta> autograd_;
  std::shared_ptr<Storage> storage_;
  DType dtype_ = kFloat32;
  bool made_without_grad_ = false;
  Shape shape_;
  Strides strides_;
  int64_t offset_ = 0;
};

/// Prints a tensor as str() does.
std::ostream& operator<<(std::ostream& os, const Tensor& t);

/// The autograd state of a tensor, shared by all handles to it.
struct AutogradMeta {
  bool requires_grad = false;            ///< gradients flow to or through the tensor
  Tensor grad;                           ///< a leaf's accumulated gradient
  std::shared_ptr<Node> grad_fn;         ///< the node that computed it (null for leaves)
  std::weak_ptr<Node> grad_accumulator;  ///< a leaf's AccumulateGrad node, shared by all uses
  /// Set by retain_grad() on a computed tensor: its grad_fn stores the gradient it receives.
  bool retains_grad = false;
  /// This record itself, so that a node can be told where to store a retained gradient.
  std::weak_ptr<AutogradMeta> self;
  /// Run by AccumulateGrad after each accumulation (register_post_accumulate_grad_hook).
  std::vector<std::function<void(const Tensor& grad)>> post_accumulate_grad_hooks;

  // A view of a floating tensor remembers what it views, as PyTorch's `_base`, so that an
  // in-place write through the view can become part of the base's history (a CopySlices node),
  // and so that a view whose memory was written since its grad_fn was set gets a new one.
  /// The tensor this one views: the first in the chain of views that is not itself a view.
  /// Undefined for a tensor that is not a view.
  Tensor view_base;
  /// The storage's version when grad_fn was last right for this view; grad_fn() makes a new
  /// node (AsStridedBackward0) when the memory has been written since.
  uint64_t view_version = 0;
  /// True for a view made while grad mode was off: writing into it in place with grad mode on
  /// is refused, as PyTorch refuses it.
  bool view_made_without_grad = false;
};

// ---- creation ---------------------------------------------------------------------------------
/// An uninitialised tensor (its memory may hold anything).
Tensor empty(const Shape& shape, DType dtype = kFloat32, Device device = Device::cpu());
/// A tensor of zeros.
Tensor zeros(const Shape& shape, DType dtype = kFloat32, Device device = Device::cpu());
/// A tensor of ones.
Tensor ones(const Shape& shape, DType dtype = kFloat32, Device device = Device::cpu());
/// A tensor filled with `value`; its dtype is the value's (float32, int64 or bool) unless given.
Tensor full(const Shape& shape, Scalar value, std::optional<DType> dtype = std::nullopt,
            Device device = Device::cpu());
/// 0, 1, ..., up to but excluding `end`: int64 for integers, float32 for floats (torch.arange).
Tensor arange(Scalar end, std::optional<DType> dtype = std::nullopt, Device device = Device::cpu());
/// start, start + step, ... up to but excluding `end`.
Tensor arange(Scalar start, Scalar end, Scalar step = 1, std::optional<DType> dtype = std::nullopt,
              Device device = Device::cpu());
/// The n x m identity (m = n when omitted).
Tensor eye(int64_t n, int64_t m = -1, DType dtype = kFloat32, Device device = Device::cpu());
/// A 0-dimensional tensor holding a number, with the number's default dtype unless given.
Tensor scalar_tensor(Scalar s, std::optional<DType> dtype = std::nullopt,
                     Device device = Device::cpu());
/// A tensor from nested lists: float32 if any number is a float, else int64, else bool.
Tensor tensor(const NestedList& values, std::optional<DType> dtype = std::nullopt,
              Device device = Device::cpu());
/// A tensor of `shape` holding a copy of `values` (row-major).
template <typename T> Tensor from_vector(const std::vector<T>& values, const Shape& shape) {
  Tensor t = empty(shape, dtype_of<T>());
  if (static_cast<int64_t>(values.size()) != t.numel())
    throw ValueError("from_vector: " + std::to_string(values.size()) + " values for " +
                     std::to_string(t.numel()) + " elements");
  T* p = t.data<T>();
  for (size_t i = 0; i < values.size(); ++i) p[i] = values[i];
  return t;
}

// ---- shape helpers shared by views and ops ----------------------------------------------------
/// Product of the sizes (1 for an empty shape).
int64_t shape_numel(const Shape& shape);
/// Row-major strides for `shape` (a size-0 or size-1 dim gets the stride it would have).
Strides contiguous_strides(const Shape& shape);
/// Wraps a possibly negative dim into [0, ndim); IndexError with PyTorch's message otherwise.
/// A 0-dim tensor takes dim 0 and -1 where PyTorch's op does (`wrap_scalar`, as sum(0) does);
/// accessors that need a real dimension (size, stride) pass false.
int64_t wrap_dim(int64_t dim, int64_t ndim, bool wrap_scalar = true);
/// The shape two shapes broadcast to; RuntimeError with PyTorch's message if they cannot.
Shape broadcast_shapes(const Shape& a, const Shape& b);
/// Strides that read memory laid out as (old shape, old strides) with `new_shape`, or nothing
/// when no strides can (PyTorch's rule for view()).
std::optional<Strides> view_strides(const Shape& old_shape, const Strides& old_strides,
                                    const Shape& new_shape);
/// `shape` with one -1 replaced by what makes it hold `numel` elements; RuntimeError
/// ("shape '[5]' is invalid for input of size 12") when it cannot.
Shape infer_size(const Shape& shape, int64_t numel);

}  // namespace tiny
