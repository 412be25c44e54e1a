// Elementwise ops against float64 references on random shapes, dtypes and layouts (contiguous,
// permuted, strided, broadcast); PyTorch's type promotion; the errors and their messages.
#include <functional>

#include "test_util.h"

using namespace tiny;
using namespace tiny::testing;

namespace {

const DType kFloats[] = {kFloat32, kFloat64, kFloat16, kBFloat16};

// out[idx] = f(x at the broadcast index), in float64, read element by element.
Tensor reference_unary(const Tensor& x, const std::function<double(double)>& f) {
  Tensor out = empty(x.shape(), kFloat64);
  double* p = out.data<double>();
  int64_t k = 0;
  for (const auto& idx : all_indices(x.shape())) p[k++] = f(x.at(idx));
  return out;
}

Tensor reference_binary(const Tensor& a, const Tensor& b,
                        const std::function<double(double, double)>& f) {
  const Shape shape = broadcast_shapes(a.shape(), b.shape());
  Tensor out = empty(shape, kFloat64);
  double* p = out.data<double>();
  int64_t k = 0;
  for (const auto& idx : all_indices(shape))
    p[k++] = f(a.at(broadcast_index(a, idx)), b.at(broadcast_index(b, idx)));
  return out;
}

// Two shapes that broadcast to `shape`: some dims set to 1, some leading dims dropped.
std::pair<Shape, Shape> broadcast_pair(std::mt19937_64& rng, const Shape& shape) {
  auto thin = [&] {
    Shape s = shape;
    for (auto& d : s)
      if (uniform_int(rng, 0, 3) == 0) d = 1;
    const int64_t drop = uniform_int(rng, 0, static_cast<int64_t>(s.size()));
    return Shape(s.begin() + (uniform_int(rng, 0, 1) ? drop : 0), s.end());
  };
  return {thin(), thin()};
}

struct UnaryCase {
  const char* name;
  std::function<Tensor(const Tensor&)> op;
  std::function<double(double)> ref;
  bool positive;  // domain: (0.1, 3) instead of (-2, 2)
  double ulps;    // allowed error in units of the dtype's epsilon (see below)
};

// Tolerances. Results are computed in the dtype (float32 for the 16-bit types) and rounded once,
// so the basic ops are within half an epsilon, relative. libm's float exp/log/tanh/erf are
// within a few ulps; gelu's 1 + erf(x) cancels for x near -2 and loses about 4.5 bits there
// (1 + erf(-2/sqrt 2) = 0.046), hence its larger allowance, in absolute terms.
const std::vector<UnaryCase>& unary_cases() {
  static const std::vector<UnaryCase> cases = {
      {"neg", [](const Tensor& x) { return -x; }, [](double v) { return -v; }, false, 0},
      {"abs", [](const Tensor& x) { return abs(x); }, [](double v) { return std::fabs(v); }, false,
       0},
      {"relu", [](const Tensor& x) { return relu(x); }, [](double v) { return v > 0 ? v : 0; },
       false, 0},
      {"sqrt", [](const Tensor& x) { return sqrt(x); }, [](double v) { return std::sqrt(v); }, true,
       1},
      {"rsqrt", [](const Tensor& x) { return rsqrt(x); }, [](double v) { return 1 / std::sqrt(v); },
       true, 2},
      {"exp", [](const Tensor& x) { return exp(x); }, [](double v) { return std::exp(v); }, false,
       4},
      {"log", [](const Tensor& x) { return log(x); }, [](double v) { return std::log(v); }, true,
       4},
      {"sigmoid", [](const Tensor& x) { return sigmoid(x); },
       [](double v) { return 1 / (1 + std::exp(-v)); }, false, 4},
      {"tanh", [](const Tensor& x) { return tanh(x); }, [](double v) { return std::tanh(v); },
       false, 4},
      {"gelu", [](const Tensor& x) { return gelu(x); },
       [](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); }, false, 32},
      {"pow 3", [](const Tensor& x) { return x.pow(3); }, [](double v) { return v * v * v; }, false,
       4},
      {"x * 2.5", [](const Tensor& x) { return x * 2.5; }, [](double v) { return v * 2.5; }, false,
       1},
      {"1 - x", [](const Tensor& x) { return 1 - x; }, [](double v) { return 1 - v; }, false, 1},
  };
  return cases;
}

}  // namespace

