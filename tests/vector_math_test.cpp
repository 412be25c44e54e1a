// The eager float32 transcendental ops (exp, log, log1p, expm1, erf, tanh, sigmoid, GELU and
// GELU's backward): every copy of their CPU loop (plain x86-64, AVX2+FMA, AVX-512, picked at run
// time: common/src/cpu/isa.h) gives the same bits, and those bits are the op struct's scalar
// ones, which tests/op_table_test.cpp shows equal to the generated kernels' source. Then the new
// ops (log1p, expm1, erf) against values PyTorch 1.13 printed, their autograd nodes, their out=
// and in-place forms, and the 16-bit floats.
#include <cstring>

#include "cpu/isa.h"
#include "elementwise_ops.h"
#include "test_util.h"

using namespace tiny;
using namespace tiny::testing;
using tiny::detail::cpu::Isa;

namespace {

uint32_t bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}

// Float32 inputs for an op: a strided sweep over every sign and exponent (NaN, infinities and
// subnormals included) from a seeded offset, then values spread over [-12, 12].
std::vector<float> sweep(std::mt19937_64& rng) {
  std::vector<float> xs;
  for (uint64_t u = uniform_int(rng, 0, 4093); u < (1ull << 32); u += 4093) {
    const uint32_t v = static_cast<uint32_t>(u);
    float x;
    std::memcpy(&x, &v, sizeof x);
    xs.push_back(x);
  }
  std::uniform_real_distribution<float> wide(-12, 12);
  for (int i = 0; i < (1 << 16); ++i) xs.push_back(wide(rng));
  return xs;
}

// The op's output on `x` (and `y` for two inputs) with cpu_isa() forced to `isa`.
Tensor eager_with(Isa isa, const std::function<Tensor()>& f) {
  const Isa before = detail::cpu::set_cpu_isa(isa);
  Tensor out = f();
  detail::cpu::set_cpu_isa(before);
  return out;
}

// Checks that every instruction set gives `scalar`'s bits for the eager op `f` on xs.
template <typename Scalar>
void check_clones(const char* name, const std::vector<float>& xs,
                  const std::function<Tensor()>& f, Scalar scalar) {
  for (Isa isa : {Isa::Baseline, Isa::Avx2, Isa::Avx512}) {
    if (isa > detail::cpu::detected_isa()) {
      std::printf("%s: this processor has no %s; that copy is not run\n", name,
                  detail::cpu::isa_name(isa));
      continue;
    }
    const Tensor out = eager_with(isa, f);
    ASSERT_EQ(out.numel(), static_cast<int64_t>(xs.size()));
    const float* y = out.data<float>();
    int bad = 0;
    for (size_t i = 0; i < xs.size(); ++i) {
      const float want = scalar(i);
      if (bits(y[i]) != bits(want) && !(y[i] != y[i] && want != want) && ++bad <= 5)
        ADD_FAILURE() << name << " (" << detail::cpu::isa_name(isa) << ") at "
                      << strprintf("%a", double(xs[i])) << ": " << strprintf("%a", double(y[i]))
                      << ", the op struct gives " << strprintf("%a", double(want));
    }
    EXPECT_EQ(bad, 0) << name << " (" << detail::cpu::isa_name(isa) << ")";
  }
}

}  // namespace

