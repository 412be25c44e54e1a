// The op table and its dispatcher: every row's source text computes what its kernel computes
// (compiled on its own, as a generated kernel is); the new ops against float64 loops; the out=
// and in-place forms and PyTorch's checks on them; the cost counter; autocast's classes.
#include <cstring>
#include <limits>

#include "elementwise_ops.h"
#include "op_list.h"
#include "test_util.h"

using namespace tiny;
using namespace tiny::testing;

// Written by tests/op_source_gen.cpp at build time: each row's source after the prelude.
struct GeneratedOp {
  const char* name;
  double (*f64)(double, double, double, double, double);
  float (*f32)(float, float, float, float, float);
};
extern const GeneratedOp kGeneratedOps[];
extern const int kGeneratedOpCount;

namespace {

const GeneratedOp* generated(const char* name) {
  for (int i = 0; i < kGeneratedOpCount; ++i)
    if (std::strcmp(kGeneratedOps[i].name, name) == 0) return &kGeneratedOps[i];
  return nullptr;
}

// The kernels' value of op struct Op at (x, y, z) with scalars (a, b), as the CPU loops and the
// CUDA kernels compute it.
template <typename Op, typename T> double kernel_value(T x, T y, T z, T a, T b) {
  Op op{};
  op.p = {static_cast<double>(a), static_cast<double>(b)};
  if constexpr (Op::arity == 1) return static_cast<double>(op(x));
  else if constexpr (Op::arity == 2) return static_cast<double>(op(x, y));
  else return static_cast<double>(op(x, y, z));
}

bool same(double a, double b) {
  return (std::isnan(a) && std::isnan(b)) || std::memcmp(&a, &b, sizeof a) == 0;
}

// Inputs that reach every branch: signed zeros, infinities, NaN, integers, values around the
// clamp bounds and lerp's switch at 0.5, and random ones.
std::vector<double> probe_values(std::mt19937_64& rng) {
  std::vector<double> v = {0.0,
                           -0.0,
                           1.0,
                           -1.0,
                           0.5,
                           -0.5,
                           0.49,
                           0.51,
                           2.0,
                           3.0,
                           1e-30,
                           -1e30,
                           std::numeric_limits<double>::infinity(),
                           -std::numeric_limits<double>::infinity(),
                           std::numeric_limits<double>::quiet_NaN()};
  std::uniform_real_distribution<double> u(-4, 4);
  for (int i = 0; i < 40; ++i) v.push_back(u(rng));
  return v;
}

}  // namespace

TEST(OpTable, EveryRowIsInThePublicTable) {
  const auto rows = op_table();
  ASSERT_EQ(static_cast<int>(rows.size()), kGeneratedOpCount);
  for (const OpInfo* op : rows) {
    EXPECT_EQ(&op_info(op->name), op) << op->name;
    EXPECT_GE(op->arity, 1);
    EXPECT_LE(op->arity, 3);
    EXPECT_GT(std::strlen(op->source), 0u) << op->name;
  }
  EXPECT_STREQ(op_info("add").node, "AddBackward0");
  EXPECT_STREQ(op_info("add").scalars, "alpha");
  EXPECT_STREQ(op_info("lerp").node, "LerpBackward1");
  EXPECT_EQ(op_info("addcmul").arity, 3);
  EXPECT_EQ(op_info("addcdiv").autocast, AutocastClass::Promote);
  EXPECT_EQ(op_info("div").dtype_rule, DTypeRule::IntegerToFloat);
  EXPECT_EQ(op_info("lt").dtype_rule, DTypeRule::Compare);
  EXPECT_EQ(op_info("lt").node, nullptr);
  EXPECT_STREQ(op_info("add").source, "x + a * y");
  EXPECT_TRUE(
      throws_with<ValueError>([] { op_info("addd"); }, "no op named 'addd' in the op table"));
}

