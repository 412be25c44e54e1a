// Views: strides and offsets of every view op, writes through views, and the view rule checked
// against an independent brute-force implementation on many random stride patterns.
#include "test_util.h"

using namespace tiny;
using namespace tiny::testing;

TEST(Views, TheDocumentsTwelveNumbers) {  // seed document 000, tensor_views.py
  Tensor x = arange(12.0).reshape({3, 4});
  EXPECT_EQ(x.strides(), (Strides{4, 1}));
  EXPECT_TRUE(x.is_contiguous());
  Tensor t = x.T();
  EXPECT_EQ(t.shape(), (Shape{4, 3}));
  EXPECT_EQ(t.strides(), (Strides{1, 4}));
  EXPECT_FALSE(t.is_contiguous());
  EXPECT_EQ(t.data_ptr(), x.data_ptr());
  EXPECT_EQ(x[1].storage_offset(), 4);
  EXPECT_EQ(x[1].strides(), (Strides{1}));
  EXPECT_EQ(x.index({Slice{}, 1}).storage_offset(), 1);
  EXPECT_EQ(x.index({Slice{}, 1}).strides(), (Strides{4}));
  t.index({0, 1}) = 100.0;
  EXPECT_EQ(x.at({1, 0}), 100.0);
  EXPECT_EQ(t.contiguous().strides(), (Strides{3, 1}));
  EXPECT_NE(t.contiguous().data_ptr(), x.data_ptr());
  EXPECT_TRUE(throws_with<RuntimeError>(
      [&] { t.view({12}); },
      "view size is not compatible with input tensor's size and stride (at least one dimension "
      "spans across two contiguous subspaces). Use .reshape(...) instead."));
  Tensor r = t.reshape({12});
  EXPECT_EQ(r.slice(0, 0, 4).tolist(), (std::vector<double>{0.0, 100.0, 8.0, 1.0}));
  EXPECT_FALSE(r.shares_storage_with(x));  // it had to copy
}

TEST(Views, TheLecturesViews) {  // seed document 004, section 3.2.2
  Tensor x = tensor({{1., 2, 3}, {4, 5, 6}});
  for (const Tensor& y : {x[0], x.index({Slice{}, 1}), x.view({3, 2}), x.transpose(1, 0)})
    EXPECT_TRUE(y.shares_storage_with(x));
  EXPECT_EQ(x.index({Slice{}, 1}).strides(), (Strides{3}));
  EXPECT_EQ(x.view({3, 2}).strides(), (Strides{2, 1}));
  EXPECT_EQ(x.transpose(1, 0).strides(), (Strides{1, 3}));
  Tensor y = x.transpose(1, 0).contiguous().view({2, 3});
  EXPECT_FALSE(y.shares_storage_with(x));
  EXPECT_TRUE(equal(y, tensor({{1., 4, 2}, {5, 3, 6}})));
  Tensor v = x.view({3, 2});
  x[0][0] = 100;
  EXPECT_EQ(v.at({0, 0}), 100.0);
  // Element (1, 2) of a 4x4 tensor is at 1 * 4 + 2 * 1 = 6 (section 3.3.2).
  Tensor m = arange(16.0).reshape({4, 4});
  EXPECT_EQ(1 * m.stride(0) + 2 * m.stride(1), 6);
  EXPECT_EQ(m.at({1, 2}), 6.0);
}

