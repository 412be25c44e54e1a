// fuzz_views: shape, stride, view and index arguments. A small float32 tensor whose storage
// element i holds the value i goes through a few view ops with fuzzed arguments. Beside it a
// reference keeps, for each element of the result in row-major order, which source element the
// op's definition (PyTorch's) says it is, computed from indices alone. After every op the
// library accepts, the reference must accept it too, the shapes must agree, every element must
// lie inside the storage and hold the value the reference names, and at() must read it.
// One of the ops is a hand-made layout on the tensor's storage (the public Tensor(storage,
// dtype, shape, strides, offset) constructor, PyTorch's as_strided), which must be accepted
// exactly when PyTorch accepts it, and whose copies (clone, contiguous) must hold its elements.
#include <algorithm>
#include <functional>

#include "fuzz_util.h"
#include "tiny/tensor.h"

namespace {

using tiny::Shape;

struct Ref {
  Shape shape;
  std::vector<int64_t> source;  // per element, row-major: the source element it is
  bool valid = true;
};

// The element count, INT64_MAX when it overflows (a shape with a 0 has none, whatever the rest).
int64_t numel_of(const Shape& s) {
  for (int64_t d : s)
    if (d == 0) return 0;
  int64_t n = 1;
  for (int64_t d : s)
    if (__builtin_mul_overflow(n, d, &n)) return INT64_MAX;
  return n;
}

// Calls f(index) for every index of `shape` in row-major order.
void for_each_index(const Shape& shape, const std::function<void(const Shape&)>& f) {
  if (numel_of(shape) == 0) return;
  Shape i(shape.size(), 0);
  while (true) {
    f(i);
    int d = static_cast<int>(shape.size()) - 1;
    while (d >= 0 && ++i[d] == shape[d]) i[d--] = 0;
    if (d < 0) return;
  }
}

int64_t flat(const Shape& shape, const Shape& index) {
  int64_t k = 0;
  for (size_t d = 0; d < shape.size(); ++d) k = k * shape[d] + index[d];
  return k;
}

// A dim argument wrapped as PyTorch wraps it (a 0-dim tensor takes dims as if it had one).
bool wrap(int64_t& dim, int64_t rank) {
  const int64_t r = std::max<int64_t>(rank, 1);
  if (dim < -r || dim >= r) return false;
  if (dim < 0) dim += r;
  return true;
}

// The reference result of an op given as a new shape and where each new index comes from.
Ref mapped(const Ref& in, const Shape& shape, const std::function<Shape(const Shape&)>& from) {
  Ref out;
  out.shape = shape;
  if (numel_of(shape) > (1 << 16)) return out;  // too many to list; shape checked only
  for_each_index(shape, [&](const Shape& i) {
    out.source.push_back(in.source[flat(in.shape, from(i))]);
  });
  return out;
}

Ref invalid() {
  Ref r;
  r.valid = false;
  return r;
}

// Python's slice clamping: the indices start, start + step, ... below stop.
Ref ref_slice(const Ref& in, int64_t dim, std::optional<int64_t> start,
              std::optional<int64_t> stop, int64_t step) {
  if (in.shape.empty() || !wrap(dim, int64_t(in.shape.size())) || step <= 0) return invalid();
  const int64_t size = in.shape[dim];
  auto clamp = [&](std::optional<int64_t> v, int64_t dflt) {
    if (!v) return dflt;
    int64_t x = *v;
    if (x < 0) x = x < -size ? 0 : x + size;
    return std::min(x, size);
  };
  const int64_t b = clamp(start, 0), e = clamp(stop, size);
  const int64_t n = e > b ? (e - b - 1) / step + 1 : 0;
  Shape shape = in.shape;
  shape[dim] = n;
  return mapped(in, shape, [&](Shape i) {
    i[dim] = b + i[dim] * step;
    return i;
  });
}

Ref ref_view(const Ref& in, Shape shape) {
  int64_t known = 1, infer = -1;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == -1) {
      if (infer >= 0) return invalid();
      infer = int64_t(d);
    } else if (shape[d] < 0) {
      return invalid();
    } else if (__builtin_mul_overflow(known, shape[d], &known)) {
      return invalid();
    }
  }
  const int64_t n = numel_of(in.shape);
  if (infer >= 0) {
    if (known == 0 || n % known != 0) return invalid();
    shape[infer] = n / known;
  } else if (known != n) {
    return invalid();
  }
  Ref out = in;
  out.shape = shape;
  return out;
}

