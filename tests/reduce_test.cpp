// sum, mean and max over all elements and over random sets of dimensions, on random layouts,
// against float64 loops; their dtype rules and errors.
#include <set>

#include "test_util.h"

using namespace tiny;
using namespace tiny::testing;

namespace {
// Reduces `x` over `dims` in float64 by visiting every element and adding it to its output slot.
Tensor reference_reduce(const Tensor& x, const std::set<int64_t>& dims, bool keepdim,
                        bool take_mean, bool take_max) {
  Shape kept;
  for (int64_t d = 0; d < x.dim(); ++d) kept.push_back(dims.count(d) ? 1 : x.size(d));
  Tensor acc = full(kept, take_max ? -INFINITY : 0.0, kFloat64);
  double count = 1;
  for (int64_t d : dims) count *= static_cast<double>(x.size(d));
  for (const auto& idx : all_indices(x.shape())) {
    std::vector<int64_t> o = idx;
    for (int64_t d : dims) o[d] = 0;
    Tensor cell = acc;
    for (int64_t v : o) cell = cell.select(0, v);
    const double v = x.at(idx);
    cell.fill_(take_max ? std::max(cell.item(), v) : cell.item() + v);
  }
  if (take_mean) acc = acc / count;
  if (keepdim) return acc;
  Shape out;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (!dims.count(d)) out.push_back(x.size(d));
  return acc.reshape(out);
}
}  // namespace

TEST(Reduce, SumMeanMaxOverRandomDimsMatchFloat64) {
  TINY_SEEDED(rng);
  for (int trial = 0; trial < 120; ++trial) {
    const Shape shape = random_shape(rng, 4, 5);
    const DType dt = std::vector<DType>{kFloat32, kFloat64, kFloat16, kBFloat16}[trial % 4];
    const Tensor x = random_layout(rng, random_values(rng, shape), dt);
    std::set<int64_t> dims;
    std::vector<int64_t> dim_list;
    for (int64_t d = 0; d < x.dim(); ++d)
      if (uniform_int(rng, 0, 1)) {
        dims.insert(d);
        dim_list.push_back(uniform_int(rng, 0, 1) ? d : d - x.dim());  // negative dims too
      }
    if (dim_list.empty() && x.dim() > 0) {
      dims.insert(0);
      dim_list.push_back(0);
    }
    const bool keepdim = uniform_int(rng, 0, 1);
    // Sums accumulate in float64 and round once to the dtype: half an epsilon of the result,
    // plus cancellation relative to the sum of magnitudes (<= 2 per element).
    const double n = static_cast<double>(x.numel());
    const double tol = eps_of(dt) * (0.5 + 2 * n * 1e-9);
    const Tensor s = x.dim() ? sum(x, dim_list, keepdim) : sum(x);
    EXPECT_EQ(s.dtype(), dt);
    ASSERT_TRUE(close(s, reference_reduce(x, dims, keepdim || x.dim() == 0, false, false),
                      eps_of(dt) * 2 * n, tol))
        << "sum of " << format_tuple(shape) << " in " << dtype_name(dt);
    const Tensor m = x.dim() ? mean(x, dim_list, keepdim) : mean(x);
    ASSERT_TRUE(close(m, reference_reduce(x, dims, keepdim || x.dim() == 0, true, false),
                      eps_of(dt) * 2, tol));
    if (x.dim() > 0) {
      const int64_t d = *dims.begin();
      const MaxResult r = max(x, d, keepdim);
      ASSERT_TRUE(close(r.values, reference_reduce(x, {d}, keepdim, false, true), 0, 0));
      EXPECT_EQ(r.indices.dtype(), kInt64);
      EXPECT_EQ(r.indices.shape(), r.values.shape());
      std::set<int64_t> all;
      for (int64_t k = 0; k < x.dim(); ++k) all.insert(k);
      ASSERT_TRUE(close(max(x), reference_reduce(x, all, false, false, true), 0, 0));
    }
  }
}

TEST(Reduce, MaxIndicesPointAtTheFirstMaximum) {
  Tensor x = tensor({{1., 5, 5}, {7, 2, 7}});
  MaxResult r = max(x, 1);
  EXPECT_EQ(r.values.tolist(), (std::vector<double>{5, 7}));
  EXPECT_EQ(r.indices.tolist(), (std::vector<double>{1, 0}));
  r = max(x, 0, true);
  EXPECT_EQ(r.values.shape(), (Shape{1, 3}));
  EXPECT_EQ(r.indices.tolist(), (std::vector<double>{1, 0, 1}));
  EXPECT_TRUE(std::isnan(tensor({1.0, NAN, 3.0}).max().item()));
}

