/// @file dim_vector.h
/// @brief DimVector: a list of int64 that keeps up to six of them inside itself, for shapes and
/// strides.
///
/// A tensor op on small tensors makes and copies shapes and strides several times: the result's
/// shape, its strides, the broadcast strides of each input, a view's new layout. With
/// std::vector each of those is a trip to malloc and free, which on a step of a small model
/// costs more than the arithmetic. A DimVector holds up to kInline numbers in the object itself
/// and goes to the heap only for tensors of more dimensions, as PyTorch's at::DimVector (a
/// SmallVector of five) does. It has the parts of std::vector's interface that shape code uses,
/// and converts to and from std::vector<int64_t> in both directions.
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
#include <vector>

namespace tiny {

class DimVector {
 public:
  using value_type = int64_t;
  using size_type = size_t;
  using difference_type = std::ptrdiff_t;
  using reference = int64_t&;
  using const_reference = const int64_t&;
  using pointer = int64_t*;
  using const_pointer = const int64_t*;
  using iterator = int64_t*;
  using const_iterator = const int64_t*;
  using reverse_iterator = std::reverse_iterator<iterator>;
  using const_reverse_iterator = std::reverse_iterator<const_iterator>;

  /// How many numbers fit without a heap block: enough for every tensor the chapters make.
  static constexpr size_t kInline = 6;

  DimVector() noexcept = default;
  explicit DimVector(size_t n, int64_t value = 0) { assign(n, value); }
  DimVector(std::initializer_list<int64_t> values) { assign(values.begin(), values.end()); }
  template <std::input_iterator It> DimVector(It first, It last) { assign(first, last); }
  // Implicit both ways, so that code written for std::vector<int64_t> keeps working.
  DimVector(const std::vector<int64_t>& values) { assign(values.begin(), values.end()); }
  operator std::vector<int64_t>() const { return std::vector<int64_t>(begin(), end()); }

  DimVector(const DimVector& other) { assign(other.begin(), other.end()); }
  DimVector(DimVector&& other) noexcept { take(other); }
  DimVector& operator=(const DimVector& other) {
    if (this != &other) assign(other.begin(), other.end());
    return *this;
  }
  DimVector& operator=(DimVector&& other) noexcept {
    if (this != &other) {
      free_heap();
      take(other);
    }
    return *this;
  }
  DimVector& operator=(std::initializer_list<int64_t> values) {
    assign(values.begin(), values.end());
    return *this;
  }
  ~DimVector() { free_heap(); }

  // ---- size and elements ----
  size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  size_t capacity() const noexcept { return capacity_; }
  int64_t* data() noexcept { return data_; }
  const int64_t* data() const noexcept { return data_; }
  int64_t& operator[](size_t i) noexcept { return data_[i]; }
  const int64_t& operator[](size_t i) const noexcept { return data_[i]; }
  int64_t& front() noexcept { return data_[0]; }
  const int64_t& front() const noexcept { return data_[0]; }
  int64_t& back() noexcept { return data_[size_ - 1]; }
  const int64_t& back() const noexcept { return data_[size_ - 1]; }

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

  // ---- changing it ----
  void reserve(size_t n) {
    if (n <= capacity_) return;
    if (n > max_size()) throw std::length_error("DimVector::reserve");
    // At least double, so that a run of push_backs costs amortised constant time.
    const size_t grown = std::max(n, 2 * capacity_);
    auto* block = static_cast<int64_t*>(::operator new(grown * sizeof(int64_t)));
    if (size_ > 0) std::memcpy(block, data_, size_ * sizeof(int64_t));
    free_heap();
    data_ = block;
    capacity_ = grown;
  }
  void clear() noexcept { size_ = 0; }
  void resize(size_t n, int64_t value = 0) {
    reserve(n);
    for (size_t i = size_; i < n; ++i) data_[i] = value;
    size_ = n;
  }
  void assign(size_t n, int64_t value) {
    size_ = 0;
    resize(n, value);
  }
  template <std::input_iterator It> void assign(It first, It last) {
    size_ = 0;
    if constexpr (std::forward_iterator<It>) {
      // The source may be this vector's own elements (v.assign(v.begin() + 1, v.end())): they
      // move towards the front, which std::copy does correctly for these trivial numbers.
      const auto n = static_cast<size_t>(std::distance(first, last));
      if (n > capacity_) {
        DimVector copy;
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
  void push_back(int64_t value) {
    if (size_ == capacity_) {
      const int64_t keep = value;  // value may be one of this vector's own elements
      reserve(size_ + 1);
      data_[size_++] = keep;
      return;
    }
    data_[size_++] = value;
  }
  int64_t& emplace_back(int64_t value) {
    push_back(value);
    return back();
  }
  void pop_back() noexcept { --size_; }

  iterator insert(const_iterator pos, int64_t value) { return insert(pos, size_t{1}, value); }
  iterator insert(const_iterator pos, size_t n, int64_t value) {
    const size_t at = index_of(pos);
    const int64_t keep = value;
    open_gap(at, n);
    std::fill(data_ + at, data_ + at + n, keep);
    return data_ + at;
  }
  iterator insert(const_iterator pos, std::initializer_list<int64_t> values) {
    return insert(pos, values.begin(), values.end());
  }
  template <std::input_iterator It> iterator insert(const_iterator pos, It first, It last) {
    // Copied out first: the range may be part of this vector, which open_gap moves.
    const DimVector values(first, last);
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
  void swap(DimVector& other) noexcept {
    DimVector tmp(std::move(other));
    other = std::move(*this);
    *this = std::move(tmp);
  }

  static constexpr size_t max_size() noexcept { return size_t{1} << 40; }

  friend bool operator==(const DimVector& a, const DimVector& b) noexcept {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }
  friend std::strong_ordering operator<=>(const DimVector& a, const DimVector& b) noexcept {
    return std::lexicographical_compare_three_way(a.begin(), a.end(), b.begin(), b.end());
  }
  friend bool operator==(const DimVector& a, const std::vector<int64_t>& b) noexcept {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }

 private:
  bool on_heap() const noexcept { return data_ != inline_; }
  void free_heap() noexcept {
    if (on_heap()) ::operator delete(data_);
    data_ = inline_;
    capacity_ = kInline;
  }
  // Takes other's numbers, leaving it empty; this vector holds no heap block.
  void take(DimVector& other) noexcept {
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

  int64_t* data_ = inline_;
  size_t size_ = 0;
  size_t capacity_ = kInline;
  int64_t inline_[kInline];
};

/// Prints [a, b, c], as std::vector's elements are printed in tests.
inline std::ostream& operator<<(std::ostream& os, const DimVector& v) {
  os << '[';
  for (size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
  return os << ']';
}

}  // namespace tiny