TEST(Views, SelectSliceNarrowFollowPython) {
  TINY_SEEDED(rng);
  for (int trial = 0; trial < 500; ++trial) {
    const int64_t n = uniform_int(rng, 0, 7);
    Tensor x = arange(n);
    auto opt = [&]() -> std::optional<int64_t> {
      if (uniform_int(rng, 0, 3) == 0) return std::nullopt;
      return uniform_int(rng, -9, 9);
    };
    const auto start = opt(), stop = opt();
    const int64_t step = uniform_int(rng, 1, 3);
    // Python's slice.indices(), written out: clamp, then walk.
    auto norm = [&](std::optional<int64_t> v, int64_t dflt) {
      if (!v) return dflt;
      int64_t i = *v < 0 ? *v + n : *v;
      return std::max<int64_t>(0, std::min(i, n));
    };
    std::vector<double> expected;
    for (int64_t i = norm(start, 0); i < norm(stop, n); i += step) expected.push_back(double(i));
    EXPECT_EQ(x.slice(0, start, stop, step).tolist(), expected);
  }
  Tensor x = arange(6).reshape({2, 3});
  EXPECT_EQ(x.select(1, -1).tolist(), (std::vector<double>{2, 5}));
  EXPECT_EQ(x.narrow(1, 1, 2).tolist(), (std::vector<double>{1, 2, 4, 5}));
  EXPECT_EQ(x.index({1, Slice{std::nullopt, std::nullopt, 2}}).tolist(),
            (std::vector<double>{3, 5}));
  EXPECT_TRUE(throws_with<IndexError>(
      [&] { x.select(0, 2); },
      "select(): index 2 out of range for tensor of size [2, 3] at dimension 0"));
  // Python's indexing names the dimension of the tensor it indexes.
  EXPECT_TRUE(throws_with<IndexError>([&] { x[2]; },
                                      "index 2 is out of bounds for dimension 0 with size 2"));
  EXPECT_TRUE(throws_with<IndexError>(
      [&] {
        x.index({0, 3});
      },
      "index 3 is out of bounds for dimension 1 with size 3"));
  EXPECT_TRUE(throws_with<IndexError>(
      [&] { x.select(2, 0); },
      "Dimension out of range (expected to be in range of [-2, 1], but got 2)"));
  EXPECT_TRUE(throws_with<IndexError>([&] { x.index({0, 0, 0}); }, "too many indices"));
  EXPECT_TRUE(throws_with<ValueError>([&] { x.slice(0, 0, 2, 0); }, "slice step cannot be zero"));
  EXPECT_TRUE(
      throws_with<ValueError>([&] { x.slice(0, 2, 0, -1); }, "step must be greater than zero"));
  EXPECT_TRUE(throws_with<IndexError>([&] { x[0][0][0]; }, "invalid index of a 0-dim tensor"));
}

TEST(Views, ExpandSqueezeUnsqueezeFlattenPermute) {
  Tensor v = tensor({1., 2, 3});
  Tensor e = v.expand({2, 3});
  EXPECT_EQ(e.strides(), (Strides{0, 1}));
  EXPECT_TRUE(e.shares_storage_with(v));
  EXPECT_EQ(e.tolist(), (std::vector<double>{1, 2, 3, 1, 2, 3}));
  EXPECT_EQ(v.unsqueeze(1).expand({-1, 4}).shape(), (Shape{3, 4}));
  EXPECT_TRUE(throws_with<RuntimeError>(
      [&] {
        v.expand({2, 4});
      },
      "The expanded size of the tensor (4) must match the existing size (3) at non-singleton "
      "dimension 1.  Target sizes: [2, 4].  Tensor sizes: [3]"));
  Tensor s = zeros({1, 3, 1, 2});
  EXPECT_EQ(s.squeeze().shape(), (Shape{3, 2}));
  EXPECT_EQ(s.squeeze(2).shape(), (Shape{1, 3, 2}));
  EXPECT_EQ(s.squeeze(1).shape(), (Shape{1, 3, 1, 2}));  // not size 1: unchanged
  EXPECT_EQ(v.unsqueeze(0).shape(), (Shape{1, 3}));
  EXPECT_EQ(v.unsqueeze(-1).shape(), (Shape{3, 1}));
  Tensor p = zeros({2, 3, 4}).permute({2, 0, 1});
  EXPECT_EQ(p.shape(), (Shape{4, 2, 3}));
  EXPECT_EQ(p.strides(), (Strides{1, 12, 4}));
  EXPECT_TRUE(throws_with<RuntimeError>([&] { zeros({2, 3}).permute({0, 0}); }, "duplicate dims"));
  Tensor f = zeros({2, 3, 4});
  EXPECT_EQ(f.flatten().shape(), (Shape{24}));
  EXPECT_EQ(f.flatten(1).shape(), (Shape{2, 12}));
  EXPECT_TRUE(f.flatten(1).shares_storage_with(f));
  EXPECT_FALSE(f.transpose(0, 2).flatten().shares_storage_with(f));  // must copy
  EXPECT_EQ(scalar_tensor(1.0).flatten().shape(), (Shape{1}));
}