TEST(Ops, UnaryOpsMatchFloat64OnRandomLayouts) {
  TINY_SEEDED(rng);
  for (const auto& c : unary_cases()) {
    for (DType dt : kFloats) {
      for (int trial = 0; trial < 8; ++trial) {
        const Tensor values = random_values(rng, random_shape(rng), c.positive);
        const Tensor x = random_layout(rng, values, dt);
        const Tensor got = c.op(x);
        EXPECT_EQ(got.dtype(), dt) << c.name;
        // A 16-bit result is float32 math rounded once to 16 bits: one rounding of the dtype.
        const double eps = eps_of(dt);
        const double tol = (dt == kFloat16 || dt == kBFloat16) ? eps : std::max(c.ulps, 0.5) * eps;
        ASSERT_TRUE(close(got, reference_unary(x, c.ref), tol * (c.ulps > 8 ? 1 : 0.01), tol))
            << c.name << " in " << dtype_name(dt) << " on " << format_tuple(x.shape());
      }
    }
  }
}

TEST(Ops, BinaryOpsBroadcastAndMatchFloat64) {
  TINY_SEEDED(rng);
  struct Case {
    const char* name;
    std::function<Tensor(const Tensor&, const Tensor&)> op;
    std::function<double(double, double)> ref;
    bool positive_b;
  };
  const std::vector<Case> cases = {
      {"add", [](auto& a, auto& b) { return a + b; }, [](double x, double y) { return x + y; },
       false},
      {"sub", [](auto& a, auto& b) { return a - b; }, [](double x, double y) { return x - y; },
       false},
      {"mul", [](auto& a, auto& b) { return a * b; }, [](double x, double y) { return x * y; },
       false},
      {"div", [](auto& a, auto& b) { return a / b; }, [](double x, double y) { return x / y; },
       true},
      {"maximum", [](auto& a, auto& b) { return maximum(a, b); },
       [](double x, double y) { return std::max(x, y); }, false},
      {"minimum", [](auto& a, auto& b) { return minimum(a, b); },
       [](double x, double y) { return std::min(x, y); }, false},
      {"pow", [](auto& a, auto& b) { return pow(abs(a), b); },
       [](double x, double y) { return std::pow(std::fabs(x), y); }, false},
  };
  for (const auto& c : cases) {
    for (DType dt : kFloats) {
      for (int trial = 0; trial < 8; ++trial) {
        const auto [sa, sb] = broadcast_pair(rng, random_shape(rng));
        const Tensor a = random_layout(rng, random_values(rng, sa), dt);
        const Tensor b = random_layout(rng, random_values(rng, sb, c.positive_b), dt);
        const Tensor got = c.op(a, b);
        EXPECT_EQ(got.dtype(), dt);
        const bool is_pow = c.name == std::string("pow");
        const double tol = is_pow ? 4 * eps_of(dt) : eps_of(dt) / 2;
        // A small base to a negative power can pass float16's largest value (65504): the
        // reference, stored in dtype, is then inf too.
        // Below the smallest normal number the grid is uniform: a rounding there is off by up
        // to half the smallest subnormal, however small the value.
        const Tensor expected = reference_binary(a, b, c.ref);
        ASSERT_TRUE(
            close(got, is_pow ? expected.to(dt) : expected, finfo(dt).smallest_subnormal, tol))
            << c.name << " " << dtype_name(dt) << " " << format_tuple(sa) << " with "
            << format_tuple(sb);
      }
    }
  }
}