TEST(Reduce, DtypeRulesAndErrors) {
  EXPECT_EQ(tensor({1, 2, 3}).sum().dtype(), kInt64);
  EXPECT_EQ(tensor({1, 2, 3}).sum().item(), 6);
  EXPECT_EQ(tensor({true, true, false}).sum().item(), 2);
  EXPECT_EQ(ones({2, 3}, kInt32).sum({1}).dtype(), kInt64);
  EXPECT_EQ(ones({2, 3}).mean({0}).tolist(), (std::vector<double>{1, 1, 1}));
  EXPECT_EQ(ones({2, 3}).sum({0, 1}, true).shape(), (Shape{1, 1}));
  EXPECT_TRUE(std::isnan(zeros({0}).mean().item()));
  EXPECT_EQ(zeros({0}).sum().item(), 0);
  EXPECT_TRUE(throws_with<RuntimeError>(
      [] {
        tensor({1, 2}).mean();
      },
      "mean(): could not infer output dtype. Input dtype must be either a floating point or "
      "complex dtype. Got: Long"));
  EXPECT_TRUE(throws_with<RuntimeError>(
      [] {
        ones({2, 2}).sum({1, -1});
      },
      "dim 1 appears multiple times"));
  EXPECT_TRUE(throws_with<IndexError>([] { ones({2, 2}).sum({2}); }, "Dimension out of range"));
  EXPECT_TRUE(throws_with<RuntimeError>([] { zeros({0}).max(); },
                                        "Expected reduction dim to be specified"));
}

// Reductions over an empty dimension, as PyTorch gives them: a sum of nothing is 0, a mean of
// nothing NaN, and max() refuses (there is no maximum); over a non-empty dimension of an empty
// tensor, the result is empty.
TEST(Reduce, EmptyDimensionsReduceAsPyTorch) {
  const Tensor x = ones({3, 0});
  EXPECT_EQ(x.sum({1}).tolist(), (std::vector<double>{0, 0, 0}));
  const std::vector<double> means = x.mean({1}).tolist();
  ASSERT_EQ(means.size(), 3u);
  for (double m : means) EXPECT_TRUE(std::isnan(m));
  EXPECT_EQ(ones({0, 3}).mean({1}).shape(), (Shape{0}));
  EXPECT_EQ(ones({0, 3}).sum({1}, true).shape(), (Shape{0, 1}));
  EXPECT_TRUE(throws_with<IndexError>([&] { max(x, 1); },
                                      "max(): Expected reduction dim 1 to have non-zero size."));
  EXPECT_EQ(max(ones({0, 3}), 1).values.shape(), (Shape{0}));
  EXPECT_TRUE(throws_with<RuntimeError>(
      [] { zeros({0}).max(); },
      "max(): Expected reduction dim to be specified for input.numel() == 0. Specify the "
      "reduction dim with the 'dim' argument."));
}

// softmax and log_softmax over an empty dimension: an empty result, with an empty gradient.
TEST(Reduce, SoftmaxOverAnEmptyDimensionIsEmpty) {
  EXPECT_EQ(softmax(ones({3, 0}), 1).shape(), (Shape{3, 0}));
  EXPECT_EQ(log_softmax(ones({3, 0}), 1).shape(), (Shape{3, 0}));
  EXPECT_EQ(softmax(ones({0, 3}), 1).shape(), (Shape{0, 3}));
  Tensor x = ones({3, 0}).requires_grad_();
  softmax(x, 1).sum().backward();
  EXPECT_EQ(x.grad().shape(), (Shape{3, 0}));
  Tensor y = ones({0, 2}).requires_grad_();
  log_softmax(y, 0).sum().backward();
  EXPECT_EQ(y.grad().shape(), (Shape{0, 2}));
}

TEST(Reduce, LongSumsStayAccurate) {
  // 1 + 10,000 x 0.0001 accumulated in float64 rounds once to float32; a float32 running sum
  // would drift (to 2.0001657, tests/fixtures/pytorch_facts.txt, section 6).
  Tensor x = full({10001}, 1e-4);
  x[0] = 1.0;
  EXPECT_EQ(x.sum().item(),
            static_cast<double>(static_cast<float>(1.0 + 10000 * static_cast<double>(1e-4f))));
}