TEST(Views, ViewAndReshapeErrors) {
  Tensor x = arange(12.0);
  EXPECT_TRUE(throws_with<RuntimeError>([&] { x.view({5}); },
                                        "shape '[5]' is invalid for input of size 12"));
  EXPECT_TRUE(throws_with<RuntimeError>([&] { x.reshape({5}); },
                                        "shape '[5]' is invalid for input of size 12"));
  EXPECT_EQ(x.view({-1, 3}).shape(), (Shape{4, 3}));
  EXPECT_TRUE(throws_with<RuntimeError>(
      [&] {
        x.view({-1, -1});
      },
      "only one dimension can be inferred"));
  EXPECT_TRUE(throws_with<RuntimeError>(
      [&] {
        x.view({-1, 5});
      },
      "shape '[-1, 5]' is invalid for input of size 12"));
}

// The view rule, independently: a new shape can view the memory iff there are strides under
// which every element, taken in row-major order of the new shape, lands where the old layout
// puts the element with the same row-major position. The candidate strides are read off the
// old layout: stride of new dim d = (address of the element one step along d) - (address of the
// first element); then every element is checked.
static std::optional<Strides> brute_force_view(const Shape& old_shape, const Strides& old_strides,
                                               const Shape& new_shape) {
  std::vector<int64_t> address;  // memory position of each element in row-major order
  for (const auto& idx : all_indices(old_shape)) {
    int64_t a = 0;
    for (size_t d = 0; d < idx.size(); ++d) a += idx[d] * old_strides[d];
    address.push_back(a);
  }
  const Strides row_major = contiguous_strides(new_shape);
  Strides strides(new_shape.size(), 0);
  for (size_t d = 0; d < new_shape.size(); ++d)
    if (new_shape[d] > 1) strides[d] = address[row_major[d]] - address[0];
  const auto indices = all_indices(new_shape);
  for (size_t k = 0; k < indices.size(); ++k) {
    int64_t a = address[0];
    for (size_t d = 0; d < new_shape.size(); ++d) a += indices[k][d] * strides[d];
    if (a != address[k]) return std::nullopt;
  }
  return strides;
}

TEST(Views, ViewRuleAgreesWithBruteForceOnRandomLayouts) {
  TINY_SEEDED(rng);
  int viewable = 0, refused = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    // A random layout: a random shape, permuted, sliced with steps, sometimes expanded.
    Tensor base = zeros(random_shape(rng, 4, 4));
    Tensor t = base;
    if (t.dim() > 1) {
      std::vector<int64_t> order(t.dim());
      for (int64_t i = 0; i < t.dim(); ++i) order[i] = i;
      std::shuffle(order.begin(), order.end(), rng);
      t = t.permute(order);
    }
    for (int64_t d = 0; d < t.dim(); ++d)
      if (uniform_int(rng, 0, 3) == 0) t = t.slice(d, 0, std::nullopt, uniform_int(rng, 1, 2));
    if (uniform_int(rng, 0, 4) == 0) {  // a broadcast dimension: stride 0
      Shape s(static_cast<size_t>(t.dim() + 1), -1);
      s[0] = 2;
      t = t.unsqueeze(0).expand(s);
    }
    if (t.numel() == 0) continue;
    // A random new shape with the same number of elements: factor numel into random parts.
    int64_t n = t.numel();
    Shape target;
    while (n > 1) {
      std::vector<int64_t> divisors;
      for (int64_t k = 2; k <= n; ++k)
        if (n % k == 0) divisors.push_back(k);
      const int64_t k = divisors[uniform_int(rng, 0, static_cast<int64_t>(divisors.size()) - 1)];
      target.push_back(k);
      n /= k;
      if (uniform_int(rng, 0, 5) == 0) target.push_back(1);
    }
    std::shuffle(target.begin(), target.end(), rng);
    const auto ours = view_strides(t.shape(), t.strides(), target);
    const auto brute = brute_force_view(t.shape(), t.strides(), target);
    ASSERT_EQ(ours.has_value(), brute.has_value())
        << "shape " << format_tuple(t.shape()) << " strides " << format_tuple(t.strides()) << " -> "
        << format_tuple(target);
    if (!ours) {
      ++refused;
      continue;
    }
    ++viewable;
    for (size_t d = 0; d < target.size(); ++d)
      if (target[d] > 1) {
        ASSERT_EQ((*ours)[d], (*brute)[d]);
      }
  }
  EXPECT_GT(viewable, 100);  // both outcomes were exercised
  EXPECT_GT(refused, 100);
}

