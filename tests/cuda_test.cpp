// cuda_test.cpp: the CUDA backend against the CPU. Every op runs on both devices on fresh random
// shapes, dtypes and layouts (contiguous, permuted, strided, broadcast), and the GPU's answer,
// copied back, must equal the CPU's: exactly where both compute the same IEEE operations, within
// a few units of the last place where the GPU's math library may round differently (exp, log,
// pow), and against a float64 reference for matmul, whose summation order cuBLAS chooses.
//
// Without a device each test skips and says why; the first suite checks what a CPU-only machine
// must answer instead.
#include <gtest/gtest.h>

#include <array>

#include "dispatch.h"
#include "internal.h"
#include "test_util.h"
#include "tiny/tiny.h"

using namespace tiny;
using namespace tiny::testing;

#define TINY_REQUIRE_CUDA() \
  if (!cuda::available()) GTEST_SKIP() << "no CUDA device: " << cuda::unavailable_reason()

namespace {

const Device kGpu = Device::cuda(0);

// The values of `t` as `dtype` on the GPU, laid out at random: contiguous, permuted memory, or
// every other element of a larger buffer (written through a cross-device copy into the view).
Tensor on_gpu(std::mt19937_64& rng, const Tensor& t, DType dtype) {
  const int kind = static_cast<int>(uniform_int(rng, 0, 2));
  if (kind == 0 || t.dim() == 0) return t.to(dtype).to(kGpu);
  if (kind == 1) {
    std::vector<int64_t> order(t.dim()), inverse(t.dim());
    for (int64_t i = 0; i < t.dim(); ++i) order[i] = i;
    std::shuffle(order.begin(), order.end(), rng);
    for (int64_t i = 0; i < t.dim(); ++i) inverse[order[i]] = i;
    return t.permute(order).to(dtype).contiguous().to(kGpu).permute(inverse);
  }
  Shape big = t.shape();
  for (auto& s : big) s *= 2;
  Tensor view = zeros(big, dtype, kGpu);
  for (int64_t d = 0; d < t.dim(); ++d) view = view.slice(d, 1, std::nullopt, 2);
  view.copy_(t);
  return view;
}

// A shape that broadcasts against `shape`: some dimensions set to 1, some leading ones dropped.
Shape broadcastable(std::mt19937_64& rng, Shape shape) {
  for (auto& s : shape)
    if (uniform_int(rng, 0, 3) == 0) s = 1;
  const int64_t drop = uniform_int(rng, 0, static_cast<int64_t>(shape.size()));
  if (uniform_int(rng, 0, 2) == 0) shape.erase(shape.begin(), shape.begin() + drop);
  return shape;
}

const DType kFloats[] = {kFloat32, kFloat64, kFloat16, kBFloat16};

}  // namespace

// ---- a machine without a device ---------------------------------------------------------------

TEST(CudaAbsent, EveryGpuRequestSaysWhy) {
  if (cuda::available()) GTEST_SKIP() << "a CUDA device is present";
  const std::string reason = cuda::unavailable_reason();
  EXPECT_FALSE(reason.empty());
  EXPECT_TRUE(throws_with<RuntimeError>([] { cuda::synchronize(); }, reason));
  EXPECT_TRUE(throws_with<RuntimeError>([] { cuda::Event e; }, "CUDA is not available"));
  EXPECT_TRUE(throws_with<RuntimeError>([] { ones({2}).pin_memory(); }, "CUDA is not available"));
  EXPECT_TRUE(throws_with<RuntimeError>([] { ones({2}).cuda(); }, "cannot use cuda:0"));
  EXPECT_TRUE(throws_with<RuntimeError>([] { memory_allocated(kGpu); }, "cannot use cuda:0"));
  EXPECT_TRUE(throws_with<RuntimeError>([] { cuda::get_device_properties(0); }, reason));
  // The CPU path of the same helpers works.
  EXPECT_NO_THROW(timed([] { ones({8}).sum(); }, Device::cpu(), 3));
  EXPECT_NO_THROW(synchronize(Device::cpu()));
  EXPECT_TRUE(equal(ones({3}).cpu(), ones({3})));
}

