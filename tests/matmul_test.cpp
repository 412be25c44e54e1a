// matmul against a float64 triple loop, through both CPU implementations (OpenBLAS and the
// blocked loops), on random shapes and layouts; torch.matmul's shape rules; its errors.
#include <cstdlib>

#include "test_util.h"

using namespace tiny;
using namespace tiny::testing;

namespace {

// The reference: C[b..., i, j] = sum_k A[b..., i, k] * B[b..., k, j] in float64, read element
// by element through at(), with matmul's rules for 1-D operands and broadcast batches written
// out independently of the library's implementation.
Tensor reference_matmul(const Tensor& a, const Tensor& b) {
  const bool a_vec = a.dim() == 1, b_vec = b.dim() == 1;
  const Tensor A = a_vec ? a.unsqueeze(0) : a;
  const Tensor B = b_vec ? b.unsqueeze(1) : b;
  const int64_t M = A.size(-2), K = A.size(-1), N = B.size(-1);
  const Shape ab(A.shape().begin(), A.shape().end() - 2),
      bb(B.shape().begin(), B.shape().end() - 2);
  const Shape batch = broadcast_shapes(ab, bb);
  Shape out_shape = batch;
  out_shape.push_back(M);
  out_shape.push_back(N);
  Tensor out = zeros(out_shape, kFloat64);
  for (const auto& idx : all_indices(out_shape)) {
    const std::vector<int64_t> bidx(idx.begin(), idx.end() - 2);
    const int64_t i = idx[idx.size() - 2], j = idx.back();
    auto pick = [&](const Shape& s) {  // the batch index of an operand with batch shape s
      std::vector<int64_t> r(s.size());
      for (size_t d = 0; d < s.size(); ++d) r[d] = s[d] == 1 ? 0 : bidx[bidx.size() - s.size() + d];
      return r;
    };
    auto ia = pick(ab), ib = pick(bb);
    double acc = 0;
    for (int64_t k = 0; k < K; ++k) {
      auto ea = ia, eb = ib;
      ea.insert(ea.end(), {i, k});
      eb.insert(eb.end(), {k, j});
      acc += A.at(ea) * B.at(eb);
    }
    Tensor cell = out;
    for (int64_t v : idx) cell = cell.select(0, v);
    cell.fill_(acc);
  }
  if (a_vec) out = out.squeeze(-2);
  if (b_vec) out = out.squeeze(-1);
  return out;
}

// Each product of K terms rounds K times in the worst case: |error| <= K * eps * sum|a||b|.
// With inputs in [-2, 2], sum|a||b| <= 4K; use that bound.
double tolerance(DType dt, int64_t K) { return 4.0 * K * K * eps_of(dt) + 1e-12; }

class MatmulBackends : public ::testing::TestWithParam<MatmulBackend> {
 protected:
  void SetUp() override { set_matmul_backend(GetParam()); }
  void TearDown() override { set_matmul_backend(MatmulBackend::Blas); }
};

}  // namespace

TEST_P(MatmulBackends, RandomShapesAndLayoutsMatchFloat64Loops) {
  TINY_SEEDED(rng);
  for (int trial = 0; trial < 60; ++trial) {
    const int64_t M = uniform_int(rng, 1, 9), K = uniform_int(rng, 1, 9),
                  N = uniform_int(rng, 1, 9);
    Shape sa = {M, K}, sb = {K, N};
    // Sometimes batches, broadcast against each other; sometimes 1-D operands.
    const int kind = static_cast<int>(uniform_int(rng, 0, 4));
    if (kind == 1) {
      sa.insert(sa.begin(), {3, 1});
      sb.insert(sb.begin(), 2);
    }
    if (kind == 2) sa.insert(sa.begin(), {2, 3});
    if (kind == 3) sa = {K};
    if (kind == 4) sb = {K};
    for (DType dt : {kFloat32, kFloat64}) {
      const Tensor a64 = random_values(rng, sa), b64 = random_values(rng, sb);
      const Tensor a = random_layout(rng, a64, dt), b = random_layout(rng, b64, dt);
      const Tensor ref = reference_matmul(a.to(kFloat64), b.to(kFloat64));
      const Tensor got = matmul(a, b);
      EXPECT_EQ(got.dtype(), dt);
      ASSERT_TRUE(close(got, ref, tolerance(dt, K), 0))
          << format_tuple(sa) << " @ " << format_tuple(sb) << " in " << dtype_name(dt);
    }
  }
}

