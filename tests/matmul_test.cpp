// matmul against a float64 triple loop, through both CPU implementations (OpenBLAS and the
// blocked loops), on random shapes and layouts; torch.matmul's shape rules; its errors.
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

INSTANTIATE_TEST_SUITE_P(Cpu, MatmulBackends,
                         ::testing::Values(MatmulBackend::Blas, MatmulBackend::Blocked),
                         [](const auto& info) {
                           return info.param == MatmulBackend::Blas ? std::string("Blas")
                                                                    : std::string("Blocked");
                         });

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
      "mat1 and mat2 shapes cannot be multiplied (16x32 and 31x2)"));
  EXPECT_TRUE(throws_with<RuntimeError>(
      [&] {
        matmul(ones({16, 32}), ones({2, 32}));
      },
      "mat1 and mat2 shapes cannot be multiplied (16x32 and 2x32)"));
  EXPECT_TRUE(throws_with<RuntimeError>(
      [&] { matmul(ones({3}), ones({4})); },
      "inconsistent tensor size, expected tensor [3] and src [4] to have the same number of "
      "elements, but got 3 and 4 elements respectively"));
  EXPECT_TRUE(throws_with<RuntimeError>(
      [&] {
        matmul(ones({2, 3}), ones({3}, kFloat64));
      },
      "expected m1 and m2 to have the same dtype"));
  EXPECT_TRUE(throws_with<RuntimeError>([&] { matmul(scalar_tensor(1.0), ones({3})); },
                                        "both arguments to matmul need to be at least 1D"));
  EXPECT_TRUE(throws_with<TypeError>(
      [&] {
        matmul(ones({2, 2}, kBool), ones({2, 2}, kBool));
      },
      "not implemented for 'Bool'"));
  EXPECT_TRUE(throws_with<RuntimeError>(
      [&] {
        matmul(ones({2, 2, 3}), ones({3, 3, 4}));
      },
      "The size of tensor a (2) must match the size of tensor b (3)"));
  // The operands are untouched by a failed call.
  EXPECT_TRUE(equal(x, ones({16, 32})));
}

TEST(Matmul, TriangleMasks) {
  Tensor m = ones({3, 3}).triu();
  EXPECT_TRUE(equal(m, tensor({{1., 1, 1}, {0, 1, 1}, {0, 0, 1}})));
  EXPECT_TRUE(equal(ones({3, 3}).tril(), tensor({{1., 0, 0}, {1, 1, 0}, {1, 1, 1}})));
  EXPECT_TRUE(equal(ones({2, 3}).triu(1), tensor({{0., 1, 1}, {0, 0, 1}})));
  EXPECT_TRUE(equal(ones({2, 2, 2}).tril(-1), tensor({{{0., 0}, {1, 0}}, {{0, 0}, {1, 0}}})));
  EXPECT_TRUE(throws_with<RuntimeError>([] { ones({3}).triu(); }, "at least 2 dimensions"));
}