// ---- the cuBLAS call, checked on the CPU ------------------------------------------------------

// cuBLAS's gemm as its documentation defines it, column-major: element (i, j) of X is at
// X[i + j * ld], op(X) is X or its transpose, and C = op(A) op(B) is m x n with inner size k.
static void column_major_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const double* A,
                              int64_t lda, const double* B, int64_t ldb, double* C, int64_t ldc) {
  auto at = [](const double* X, int64_t ld, bool t, int64_t i, int64_t j) {
    return t ? X[j + i * ld] : X[i + j * ld];
  };
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0;
      for (int64_t l = 0; l < k; ++l) sum += at(A, lda, ta, i, l) * at(B, ldb, tb, l, j);
      C[i + j * ldc] = sum;
    }
}

// matmul.cu asks cuBLAS for C^T = B^T A^T with each operand's flag and leading dimension from
// detail::blas_layout. Making that same call on a reference implementation of cuBLAS's contract
// must give the row-major product, for every layout an operand can arrive in: this checks the
// GPU path's one tricky piece of index math without a GPU.
TEST(CublasCall, SwappedColumnMajorCallGivesTheRowMajorProduct) {
  TINY_SEEDED(rng);
  for (int trial = 0; trial < 300; ++trial) {
    const int64_t M = uniform_int(rng, 1, 6), K = uniform_int(rng, 1, 6),
                  N = uniform_int(rng, 1, 6);
    Tensor a = random_layout(rng, random_values(rng, {M, K}), kFloat64);
    Tensor b = random_layout(rng, random_values(rng, {K, N}), kFloat64);
    auto layout_of = [](Tensor& t) {
      auto l = detail::blas_layout(t.size(0), t.size(1), t.stride(0), t.stride(1));
      if (!l) {  // what matmul.cu does: pack it, then ask again
        t = t.contiguous();
        l = detail::blas_layout(t.size(0), t.size(1), t.stride(0), t.stride(1));
      }
      return *l;
    };
    const detail::BlasLayout la = layout_of(a), lb = layout_of(b);
    Tensor c = empty({M, N}, kFloat64);
    column_major_gemm(lb.transposed, la.transposed, N, M, K, b.data<double>(), lb.ld,
                      a.data<double>(), la.ld, c.data<double>(), N);
    ASSERT_TRUE(close(c, matmul(a, b), 1e-12, 1e-12))
        << "a strides " << format_tuple(a.strides()) << ", b strides " << format_tuple(b.strides());
  }
}

// The general elementwise kernel finds each element's operands by dividing its linear index
// (detail::LoopGeometry). Checked here against the plain definition, the sum of index times
// stride, on random layouts and broadcasts after the CPU's coalescing.
TEST(KernelGeometry, OffsetsAreIndexTimesStride) {
  TINY_SEEDED(rng);
  for (int trial = 0; trial < 300; ++trial) {
    const Shape shape = random_shape(rng, 5, 4);
    const Tensor out = empty(shape);
    const Tensor a = random_layout(rng, random_values(rng, shape), kFloat32);
    const Tensor b = random_layout(rng, random_values(rng, broadcastable(rng, shape)), kFloat32);
    const std::array<Strides, 3> strides = {out.strides(), detail::broadcast_strides(a, shape),
                                            detail::broadcast_strides(b, shape)};
    const auto loop = detail::coalesce<3>(shape, {&strides[0], &strides[1], &strides[2]});
    if (loop.empty) continue;
    const auto geometry = detail::LoopGeometry<3>::from(loop);
    const auto indices = all_indices(shape);
    for (size_t linear = 0; linear < indices.size(); ++linear) {
      int64_t off[3];
      geometry.offsets(static_cast<int64_t>(linear), off);
      for (int k = 0; k < 3; ++k) {
        int64_t expected = 0;
        for (size_t d = 0; d < shape.size(); ++d) expected += indices[linear][d] * strides[k][d];
        ASSERT_EQ(off[k], expected)
            << "operand " << k << ", element " << linear << " of " << format_tuple(shape);
      }
    }
  }
}