TEST(Ops, IntegerArithmeticIsExact) {
  TINY_SEEDED(rng);
  for (int trial = 0; trial < 20; ++trial) {
    const auto [sa, sb] = broadcast_pair(rng, random_shape(rng));
    const Tensor a = random_layout(rng, (random_values(rng, sa) * 1000).to(kInt64), kInt64);
    const Tensor b = random_layout(rng, (random_values(rng, sb) * 1000).to(kInt64), kInt32);
    EXPECT_TRUE(
        close(a + b, reference_binary(a, b, [](double x, double y) { return x + y; }), 0, 0));
    EXPECT_TRUE(
        close(a * b, reference_binary(a, b, [](double x, double y) { return x * y; }), 0, 0));
    // A 0-dim int64 does not widen a dimensioned int32 (PyTorch's promotion ranks).
    EXPECT_EQ((a * b).dtype(), (a.dim() > 0 || b.dim() == 0) ? kInt64 : kInt32);
  }
  // The lecture's elementwise examples (seed document 004, section 3.2.2).
  Tensor x = tensor({1, 4, 9});
  EXPECT_TRUE(equal(x.pow(2), tensor({1, 16, 81})));
  EXPECT_TRUE(equal(x.sqrt(), tensor({1, 2, 3})));
  EXPECT_TRUE(equal(x.rsqrt(), tensor({1.0, 1.0 / 2, 1.0 / 3})));
  EXPECT_TRUE(equal(x + x, tensor({2, 8, 18})));
  EXPECT_TRUE(equal(x * 2, tensor({2, 8, 18})));
  EXPECT_TRUE(equal(x / 0.5, tensor({2, 8, 18})));
}

// tests/fixtures/pytorch_facts.txt, section 10, and torch.result_type's rules.
TEST(Ops, TypePromotionMatchesPyTorch) {
  Tensor i64 = tensor({1, 4, 9});
  EXPECT_EQ((i64 / 0.5).dtype(), kFloat32);
  EXPECT_EQ(i64.sqrt().dtype(), kFloat32);
  EXPECT_EQ((i64 * 2).dtype(), kInt64);
  EXPECT_EQ((i64 + 0.5).dtype(), kFloat32);
  EXPECT_EQ((i64 / i64).dtype(), kFloat32);
  Tensor bf = ones({2}, kBFloat16);
  EXPECT_EQ((bf + ones({2})).dtype(), kFloat32);
  EXPECT_EQ((bf + 1.5).dtype(), kBFloat16);
  EXPECT_EQ((ones({2}, kFloat16) + bf).dtype(), kFloat32);
  EXPECT_EQ((ones({2}) * 2.0).dtype(), kFloat32);  // a float64 number does not widen float32
  // 0-dim tensors rank below dimensioned ones, unless of a higher kind.
  EXPECT_EQ((ones({2}) + scalar_tensor(1.0, kFloat64)).dtype(), kFloat32);
  EXPECT_EQ((i64 + scalar_tensor(1.0, kFloat64)).dtype(), kFloat64);
  EXPECT_EQ((scalar_tensor(1.0, kFloat64) + scalar_tensor(1, kInt32)).dtype(), kFloat64);
  EXPECT_EQ((ones({2}, kInt32) + 5).dtype(), kInt32);
  EXPECT_EQ((tensor({true}) + tensor({true})).dtype(), kBool);
  EXPECT_EQ((tensor({true}) + 1).dtype(), kInt64);
}