TEST(Views, ReshapeIsAViewExactlyWhenViewWorks) {
  TINY_SEEDED(rng);
  for (int trial = 0; trial < 200; ++trial) {
    const Tensor values = random_values(rng, random_shape(rng, 3, 4));
    const Tensor t = random_layout(rng, values, kFloat32);
    const Shape flat = {t.numel()};
    const Tensor r = t.reshape(flat);
    EXPECT_EQ(r.shares_storage_with(t), view_strides(t.shape(), t.strides(), flat).has_value());
    EXPECT_EQ(r.tolist(), t.contiguous().tolist());
  }
}

TEST(Views, IsContiguousIgnoresSizeOneStrides) {
  Tensor x = zeros({3, 1, 4});
  Tensor odd(x.storage(), kFloat32, {3, 1, 4}, {4, 99, 1}, 0);  // the size-1 stride is irrelevant
  EXPECT_TRUE(odd.is_contiguous());
  EXPECT_FALSE(x.slice(2, 0, std::nullopt, 2).is_contiguous());
  EXPECT_TRUE(x.index({Slice{0, 1}}).is_contiguous());
  EXPECT_TRUE(zeros({0, 3}).transpose(0, 1).is_contiguous());  // no elements: trivially
}

// offset_of against an independent witness: in a buffer holding 0, 1, 2, ... each value is its
// own memory position, so the k-th element of any view's contiguous copy (made by the copy
// loops, not by offset_of) names the cell that the view's k-th index must map to.
TEST(Views, OffsetOfNamesTheCellTheViewReads) {
  TINY_SEEDED(rng);
  for (int trial = 0; trial < 300; ++trial) {
    const Shape shape = random_shape(rng, 4, 4);
    Tensor v = arange(shape_numel(shape) + 3).slice(0, 3, std::nullopt).view(shape);  // offset 3
    if (v.dim() > 1) {
      std::vector<int64_t> order(v.dim());
      for (int64_t i = 0; i < v.dim(); ++i) order[i] = i;
      std::shuffle(order.begin(), order.end(), rng);
      v = v.permute(order);
    }
    for (int64_t d = 0; d < v.dim(); ++d)
      if (uniform_int(rng, 0, 2) == 0) {
        // Two draws, two statements: argument evaluation order is unspecified, and a seed must
        // reproduce the same case under every compiler.
        const int64_t start = uniform_int(rng, 0, 1), step = uniform_int(rng, 1, 2);
        v = v.slice(d, start, std::nullopt, step);
      }
    const Tensor cells = v.contiguous();
    const int64_t* expected = cells.data<int64_t>();
    int64_t k = 0;
    for (const auto& idx : all_indices(v.shape())) ASSERT_EQ(v.offset_of(idx), expected[k++]);
  }
  Tensor x = zeros({2, 3});
  EXPECT_EQ(x.offset_of({-1, -1}), 5);
  EXPECT_TRUE(throws_with<IndexError>(
      [&] {
        x.offset_of({0, 3});
      },
      "index 3 is out of bounds for dimension 1 with size 3"));
  EXPECT_TRUE(throws_with<IndexError>([&] { x.offset_of({0}); }, "expected 2 indices"));
}

