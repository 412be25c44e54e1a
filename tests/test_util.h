// test_util.h: what the test suites share. Random shapes and layouts, independent float64
// references, and comparisons that report the worst element.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "tiny/tiny.h"

namespace tiny::testing {

// A fresh seed per test run (printed on failure via SCOPED_TRACE), so repeated runs explore new
// inputs; TINY_TEST_SEED=<n> replays one.
inline uint64_t test_seed() {
  if (const char* s = std::getenv("TINY_TEST_SEED")) return std::strtoull(s, nullptr, 10);
  static const uint64_t seed = std::random_device{}();
  return seed;
}

#define TINY_SEEDED(rng)                             \
  std::mt19937_64 rng(::tiny::testing::test_seed()); \
  SCOPED_TRACE("replay with TINY_TEST_SEED=" + std::to_string(::tiny::testing::test_seed()))

// The Python name of the exception PyTorch would raise for `e` (the library names its
// exceptions after them); "Error" for the library's base class, "std::exception" for others.
inline std::string python_exception_name(const std::exception& e) {
  if (dynamic_cast<const AssertionError*>(&e)) return "AssertionError";
  if (dynamic_cast<const NotImplementedError*>(&e)) return "NotImplementedError";
  if (dynamic_cast<const CheckpointError*>(&e)) return "CheckpointError";
  if (dynamic_cast<const EinopsError*>(&e)) return "EinopsError";
  if (dynamic_cast<const IndexError*>(&e)) return "IndexError";
  if (dynamic_cast<const KeyError*>(&e)) return "KeyError";
  if (dynamic_cast<const ValueError*>(&e)) return "ValueError";
  if (dynamic_cast<const TypeError*>(&e)) return "TypeError";
  if (dynamic_cast<const ZeroDivisionError*>(&e)) return "ZeroDivisionError";
  if (dynamic_cast<const RuntimeError*>(&e)) return "RuntimeError";
  if (dynamic_cast<const Error*>(&e)) return "Error";
  return "std::exception";
}

// `text` with the names inside each "{'a', 'b'}" sorted: einops prints a set of names in
// Python's hash order, the library in a fixed one.
inline std::string sorted_sets(std::string text) {
  for (size_t open = text.find("{'"); open != std::string::npos; open = text.find("{'", open + 1)) {
    const size_t close = text.find("'}", open);
    if (close == std::string::npos) break;
    std::vector<std::string> names;
    std::string name;
    for (char c : text.substr(open + 1, close - open)) {
      if (c == ',') names.push_back(name), name.clear();
      else if (c != ' ') name += c;
    }
    names.push_back(name);
    std::sort(names.begin(), names.end());
    std::string joined;
    for (size_t i = 0; i < names.size(); ++i) joined += (i ? ", " : "") + names[i];
    text.replace(open + 1, close - open, joined);
  }
  return text;
}

inline int64_t uniform_int(std::mt19937_64& rng, int64_t lo, int64_t hi) {
  return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
}

inline Shape random_shape(std::mt19937_64& rng, int max_dims = 4, int64_t max_size = 5) {
  Shape s(static_cast<size_t>(uniform_int(rng, 0, max_dims)));
  for (auto& d : s) d = uniform_int(rng, 1, max_size);
  return s;
}

// Random values in [-2, 2] (positive in [0.1, 3] when asked), as a float64 tensor.
inline Tensor random_values(std::mt19937_64& rng, const Shape& shape, bool positive = false) {
  Tensor t = empty(shape, kFloat64);
  double* p = t.data<double>();
  std::uniform_real_distribution<double> u(positive ? 0.1 : -2.0, positive ? 3.0 : 2.0);
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = u(rng);
  return t;
}

// The same values as `t`, in `dtype`, laid out in one of three ways chosen at random:
// contiguous, permuted memory (the tensor is a permute of a contiguous one), or every other
// element of a larger buffer (a strided slice).
inline Tensor random_layout(std::mt19937_64& rng, const Tensor& t, DType dtype) {
  const int kind = static_cast<int>(uniform_int(rng, 0, 2));
  if (kind == 0 || t.dim() == 0) return t.to(dtype).contiguous().clone();
  if (kind == 1) {
    std::vector<int64_t> order(t.dim());
    for (int64_t i = 0; i < t.dim(); ++i) order[i] = i;
    std::shuffle(order.begin(), order.end(), rng);
    std::vector<int64_t> inverse(t.dim());
    for (int64_t i = 0; i < t.dim(); ++i) inverse[order[i]] = i;
    Tensor stored = t.permute(order).to(dtype).contiguous().clone();  // memory in permuted order
    return stored.permute(inverse);
  }
  Shape big = t.shape();
  for (auto& s : big) s *= 2;
  Tensor buffer = zeros(big, dtype);
  Tensor view = buffer;
  for (int64_t d = 0; d < t.dim(); ++d) view = view.slice(d, 1, std::nullopt, 2);
  view.copy_(t);
  return view;
}

// Every multi-index of `shape`, row-major.
inline std::vector<std::vector<int64_t>> all_indices(const Shape& shape) {
  const int64_t n = shape_numel(shape);
  std::vector<std::vector<int64_t>> out(static_cast<size_t>(n));
  std::vector<int64_t> idx(shape.size(), 0);
  for (int64_t k = 0; k < n; ++k) {
    out[static_cast<size_t>(k)] = idx;
    for (size_t d = shape.size(); d-- > 0;) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

// The index of `t` that an output index reads when `t` is broadcast to the output's shape.
inline std::vector<int64_t> broadcast_index(const Tensor& t, const std::vector<int64_t>& out_idx) {
  std::vector<int64_t> idx(t.dim());
  const size_t lead = out_idx.size() - static_cast<size_t>(t.dim());
  for (int64_t d = 0; d < t.dim(); ++d) idx[d] = t.size(d) == 1 ? 0 : out_idx[lead + d];
  return idx;
}

// Compares `actual` with `expected` (both read through at()): shapes equal, and every element
// within atol + rtol * |expected|. On failure names the worst element.
inline ::testing::AssertionResult close(const Tensor& actual, const Tensor& expected, double atol,
                                        double rtol) {
  if (actual.shape() != expected.shape())
    return ::testing::AssertionFailure() << "shape " << format_tuple(actual.shape())
                                         << " vs expected " << format_tuple(expected.shape());
  const Tensor a = actual.to(kFloat64).contiguous().cpu(),
               e = expected.to(kFloat64).contiguous().cpu();
  const double* pa = a.data<double>();
  const double* pe = e.data<double>();
  double worst = -1;
  int64_t where = -1;
  for (int64_t i = 0; i < a.numel(); ++i) {
    const bool both_nan = std::isnan(pa[i]) && std::isnan(pe[i]);
    if (both_nan || pa[i] == pe[i]) continue;
    const double excess = std::fabs(pa[i] - pe[i]) - (atol + rtol * std::fabs(pe[i]));
    if (!(excess <= 0) && (where < 0 || !(excess <= worst))) {
      worst = std::isnan(excess) ? INFINITY : excess;
      where = i;
    }
  }
  if (where < 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "element " << where << " (row-major) is " << repr(pa[where]) << ", reference "
         << repr(pe[where]) << " (atol " << atol << ", rtol " << rtol << ")";
}

// The tolerance of a dtype for one rounding of a value near 1: half its machine epsilon.
inline double eps_of(DType dt) {
  switch (dt) {
    case DType::Float64: return 2.220446049250313e-16;
    case DType::Float32: return 1.1920928955078125e-07;
    case DType::Float16: return 0.0009765625;
    case DType::BFloat16: return 0.0078125;
    default: return 0;
  }
}

// Expects `fn` to throw E with a message containing `text`.
template <typename E, typename F>
::testing::AssertionResult throws_with(F&& fn, const std::string& text) {
  try {
    fn();
  } catch (const E& e) {
    if (std::string(e.what()).find(text) != std::string::npos) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure()
           << "message was: " << e.what() << "\nexpected to contain: " << text;
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "threw a different type: " << e.what();
  }
  return ::testing::AssertionFailure() << "did not throw";
}

// A fresh folder under the system's temporary directory, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "tiny_test_XXXXXX").string();
    if (!::mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// The bytes of a tensor's elements in row-major order: equal bytes mean equal values, -0.0 and
// every bit of a float16 included.
inline std::string element_bytes(const Tensor& t) {
  const Tensor c = t.cpu().contiguous();
  return std::string(static_cast<const char*>(c.data_ptr()), c.nbytes());
}

// A file's bytes, and a file made of `bytes`.
inline std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}
inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace tiny::testing