TEST(Ops, ComparisonsAndWhere) {
  Tensor x = tensor({1.0, 2.0, 3.0});
  EXPECT_EQ((x > 1.5).dtype(), kBool);
  EXPECT_EQ((x > 1.5).tolist(), (std::vector<double>{0, 1, 1}));
  EXPECT_EQ((x == tensor({1, 0, 3})).tolist(), (std::vector<double>{1, 0, 1}));
  EXPECT_EQ((x <= 2).tolist(), (std::vector<double>{1, 1, 0}));
  EXPECT_EQ((x != 2).tolist(), (std::vector<double>{1, 0, 1}));
  Tensor w = where(x > 1.5, x, zeros({1}));
  EXPECT_EQ(w.tolist(), (std::vector<double>{0, 2, 3}));
  // where broadcasts all three and promotes the two values.
  Tensor m = where(tensor({{true}, {false}}), tensor({1, 2}), tensor({0.5}));
  EXPECT_EQ(m.shape(), (Shape{2, 2}));
  EXPECT_EQ(m.dtype(), kFloat32);
  EXPECT_EQ(m.tolist(), (std::vector<double>{1, 2, 0.5, 0.5}));
  EXPECT_TRUE(throws_with<RuntimeError>(
      [&] { where(x, x, x); },
      "where expected condition to be a boolean tensor, but got a tensor with dtype Float"));
}

TEST(Ops, SpecialValues) {
  Tensor x = tensor({0.0, -1.0, INFINITY, NAN});
  const auto r = relu(x).tolist();
  EXPECT_EQ(r[1], 0.0);
  EXPECT_TRUE(std::isnan(r[3]));  // relu keeps NaN
  EXPECT_TRUE(std::isnan(sqrt(x).tolist()[1]));
  EXPECT_EQ(log(x).tolist()[0], -INFINITY);
  EXPECT_TRUE(std::isnan(maximum(x, zeros({4})).tolist()[3]));
  // gelu(1) in float32: the float nearest 0.84134474607 (PyTorch's formula gives the one below,
  // 0.8413447141647339); in float64, as PyTorch computes it.
  EXPECT_EQ(gelu(tensor({1.0})).item(), 0.8413447737693787);
  EXPECT_NEAR(gelu(tensor({1.0}, kFloat64)).item(), 0.841344746068543, 1e-15);
  EXPECT_EQ((tensor({1, 2}) / 0).tolist(), (std::vector<double>{INFINITY, INFINITY}));
}

TEST(Ops, ErrorsAreClearAndLeaveOperandsUntouched) {
  Tensor a = ones({2, 3}), b = ones({3, 2});
  EXPECT_TRUE(throws_with<RuntimeError>(
      [&] { a + b; },
      "The size of tensor a (3) must match the size of tensor b (2) at non-singleton dimension 1"));
  EXPECT_TRUE(equal(a, ones({2, 3})));
  EXPECT_TRUE(equal(b, ones({3, 2})));
  Tensor flags = tensor({true, false});
  EXPECT_TRUE(throws_with<RuntimeError>([&] { flags - flags; },
                                     "Subtraction, the `-` operator, with two bool tensors"));
  EXPECT_TRUE(
      throws_with<RuntimeError>([&] { -flags; }, "Negation, the `-` operator, on a bool tensor"));
  EXPECT_TRUE(throws_with<RuntimeError>([&] { relu(flags); }, "Boolean inputs not supported for relu"));
  EXPECT_TRUE(throws_with<RuntimeError>([&] { gelu(tensor({1})); }, "not implemented for 'Long'"));
  EXPECT_TRUE(throws_with<RuntimeError>([&] { tensor({2}).pow(-1); },
                                        "Integers to negative integer powers are not allowed."));
  // With any bool operand, a bool number included, subtraction is refused (PyTorch's text).
  EXPECT_TRUE(throws_with<RuntimeError>([&] { tensor({1.5}) - true; },
                                        "Subtraction, the `-` operator, with a bool tensor"));
  EXPECT_TRUE(throws_with<RuntimeError>([&] { 2 - flags; }, "with a bool tensor"));
  EXPECT_TRUE(throws_with<RuntimeError>([&] { add(a, Tensor()); }, "undefined tensor"));
}