// t() is the matrix transpose PyTorch's Linear uses: a view, recorded as TBackward0 (x.T is a
// PermuteBackward0); fewer than two dimensions come back unchanged, more are refused with
// PyTorch's message.
TEST(Views, TIsTheMatrixTranspose) {
  const Tensor m = arange(6.0).view({2, 3});
  const Tensor mt = m.t();
  EXPECT_EQ(mt.shape(), (Shape{3, 2}));
  EXPECT_EQ(mt.strides(), (Strides{1, 3}));
  EXPECT_EQ(mt.storage(), m.storage());
  Tensor w = ones({2, 3}).requires_grad_(true);
  Tensor wt = w.t();
  ASSERT_TRUE(wt.grad_fn());
  EXPECT_EQ(wt.grad_fn()->name(), "TBackward0");
  EXPECT_EQ(w.T().grad_fn()->name(), "PermuteBackward0");
  (wt * arange(6.0).view({3, 2})).sum().backward();
  EXPECT_TRUE(equal(w.grad(), arange(6.0).view({3, 2}).t().to(kFloat32)));
  const Tensor v = arange(3.0);
  EXPECT_EQ(v.t().shape(), (Shape{3}));
  EXPECT_TRUE(throws_with<RuntimeError>(
      [] {
        (void)ones({2, 3, 4}).t();
      },
      "t() expects a tensor with <= 2 dimensions, but self is 3D"));
}

// A 0-dim tensor has no dimension 0: the accessors that need one raise PyTorch's errors (they
// used to index past an empty shape). Ops that accept dim 0 of a 0-dim tensor, as PyTorch's do
// (sum(0), transpose(0, 0), unsqueeze(0)), still do.
TEST(Views, ZeroDimTensorsHaveNoDimensionToAccess) {
  const Tensor s = scalar_tensor(1.0);
  EXPECT_TRUE(throws_with<IndexError>([&] { s.size(0); },
                                      "Dimension specified as 0 but tensor has no dimensions"));
  EXPECT_TRUE(throws_with<IndexError>([&] { s.stride(0); },
                                      "Dimension specified as 0 but tensor has no dimensions"));
  EXPECT_TRUE(throws_with<IndexError>([&] { s.size(-1); },
                                      "Dimension specified as -1 but tensor has no dimensions"));
  EXPECT_TRUE(throws_with<RuntimeError>([&] { s.narrow(0, 0, 1); },
                                        "narrow() cannot be applied to a 0-dim tensor."));
  EXPECT_TRUE(throws_with<IndexError>([&] { s.slice(0, 0, 1); },
                                      "slice() cannot be applied to a 0-dim tensor."));
  EXPECT_EQ(s.transpose(0, -1).dim(), 0);
  EXPECT_EQ(s.unsqueeze(0).shape(), (Shape{1}));
  EXPECT_EQ(s.squeeze(0).dim(), 0);
  EXPECT_EQ(s.sum({0}).item(), 1.0);
  // flatten makes one element of it, for the dims a 0-dim tensor is allowed: 0 and -1.
  EXPECT_EQ(s.flatten(0, -1).shape(), (Shape{1}));
  EXPECT_TRUE(throws_with<IndexError>(
      [&] { s.flatten(3, -5); },
      "Dimension out of range (expected to be in range of [-1, 0], but got 3)"));
}