// ---- memory ---------------------------------------------------------------------------------

TEST(CudaMemory, TwoSmallMatricesAreExactly8KiB) {
  TINY_REQUIRE_CUDA();
  const Tensor x = ones({32, 32});
  const int64_t before = memory_allocated(kGpu), cpu_before = memory_allocated(Device::cpu());
  {
    const Tensor y = x.to(kGpu);                       // moved
    const Tensor z = zeros({32, 32}, kFloat32, kGpu);  // created there
    EXPECT_EQ(memory_allocated(kGpu) - before, 2 * (32 * 32 * 4));
    EXPECT_EQ(memory_allocated(Device::cpu()), cpu_before);  // each device counts its own
  }
  EXPECT_EQ(memory_allocated(kGpu), before);
}

TEST(CudaMemory, PeakResetAndCache) {
  TINY_REQUIRE_CUDA();
  reset_peak_memory_stats(kGpu);
  const int64_t before = memory_allocated(kGpu);
  { const Tensor big = empty({1000, 1000}, kFloat32, kGpu); }
  EXPECT_EQ(memory_allocated(kGpu), before);
  // 4,000,000 bytes, rounded up to a multiple of 512 as PyTorch accounts them.
  EXPECT_EQ(max_memory_allocated(kGpu) - before, 4000256);
  const int64_t hits = memory_stats(kGpu).cache_hits;
  { const Tensor again = empty({1000, 1000}, kFloat32, kGpu); }
  EXPECT_EQ(memory_stats(kGpu).cache_hits, hits + 1);  // the freed block came back
  reset_peak_memory_stats(kGpu);
  EXPECT_EQ(max_memory_allocated(kGpu), memory_allocated(kGpu));
  empty_cache(kGpu);
  EXPECT_GE(memory_stats(kGpu).reserved, memory_allocated(kGpu));
}

// ---- copies -----------------------------------------------------------------------------------

TEST(CudaCopy, RoundTripsEveryDtypeAndLayout) {
  TINY_REQUIRE_CUDA();
  TINY_SEEDED(rng);
  for (int trial = 0; trial < 60; ++trial) {
    const Shape shape = random_shape(rng, 4, 6);
    const Tensor values = random_values(rng, shape) * 4.0;
    for (DType dt : kAllDTypes) {
      const Tensor expected = values.to(dt);
      const Tensor g = on_gpu(rng, values, dt);
      EXPECT_EQ(g.device(), kGpu);
      ASSERT_TRUE(equal(g.cpu(), expected)) << dtype_name(dt) << " " << format_tuple(shape);
      // A conversion on the GPU equals the CPU's, from every dtype to every dtype.
      for (DType to : kAllDTypes) ASSERT_TRUE(equal(g.to(to).cpu(), expected.to(to)));
    }
  }
}

TEST(CudaCopy, NonBlockingCopiesAreOrdered) {
  TINY_REQUIRE_CUDA();
  TINY_SEEDED(rng);
  for (int trial = 0; trial < 20; ++trial) {
    const Tensor x = random_values(rng, {257, 129}).to(kFloat32);
    const Tensor pinned = x.pin_memory();
    EXPECT_TRUE(pinned.is_pinned());
    EXPECT_FALSE(x.is_pinned());
    // Queued: the copy, then the kernel that reads its result, then a copy back into pinned
    // memory; the host waits once, at the end.
    const Tensor y = pinned.to(kGpu, /*non_blocking=*/true);
    const Tensor doubled = y * 2.0;
    Tensor back = empty(x.shape()).pin_memory();
    back.copy_(doubled, /*non_blocking=*/true);
    cuda::synchronize();
    ASSERT_TRUE(equal(back, x * 2.0));
  }
}