TEST(Ops, ComparisonsAndWhereOnRandomLayoutsMatchFloat64) {
  TINY_SEEDED(rng);
  for (int trial = 0; trial < 40; ++trial) {
    const DType dt = kFloats[trial % 4];
    const auto [sa, sb] = broadcast_pair(rng, random_shape(rng));
    // Values on a coarse grid, so that ties (==, <=, >=) actually occur.
    const Tensor a = random_layout(rng, (random_values(rng, sa) * 2).to(kInt64).to(kFloat64), dt);
    const Tensor b = random_layout(rng, (random_values(rng, sb) * 2).to(kInt64).to(kFloat64), dt);
    const std::pair<Tensor, std::function<double(double, double)>> cases[] = {
        {eq(a, b), [](double x, double y) { return double(x == y); }},
        {ne(a, b), [](double x, double y) { return double(x != y); }},
        {lt(a, b), [](double x, double y) { return double(x < y); }},
        {le(a, b), [](double x, double y) { return double(x <= y); }},
        {gt(a, b), [](double x, double y) { return double(x > y); }},
        {ge(a, b), [](double x, double y) { return double(x >= y); }},
    };
    for (const auto& [got, ref] : cases) {
      EXPECT_EQ(got.dtype(), kBool);
      ASSERT_TRUE(close(got, reference_binary(a, b, ref), 0, 0));
    }
    // where(a < b, a, b) is the elementwise minimum.
    ASSERT_TRUE(close(where(lt(a, b), a, b),
                      reference_binary(a, b, [](double x, double y) { return std::min(x, y); }), 0,
                      0));
  }
}

// Large transposed inputs take another path (copied into row order by the tiled transpose,
// then the vectorised op); small tests never reach it, so check it at a size that does.
TEST(Ops, LargeTransposedInputsMatchFloat64) {
  TINY_SEEDED(rng);
  for (DType dt : {kFloat32, kBFloat16, kFloat64}) {
    const Tensor a = random_values(rng, {300, 170}).to(dt).T();  // (170, 300), strides (1, 170)
    const Tensor b = random_values(rng, {170, 300}).to(dt);
    ASSERT_TRUE(close(a + b, reference_binary(a, b, [](double x, double y) { return x + y; }), 0,
                      eps_of(dt) / 2));
    ASSERT_TRUE(close(exp(a), reference_unary(a, [](double x) { return std::exp(x); }), eps_of(dt),
                      4 * eps_of(dt)));
    ASSERT_TRUE(close(a.contiguous(), reference_unary(a, [](double x) { return x; }), 0, 0));
    const Tensor t3 =
        random_values(rng, {40, 30, 50}).to(dt).permute({2, 0, 1});  // strides (1, 1500, 50)
    ASSERT_TRUE(close(t3 * 2.0, reference_unary(t3, [](double x) { return 2 * x; }), 0, 0));
  }
}

// Numbers that are not finite are numbers like others in float arithmetic (Scalar used to cast
// every float to int64, undefined for these); an integer tensor times NaN promotes to float.
// An integer tensor clamped on one side only runs with the other bound infinite: that bound in
// the integer type saturates instead of being an undefined cast.
TEST(Ops, NonFiniteNumbersAndOneSidedIntegerClamps) {
  const double nan = NAN, inf = INFINITY;
  const std::vector<double> nans = (ones({2}) * nan).tolist();
  EXPECT_TRUE(std::isnan(nans[0]) && std::isnan(nans[1]));
  const Tensor ints = tensor({1, 5, -3});
  const Tensor promoted = ints * nan;
  EXPECT_EQ(promoted.dtype(), kFloat32);
  EXPECT_TRUE(std::isnan(promoted.tolist()[2]));
  EXPECT_EQ((ints * inf).tolist(), (std::vector<double>{inf, inf, -inf}));
  EXPECT_EQ((ones({2}) * -inf).tolist(), (std::vector<double>{-inf, -inf}));
  EXPECT_EQ(ints.clamp(0).tolist(), (std::vector<double>{1, 5, 0}));
  EXPECT_EQ(ints.clamp(std::nullopt, 2).tolist(), (std::vector<double>{1, 2, -3}));
  EXPECT_EQ(ints.clamp(0).dtype(), kInt64);
  EXPECT_EQ(tensor({1, 5, -3}, kInt32).clamp(0).tolist(), (std::vector<double>{1, 5, 0}));
}