Ref ref_expand(const Ref& in, const Shape& sizes) {
  if (sizes.size() < in.shape.size()) return invalid();
  const size_t lead = sizes.size() - in.shape.size();
  Shape shape(sizes.size());
  int64_t total = 1;
  for (size_t d = 0; d < sizes.size(); ++d) {
    const int64_t s = sizes[d];
    if (d < lead) {
      if (s < 0) return invalid();
      shape[d] = s;
    } else {
      const int64_t old = in.shape[d - lead];
      if (s == -1) shape[d] = old;
      else if (s < 0 || (old != 1 && s != old)) return invalid();
      else shape[d] = s;
    }
    if (__builtin_mul_overflow(total, shape[d], &total)) return invalid();
  }
  return mapped(in, shape, [&](const Shape& i) {
    Shape j(in.shape.size());
    for (size_t d = 0; d < j.size(); ++d) j[d] = in.shape[d] == 1 ? 0 : i[d + lead];
    return j;
  });
}

// The reference of a hand-made layout on `base`'s storage, by PyTorch's rule: as many strides
// as sizes, no negative stride or offset, an element count int64 holds (a 0 before any overflow
// makes it 0), and, unless there is no element, the farthest element inside the storage. (tiny
// also refuses a negative size where PyTorch lets one through beside a 0.) Each element is the
// storage element its offset names, which holds the source element's number.
Ref ref_strided(const tiny::Tensor& base, const Shape& shape, const tiny::Strides& strides,
                int64_t offset) {
  if (shape.size() != strides.size()) return invalid();
  int64_t n = 1;
  for (int64_t d : shape)
    if (__builtin_mul_overflow(n, d, &n)) return invalid();
  if (offset < 0) return invalid();
  for (size_t d = 0; d < shape.size(); ++d)
    if (shape[d] < 0 || strides[d] < 0) return invalid();
  Ref r;
  r.shape = shape;
  if (n == 0) return r;
  const int64_t elements = static_cast<int64_t>(base.storage()->nbytes() / sizeof(float));
  __int128 far = offset;  // every term is at most 2^126 and the sum stops at the storage's end
  for (size_t d = 0; d < shape.size() && far < elements; ++d)
    far += static_cast<__int128>(shape[d] - 1) * strides[d];
  if (far >= elements) return invalid();
  if (n > (1 << 16)) return r;  // too many to list; shape and bounds checked only
  const float* data = static_cast<const float*>(base.storage()->data());
  for_each_index(shape, [&](const Shape& i) {
    int64_t o = offset;
    for (size_t d = 0; d < i.size(); ++d) o += i[d] * strides[d];
    r.source.push_back(static_cast<int64_t>(data[o]));
  });
  return r;
}

// Checks a result against its reference: shape, bounds, values, at().
void check(const tiny::Tensor& t, const Ref& ref, const std::string& what) {
  fuzz::require(ref.valid, what + ": the library accepted arguments PyTorch refuses");
  fuzz::require(t.shape() == ref.shape, what + ": shape differs from the reference");
  fuzz::require(t.strides().size() == t.shape().size(), what + ": strides and shape disagree");
  const int64_t elements = static_cast<int64_t>(t.storage()->nbytes() / sizeof(float));
  const float* data = static_cast<const float*>(t.storage()->data());
  int64_t lowest = t.storage_offset(), highest = t.storage_offset();
  for (size_t d = 0; d < t.shape().size(); ++d)
    if (t.shape()[d] == 0) return;  // no elements: nothing to read
  for (size_t d = 0; d < t.shape().size(); ++d) {
    // Checked: a view whose reach overflows int64 certainly leaves its storage.
    int64_t reach = 0;
    const bool overflow = __builtin_mul_overflow(t.shape()[d] - 1, t.strides()[d], &reach) ||
                          __builtin_add_overflow(reach < 0 ? lowest : highest, reach,
                                                 reach < 0 ? &lowest : &highest);
    fuzz::require(!overflow, what + ": the view's reach overflows int64 (size " +
                                 std::to_string(t.shape()[d]) + ", stride " +
                                 std::to_string(t.strides()[d]) + ")");
  }
  fuzz::require(lowest >= 0 && highest < elements, what + ": the view reaches outside its storage");
  if (ref.source.empty() && numel_of(ref.shape) != 0) return;  // too large to compare
  int64_t k = 0;
  for_each_index(t.shape(), [&](const Shape& i) {
    int64_t offset = t.storage_offset();
    for (size_t d = 0; d < i.size(); ++d) offset += i[d] * t.strides()[d];
    const float want = static_cast<float>(ref.source[k++]);
    fuzz::require(data[offset] == want, what + ": an element differs from the reference");
    fuzz::require(t.at(i) == double(want), what + ": at() differs from the element");
  });
}