TEST(VectorMath, EveryInstructionSetGivesTheScalarBits) {
  TINY_SEEDED(rng);
  const std::vector<float> xs = sweep(rng);
  const int64_t n = static_cast<int64_t>(xs.size());
  const Tensor x = from_vector(xs, {n});
  std::vector<float> ys(xs.size());
  std::normal_distribution<float> normal;
  for (float& v : ys) v = normal(rng);
  const Tensor y = from_vector(ys, {n});
#define TINY_CHECK_UNARY(FN, OP)                                                         \
  check_clones(#FN, xs, [&] { return FN(x); }, [&](size_t i) { return ops::OP{}(xs[i]); });
  TINY_CHECK_UNARY(exp, Exp)
  TINY_CHECK_UNARY(log, Log)
  TINY_CHECK_UNARY(log1p, Log1p)
  TINY_CHECK_UNARY(expm1, Expm1)
  TINY_CHECK_UNARY(erf, Erf)
  TINY_CHECK_UNARY(tanh, Tanh)
  TINY_CHECK_UNARY(sigmoid, Sigmoid)
  TINY_CHECK_UNARY(gelu, Gelu)
#undef TINY_CHECK_UNARY
  // GELU's backward, through autograd: the gradient ys flows back through gelu(x).
  const Tensor xg = from_vector(xs, {n});
  check_clones(
      "gelu backward", xs,
      [&] {
        Tensor leaf = xg.detach().requires_grad_();
        backward(gelu(leaf), y);
        return leaf.grad();
      },
      [&](size_t i) { return ops::GeluBackward{}(ys[i], xs[i]); });
}

// The TINY_CPU_ISA variable and set_cpu_isa never choose more than the processor has.
TEST(VectorMath, TheChoiceNeverExceedsTheProcessor) {
  const Isa before = detail::cpu::set_cpu_isa(Isa::Avx512);
  EXPECT_LE(detail::cpu::cpu_isa(), detail::cpu::detected_isa());
  detail::cpu::set_cpu_isa(Isa::Baseline);
  EXPECT_EQ(detail::cpu::cpu_isa(), Isa::Baseline);
  detail::cpu::set_cpu_isa(before);
}

// torch.log1p, torch.expm1 and torch.erf of float32 tensor([-0.75, -1e-3, 1e-7, 0.3, 2.5]) in
// PyTorch 1.13 (printed with float.hex), and the names of their autograd nodes.
TEST(VectorMath, NewOpsMatchPyTorch) {
  const std::vector<float> xs = {-0.75f, -1e-3f, 1e-7f, 0.3f, 2.5f};
  struct Case {
    const char* name;
    Tensor (*f)(const Tensor&);
    const char* node;
    std::vector<float> want;
  };
  const std::vector<Case> cases = {
      {"log1p", log1p, "Log1PBackward0",
       {-0x1.62e430p+0f, -0x1.064672p-10f, 0x1.ad7f28p-24f, 0x1.0ca938p-2f, 0x1.40b512p+0f}},
      {"expm1", expm1, "Expm1Backward0",
       {-0x1.0e25f8p-1f, -0x1.060352p-10f, 0x1.ad7f2cp-24f, 0x1.664164p-2f, 0x1.65d6fep+3f}},
      {"erf", erf, "ErfBackward0",
       {-0x1.6c1c98p-1f, -0x1.27cc38p-10f, 0x1.e4a29ap-24f, 0x1.50838ap-2f, 0x1.ffcaa8p-1f}},
  };
  for (const Case& c : cases) {
    const Tensor x = from_vector(xs, {5}).requires_grad_();
    const Tensor y = c.f(x);
    ASSERT_NE(y.grad_fn(), nullptr) << c.name;
    EXPECT_EQ(y.grad_fn()->name(), c.node);
    for (int i = 0; i < 5; ++i) {
      // Both are within an ulp of the true value, so they may differ by one ulp.
      const float got = y.detach().data<float>()[i];
      EXPECT_LE(std::abs(static_cast<int64_t>(bits(got)) - static_cast<int64_t>(bits(c.want[i]))),
                1)
          << c.name << "(" << xs[i] << ") = " << strprintf("%a", double(got));
    }
    // The out= and in-place forms give the same values; integers become float32 as in PyTorch.
    const Tensor plain = c.f(from_vector(xs, {5}));
    Tensor out = empty({5});
    Tensor inplace = from_vector(xs, {5});
    if (std::string(c.name) == "log1p") {
      log1p_out(out, from_vector(xs, {5}));
      inplace.log1p_();
    } else if (std::string(c.name) == "expm1") {
      expm1_out(out, from_vector(xs, {5}));
      inplace.expm1_();
    } else {
      erf_out(out, from_vector(xs, {5}));
      inplace.erf_();
    }
    EXPECT_EQ(element_bytes(out), element_bytes(plain)) << c.name;
    EXPECT_EQ(element_bytes(inplace), element_bytes(plain)) << c.name;
    EXPECT_EQ(c.f(from_vector(std::vector<int64_t>{1, 2}, {2})).dtype(), kFloat32) << c.name;
  }
}

// float16 and bfloat16 compute in float32 and round once: the result is the float32 op's,
// rounded to the 16-bit format.
TEST(VectorMath, SixteenBitFloatsComputeInFloat32) {
  TINY_SEEDED(rng);
  const Tensor x = randn({4096}) * 3;
  for (DType dt : {kFloat16, kBFloat16}) {
    const Tensor x16 = x.to(dt);
    const Tensor x32 = x16.to(kFloat32);
    using UnaryOp = Tensor (*)(const Tensor&);
    for (UnaryOp f : {UnaryOp(exp), UnaryOp(tanh), UnaryOp(erf), UnaryOp(expm1), UnaryOp(sigmoid),
                      UnaryOp(gelu)}) {
      const Tensor got = f(x16);
      EXPECT_EQ(got.dtype(), dt);
      EXPECT_EQ(element_bytes(got), element_bytes(f(x32).to(dt))) << dtype_name(dt);
    }
    const Tensor positive = abs(x16);
    for (UnaryOp f : {UnaryOp(log), UnaryOp(log1p)})
      EXPECT_EQ(element_bytes(f(positive)), element_bytes(f(positive.to(kFloat32)).to(dt)));
  }
}