// Arguments whose arithmetic overflows int64 get PyTorch 1.13's errors instead of a wrapped
// size: a narrow's start + length, an expand to more elements than int64 counts or to a
// negative size, a reshape whose sizes multiply past int64.
TEST(Views, OverflowingViewArgumentsAreRefused) {
  const Tensor x = ones({3});
  EXPECT_TRUE(throws_with<RuntimeError>(
      [&] { x.narrow(0, 1, INT64_MAX); },
      "start (1) + length (9223372036854775807) exceeds dimension size (3)."));
  EXPECT_TRUE(throws_with<RuntimeError>([&] { x.narrow(0, 1, -1); },
                                        "narrow(): length must be non-negative."));
  EXPECT_TRUE(throws_with<RuntimeError>([&] { x.narrow(0, -1, 2); },
                                        "start (2) + length (2) exceeds dimension size (3)."));
  EXPECT_TRUE(throws_with<IndexError>(
      [&] { x.narrow(0, 4, 0); },
      "start out of range (expected to be in range of [-3, 3], but got 4)"));
  EXPECT_EQ(x.narrow(0, 3, 0).numel(), 0);
  EXPECT_EQ(x.narrow(0, -3, 1).numel(), 1);
  EXPECT_TRUE(throws_with<RuntimeError>([] { ones({1}).expand({-2}); },
                                        "numel: integer multiplication overflow"));
  EXPECT_TRUE(throws_with<RuntimeError>(
      [] {
        ones({1}).expand({-2, 3});
      },
      "numel: integer multiplication overflow"));
  EXPECT_TRUE(throws_with<RuntimeError>(
      [] {
        ones({1}).expand({-1, 3});
      },
      "The expanded size of the tensor (-1) isn't allowed in a leading, non-existing dimension 0"));
  EXPECT_TRUE(throws_with<RuntimeError>(
      [] {
        ones({2}).expand({int64_t(1) << 62, int64_t(1) << 62, 2});
      },
      "numel: integer multiplication overflow"));
  EXPECT_EQ(ones({1}).expand({-1}).shape(), (Shape{1}));
  const Tensor big = ones({1}).expand({int64_t(1) << 62});  // stride 0: one element of memory
  EXPECT_EQ(big.numel(), int64_t(1) << 62);
  EXPECT_EQ(big.at({1000}), 1.0);
  const Tensor twelve = arange(12.0);
  EXPECT_TRUE(throws_with<RuntimeError>(
      [&] {
        twelve.reshape({int64_t(1) << 62, int64_t(1) << 62, -1});
      },
      "shape '[4611686018427387904, 4611686018427387904, -1]' is invalid for input of size 12"));
  EXPECT_TRUE(throws_with<RuntimeError>(
      [&] {
        twelve.reshape({int64_t(1) << 62, 4});
      },
      "shape '[4611686018427387904, 4]' is invalid for input of size 12"));
}

// An empty tensor reshaped: the sizes still may not multiply past int64 (they used to wrap to 0,
// a shape claiming 2^64 elements), and -1 next to a 0 is ambiguous, as PyTorch says.
TEST(Views, ReshapeOfAnEmptyTensor) {
  const Tensor e = zeros({0});
  EXPECT_EQ(e.reshape({-1}).shape(), (Shape{0}));
  EXPECT_EQ(e.view({2, 0, 5}).shape(), (Shape{2, 0, 5}));
  EXPECT_TRUE(throws_with<RuntimeError>(
      [&] {
        e.reshape({int64_t(1) << 32, int64_t(1) << 32});
      },
      "numel: integer multiplication overflow"));
  EXPECT_TRUE(throws_with<RuntimeError>(
      [&] {
        e.reshape({int64_t(1) << 62, int64_t(1) << 62, 0});
      },
      "numel: integer multiplication overflow"));
  EXPECT_TRUE(throws_with<RuntimeError>(
      [&] {
        e.reshape({-1, 0});
      },
      "cannot reshape tensor of 0 elements into shape [-1, 0] because the unspecified "
      "dimension size -1 can be any value and is ambiguous"));
  EXPECT_TRUE(throws_with<RuntimeError>(
      [&] {
        e.reshape({int64_t(1) << 40, int64_t(1) << 40, 0, -1});
      },
      "cannot reshape tensor of 0 elements into shape [1099511627776, 1099511627776, 0, -1] "
      "because the unspecified dimension size -1 can be any value and is ambiguous"));
}