Shape shape_argument(FuzzedDataProvider& in) {
  Shape s(in.ConsumeIntegralInRange<int>(0, 5));
  for (int64_t& d : s) d = fuzz::argument(in);
  return s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
  FuzzedDataProvider in(bytes, size);
  Ref ref;
  ref.shape.resize(in.ConsumeIntegralInRange<int>(0, 4));
  for (int64_t& d : ref.shape) d = in.ConsumeIntegralInRange<int64_t>(0, 5);
  const int64_t n = numel_of(ref.shape);
  for (int64_t i = 0; i < n; ++i) ref.source.push_back(i);
  tiny::Tensor t = tiny::arange(n, tiny::kFloat32).reshape(ref.shape);
  check(t, ref, "arange");

  for (int step = 0; step < 4 && in.remaining_bytes() > 0; ++step) {
    const int rank = static_cast<int>(ref.shape.size());
    std::string name;
    Ref next;
    tiny::Tensor out;
    bool ok = false;
    switch (in.ConsumeIntegralInRange<int>(0, 12)) {
      case 0: {
        name = "transpose";
        int64_t a = fuzz::argument(in), b = fuzz::argument(in);
        ok = fuzz::accepted([&] { out = t.transpose(a, b); });
        if (!wrap(a, rank) || !wrap(b, rank)) next = invalid();
        else if (rank == 0) next = ref;
        else next = mapped(ref, [&] { Shape s = ref.shape; std::swap(s[a], s[b]); return s; }(),
                           [&](Shape i) { std::swap(i[a], i[b]); return i; });
        break;
      }
      case 1: {
        name = "permute";
        std::vector<int64_t> order(in.ConsumeIntegralInRange<int>(0, 5));
        for (int64_t& d : order) d = fuzz::argument(in);
        ok = fuzz::accepted([&] { out = t.permute(order); });
        std::vector<bool> seen(rank, false);
        bool good = int(order.size()) == rank;
        for (int64_t& d : order) {
          if (!good || d < -rank || d >= rank) { good = false; break; }
          if (d < 0) d += rank;
          good = !seen[d];
          seen[d] = true;
        }
        if (!good) { next = invalid(); break; }
        Shape s(rank);
        for (int d = 0; d < rank; ++d) s[d] = ref.shape[order[d]];
        next = mapped(ref, s, [&](const Shape& i) {
          Shape j(rank);
          for (int d = 0; d < rank; ++d) j[order[d]] = i[d];
          return j;
        });
        break;
      }
      case 2: {
        name = "select";
        int64_t dim = fuzz::argument(in), i = fuzz::argument(in);
        ok = fuzz::accepted([&] { out = t.select(dim, i); });
        if (rank == 0 || !wrap(dim, rank) || i < -ref.shape[dim] || i >= ref.shape[dim]) {
          next = invalid();
          break;
        }
        if (i < 0) i += ref.shape[dim];
        Shape s = ref.shape;
        s.erase(s.begin() + dim);
        next = mapped(ref, s, [&](Shape j) { j.insert(j.begin() + dim, i); return j; });
        break;
      }
      case 3: {
        int64_t dim = fuzz::argument(in), start = fuzz::argument(in), length = fuzz::argument(in);
        name = "narrow(" + std::to_string(dim) + ", " + std::to_string(start) + ", " +
               std::to_string(length) + ")";
        ok = fuzz::accepted([&] { out = t.narrow(dim, start, length); });
        // PyTorch wraps a start other than the size itself as it wraps a dim, where a size of
        // 0 counts as 1: narrow(0, -1, 0) of an empty dimension starts at 0.
        if (rank == 0 || !wrap(dim, rank) || length < 0 ||
            (start != ref.shape[dim] && !wrap(start, ref.shape[dim]))) {
          next = invalid();
          break;
        }
        if (length > ref.shape[dim] - start) { next = invalid(); break; }
        next = ref_slice(ref, dim, start, start + length, 1);
        break;
      }
      case 4: {
        name = "slice";
        int64_t dim = fuzz::argument(in);
        std::optional<int64_t> start, stop;
        if (in.ConsumeBool()) start = fuzz::argument(in);
        if (in.ConsumeBool()) stop = fuzz::argument(in);
        int64_t by = fuzz::argument(in);
        name += "(step " + std::to_string(by) + ")";
        ok = fuzz::accepted([&] { out = t.slice(dim, start, stop, by); });
        next = ref_slice(ref, dim, start, stop, by);
        break;
      }
      case 5: {
        name = "expand";
        Shape s = shape_argument(in);
        ok = fuzz::accepted([&] { out = t.expand(s); });
        next = ref_expand(ref, s);
        break;
      }
      case 6: {
        name = "view";
        Shape s = shape_argument(in);
        ok = fuzz::accepted([&] { out = t.view(s); });
        next = ref_view(ref, s);
        break;
      }
      case 7: {
        name = "reshape";
        Shape s = shape_argument(in);
        ok = fuzz::accepted([&] { out = t.reshape(s); });
        next = ref_view(ref, s);
        break;
      }
      case 8: {
        name = "squeeze";
        if (in.ConsumeBool()) {
          ok = fuzz::accepted([&] { out = t.squeeze(); });
          Shape s;
          for (int64_t d : ref.shape) if (d != 1) s.push_back(d);
          next = ref;
          next.shape = s;
        } else {
          int64_t dim = fuzz::argument(in);
          ok = fuzz::accepted([&] { out = t.squeeze(dim); });
          next = ref;
          if (!wrap(dim, rank)) next = invalid();
          else if (rank > 0 && ref.shape[dim] == 1) next.shape.erase(next.shape.begin() + dim);
        }
        break;
      }
      case 9: {
        name = "unsqueeze";
        int64_t dim = fuzz::argument(in);
        ok = fuzz::accepted([&] { out = t.unsqueeze(dim); });
        next = ref;
        if (dim < -(rank + 1) || dim > rank) next = invalid();
        else next.shape.insert(next.shape.begin() + (dim < 0 ? dim + rank + 1 : dim), 1);
        break;
      }
      case 10: {
        int64_t a = fuzz::argument(in), b = fuzz::argument(in);
        name = "flatten(" + std::to_string(a) + ", " + std::to_string(b) + ") of rank " +
               std::to_string(rank);
        ok = fuzz::accepted([&] { out = t.flatten(a, b); });
        next = ref;
        if (!wrap(a, rank) || !wrap(b, rank) || a > b) next = invalid();
        else if (rank == 0) next.shape = {1};
        else {
          Shape s(ref.shape.begin(), ref.shape.begin() + a);
          int64_t m = 1;
          bool overflow = false;  // possible beside a 0 elsewhere; PyTorch refuses the size
          for (int64_t d = a; d <= b; ++d) overflow |= __builtin_mul_overflow(m, ref.shape[d], &m);
          s.push_back(m);
          s.insert(s.end(), ref.shape.begin() + b + 1, ref.shape.end());
          next.shape = s;
          if (overflow) next = invalid();
        }
        break;
      }
      case 12: {
        name = "Tensor(storage, ...)";
        Shape s = shape_argument(in);
        tiny::Strides st(in.ConsumeBool() ? s.size() : in.ConsumeIntegralInRange<size_t>(0, 5));
        for (int64_t& x : st) x = fuzz::argument(in);
        const int64_t offset = fuzz::argument(in);
        ok = fuzz::accepted([&] { out = tiny::Tensor(t.storage(), tiny::kFloat32, s, st, offset); });
        next = ref_strided(t, s, st, offset);
        fuzz::require(ok || !next.valid, name + ": refused a layout PyTorch accepts");
        if (ok && next.valid && !(next.source.empty() && numel_of(s) != 0)) {
          // Copies read every element through the layout (zero and overlapping strides too).
          check(out.clone(), next, name + " then clone");
          check(out.contiguous(), next, name + " then contiguous");
        }
        break;
      }
      default: {
        name = "at";
        Shape i(in.ConsumeIntegralInRange<int>(0, 5));
        for (int64_t& d : i) d = fuzz::argument(in);
        double value = 0;
        ok = fuzz::accepted([&] { value = t.at(i); });
        bool good = int(i.size()) == rank;
        for (int d = 0; good && d < rank; ++d) {
          good = i[d] >= -ref.shape[d] && i[d] < ref.shape[d];
          if (i[d] < 0) i[d] += ref.shape[d];
        }
        if (ok) {
          fuzz::require(good, "at: an index out of range was accepted");
          fuzz::require(value == double(ref.source[flat(ref.shape, i)]), "at: wrong element");
        }
        continue;
      }
    }
    if (!ok) continue;  // refused with the library's error: a fine answer
    check(out, next, name);
    t = out;
    ref = next;
    if (ref.source.empty() && numel_of(ref.shape) != 0) break;  // too large to follow further
  }
  return 0;
}