TEST_P(MatmulBackends, LargerMatricesUseTheFastPathsCorrectly) {
  TINY_SEEDED(rng);
  // Big enough for the blocked loops' tiles and the BLAS's own blocking; the reference is the
  // same product done in float64 by the library's float64 path checked above.
  for (auto [M, K, N] :
       {std::tuple<int64_t, int64_t, int64_t>{130, 300, 70}, {1, 513, 600}, {600, 2, 1}}) {
    const Tensor a = random_values(rng, {M, K}), b = random_values(rng, {K, N});
    set_matmul_backend(MatmulBackend::Blocked);
    const Tensor ref = matmul(a, b);  // float64, blocked loops
    set_matmul_backend(GetParam());
    EXPECT_TRUE(close(matmul(a.to(kFloat32), b.to(kFloat32)), ref, tolerance(kFloat32, K) / K, 0));
    EXPECT_TRUE(close(matmul(a.T().contiguous().T().to(kFloat32), b.to(kFloat32)), ref,
                      tolerance(kFloat32, K) / K, 0));
  }
}

namespace {

// One unit in the last place of a float16 or bfloat16 value x: the gap between the two values of
// the format around |x| (the subnormal spacing below the smallest normal).
double ulp_of(DType dt, double x) {
  const int mantissa_bits = dt == kBFloat16 ? 7 : 10, min_exponent = dt == kBFloat16 ? -126 : -14;
  int e = 0;
  std::frexp(x, &e);  // |x| = f * 2^e with f in [0.5, 1), so floor(log2 |x|) = e - 1
  return std::ldexp(1.0, std::max(e - 1, min_exponent) - mantissa_bits);
}

// Checks a 16-bit product against float64. The reference sums the exact products of the inputs'
// values in float64 and rounds the sum to the output dtype once. The library sums in float32,
// whose error is at most K * 2^-24 * sum_k |a_ik| |b_kj| (the classical bound for a sum of K
// terms, which covers any order a BLAS or the blocked loops add in), and then rounds once. The
// float32 error can move the sum across a rounding boundary of the 16-bit format, so the honest
// bound is 1 ulp of the output dtype plus that float32 term; for these sizes the float32 term is
// far below an ulp, except where cancellation leaves a result much smaller than its terms. Almost
// every element must then match the rounded reference exactly: rounding more than once (after
// each panel, say) would miss it on a large fraction of them, often by no more than 1 ulp.
::testing::AssertionResult matches_rounded_float64(const Tensor& got, const Tensor& a,
                                                   const Tensor& b) {
  const DType dt = a.dtype();
  if (got.dtype() != dt)
    return ::testing::AssertionFailure() << "result dtype " << dtype_name(got.dtype());
  Shape batch = broadcast_shapes(Shape(a.shape().begin(), a.shape().end() - 2),
                                 Shape(b.shape().begin(), b.shape().end() - 2));
  const int64_t M = a.size(-2), K = a.size(-1), N = b.size(-1), nb = shape_numel(batch);
  Shape as = batch, bs = batch, cs = batch;
  as.insert(as.end(), {M, K});
  bs.insert(bs.end(), {K, N});
  cs.insert(cs.end(), {M, N});
  if (got.shape() != cs)
    return ::testing::AssertionFailure() << "shape " << format_tuple(got.shape());
  // The 16-bit values are exact in float64, and so are their products.
  const Tensor x = a.to(kFloat64).expand(as).contiguous(),
               y = b.to(kFloat64).expand(bs).contiguous();
  const double* px = x.data<double>();
  const double* py = y.data<double>();
  Tensor sum = empty(cs, kFloat64), magnitude = empty(cs, kFloat64);
  double* ps = sum.data<double>();
  double* pm = magnitude.data<double>();
  for (int64_t bi = 0; bi < nb; ++bi)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double s = 0, m = 0;
        for (int64_t k = 0; k < K; ++k) {
          const double p = px[(bi * M + i) * K + k] * py[(bi * K + k) * N + j];
          s += p;
          m += std::fabs(p);
        }
        ps[(bi * M + i) * N + j] = s;
        pm[(bi * M + i) * N + j] = m;
      }
  const Tensor rounded = sum.to(dt).to(kFloat64), actual = got.to(kFloat64).contiguous();
  const double* pr = rounded.data<double>();
  const double* pa = actual.data<double>();
  int64_t exact = 0;
  for (int64_t e = 0; e < actual.numel(); ++e) {
    const double bound = ulp_of(dt, pr[e]) + static_cast<double>(K) * 0x1p-24 * pm[e];
    if (!(std::fabs(pa[e] - pr[e]) <= bound))
      return ::testing::AssertionFailure()
             << "element " << e << " (row-major) is " << repr(pa[e]) << ", rounded reference "
             << repr(pr[e]) << " (bound " << bound << ")";
    exact += pa[e] == pr[e];
  }
  // Measured, fewer than 0.5% of the elements straddle a boundary; rounding after every panel
  // instead misses about 30%. Allow 1%, and two more for the chance of a small output.
  if (actual.numel() - exact > actual.numel() / 100 + 2)
    return ::testing::AssertionFailure()
           << "only " << exact << " of " << actual.numel() << " elements are correctly rounded";
  return ::testing::AssertionSuccess();
}

}  // namespace

