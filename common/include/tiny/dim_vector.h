/// @file dim_vector.h
/// @brief DimVector: a list of int64 that keeps up to six of them inside itself, for shapes and
/// strides; SmallVector, the template it is made from.
///
/// A tensor op on small tensors makes and copies shapes and strides several times: the result's
/// shape, its strides, the broadcast strides of each input, a view's new layout. With
/// std::vector each of those is a trip to malloc and free, which on a step of a small model
/// costs more than the arithmetic. A DimVector holds up to six numbers in the object itself
/// and goes to the heap only for tensors of more dimensions, as PyTorch's at::DimVector (a
/// SmallVector of five) does. It has the parts of std::vector's interface that shape code uses,
/// and converts to and from std::vector<int64_t> in both directions. The kernels' loop
/// descriptions (common/src/internal.h) keep their per-dimension steps in a SmallVector too.
#pragma once
#include <algorithm>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <iterator>
#include <new>
#include <ostream>
#include <stdexcept>
#include <type_traits>
#include <vector>

namespace tiny {

/// A vector of trivially copyable T that holds up to `Inline` elements in the object and moves
/// to one heap block beyond that. Its members do what std::vector's of the same name do, and
/// it converts to and from std::vector<T>.
template <typename T, size_t Inline> class SmallVector {
  static_assert(std::is_trivially_copyable_v<T>, "SmallVector moves its elements with memcpy");

 public:
  /// @name Member types
  /// std::vector's member types, so that generic code and the standard algorithms accept it.
  ///@{

  /// One of std::vector's member types.
  using value_type = T;
  using size_type = size_t;
  using difference_type = std::ptrdiff_t;
  using reference = T&;
  using const_reference = const T&;
  using pointer = T*;
  using const_pointer = const T*;
  using iterator = T*;
  using const_iterator = const T*;
  using reverse_iterator = std::reverse_iterator<iterator>;
  using const_reverse_iterator = std::reverse_iterator<const_iterator>;
  ///@}

  /// How many elements fit without a heap block.
  static constexpr size_t kInline = Inline;

  /// @name Construction and assignment
  /// As std::vector's: empty, n copies of a value, a brace list, an iterator range, another
  /// vector (a std::vector included, implicitly); and back to a std::vector, implicitly, so
  /// that code written for std::vector<T> keeps working.
  ///@{

  /// Constructs, assigns or converts as std::vector does.
  SmallVector() noexcept = default;
  explicit SmallVector(size_t n, T value = T()) { assign(n, value); }
  SmallVector(std::initializer_list<T> values) { assign(values.begin(), values.end()); }
  template <std::input_iterator It> SmallVector(It first, It last) { assign(first, last); }
  SmallVector(const std::vector<T>& values) { assign(values.begin(), values.end()); }
  operator std::vector<T>() const { return std::vector<T>(begin(), end()); }

  SmallVector(const SmallVector& other) { assign(other.begin(), other.end()); }
  SmallVector(SmallVector&& other) noexcept { take(other); }
  SmallVector& operator=(const SmallVector& other) {
    if (this != &other) assign(other.begin(), other.end());
    return *this;
  }
  SmallVector& operator=(SmallVector&& other) noexcept {
    if (this != &other) {
      free_heap();
      take(other);
    }
    return *this;
  }
  SmallVector& operator=(std::initializer_list<T> values) {
    assign(values.begin(), values.end());
    return *this;
  }
  ~SmallVector() { free_heap(); }
  ///@}

  /// @name Size and elements
  /// As std::vector's; nothing is bounds-checked, as with std::vector's operator[].
  ///@{

  /// Size or element access, as std::vector's.
  size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  size_t capacity() const noexcept { return capacity_; }
  T* data() noexcept { return data_; }
  const T* data() const noexcept { return data_; }
  T& operator[](size_t i) noexcept { return data_[i]; }
  const T& operator[](size_t i) const noexcept { return data_[i]; }
  T& front() noexcept { return data_[0]; }
  const T& front() const noexcept { return data_[0]; }
  T& back() noexcept { return data_[size_ - 1]; }
  const T& back() const noexcept { return data_[size_ - 1]; }

  iterator begin() noexcept { return data_; }
  iterator end() noexcept { return data_ + size_; }
  const_iterator begin() const noexcept { return data_; }
  const_iterator end() const noexcept { return data_ + size_; }
  const_iterator cbegin() const noexcept { return data_; }
  const_iterator cend() const noexcept { return data_ + size_; }
  reverse_iterator rbegin() noexcept { return reverse_iterator(end()); }
  reverse_iterator rend() noexcept { return reverse_iterator(begin()); }
  const_reverse_iterator rbegin() const noexcept { return const_reverse_iterator(end()); }
  const_reverse_iterator rend() const noexcept { return const_reverse_iterator(begin()); }
  ///@}

  /// @name Changing it
  /// As std::vector's, including when the argument is one of this vector's own elements or a
  /// range of them; reserve beyond max_size() throws std::length_error.
  ///@{

  /// A change, as std::vector's.
  void reserve(size_t n) {
    if (n <= capacity_) return;
    if (n > max_size()) throw std::length_error("SmallVector::reserve");
    // At least double, so that a run of push_backs costs amortised constant time.
    const size_t grown = std::max(n, 2 * capacity_);
    auto* block = static_cast<T*>(::operator new(grown * sizeof(T)));
    if (size_ > 0) std::memcpy(block, data_, size_ * sizeof(T));
    free_heap();
    data_ = block;
    capacity_ = grown;
  }
  void clear() noexcept { size_ = 0; }
  void resize(size_t n, T value = T()) {
    reserve(n);
    for (size_t i = size_; i < n; ++i) data_[i] = value;
    size_ = n;
  }
  void assign(size_t n, T value) {
    size_ = 0;
    resize(n, value);
  }
  template <std::input_iterator It> void assign(It first, It last) {
    size_ = 0;
    if constexpr (std::forward_iterator<It>) {
      // The source may be this vector's own elements (v.assign(v.begin() + 1, v.end())): they
      // move towards the front, which std::copy does correctly for trivially copyable elements.
      const auto n = static_cast<size_t>(std::distance(first, last));
      if (n > capacity_) {
        SmallVector copy;
        copy.reserve(n);
        for (; first != last; ++first) copy.data_[copy.size_++] = *first;
        *this = std::move(copy);
        return;
      }
      std::copy(first, last, data_);
      size_ = n;
    } else {
      for (; first != last; ++first) push_back(*first);
    }
  }
  void push_back(T value) {
    if (size_ == capacity_) {
      const T keep = value;  // value may be one of this vector's own elements
      reserve(size_ + 1);
      data_[size_++] = keep;
      return;
    }
    data_[size_++] = value;
  }
  T& emplace_back(T value) {
    push_back(value);
    return back();
  }
  void pop_back() noexcept { --size_; }

  iterator insert(const_iterator pos, T value) { return insert(pos, size_t{1}, value); }
  iterator insert(const_iterator pos, size_t n, T value) {
    const size_t at = index_of(pos);
    const T keep = value;
    open_gap(at, n);
    std::fill(data_ + at, data_ + at + n, keep);
    return data_ + at;
  }
  iterator insert(const_iterator pos, std::initializer_list<T> values) {
    return insert(pos, values.begin(), values.end());
  }
  template <std::input_iterator It> iterator insert(const_iterator pos, It first, It last) {
    // Copied out first: the range may be part of this vector, which open_gap moves.
    const SmallVector values(first, last);
    const size_t at = index_of(pos);
    open_gap(at, values.size());
    std::copy(values.begin(), values.end(), data_ + at);
    return data_ + at;
  }
  iterator erase(const_iterator pos) { return erase(pos, pos + 1); }
  iterator erase(const_iterator first, const_iterator last) {
    const size_t from = index_of(first), to = index_of(last);
    std::copy(data_ + to, data_ + size_, data_ + from);
    size_ -= to - from;
    return data_ + from;
  }
  void swap(SmallVector& other) noexcept {
    SmallVector tmp(std::move(other));
    other = std::move(*this);
    *this = std::move(tmp);
  }

  static constexpr size_t max_size() noexcept { return size_t{1} << 40; }
  ///@}

  /// @name Comparisons
  /// Element by element, and lexicographic for the ordering, as std::vector's.
  ///@{

  /// Compares as std::vector does.
  friend bool operator==(const SmallVector& a, const SmallVector& b) noexcept {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }
  friend std::strong_ordering operator<=>(const SmallVector& a, const SmallVector& b) noexcept {
    return std::lexicographical_compare_three_way(a.begin(), a.end(), b.begin(), b.end());
  }
  friend bool operator==(const SmallVector& a, const std::vector<T>& b) noexcept {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }
  ///@}

 private:
  bool on_heap() const noexcept { return data_ != inline_; }
  void free_heap() noexcept {
    if (on_heap()) ::operator delete(data_);
    data_ = inline_;
    capacity_ = kInline;
  }
  // Takes other's elements, leaving it empty; this vector holds no heap block.
  void take(SmallVector& other) noexcept {
    if (other.on_heap()) {
      data_ = other.data_;
      capacity_ = other.capacity_;
      other.data_ = other.inline_;
      other.capacity_ = kInline;
    } else {
      std::copy(other.inline_, other.inline_ + other.size_, inline_);
    }
    size_ = other.size_;
    other.size_ = 0;
  }
  size_t index_of(const_iterator pos) const noexcept { return static_cast<size_t>(pos - data_); }
  // Moves elements [at, size) up by n, leaving [at, at + n) to be written.
  void open_gap(size_t at, size_t n) {
    reserve(size_ + n);
    std::copy_backward(data_ + at, data_ + size_, data_ + size_ + n);
    size_ += n;
  }

  T* data_ = inline_;
  size_t size_ = 0;
  size_t capacity_ = kInline;
  T inline_[kInline];
};

/// Shapes and strides: up to six dimensions without a heap block.
using DimVector = SmallVector<int64_t, 6>;

/// Prints [a, b, c], as std::vector's elements are printed in tests.
inline std::ostream& operator<<(std::ostream& os, const DimVector& v) {
  os << '[';
  for (size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
  return os << ']';
}

}  // namespace tiny