// A step past the end takes the first element, as Python's slicing does; (len + step - 1) / step
// used to overflow to a negative size, read as empty. (PyTorch 1.13 overflows the same way and
// refuses it; later versions and Python give one element.)
TEST(Views, SliceWithAHugeStepTakesOneElement) {
  const Tensor x = arange(3.0);
  EXPECT_EQ(x.slice(0, std::nullopt, std::nullopt, INT64_MAX).tolist(), (std::vector<double>{0}));
  EXPECT_EQ(x.slice(0, 1, std::nullopt, INT64_MAX).tolist(), (std::vector<double>{1}));
  EXPECT_EQ(x.slice(0, 3, std::nullopt, INT64_MAX).numel(), 0);
  const Tensor m = arange(6.0).reshape({2, 3});
  EXPECT_EQ(m.slice(1, 1, std::nullopt, INT64_MAX).tolist(), (std::vector<double>{1, 4}));
}

// The public constructor takes any layout, so it checks the layout fits its storage (PyTorch's
// as_strided checks and texts); the views the library makes always pass.
TEST(Views, HandMadeLayoutsMustFitTheirStorage) {
  const auto storage = ones({2}).storage();  // 8 bytes
  EXPECT_EQ(Tensor(storage, kFloat32, {2}, {1}, 0).sum().item(), 2.0);
  EXPECT_EQ(Tensor(storage, kFloat32, {1}, {1}, 1).item(), 1.0);
  EXPECT_EQ(Tensor(storage, kFloat32, {0}, {1}, 2).numel(), 0);
  EXPECT_TRUE(throws_with<RuntimeError>(
      [&] { Tensor(storage, kFloat32, {4}, {1}, 0); },
      "setStorage: sizes [4], strides [1], storage offset 0, and itemsize 4 requiring a storage "
      "size of 16 are out of bounds for storage of size 8"));
  EXPECT_TRUE(throws_with<RuntimeError>(
      [&] { Tensor(storage, kFloat64, {2}, {1}, 0); },
      "setStorage: sizes [2], strides [1], storage offset 0, and itemsize 8 requiring a storage "
      "size of 16 are out of bounds for storage of size 8"));
  EXPECT_TRUE(throws_with<RuntimeError>(
      [&] { Tensor(storage, kFloat32, {2}, {-1}, 1); },
      "as_strided: Negative strides are not supported at the moment, got strides: [-1]"));
  EXPECT_TRUE(throws_with<RuntimeError>([&] { Tensor(storage, kFloat32, {1}, {1}, -1); },
                                        "Tensor: invalid storage offset -1"));
  EXPECT_TRUE(throws_with<RuntimeError>(
      [&] { Tensor(storage, kFloat32, {-2}, {1}, 0); },
      "Storage size calculation overflowed with sizes=[-2] and strides=[1]"));
  EXPECT_TRUE(throws_with<RuntimeError>(
      [&] {
        Tensor(storage, kFloat32, {2, 2}, {INT64_MAX, 1}, 0);
      },
      "Storage size calculation overflowed with sizes=[2, 2] and strides=[9223372036854775807, "
      "1]"));
}

// Writing through an expanded view would write one element many times: refused as PyTorch does
// for copy_ and in-place ops. Filling writes the same value everywhere, which PyTorch allows.
TEST(Views, WritesThroughExpandedViewsAreRefused) {
  const char* overlap =
      "unsupported operation: more than one element of the written-to tensor refers to a single "
      "memory location. Please clone() the tensor before performing the operation.";
  EXPECT_TRUE(throws_with<RuntimeError>([] { ones({1}).expand({3}).copy_(ones({3})); }, overlap));
  EXPECT_TRUE(throws_with<RuntimeError>(
      [] {
        ones({4}).expand({2, 3, 4}).copy_(ones({4}));
      },
      overlap));
  EXPECT_TRUE(throws_with<RuntimeError>([] { ones({1}).expand({3}).add_(1); }, overlap));
  EXPECT_EQ(ones({1}).expand({0}).copy_(ones({0})).numel(), 0);
}