// The source text of each row, compiled by itself after op_source_prelude(), gives bit for bit
// what the row's kernel gives, in float64 and float32 (the compute types of every float dtype).
TEST(OpTable, SourceTextComputesWhatTheKernelComputes) {
  TINY_SEEDED(rng);
  const std::vector<double> values = probe_values(rng);
  int checked = 0;
#define TINY_CHECK_ROW(NAME, OP, ...)                                                              \
  {                                                                                                \
    const GeneratedOp* g = generated(#NAME);                                                       \
    ASSERT_NE(g, nullptr) << #NAME;                                                                \
    for (int trial = 0; trial < 400; ++trial) {                                                    \
      auto pick = [&] {                                                                            \
        return values[static_cast<size_t>(uniform_int(rng, 0, values.size() - 1))];                \
      };                                                                                           \
      const double x = pick(), y = pick(), z = pick(), a = pick(), b = pick();                     \
      const double k64 = kernel_value<ops::OP, double>(x, y, z, a, b);                             \
      const double s64 = g->f64(x, y, z, a, b);                                                    \
      ASSERT_TRUE(same(k64, s64)) << #NAME << "(" << x << ", " << y << ", " << z << "; " << a      \
                                  << ", " << b << "): kernel " << k64 << ", source " << s64;       \
      const float fx = float(x), fy = float(y), fz = float(z), fa = float(a), fb = float(b);       \
      const double k32 = kernel_value<ops::OP, float>(fx, fy, fz, fa, fb);                         \
      const double s32 = g->f32(fx, fy, fz, fa, fb);                                               \
      ASSERT_TRUE(same(k32, s32)) << #NAME << " in float32: kernel " << k32 << ", source " << s32; \
    }                                                                                              \
    ++checked;                                                                                     \
  }
  TINY_OP_ROWS(TINY_CHECK_ROW)
#undef TINY_CHECK_ROW
  EXPECT_EQ(checked, kGeneratedOpCount);
}

// ---- the new ops against float64 loops ---------------------------------------------------------

namespace {
// Applies `f` element by element in float64 over the broadcast of the inputs.
Tensor reference(const std::vector<Tensor>& in,
                 const std::function<double(const std::vector<double>&)>& f) {
  Shape shape = in[0].shape();
  for (const Tensor& t : in) shape = broadcast_shapes(shape, t.shape());
  Tensor out = empty(shape, kFloat64);
  double* p = out.data<double>();
  int64_t i = 0;
  for (const auto& idx : all_indices(shape)) {
    std::vector<double> v;
    for (const Tensor& t : in) v.push_back(t.at(broadcast_index(t, idx)));
    p[i++] = f(v);
  }
  return out;
}
}  // namespace

TEST(OpTable, NewOpsMatchFloat64Loops) {
  TINY_SEEDED(rng);
  for (int trial = 0; trial < 20; ++trial) {
    const Shape shape = random_shape(rng, 3, 4);
    Shape other = shape;
    for (auto& d : other)
      if (uniform_int(rng, 0, 2) == 0) d = 1;
    const DType dt = trial % 2 ? kFloat32 : kFloat64;
    // Tolerance: one rounding of each intermediate in float32, relative to values of order 10.
    const double tol = dt == kFloat64 ? 1e-12 : 1e-5;
    const Tensor x = random_layout(rng, random_values(rng, shape), dt);
    const Tensor y = random_layout(rng, random_values(rng, other), dt);
    const Tensor z = random_layout(rng, random_values(rng, other, true), dt);
    const double w = std::uniform_real_distribution<double>(-1, 2)(rng);
    EXPECT_TRUE(close(lerp(x, y, w),
                      reference({x, y}, [w](auto& v) { return v[0] + w * (v[1] - v[0]); }), tol,
                      tol));
    EXPECT_TRUE(close(lerp(x, y, z),
                      reference({x, y, z}, [](auto& v) { return v[0] + v[2] * (v[1] - v[0]); }),
                      tol, tol));
    EXPECT_TRUE(close(addcmul(x, y, z, w),
                      reference({x, y, z}, [w](auto& v) { return v[0] + w * v[1] * v[2]; }), tol,
                      tol));
    EXPECT_TRUE(close(addcdiv(x, y, z, w),
                      reference({x, y, z}, [w](auto& v) { return v[0] + w * v[1] / v[2]; }), tol,
                      tol));
    EXPECT_TRUE(close(clamp(x, -0.5, 0.7),
                      reference({x}, [](auto& v) { return std::min(std::max(v[0], -0.5), 0.7); }),
                      tol, 0));
    EXPECT_TRUE(close(clamp_min(x, 0.25),
                      reference({x}, [](auto& v) { return std::max(v[0], 0.25); }), tol, 0));
    EXPECT_TRUE(close(clamp_max(x, 0.25),
                      reference({x}, [](auto& v) { return std::min(v[0], 0.25); }), tol, 0));
    EXPECT_TRUE(close(square(x), reference({x}, [](auto& v) { return v[0] * v[0]; }), tol, tol));
    EXPECT_TRUE(close(reciprocal(z), reference({z}, [](auto& v) { return 1 / v[0]; }), tol, tol));
    EXPECT_TRUE(
        close(add(x, y, w), reference({x, y}, [w](auto& v) { return v[0] + w * v[1]; }), tol, tol));
    EXPECT_TRUE(
        close(sub(x, y, w), reference({x, y}, [w](auto& v) { return v[0] - w * v[1]; }), tol, tol));
  }
}

TEST(OpTable, NewOpsFollowPyTorchsEdgeCases) {
  // lerp is exact at both ends; clamp keeps NaN, and with min > max gives max everywhere.
  const Tensor s = tensor({1.0, -3.0, 1e8}), e = tensor({2.5, 7.0, -1e-8});
  EXPECT_TRUE(equal(lerp(s, e, 1.0), e));
  EXPECT_TRUE(equal(lerp(s, e, 0.0), s));
  const Tensor c = clamp(tensor({-1.0, NAN, 5.0}), 0.0, 1.0);
  EXPECT_EQ(c.at({0}), 0.0);
  EXPECT_TRUE(std::isnan(c.at({1})));
  EXPECT_EQ(c.at({2}), 1.0);
  EXPECT_TRUE(equal(clamp(tensor({-1.0, 0.5, 5.0}), 2.0, 1.0), tensor({1.0, 1.0, 1.0})));
  // Integers stay integers with integer bounds, and become float32 with float bounds.
  EXPECT_EQ(clamp(tensor({-3, 4}), 0, 2).dtype(), kInt64);
  EXPECT_TRUE(equal(clamp(tensor({-3, 4}), 0, 2), tensor({0, 2})));
  EXPECT_EQ(clamp(tensor({-3, 4}), 0.5, std::nullopt).dtype(), kFloat32);
  EXPECT_TRUE(
      throws_with<RuntimeError>([] { clamp(tensor({1.0}), std::nullopt, std::nullopt); },
                                "torch.clamp: At least one of 'min' or 'max' must not be None"));
  EXPECT_TRUE(throws_with<RuntimeError>([] { addcdiv(tensor({1}), tensor({1}), tensor({2})); },
                                        "Integer division with addcdiv is no longer supported"));
  EXPECT_TRUE(throws_with<RuntimeError>([] { lerp(tensor({1.0}), tensor({2.0}, kFloat64), 0.5); },
                                        "expected dtype float for `end` but got dtype double"));
  EXPECT_TRUE(throws_with<RuntimeError>(
      [] { add(tensor({1}), tensor({2}), 0.5); },
      "For integral input tensors, argument alpha must not be a floating point number."));
  // Autograd nodes carry PyTorch's names.
  const Tensor p = tensor({1.0, 2.0}).requires_grad_(), q = tensor({3.0, 4.0}).requires_grad_();
  EXPECT_EQ(lerp(p, q, 0.3).grad_fn()->name(), "LerpBackward0");
  EXPECT_EQ(lerp(p, q, q).grad_fn()->name(), "LerpBackward1");
  EXPECT_EQ(addcmul(p, p, q).grad_fn()->name(), "AddcmulBackward0");
  EXPECT_EQ(addcdiv(p, p, q).grad_fn()->name(), "AddcdivBackward0");
  EXPECT_EQ(clamp(p, 0, 1).grad_fn()->name(), "ClampBackward1");
  EXPECT_EQ(clamp(p, 0, std::nullopt).grad_fn()->name(),
            "ClampBackward1");  // one bound: still clamp
  EXPECT_EQ(clamp_min(p, 0).grad_fn()->name(), "ClampMinBackward0");
  EXPECT_EQ((2 - p).grad_fn()->name(), "RsubBackward1");
  EXPECT_EQ((2 / p).grad_fn()->name(), "MulBackward0");  // PyTorch: p.reciprocal() * 2
  EXPECT_EQ(square(p).grad_fn()->name(), "PowBackward0");
  EXPECT_EQ(p.pow(2).grad_fn()->name(), "PowBackward0");
  EXPECT_EQ(reciprocal(p).grad_fn()->name(), "ReciprocalBackward0");
}

// ---- out= and in-place forms ---------------------------------------------------------------------

TEST(OpTable, OutFormsWriteIntoTheGivenTensor) {
  const Tensor a = tensor({1.0, 2.0, 3.0}), b = tensor({10.0, 20.0, 30.0});
  Tensor out = empty({3});
  const uint64_t version = out.storage()->version();
  const Tensor r = add_out(out, a, b, 2);
  EXPECT_TRUE(r.shares_storage_with(out));
  EXPECT_TRUE(equal(out, tensor({21.0, 42.0, 63.0})));
  EXPECT_GT(out.storage()->version(), version);  // a write, as autograd's checks see it
  // A float32 result goes into a float64 tensor; a bool result into bool; a strided view works.
  Tensor wide = zeros({3}, kFloat64);
  mul_out(wide, a, b);
  EXPECT_TRUE(equal(wide, tensor({10.0, 40.0, 90.0})));
  Tensor flags = empty({3}, kBool);
  gt_out(flags, a, tensor({1.5}));
  EXPECT_TRUE(equal(flags, tensor({false, true, true})));
  Tensor big = zeros({2, 3});
  sqrt_out(big.index({1}), tensor({4.0, 9.0, 16.0}));
  EXPECT_TRUE(equal(big, tensor({{0.0, 0.0, 0.0}, {2.0, 3.0, 4.0}})));
  addcmul_out(out, a, a, b, 0.5);
  EXPECT_TRUE(equal(out, tensor({6.0, 22.0, 48.0})));
  // PyTorch's refusals.
  EXPECT_TRUE(
      throws_with<RuntimeError>([&] { add_out(empty({3}, kInt64), a, b); },
                                "result type Float can't be cast to the desired output type Long"));
  EXPECT_TRUE(throws_with<RuntimeError>(
      [&] { add_out(empty({2}), a, b); },
      "add(): the out= tensor has shape [2], but the result has shape [3]"));
  EXPECT_TRUE(throws_with<RuntimeError>(
      [&] { add_out(empty({1}).expand({3}), a, b); },
      "more than one element of the written-to tensor refers to a single memory location"));
  const Tensor w = tensor({1.0, 2.0, 3.0}).requires_grad_();
  EXPECT_TRUE(throws_with<RuntimeError>(
      [&] { mul_out(out, w, b); },
      "mul(): functions with out=... arguments don't support automatic differentiation, "
      "but one of the arguments requires grad."));
  {
    NoGradGuard no_grad;
    mul_out(out, w, b);  // allowed without recording
  }
  EXPECT_TRUE(equal(out, tensor({10.0, 40.0, 90.0})));
}

TEST(OpTable, InPlaceFormsUpdateTheTensorItself) {
  Tensor m = tensor({1.0, 2.0, 3.0});
  const Tensor alias = m;  // another handle to the same memory sees the update
  m.mul_(0.5).add_(tensor({1.0, 1.0, 1.0}), 2).sqrt_();
  EXPECT_TRUE(close(alias, tensor({std::sqrt(2.5), std::sqrt(3.0), std::sqrt(3.5)}), 1e-6, 1e-6));
  // Adam's moment updates, in place, against the same arithmetic written out.
  Tensor v = tensor({0.1, 0.2}), g = tensor({1.0, -3.0}), p = tensor({5.0, 6.0});
  v.mul_(0.999).addcmul_(g, g, 1 - 0.999);
  EXPECT_TRUE(equal(v, add(mul(tensor({0.1, 0.2}), scalar_tensor(0.999)),
                           mul(mul(g, g), scalar_tensor(1 - 0.999)))));
  Tensor mom = tensor({0.5, 0.5});
  mom.lerp_(g, 0.1);
  EXPECT_TRUE(close(mom, tensor({0.55, 0.15}), 1e-7, 1e-7));
  p.addcdiv_(mom, tensor({2.0, 4.0}), -1);
  EXPECT_TRUE(close(p, tensor({5.0 - 0.275, 6.0 - 0.0375}), 1e-6, 1e-6));
  p.clamp_(5.0, 5.9);
  EXPECT_TRUE(close(p, tensor({5.0, 5.9}), 1e-6, 0));
  // An input that shares the destination's memory in another layout: refused where both are
  // dense, as PyTorch refuses it. Where one is not, PyTorch lets it through and its result
  // depends on the order it visits the elements (torch 2.15 gives 12 in row 1, column 2: 5 plus
  // the new column 1's 7); the library reads the input before it overwrites it (5 + 4).
  Tensor sq = tensor({{1.0, 2.0}, {3.0, 4.0}});
  EXPECT_TRUE(throws_with<RuntimeError>(
      [&] { sq.add_(sq.T()); },
      "unsupported operation: some elements of the input tensor and the written-to tensor refer "
      "to a single memory location. Please clone() the tensor before performing the operation."));
  EXPECT_TRUE(throws_with<RuntimeError>([&] { neg_out(sq.view({4}).slice(0, 1, 4), sq.view({4}).slice(0, 0, 3)); },
                                        "some elements of the input tensor"));
  EXPECT_TRUE(equal(sq, tensor({{1.0, 2.0}, {3.0, 4.0}})));
  sq.add_(sq);  // the same elements in the same layout
  EXPECT_TRUE(equal(sq, tensor({{2.0, 4.0}, {6.0, 8.0}})));
  Tensor cols = arange(9.0).reshape({3, 3});
  cols.slice(1, 1, 3).add_(cols.slice(1, 0, 2));
  EXPECT_TRUE(equal(cols, tensor({{0.0, 1.0, 3.0}, {3.0, 7.0, 9.0}, {6.0, 13.0, 15.0}})));
  // PyTorch's refusals.
  Tensor ints = tensor({1, 2});
  EXPECT_TRUE(throws_with<RuntimeError>(
      [&] { ints.div_(2); }, "result type Float can't be cast to the desired output type Long"));
  EXPECT_TRUE(throws_with<RuntimeError>(
      [&] { ints.add_(1.5); }, "result type Float can't be cast to the desired output type Long"));
  Tensor row = tensor({1.0, 2.0});
  EXPECT_TRUE(throws_with<RuntimeError>(
      [&] {
        row.add_(tensor({{1.0, 2.0}, {3.0, 4.0}}));
      },
      "output with shape [2] doesn't match the broadcast shape [2, 2]"));
  Tensor expanded = tensor({1.0}).expand({3});
  EXPECT_TRUE(throws_with<RuntimeError>(
      [&] { expanded.mul_(2); },
      "unsupported operation: more than one element of the written-to tensor refers to a "
      "single memory location. Please clone() the tensor before performing the operation."));
  Tensor leaf = tensor({1.0, 2.0}).requires_grad_();
  EXPECT_TRUE(throws_with<RuntimeError>(
      [&] { leaf.add_(1.0); },
      "a leaf Variable that requires grad is being used in an in-place operation."));
  {
    NoGradGuard no_grad;  // how an optimizer updates a weight
    leaf.sub_(tensor({0.5, 0.5}), 2);
  }
  EXPECT_TRUE(equal(leaf.detach(), tensor({0.0, 1.0})));
  // An in-place form on a computed tensor is recorded as its out-of-place twin would be, and
  // becomes the tensor's grad_fn.
  Tensor y = leaf * 2;
  y.mul_(3);
  EXPECT_EQ(y.grad_fn()->name(), "MulBackward0");
  y.sum().backward();
  EXPECT_TRUE(equal(leaf.grad(), tensor({6.0, 6.0})));
}

// ---- the dispatcher's other duties -------------------------------------------------------------

TEST(OpTable, ErrorsNameTheKernelAsPyTorchDoes) {
  EXPECT_TRUE(throws_with<RuntimeError>(
      [] {
        gelu(tensor({1, 2}));
      },
      "\"GeluKernelImpl\" not implemented for 'Long'"));
  EXPECT_TRUE(
      throws_with<RuntimeError>([] { relu(tensor({true})); }, "Boolean inputs not supported for relu"));
  EXPECT_TRUE(throws_with<RuntimeError>([] { pow(tensor({true}), tensor({true})); },
                                     "\"pow\" not implemented for 'Bool'"));
  EXPECT_TRUE(throws_with<RuntimeError>(
      [] { -tensor({true}); }, "Negation, the `-` operator, on a bool tensor is not supported."));
  EXPECT_TRUE(throws_with<RuntimeError>([] { tensor({true}) - tensor({false}); },
                                     "Subtraction, the `-` operator, with two bool tensors"));
  EXPECT_TRUE(throws_with<RuntimeError>(
      [] {
        tensor({1, 2}).pow(-1);
      },
      "Integers to negative integer powers are not allowed."));
  EXPECT_EQ(sqrt(tensor({4})).dtype(), kFloat32);  // IntegerToFloat
  EXPECT_EQ(square(tensor({3})).dtype(), kInt64);
}

TEST(OpTable, CostCounterCountsEveryOpRecordedOrNot) {
  const Tensor a = ones({4, 8}), b = ones({8, 2});
  CostCounter outer;
  {
    CostCounter inner;
    NoGradGuard no_grad;  // counted all the same: the cost model is not autograd's
    (void)add(a, a);
    EXPECT_EQ(inner.ops(), 1);
    EXPECT_EQ(inner.flops(), 32);
    EXPECT_EQ(inner.bytes(), 3 * 32 * 4);  // two inputs read, one output written
    (void)matmul(a, b);
    EXPECT_EQ(inner.flops(), 32 + 2 * 4 * 8 * 2);
    EXPECT_EQ(inner.bytes(), 3 * 32 * 4 + (32 + 16 + 8) * 4);
  }
  (void)addcmul(a, a, a, 0.5);  // three FLOPs an element
  EXPECT_EQ(outer.ops(), 3);
  EXPECT_EQ(outer.flops(), 32 + 128 + 3 * 32);
  (void)sum(a);
  EXPECT_EQ(outer.flops(), 32 + 128 + 96 + 32);
}

TEST(OpTable, AutocastCastsEachOpAsItsClassSays) {
  const Tensor x = full({2, 3}, 1.5), w = full({3, 2}, 0.25);
  EXPECT_TRUE(throws_with<ValueError>([] { AutocastGuard bad(Device::Type::CPU, kFloat32); },
                                      "float16 or bfloat16"));
  EXPECT_FALSE(autocast_enabled(Device::Type::CPU));
  {
    AutocastGuard autocast(Device::Type::CPU, kBFloat16);
    EXPECT_TRUE(autocast_enabled(Device::Type::CPU));
    EXPECT_EQ(autocast_dtype(Device::Type::CPU), kBFloat16);
    const Tensor y = matmul(x, w);  // LowerPrecision on both device types
    EXPECT_EQ(y.dtype(), kBFloat16);
    EXPECT_TRUE(equal(y.to(kFloat32), full({2, 2}, 1.125)));
    {
      // enabled=false turns it off inside the scope (torch.autocast(..., enabled=False)).
      AutocastGuard off(Device::Type::CPU, kBFloat16, /*enabled=*/false);
      EXPECT_FALSE(autocast_enabled(Device::Type::CPU));
      EXPECT_EQ(matmul(x, w).dtype(), kFloat32);
    }
    EXPECT_TRUE(autocast_enabled(Device::Type::CPU));
    // PyTorch's CPU list leaves the table's ops and sums alone (its CUDA list casts exp and sum
    // to float32): they run in their inputs' dtypes, promoted as usual.
    EXPECT_EQ(exp(y).dtype(), kBFloat16);
    EXPECT_EQ(sum(y).dtype(), kBFloat16);
    EXPECT_EQ(add(y, y).dtype(), kBFloat16);
    EXPECT_EQ(addcmul(y, y.to(kFloat32), y).dtype(), kFloat32);
    EXPECT_EQ(matmul(x.to(kFloat64), w.to(kFloat64)).dtype(), kFloat64);  // float64 is never cast
    // Gradients flow back through the casts, in the inputs' own dtype.
    const Tensor p = full({3, 2}, 0.5).requires_grad_();
    sum(matmul(x, p)).backward();
    EXPECT_EQ(p.grad().dtype(), kFloat32);
    EXPECT_TRUE(equal(p.grad(), full({3, 2}, 3.0)));
  }
  EXPECT_FALSE(autocast_enabled(Device::Type::CPU));
  EXPECT_EQ(matmul(x, w).dtype(), kFloat32);
}