// The 16-bit products are sgemm's, one panel of K at a time; these shapes cover a single panel,
// K not a multiple of the panel width, several panels, and no panel at all.
TEST_P(MatmulBackends, SixteenBitProductsRoundTheFloat64ResultOnce) {
  TINY_SEEDED(rng);
  for (DType dt : {kBFloat16, kFloat16}) {
    for (auto [M, K, N] : {std::tuple<int64_t, int64_t, int64_t>{64, 64, 64},
                           {37, 300, 53},
                           {48, 700, 40},
                           {5, 1030, 3},
                           {1, 513, 33},
                           {33, 600, 1}}) {
      const Tensor a = random_values(rng, {M, K}).to(dt), b = random_values(rng, {K, N}).to(dt);
      EXPECT_TRUE(matches_rounded_float64(matmul(a, b), a, b))
          << M << "x" << K << " @ " << K << "x" << N << " in " << dtype_name(dt);
    }
    // K = 0: an empty sum, zeros of the inputs' dtype.
    const Tensor z = matmul(empty({4, 0}, dt), empty({0, 3}, dt));
    EXPECT_EQ(z.dtype(), dt);
    EXPECT_TRUE(equal(z, zeros({4, 3}, dt)));
  }
}

// The operands are read in place in any layout: transposed (column by column), every other
// column of a wider matrix (neither rows nor columns contiguous), and a batch against one
// matrix broadcast over it (batch stride 0).
TEST_P(MatmulBackends, SixteenBitProductsReadAnyLayout) {
  TINY_SEEDED(rng);
  for (DType dt : {kBFloat16, kFloat16}) {
    const int64_t M = 29, K = 600, N = 45;
    const Tensor at = random_values(rng, {K, M}).to(dt).t(),
                 bt = random_values(rng, {N, K}).to(dt).t();
    ASSERT_EQ(at.stride(0), 1);
    EXPECT_TRUE(matches_rounded_float64(matmul(at, bt), at, bt)) << dtype_name(dt);
    const Tensor a = random_values(rng, {M, K}).to(dt);
    const Tensor every_other = random_values(rng, {K, 2 * N}).to(dt).slice(1, 0, std::nullopt, 2);
    EXPECT_TRUE(matches_rounded_float64(matmul(at, every_other), at, every_other))
        << dtype_name(dt);
    EXPECT_TRUE(matches_rounded_float64(matmul(every_other.t(), a.t()), every_other.t(), a.t()))
        << dtype_name(dt);
    const Tensor batch = random_values(rng, {3, M, K}).to(dt),
                 one = random_values(rng, {1, K, N}).to(dt);
    EXPECT_TRUE(matches_rounded_float64(matmul(batch, one), batch, one)) << dtype_name(dt);
    const Tensor batch_t = random_values(rng, {3, N, K}).to(dt).transpose(-2, -1);
    EXPECT_TRUE(matches_rounded_float64(matmul(a.unsqueeze(0), batch_t), a.unsqueeze(0), batch_t))
        << dtype_name(dt);
  }
}