TEST(CudaCopy, PinnedBufferIsNotReusedWhileACopyReadsIt) {
  TINY_REQUIRE_CUDA();
  // A large GPU job first, so the copies below wait in the queue behind it.
  const Tensor a = ones({4096, 4096}, kFloat32, kGpu);
  std::vector<Tensor> results;
  for (int i = 0; i < 8; ++i) {
    const Tensor busy = matmul(a, a);
    Tensor staging = full({1 << 20}, static_cast<double>(i)).pin_memory();
    results.push_back(staging.to(kGpu, /*non_blocking=*/true));
    // `staging` dies here; its block goes back to the pinned cache, and the next iteration's
    // full().pin_memory() may get it and overwrite it, but only after this copy has read it.
  }
  for (int i = 0; i < 8; ++i)
    EXPECT_EQ(results[i].sum().item(), static_cast<double>(i) * (1 << 20)) << "batch " << i;
}

// ---- elementwise ------------------------------------------------------------------------------

TEST(CudaOps, BinaryOpsMatchTheCpu) {
  TINY_REQUIRE_CUDA();
  TINY_SEEDED(rng);
  using Op = Tensor (*)(const Tensor&, const Tensor&);
  struct Case {
    const char* name;
    Op op;
    bool exact;
  };
  const Case cases[] = {{"add", [](const Tensor& a, const Tensor& b) { return add(a, b); }, true},
                        {"sub", [](const Tensor& a, const Tensor& b) { return sub(a, b); }, true},
                        {"mul", mul, true},
                        {"div", div, true},
                        {"maximum", maximum, true},
                        {"minimum", minimum, true},
                        {"eq", eq, true},
                        {"lt", lt, true},
                        {"ge", ge, true},
                        {"pow", pow, false}};
  for (int trial = 0; trial < 40; ++trial) {
    const Shape shape = random_shape(rng, 4, 7);
    const Tensor xv = random_values(rng, shape, true),
                 yv = random_values(rng, broadcastable(rng, shape), true);
    for (DType dt : {kFloat32, kFloat64, kFloat16, kBFloat16, kInt32, kInt64}) {
      const Tensor x = xv.to(dt), y = yv.to(dt);
      const Tensor gx = on_gpu(rng, xv, dt), gy = on_gpu(rng, yv, dt);
      for (const Case& c : cases) {
        if (std::string(c.name) == "pow" && !is_floating(dt)) continue;
        SCOPED_TRACE(std::string(c.name) + " " + dtype_name(dt) + " " + format_tuple(shape));
        const Tensor cpu = c.op(x, y), gpu = c.op(gx, gy);
        ASSERT_EQ(gpu.device(), kGpu);
        ASSERT_EQ(gpu.dtype(), cpu.dtype());
        // Integer inputs of 0 make 0 / 0 = NaN on both devices: close() counts two NaNs as equal.
        if (c.exact) ASSERT_TRUE(close(gpu, cpu, 0, 0));
        else ASSERT_TRUE(close(gpu, cpu, 0, 4 * eps_of(cpu.dtype())));
      }
    }
  }
}