// Filling an expanded view writes one value to each element it reads: allowed, as in PyTorch.
TEST(Views, FillingAnExpandedViewFillsWhatItReads) {
  Tensor base = zeros({2, 1});
  Tensor e = base.expand({2, 3});
  e.fill_(7);
  EXPECT_EQ(base.tolist(), (std::vector<double>{7, 7}));
  e.zero_();
  EXPECT_EQ(e.tolist(), (std::vector<double>(6, 0.0)));
}

// torch.diagonal against a loop that walks the diagonal index by index: every pair of dims,
// offsets on both sides and past the edges, strided inputs; and its gradient, which puts each
// element's gradient back on the diagonal it came from.
TEST(Views, DiagonalPicksIndicesThatDifferByTheOffset) {
  TINY_SEEDED(rng);
  for (int trial = 0; trial < 300; ++trial) {
    const Shape shape = random_shape(rng, 4, 4);
    if (shape.size() < 2) continue;
    const Tensor x = random_layout(rng, random_values(rng, shape), kFloat64);
    const int64_t n = x.dim();
    int64_t d1 = uniform_int(rng, 0, n - 1), d2 = uniform_int(rng, 0, n - 2);
    if (d2 >= d1) ++d2;
    const int64_t offset = uniform_int(rng, -5, 5);
    // Negative dims name the same ones.
    const int64_t a1 = uniform_int(rng, 0, 1) ? d1 - n : d1;
    const int64_t a2 = uniform_int(rng, 0, 1) ? d2 - n : d2;
    const Tensor leaf_x = x.detach().requires_grad_();
    const Tensor y = leaf_x.diagonal(offset, a1, a2);
    ASSERT_EQ(y.grad_fn()->name(), "DiagonalBackward0");
    EXPECT_TRUE(y.shares_storage_with(x));
    // The expected shape: the other dims in order, then the diagonal's length.
    Shape expected_shape;
    for (int64_t d = 0; d < n; ++d)
      if (d != d1 && d != d2) expected_shape.push_back(shape[d]);
    const int64_t r1 = std::max<int64_t>(-offset, 0), r2 = std::max<int64_t>(offset, 0);
    expected_shape.push_back(std::max<int64_t>(0, std::min(shape[d1] - r1, shape[d2] - r2)));
    ASSERT_EQ(y.shape(), expected_shape) << "offset " << offset << " dims " << a1 << ", " << a2;
    const Tensor w = random_values(rng, y.shape());
    (y * w).sum().backward();
    const Tensor g = leaf_x.grad();
    // Every element of x: on the diagonal it got w's value and y holds it; elsewhere a zero.
    for (const auto& idx : all_indices(shape)) {
      const int64_t k = idx[d1] - r1;
      const bool on = k >= 0 && idx[d2] - r2 == k && k < expected_shape.back();
      if (!on) {
        EXPECT_EQ(g.at(idx), 0.0);
        continue;
      }
      std::vector<int64_t> out;
      for (int64_t d = 0; d < n; ++d)
        if (d != d1 && d != d2) out.push_back(idx[d]);
      out.push_back(k);
      EXPECT_EQ(y.at(out), x.at(idx));
      EXPECT_EQ(g.at(idx), w.at(out));
    }
  }
  // An offset far past either edge is an empty diagonal, not an overflow.
  EXPECT_EQ(ones({2, 3}).diagonal(INT64_MAX).shape(), (Shape{0}));
  EXPECT_EQ(ones({2, 3}).diagonal(INT64_MIN).shape(), (Shape{0}));
  EXPECT_EQ(ones({2, 3}).diagonal(-1).shape(), (Shape{1}));
  // A view: writing through it writes the matrix.
  Tensor m = zeros({3, 3});
  m.diagonal().fill_(1.0);
  EXPECT_TRUE(close(m, tensor({{1.0, 0.0, 0.0}, {0.0, 1.0, 0.0}, {0.0, 0.0, 1.0}}), 0, 0));
}