// An inner dimension of 0 is a sum of no products: zeros, as in PyTorch, on both backends (the
// BLAS is not called with K = 0), batched, matrix-vector and dot, and with gradients (each input's
// gradient is empty too).
TEST_P(MatmulBackends, InnerDimensionZeroGivesZeros) {
  for (DType dt : {kFloat32, kFloat64, kFloat16, kInt64}) {
    const Tensor c = matmul(ones({3, 0}, dt), ones({0, 4}, dt));
    EXPECT_EQ(c.shape(), (Shape{3, 4})) << dtype_name(dt);
    EXPECT_EQ(c.tolist(), std::vector<double>(12, 0.0)) << dtype_name(dt);
  }
  const Tensor batched = matmul(full({2, 3, 0}, 5.0), full({2, 0, 4}, 5.0));
  EXPECT_EQ(batched.shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(batched.tolist(), std::vector<double>(24, 0.0));
  EXPECT_EQ(matmul(ones({2, 3, 0}), ones({0, 4})).shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(matmul(ones({3, 0}), ones({0})).tolist(), (std::vector<double>{0, 0, 0}));
  EXPECT_EQ(matmul(ones({0}), ones({0})).item(), 0.0);
  EXPECT_EQ(matmul(ones({0, 3}), ones({3, 4})).shape(), (Shape{0, 4}));
  Tensor a = ones({3, 0}).requires_grad_(), b = ones({0, 4}).requires_grad_();
  matmul(a, b).sum().backward();
  EXPECT_EQ(a.grad().shape(), (Shape{3, 0}));
  EXPECT_EQ(b.grad().shape(), (Shape{0, 4}));
  Tensor m = ones({2, 0}).requires_grad_(), v = ones({0}).requires_grad_();
  matmul(m, v).sum().backward();
  EXPECT_EQ(m.grad().shape(), (Shape{2, 0}));
  EXPECT_EQ(v.grad().shape(), (Shape{0}));
}

INSTANTIATE_TEST_SUITE_P(Cpu, MatmulBackends,
                         ::testing::Values(MatmulBackend::Blas, MatmulBackend::Blocked),
                         [](const auto& info) {
                           return info.param == MatmulBackend::Blas ? std::string("Blas")
                                                                    : std::string("Blocked");
                         });

// OpenBLAS falls back to its generic Prescott kernels on a processor newer than itself (0.3.21
// on Emerald Rapids); the library then picks kernels for what the processor has
// (cpu/matmul.cpp), which chapter 06 needs to print PyTorch's losses. Skipped where the user
// chose the kernels or the processor has no AVX2.
TEST(Matmul, OpenBlasDoesNotRunItsGenericKernelsOnAVectorProcessor) {
  if (!blas_available()) GTEST_SKIP() << "built without OpenBLAS";
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr) GTEST_SKIP() << "OPENBLAS_CORETYPE is set";
#if defined(__x86_64__) && defined(__GNUC__)
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma"))
    GTEST_SKIP() << "no AVX2 with FMA here";
#else
  GTEST_SKIP() << "not x86-64";
#endif
  set_matmul_backend(MatmulBackend::Blas);
  const std::string description = matmul_backend_description();
  EXPECT_EQ(description.find("Prescott"), std::string::npos) << description;
  EXPECT_EQ(std::getenv("OPENBLAS_CORETYPE"), nullptr) << "the environment was left changed";
}

TEST(Matmul, ShapesFollowTorchMatmul) {
  EXPECT_EQ(matmul(ones({16, 32}), ones({32, 2})).shape(), (Shape{16, 2}));
  EXPECT_EQ(matmul(ones({4, 8, 16, 32}), ones({32, 2})).shape(), (Shape{4, 8, 16, 2}));
  EXPECT_EQ(matmul(ones({3}), ones({3})).shape(), (Shape{}));
  EXPECT_EQ(matmul(ones({2, 3}), ones({3})).shape(), (Shape{2}));
  EXPECT_EQ(matmul(ones({3}), ones({3, 5})).shape(), (Shape{5}));
  EXPECT_EQ(matmul(ones({5, 1, 2, 3}), ones({4, 3, 6})).shape(), (Shape{5, 4, 2, 6}));
  EXPECT_EQ(matmul(ones({16, 32}), ones({32, 2})).at({0, 0}), 32.0);
}

TEST(Matmul, IntegerAnd16BitTypes) {
  Tensor a = tensor({{1, 2}, {3, 4}}), b = tensor({{5, 6}, {7, 8}});
  EXPECT_TRUE(equal(matmul(a, b), tensor({{19, 22}, {43, 50}})));
  EXPECT_EQ(matmul(a, b).dtype(), kInt64);
  // 16-bit floats multiply in float32 and round once: exact here.
  for (DType dt : {kFloat16, kBFloat16}) {
    Tensor c = matmul(a.to(dt), b.to(dt));
    EXPECT_EQ(c.dtype(), dt);
    EXPECT_TRUE(equal(c, tensor({{19., 22}, {43, 50}})));
  }
}

TEST(Matmul, ErrorsNameTheShapes) {
  Tensor x = ones({16, 32});
  EXPECT_TRUE(throws_with<RuntimeError>(
      [&] {
        matmul(x, ones({31, 2}));
      },
      "mm: mat1 and mat2 shapes cannot be multiplied (16x32 and 31x2)"));
  EXPECT_TRUE(throws_with<RuntimeError>(
      [&] {
        matmul(ones({16, 32}), ones({2, 32}));
      },
      "mm: mat1 and mat2 shapes cannot be multiplied (16x32 and 2x32)"));
  EXPECT_TRUE(throws_with<RuntimeError>(
      [&] { matmul(ones({3}), ones({4})); },
      "inconsistent tensor size, expected tensor [3] and src [4] to have the same number of "
      "elements, but got 3 and 4 elements respectively"));
  EXPECT_TRUE(throws_with<RuntimeError>(
      [&] {
        matmul(ones({2, 3}), ones({3}, kFloat64));
      },
      "addmv input tensors must have the same dtype, but got Double, Float, and Double"));
  EXPECT_TRUE(throws_with<RuntimeError>([&] { matmul(scalar_tensor(1.0), ones({3})); },
                                        "both arguments to matmul need to be at least 1D"));
  EXPECT_TRUE(throws_with<NotImplementedError>(
      [&] {
        matmul(ones({2, 2}, kBool), ones({2, 2}, kBool));
      },
      "\"addmm_impl_cpu_\" not implemented for 'Bool'"));
  EXPECT_TRUE(throws_with<RuntimeError>(
      [&] {
        matmul(ones({2, 2, 3}), ones({3, 3, 4}));
      },
      "The size of tensor a (2) must match the size of tensor b (3)"));
  // The operands are untouched by a failed call.
  EXPECT_TRUE(equal(x, ones({16, 32})));
}

// Each way torch.matmul folds its operands has its own message; these are PyTorch 2.15's, printed
// by torch.ones(*a) @ torch.ones(*b) for each pair (1.13 folded a 1-D or 2-D operand times a
// batch into one transposed mm, and worded mv's message "size mismatch, got 2, 2x3,4").
TEST(Matmul, MismatchesGetTheMessageOfTheProductPyTorchRuns) {
  const std::vector<std::tuple<Shape, Shape, std::string>> cases = {
      {{3}, {4, 5}, "mm: mat1 and mat2 shapes cannot be multiplied (1x3 and 4x5)"},
      {{2, 3}, {4}, "size mismatch, got input (2), mat (2x3), vec (4)"},
      {{2, 3, 4},
       {2, 5, 6},
       "Expected size for first two dimensions of batch2 tensor to be: [2, 4] but got: [2, 5]."},
      {{2, 3, 4}, {5, 6}, "mm: mat1 and mat2 shapes cannot be multiplied (6x4 and 5x6)"},
      {{3, 4},
       {2, 5, 6},
       "Expected size for first two dimensions of batch2 tensor to be: [2, 4] but got: [2, 5]."},
      {{4},
       {2, 5, 6},
       "Expected size for first two dimensions of batch2 tensor to be: [2, 4] but got: [2, 5]."},
      {{2, 3, 4}, {5}, "size mismatch, got input (6), mat (6x4), vec (5)"},
      {{2, 2, 3, 4},
       {2, 5, 6},
       "Expected size for first two dimensions of batch2 tensor to be: [4, 4] but got: [4, 5]."},
      {{1, 3, 4},
       {2, 5, 6},
       "Expected size for first two dimensions of batch2 tensor to be: [2, 4] but got: [2, 5]."},
      {{3, 2, 3, 4},
       {2, 1, 4, 6},
       "The size of tensor a (3) must match the size of tensor b (2) at non-singleton dimension 0"},
  };
  for (const auto& c : cases) {
    // Plain references: clang before 16 cannot capture structured bindings in a lambda.
    const Shape &a = std::get<0>(c), &b = std::get<1>(c);
    EXPECT_TRUE(throws_with<RuntimeError>([&] { matmul(ones(a), ones(b)); }, std::get<2>(c)))
        << a.size() << "-D @ " << b.size() << "-D";
  }
  EXPECT_TRUE(throws_with<RuntimeError>([] { matmul(ones({2}), ones({2}, kFloat64)); },
                                        "dot : expected both vectors to have same dtype, but "
                                        "found Float and Double"));
  EXPECT_TRUE(throws_with<RuntimeError>(
      [] {
        matmul(ones({2, 2}, kBFloat16), ones({2, 2}, kFloat16));
      },
      "expected m1 and m2 to have the same dtype, but got: c10::BFloat16 != c10::Half"));
}

TEST(Matmul, TriangleMasks) {
  Tensor m = ones({3, 3}).triu();
  EXPECT_TRUE(equal(m, tensor({{1., 1, 1}, {0, 1, 1}, {0, 0, 1}})));
  EXPECT_TRUE(equal(ones({3, 3}).tril(), tensor({{1., 0, 0}, {1, 1, 0}, {1, 1, 1}})));
  EXPECT_TRUE(equal(ones({2, 3}).triu(1), tensor({{0., 1, 1}, {0, 0, 1}})));
  EXPECT_TRUE(equal(ones({2, 2, 2}).tril(-1), tensor({{{0., 0}, {1, 0}}, {{0, 0}, {1, 0}}})));
  // Fewer than two dimensions: PyTorch 2.x's own words (1.13: an IndexError for dimension -2).
  EXPECT_TRUE(throws_with<RuntimeError>([] { ones({3}).triu(); },
                                        "triu: input tensor must have at least 2 dimensions"));
  EXPECT_TRUE(throws_with<RuntimeError>([] { scalar_tensor(1.0).tril(); },
                                        "tril: input tensor must have at least 2 dimensions"));
}

// torch.set_float32_matmul_precision: the three words are remembered as given; any other is
// warned about in PyTorch's words and changes nothing.
TEST(Matmul, Float32PrecisionSettingIsRemembered) {
  const std::string before = float32_matmul_precision();
  EXPECT_EQ(before, "highest");
  for (const char* p : {"medium", "high", "highest"}) {
    set_float32_matmul_precision(p);
    EXPECT_EQ(float32_matmul_precision(), p);
  }
  set_float32_matmul_precision("medium");
  WarningCapture caught;
  set_float32_matmul_precision("HIGH");
  EXPECT_EQ(float32_matmul_precision(), "medium");
  EXPECT_EQ(caught.messages(),
            std::vector<std::string>{"HIGH is not one of 'highest', 'high', or 'medium'; the "
                                     "currentsetFloat32MatmulPrecision call has no effect."});
  set_float32_matmul_precision(before);
}