TEST(CudaOps, UnaryOpsMatchTheCpu) {
  TINY_REQUIRE_CUDA();
  TINY_SEEDED(rng);
  using Op = Tensor (*)(const Tensor&);
  const std::pair<const char*, Op> cases[] = {
      {"neg", neg}, {"abs", abs}, {"relu", relu},       {"sqrt", sqrt}, {"rsqrt", rsqrt},
      {"exp", exp}, {"log", log}, {"sigmoid", sigmoid}, {"tanh", tanh}, {"gelu", gelu}};
  for (int trial = 0; trial < 40; ++trial) {
    const Shape shape = random_shape(rng, 4, 7);
    const Tensor v = random_values(rng, shape, true);
    for (DType dt : kFloats) {
      const Tensor x = v.to(dt), gx = on_gpu(rng, v, dt);
      for (const auto& [name, op] : cases) {
        SCOPED_TRACE(std::string(name) + " " + dtype_name(dt));
        // neg, abs and relu are exact; the others go through the GPU's math library, which may
        // differ from glibc's by an ulp or two before the final rounding to dtype.
        ASSERT_TRUE(close(op(gx), op(x), 0, 4 * eps_of(dt)));
      }
      ASSERT_TRUE(equal(x.pow(2).cpu(), gx.pow(2).cpu()));
    }
  }
}

// Every row of the op table, run by the dispatcher on the GPU and on the CPU with the same
// inputs (positive, so that log and sqrt are defined; broadcast and laid out at random) and the
// same scalars: the CUDA kernel of each row is the same expression as the CPU's.
TEST(CudaOps, EveryOpTableRowMatchesTheCpu) {
  TINY_REQUIRE_CUDA();
  TINY_SEEDED(rng);
  for (const OpInfo* info : op_table()) {
    const detail::OpEntry& row = *detail::find_op_entry(info->name);
    for (DType dt : kFloats) {
      SCOPED_TRACE(std::string(info->name) + " " + dtype_name(dt));
      const Shape shape = random_shape(rng, 3, 6);
      std::vector<Tensor> cpu, gpu;
      for (int k = 0; k < info->arity; ++k) {
        const Tensor v = random_values(rng, k == 0 ? shape : broadcastable(rng, shape), true);
        cpu.push_back(v.to(dt));
        gpu.push_back(on_gpu(rng, v, dt));
      }
      auto call = [&](const std::vector<Tensor>& in) {
        detail::Call c{.op = &row, .scalars = {0.3, 0.7}};
        for (int k = 0; k < info->arity; ++k) c.inputs[k] = &in[k];
        return detail::run(c);
      };
      // Transcendental functions go through the GPU's math library, which may differ from
      // glibc's by an ulp or two before the final rounding to dtype.
      ASSERT_TRUE(close(call(gpu).cpu(), call(cpu), 0, 4 * eps_of(dt)));
    }
  }
}

// The out= and in-place forms write into GPU memory as they do on the CPU, and a destination on
// another device is refused with PyTorch's message.
TEST(CudaOps, OutAndInPlaceFormsOnTheGpu) {
  TINY_REQUIRE_CUDA();
  const Tensor a = arange(6, kFloat32).view({2, 3}), b = full({3}, 0.5);
  const Tensor ga = a.cuda(), gb = b.cuda();
  Tensor out = empty({2, 3}, kFloat32, kGpu);
  addcmul_out(out, ga, ga, gb, 2);
  EXPECT_TRUE(equal(out.cpu(), addcmul(a, a, b, 2)));
  Tensor m = ga.clone();
  m.mul_(0.9).lerp_(gb.expand({2, 3}), 0.1).clamp_(0.5, 3.0);
  Tensor c = a.clone();
  c.mul_(0.9).lerp_(b.expand({2, 3}), 0.1).clamp_(0.5, 3.0);
  EXPECT_TRUE(close(m.cpu(), c, 0, 4 * eps_of(kFloat32)));
  EXPECT_TRUE(throws_with<RuntimeError>(
      [&] {
        add_out(empty({2, 3}), ga, ga);
      },
      "Expected all tensors to be on the same device"));
  // A 0-dim CPU tensor is a number as an input, but not as a destination.
  Tensor number = scalar_tensor(1.0);
  EXPECT_TRUE(throws_with<RuntimeError>([&] { number.add_(sum(ga)); },
                                        "Expected all tensors to be on the same device"));
}