// A number beside a tensor of a float dtype is cast as PyTorch casts it, unchecked: beyond the
// dtype's range it is infinity (torch 2.15 gives each of these), where storing it with fill_ or
// full is an error. An integer dtype still refuses a number it cannot hold.
TEST(Ops, NumbersBeyondAFloatDtypesRangeAreInfinite) {
  const double inf = INFINITY;
  const std::vector<double> infs{inf, inf};
  EXPECT_EQ((ones({2}) * 1e300).tolist(), infs);
  EXPECT_EQ((1e300 - ones({2})).tolist(), infs);
  EXPECT_EQ(ones({2}).mul_(1e300).tolist(), infs);
  EXPECT_EQ((ones({2}) * 2).pow(1e300).tolist(), infs);
  EXPECT_EQ((ones({2}) < 1e39).tolist(), (std::vector<double>{1, 1}));
  EXPECT_EQ((ones({1}, kFloat16) * 65536).tolist(), (std::vector<double>{inf}));
  EXPECT_EQ((ones({2}, kFloat16) < 1e5).tolist(), (std::vector<double>{1, 1}));
  EXPECT_TRUE(throws_with<RuntimeError>([] { ones({2}).fill_(1e300); },
                                        "value cannot be converted to type float without overflow"));
  EXPECT_TRUE(throws_with<RuntimeError>([] { (void)(ones({2}, kInt32) * (int64_t(1) << 40)); },
                                        "value cannot be converted to type int without overflow"));
  // An unsigned number int64 cannot hold is refused, never wrapped to a negative one.
  EXPECT_TRUE(throws_with<ValueError>([] { (void)(ones({1}) * UINT64_MAX); },
                                      "Overflow when unpacking long long"));
  EXPECT_EQ((ones({1}) * uint64_t(INT64_MAX)).item(), 9223372036854775807.0);
  // No numbers at all is PyTorch's default dtype.
  EXPECT_EQ(tensor({}).dtype(), kFloat32);
  EXPECT_EQ(tensor({{}, {}}).dtype(), kFloat32);
  EXPECT_EQ(tensor({{}, {}}).shape(), (Shape{2, 0}));
}

// Integer powers as PyTorch computes them: a negative exponent inside a tensor gives 0, except
// for the bases 1 and -1 (only a negative number as the exponent is refused), and the result
// wraps in the integer type (3 ** 120 in int64 and 5 ** 5 in int8, PyTorch 1.13's values).
TEST(Ops, IntegerPowersWrapAndNegativeExponentsGiveZero) {
  const Tensor base = tensor({2, -1, 1, -1, 0});
  EXPECT_EQ(base.pow(tensor({-1, -3, -2, -2, 3})).tolist(),
            (std::vector<double>{0, -1, 1, 1, 0}));
  const Tensor big = pow(3, tensor({5, -7, 120}));
  EXPECT_EQ(big.dtype(), kInt64);
  EXPECT_EQ(big.data<int64_t>()[2], 6985361111267558497);
  EXPECT_EQ(big.data<int64_t>()[0], 243);
  const Tensor small = tensor({5}).to(kInt8).pow(tensor({5}).to(kInt8));
  EXPECT_EQ(small.dtype(), kInt8);
  EXPECT_EQ(small.data<int8_t>()[0], 53);  // 3125 mod 256
  EXPECT_EQ(pow(2.5, tensor({2})).item(), 6.25);  // a float number makes the result float32
  EXPECT_EQ(pow(2.5, tensor({2})).dtype(), kFloat32);
}