TEST(CudaOps, CpuScalarsJoinGpuTensors) {
  TINY_REQUIRE_CUDA();
  const Tensor x = arange(6, kFloat32).view({2, 3});
  const Tensor g = x.cuda();
  EXPECT_TRUE(equal((g * 2.5).cpu(), x * 2.5));
  EXPECT_TRUE(equal((1.0 - g).cpu(), 1.0 - x));
  EXPECT_TRUE(
      equal(where(g > 2.0, g, scalar_tensor(0.0)).cpu(), where(x > 2.0, x, scalar_tensor(0.0))));
  Tensor filled = empty({2, 3}, kFloat16, kGpu);
  filled.fill_(7);
  EXPECT_TRUE(equal(filled.cpu(), full({2, 3}, 7, kFloat16)));
  EXPECT_TRUE(throws_with<RuntimeError>([&] { add(g, x); },
                                        "Expected all tensors to be on the same device"));
  EXPECT_TRUE(throws_with<RuntimeError>([&] { matmul(g, x.T()); }, "same device"));
}

TEST(CudaOps, WhereTriangleAndContiguous) {
  TINY_REQUIRE_CUDA();
  TINY_SEEDED(rng);
  for (int trial = 0; trial < 20; ++trial) {
    const Shape shape = {uniform_int(rng, 1, 4), uniform_int(rng, 1, 9), uniform_int(rng, 1, 9)};
    const Tensor v = random_values(rng, shape);
    const Tensor g = on_gpu(rng, v, kFloat32), c = v.to(kFloat32);
    EXPECT_TRUE(equal(where(g > 0.0, g, -g).cpu(), where(c > 0.0, c, -c)));
    EXPECT_TRUE(equal(g.triu(1).cpu(), c.triu(1)));
    EXPECT_TRUE(equal(g.tril(-1).cpu(), c.tril(-1)));
    const Tensor t = g.transpose(0, 2).contiguous();
    EXPECT_TRUE(t.is_contiguous());
    EXPECT_TRUE(equal(t.cpu(), c.transpose(0, 2)));
  }
}

// ---- reductions -------------------------------------------------------------------------------

TEST(CudaReduce, SumMeanMaxMatchTheCpu) {
  TINY_REQUIRE_CUDA();
  TINY_SEEDED(rng);
  for (int trial = 0; trial < 60; ++trial) {
    const Shape shape = random_shape(rng, 4, 9);
    const Tensor v = random_values(rng, shape);
    std::vector<int64_t> dims;
    for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d)
      if (uniform_int(rng, 0, 1)) dims.push_back(d);
    const bool keepdim = uniform_int(rng, 0, 1);
    for (DType dt : {kFloat32, kFloat64, kFloat16, kBFloat16, kInt32, kInt64, kBool}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " " + format_tuple(shape));
      const Tensor c = (dt == kBool ? v > 0.0 : (v * 5.0).to(dt));
      const Tensor g = on_gpu(rng, c, dt);
      // Both devices add in float64 (int64 for integers); only the order differs, so the
      // results agree to float64 rounding (absolute, when a sum cancels to near zero) before
      // the final rounding to dtype. Integer sums are exact.
      const double tol = is_floating(dt) ? eps_of(dt) : 0, atol = is_floating(dt) ? 1e-9 : 0;
      ASSERT_TRUE(close(g.sum(), c.sum(), atol, tol));
      ASSERT_TRUE(close(g.sum(dims, keepdim), c.sum(dims, keepdim), atol, tol));
      if (is_floating(dt)) {
        ASSERT_TRUE(close(g.mean(dims, keepdim), c.mean(dims, keepdim), atol, tol));
      }
      if (c.numel() > 0) {
        ASSERT_TRUE(equal(g.max().cpu(), c.max()));
        if (c.dim() > 0) {
          const int64_t d = uniform_int(rng, 0, c.dim() - 1);
          const MaxResult gm = max(g, d, keepdim), cm = max(c, d, keepdim);
          ASSERT_TRUE(equal(gm.values.cpu(), cm.values));
          ASSERT_TRUE(equal(gm.indices.cpu(), cm.indices));  // the first of equal maxima
        }
      }
    }
  }
}

TEST(CudaReduce, LongRowsAreSplitAcrossBlocks) {
  TINY_REQUIRE_CUDA();
  // 2^24 + 3 ones: every block's piece and the second pass must all be counted.
  const int64_t n = (int64_t(1) << 24) + 3;
  const Tensor g = ones({n}, kFloat32, kGpu);
  EXPECT_EQ(g.sum().item(), static_cast<double>(n));
  EXPECT_EQ(ones({3, n / 3}, kInt32, kGpu).sum({1}).cpu().tolist(),
            std::vector<double>(3, static_cast<double>(n / 3)));
  Tensor nan_last = zeros({n}, kFloat32, kGpu);
  nan_last.index({Slice{n - 1, std::nullopt}}) = std::nan("");
  EXPECT_TRUE(std::isnan(nan_last.max().item()));
}

// ---- matmul -----------------------------------------------------------------------------------

TEST(CudaMatmul, EveryFloatTypeAgainstAFloat64Reference) {
  TINY_REQUIRE_CUDA();
  TINY_SEEDED(rng);
  for (int trial = 0; trial < 30; ++trial) {
    const int64_t M = uniform_int(rng, 1, 70), K = uniform_int(rng, 1, 300),
                  N = uniform_int(rng, 1, 70);
    const int64_t B = uniform_int(rng, 1, 3);
    const Tensor a = random_values(rng, {B, M, K}), b = random_values(rng, {K, N});
    for (DType dt : kFloats) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " " + std::to_string(M) + "x" + std::to_string(K) +
                   "x" + std::to_string(N));
      const Tensor ga = on_gpu(rng, a, dt);
      // b sometimes arrives transposed in memory (the backward pass's layout).
      const Tensor gb =
          uniform_int(rng, 0, 1) ? on_gpu(rng, b, dt) : on_gpu(rng, b.T().contiguous(), dt).T();
      // The reference multiplies the inputs as stored (already rounded to dtype) in float64.
      const Tensor ref = matmul(a.to(dt).to(kFloat64), b.to(dt).to(kFloat64));
      const Tensor got = matmul(ga, gb);
      ASSERT_EQ(got.dtype(), dt);
      // Each output sums K products of values up to 2 in size: allow K float32 roundings, plus
      // the one rounding of the result to dtype.
      const double atol =
          4.0 * static_cast<double>(K) * 1.2e-7 * 4 + (dt == kFloat64 ? 0 : 4 * eps_of(dt));
      ASSERT_TRUE(close(got, ref, atol, eps_of(dt)));
      // Batched operands on both sides, and vectors.
      ASSERT_TRUE(close(matmul(ga, gb.unsqueeze(0).expand({B, K, N})), ref, atol, eps_of(dt)));
      ASSERT_TRUE(close(matmul(ga[0][0], gb), ref[0][0], atol, eps_of(dt)));
    }
  }
}

TEST(CudaMatmul, Tf32IsAnExplicitChoice) {
  TINY_REQUIRE_CUDA();
  TINY_SEEDED(rng);
  // Large enough that cuBLAS takes its tensor-core kernels.
  const Tensor a = random_values(rng, {512, 1024}), b = random_values(rng, {1024, 512});
  const Tensor ref = matmul(a, b);
  const Tensor ga = a.to(kFloat32).cuda(), gb = b.to(kFloat32).cuda();
  EXPECT_EQ(float32_matmul_precision(), "highest");
  const Tensor full_precision = matmul(ga, gb);
  set_float32_matmul_precision("high");
  const Tensor tf32 = matmul(ga, gb);
  set_float32_matmul_precision("highest");
  const double err_fp32 = abs(full_precision.cpu().to(kFloat64) - ref).max().item();
  const double err_tf32 = abs(tf32.cpu().to(kFloat64) - ref).max().item();
  // TF32 keeps 10 mantissa bits of each input: its error is far above float32's.
  EXPECT_LT(err_fp32, 1e-3);
  EXPECT_GT(err_tf32, 10 * err_fp32);
  EXPECT_LT(err_tf32, 0.5);
  // A word PyTorch does not know is warned about and leaves the setting as it was.
  WarningCapture caught;
  set_float32_matmul_precision("fast");
  EXPECT_EQ(caught.messages().size(), 1u);
  EXPECT_EQ(float32_matmul_precision(), "highest");
}

TEST(CudaMatmul, IntegersAreRefusedAsInPyTorch) {
  TINY_REQUIRE_CUDA();
  const Tensor a = ones({2, 2}, kInt64, kGpu);
  EXPECT_TRUE(
      throws_with<RuntimeError>([&] { matmul(a, a); }, "\"addmm_cuda\" not implemented for 'Long'"));
}

// ---- autograd, printing, events -----------------------------------------------------------------

TEST(CudaAutograd, GradientsMatchTheCpu) {
  TINY_REQUIRE_CUDA();
  TINY_SEEDED(rng);
  const Tensor xv = random_values(rng, {16, 32}).to(kFloat64),
               w1v = random_values(rng, {32, 24}).to(kFloat64),
               w2v = random_values(rng, {24, 1}).to(kFloat64);
  auto grads = [&](Device d) {
    const Tensor x = xv.to(d);
    Tensor w1 = w1v.to(d).detach(), w2 = w2v.to(d).detach();
    w1.requires_grad_();
    w2.requires_grad_();
    const Tensor loss = matmul(matmul(x, w1).relu().sigmoid(), w2).pow(2).mean();
    loss.backward();
    return std::vector<Tensor>{loss.cpu(), w1.grad().cpu(), w2.grad().cpu()};
  };
  const auto c = grads(Device::cpu()), g = grads(kGpu);
  for (size_t i = 0; i < c.size(); ++i) EXPECT_TRUE(close(g[i], c[i], 1e-12, 1e-10)) << i;
  // Moving between devices is itself a recorded op: the gradient flows back to the CPU leaf.
  Tensor leaf = xv.detach();
  leaf.requires_grad_();
  (leaf.to(kGpu) * 3.0).sum().backward();
  EXPECT_EQ(leaf.grad().device(), Device::cpu());
  EXPECT_TRUE(equal(leaf.grad(), full(xv.shape(), 3.0, kFloat64)));
}

TEST(CudaFormat, PrintsLikePyTorch) {
  TINY_REQUIRE_CUDA();
  EXPECT_EQ(tensor({1.5, 2.0}).cuda().str(), "tensor([1.5000, 2.0000], device='cuda:0')");
  EXPECT_EQ(ones({2}, kFloat16).cuda().str(),
            "tensor([1., 1.], device='cuda:0', dtype=torch.float16)");
  const std::string props = cuda::get_device_properties(0).str();
  EXPECT_EQ(props.rfind("_CudaDeviceProperties(name='", 0), 0u) << props;
}

TEST(CudaTiming, EventsAndTheSynchronizingTimer) {
  TINY_REQUIRE_CUDA();
  const Tensor a = ones({2048, 2048}, kFloat32, kGpu);
  cuda::Event start, stop;
  start.record();
  const Tensor c = matmul(a, a);
  stop.record();
  stop.synchronize();
  EXPECT_TRUE(stop.query());
  const double ms = start.elapsed_time(stop);
  EXPECT_GT(ms, 0.0);
  EXPECT_EQ(c.at({0, 0}), 2048.0);
  // The timer waits for the device, so it measures at least the GPU's own time.
  const double s = timed([&] { matmul(a, a); }, kGpu, 5);
  EXPECT_GT(s * 1e3, 0.5 * ms);
}
