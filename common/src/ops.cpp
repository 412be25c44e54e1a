// ops.cpp: the public elementwise ops, each a call of the dispatcher with its op table row (see
// dispatch.h for what the dispatcher does, op_list.h for the rows), their out= and in-place
// forms, where(), the triangle masks, and the whole-tensor comparisons.
#include "tiny/ops.h"

#include <cmath>
#include <limits>

#include "autograd_internal.h"
#include "backend.h"
#include "capture_internal.h"
#include "dispatch.h"
#include "fusion/graph.h"
#include "internal.h"

namespace tiny {

using detail::OpId;

namespace {

// The row of an op, by id.
const detail::OpEntry* row(OpId id) { return &detail::op_entry(id); }

// The three forms of an op with its inputs and scalars: a new tensor, out=, and in place.
Tensor run(OpId id, std::array<const Tensor*, 3> in, ops::Scalars s = {}) {
  return detail::run({.op = row(id), .inputs = in, .scalars = s});
}
Tensor run_out(const Tensor& out, OpId id, std::array<const Tensor*, 3> in, ops::Scalars s = {}) {
  return detail::run({.op = row(id), .inputs = in, .scalars = s, .out = &out});
}
Tensor& run_inplace(Tensor& self, OpId id, std::array<const Tensor*, 3> in, ops::Scalars s = {}) {
  in[0] = &self;
  detail::run({.op = row(id), .inputs = in, .scalars = s, .out = &self, .inplace = true});
  return self;
}

// A number next to a tensor becomes a 0-dim tensor of the dtype promotion gives the pair, so that
// `int64 * 2` stays int64 and `float16 * 2.5` stays float16. A float dtype takes the number as
// PyTorch casts it, unchecked: `x * 1e300` is inf for float32 x, and `h < 1e5` true for float16
// h (65504 is its largest), where storing 1e300 with fill_ or full is an error.
Tensor wrap(const Tensor& t, Scalar s) {
  return detail::number_tensor(s, result_type(t, s), /*check_floats=*/false);
}

// PyTorch's checks on add's and sub's alpha.
ops::Scalars alpha_of(const Tensor& a, const Tensor& b, Scalar alpha) {
  const DType dt = result_type(a, b);
  if (is_integral(dt) && alpha.kind() == Scalar::Kind::Float)
    throw RuntimeError(
        "For integral input tensors, argument alpha must not be a floating point number.");
  // A bool alpha is for bool results only; a bool result takes any alpha (nonzero is true).
  if (alpha.kind() == Scalar::Kind::Bool && dt != kBool)
    throw RuntimeError("Boolean alpha only supported for Boolean results.");
  return {alpha.to_double()};
}

// PyTorch refuses subtraction with any bool operand (a bool number counts), with one text for
// two bools and another for one.
void refuse_bool_sub(bool a_is_bool, bool b_is_bool) {
  if (a_is_bool && b_is_bool)
    throw NotImplementedError(
        "Subtraction, the `-` operator, with two bool tensors is not supported. "
        "Use the `^` or `logical_xor()` operator instead.");
  if (a_is_bool || b_is_bool)
    throw NotImplementedError(
        "Subtraction, the `-` operator, with a bool tensor is not supported. If you are trying "
        "to invert a mask, use the `~` or `logical_not()` operator instead.");
}
void refuse_bool_sub(const Tensor& a, const Tensor& b) {
  refuse_bool_sub(a.dtype() == kBool, b.dtype() == kBool);
}
bool is_bool(Scalar s) { return s.kind() == Scalar::Kind::Bool; }

// relu's own text for bool, before the table's "not implemented for 'Bool'".
void refuse_bool_relu(const Tensor& a) {
  if (a.dtype() == kBool) throw NotImplementedError("Boolean inputs not supported for relu");
}

// pow with a number: the common fixed exponents of a float run a cheaper kernel with the same
// values (std::pow costs some 20 ns per element, enough to dominate a backward pass through
// x.pow(2)), and integers refuse negative exponents.
detail::Call pow_scalar_call(const Tensor& a, const Tensor& exponent, double e) {
  detail::Call call{.op = row(OpId::pow_scalar), .inputs = {&a, &exponent}, .scalars = {e}};
  if (is_floating(exponent.dtype()) && a.dtype() == exponent.dtype()) {
    if (e == 2) call.kernel = row(OpId::square);
    if (e == 3) call.kernel = row(OpId::cube);
    if (e == 0.5) call.kernel = row(OpId::sqrt);
    if (e == -0.5) call.kernel = row(OpId::rsqrt);
    if (e == -1) call.kernel = row(OpId::reciprocal);
  }
  return call;
}

// An integer tensor to a negative number's power: PyTorch refuses it (a negative exponent in a
// tensor is computed, and gives 0 for most bases).
void refuse_negative_integer_powers(const Tensor& a, Scalar exponent) {
  if (is_integral(result_type(a, exponent)) && exponent.kind() != Scalar::Kind::Float &&
      exponent.to_double() < 0)
    throw RuntimeError("Integers to negative integer powers are not allowed.");
}

// lerp's operands share one dtype, as in PyTorch (it does not promote them).
void check_lerp_dtypes(const Tensor& start, const Tensor& end, const Tensor* weight) {
  auto check = [&](const Tensor& t, const char* what) {
    if (t.dtype() != start.dtype())
      throw RuntimeError(std::string("expected dtype ") + detail::type_meta_name(start.dtype()) + " for `" +
                         what + "` but got dtype " + detail::type_meta_name(t.dtype()));
  };
  check(end, "end");
  if (weight) check(*weight, "weight");
}

// clamp's bounds: at least one, each taking part in promotion as a Python number does. With one
// bound, clamp runs the one-sided kernel but is recorded as clamp (ClampBackward1), as in PyTorch;
// the missing bound is infinite for the backward formula.
detail::Call clamp_call(const OpId id, const Tensor& a, std::optional<Scalar> min,
                        std::optional<Scalar> max) {
  if (!min && !max)
    throw RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None");
  constexpr double inf = std::numeric_limits<double>::infinity();
  detail::Call call{.op = row(id),
                    .inputs = {&a},
                    .scalars = {min ? min->to_double() : -inf, max ? max->to_double() : inf},
                    .numbers = {min, max}};
  if (!max) call.kernel = row(OpId::clamp_min);
  if (!min) call.kernel = row(OpId::clamp_max);
  return call;
}

}  // namespace

// ---- promotion ----------------------------------------------------------------------------------

DType result_type(const Tensor& a, const Tensor& b) { return detail::result_type({&a, &b}); }
DType result_type(const Tensor& a, Scalar b) { return detail::result_type({&a}, {b}); }

// ---- binary -------------------------------------------------------------------------------------

Tensor add(const Tensor& a, const Tensor& b, Scalar alpha) {
  return run(OpId::add, {&a, &b}, alpha_of(a, b, alpha));
}
Tensor sub(const Tensor& a, const Tensor& b, Scalar alpha) {
  refuse_bool_sub(a, b);
  return run(OpId::sub, {&a, &b}, alpha_of(a, b, alpha));
}
Tensor mul(const Tensor& a, const Tensor& b) { return run(OpId::mul, {&a, &b}); }
Tensor div(const Tensor& a, const Tensor& b) { return run(OpId::div, {&a, &b}); }
Tensor pow(const Tensor& a, const Tensor& b) { return run(OpId::pow, {&a, &b}); }
// PyTorch 2.x computes x ** 0 as ones and x ** 1 as a copy, without a kernel; so a bool tensor
// to a bool power, which has no pow kernel, is computed (1.13 raised "not implemented"). On
// {0, 1}, a ** e is a >= e (e = 1 gives a; e = 0 gives all ones), which is the kernel used.
bool bool_to_bool_power(const Tensor& a, Scalar exponent) {
  return a.dtype() == kBool && is_bool(exponent);
}
Tensor pow(const Tensor& a, Scalar b) {
  if (bool_to_bool_power(a, b)) {
    const Tensor e = wrap(a, b);
    return run(OpId::ge, {&a, &e});
  }
  refuse_negative_integer_powers(a, b);
  const Tensor e = wrap(a, b);
  return detail::run(pow_scalar_call(a, e, b.to_double()));
}
Tensor pow(Scalar a, const Tensor& b) {
  const Tensor base = wrap(b, a);
  return run(OpId::pow, {&base, &b});
}
Tensor maximum(const Tensor& a, const Tensor& b) { return run(OpId::maximum, {&a, &b}); }
Tensor minimum(const Tensor& a, const Tensor& b) { return run(OpId::minimum, {&a, &b}); }
Tensor lerp(const Tensor& start, const Tensor& end, Scalar weight) {
  check_lerp_dtypes(start, end, nullptr);
  return run(OpId::lerp_scalar, {&start, &end}, {weight.to_double()});
}
Tensor lerp(const Tensor& start, const Tensor& end, const Tensor& weight) {
  check_lerp_dtypes(start, end, &weight);
  return run(OpId::lerp, {&start, &end, &weight});
}
Tensor addcmul(const Tensor& a, const Tensor& t1, const Tensor& t2, Scalar value) {
  return run(OpId::addcmul, {&a, &t1, &t2}, {value.to_double()});
}
Tensor addcdiv(const Tensor& a, const Tensor& t1, const Tensor& t2, Scalar value) {
  if (!is_floating(t1.dtype()) && !is_floating(t2.dtype()))
    throw RuntimeError(
        "Integer division with addcdiv is no longer supported, and in a future  release addcdiv "
        "will perform a true division of tensor1 and tensor2. The historic addcdiv behavior can be "
        "implemented as (input + value * torch.trunc(tensor1 / tensor2)).to(input.dtype) for "
        "integer inputs and as (input + value * tensor1 / tensor2) for float inputs. The future "
        "addcdiv behavior is just the latter implementation: (input + value * tensor1 / tensor2), "
        "for all dtypes.");
  return run(OpId::addcdiv, {&a, &t1, &t2}, {value.to_double()});
}

// ---- unary --------------------------------------------------------------------------------------

Tensor neg(const Tensor& a) { return run(OpId::neg, {&a}); }
Tensor abs(const Tensor& a) { return run(OpId::abs, {&a}); }
Tensor sqrt(const Tensor& a) { return run(OpId::sqrt, {&a}); }
Tensor rsqrt(const Tensor& a) { return run(OpId::rsqrt, {&a}); }
Tensor exp(const Tensor& a) { return run(OpId::exp, {&a}); }
Tensor log(const Tensor& a) { return run(OpId::log, {&a}); }
Tensor log1p(const Tensor& a) { return run(OpId::log1p, {&a}); }
Tensor expm1(const Tensor& a) { return run(OpId::expm1, {&a}); }
Tensor erf(const Tensor& a) { return run(OpId::erf, {&a}); }
Tensor relu(const Tensor& a) {
  refuse_bool_relu(a);
  return run(OpId::relu, {&a});
}
Tensor gelu(const Tensor& a) { return run(OpId::gelu, {&a}); }
Tensor sigmoid(const Tensor& a) { return run(OpId::sigmoid, {&a}); }
Tensor tanh(const Tensor& a) { return run(OpId::tanh, {&a}); }
Tensor square(const Tensor& a) { return run(OpId::square, {&a}); }
Tensor reciprocal(const Tensor& a) { return run(OpId::reciprocal, {&a}); }
Tensor clamp(const Tensor& a, std::optional<Scalar> min, std::optional<Scalar> max) {
  return detail::run(clamp_call(OpId::clamp, a, min, max));
}
Tensor clamp_min(const Tensor& a, Scalar min) {
  return detail::run(clamp_call(OpId::clamp_min, a, min, std::nullopt));
}
Tensor clamp_max(const Tensor& a, Scalar max) {
  return detail::run(clamp_call(OpId::clamp_max, a, std::nullopt, max));
}

// ---- comparisons --------------------------------------------------------------------------------

Tensor eq(const Tensor& a, const Tensor& b) { return run(OpId::eq, {&a, &b}); }
Tensor ne(const Tensor& a, const Tensor& b) { return run(OpId::ne, {&a, &b}); }
Tensor lt(const Tensor& a, const Tensor& b) { return run(OpId::lt, {&a, &b}); }
Tensor le(const Tensor& a, const Tensor& b) { return run(OpId::le, {&a, &b}); }
Tensor gt(const Tensor& a, const Tensor& b) { return run(OpId::gt, {&a, &b}); }
Tensor ge(const Tensor& a, const Tensor& b) { return run(OpId::ge, {&a, &b}); }

// ---- out= forms ---------------------------------------------------------------------------------

Tensor add_out(const Tensor& out, const Tensor& a, const Tensor& b, Scalar alpha) {
  return run_out(out, OpId::add, {&a, &b}, alpha_of(a, b, alpha));
}
Tensor sub_out(const Tensor& out, const Tensor& a, const Tensor& b, Scalar alpha) {
  refuse_bool_sub(a, b);
  return run_out(out, OpId::sub, {&a, &b}, alpha_of(a, b, alpha));
}
Tensor mul_out(const Tensor& out, const Tensor& a, const Tensor& b) {
  return run_out(out, OpId::mul, {&a, &b});
}
Tensor div_out(const Tensor& out, const Tensor& a, const Tensor& b) {
  return run_out(out, OpId::div, {&a, &b});
}
Tensor pow_out(const Tensor& out, const Tensor& a, const Tensor& b) {
  return run_out(out, OpId::pow, {&a, &b});
}
Tensor pow_out(const Tensor& out, const Tensor& a, Scalar b) {
  if (bool_to_bool_power(a, b)) {
    const Tensor e = wrap(a, b);
    return run_out(out, OpId::ge, {&a, &e});
  }
  refuse_negative_integer_powers(a, b);
  const Tensor e = wrap(a, b);
  detail::Call call = pow_scalar_call(a, e, b.to_double());
  call.out = &out;
  return detail::run(call);
}
Tensor maximum_out(const Tensor& out, const Tensor& a, const Tensor& b) {
  return run_out(out, OpId::maximum, {&a, &b});
}
Tensor minimum_out(const Tensor& out, const Tensor& a, const Tensor& b) {
  return run_out(out, OpId::minimum, {&a, &b});
}
Tensor lerp_out(const Tensor& out, const Tensor& start, const Tensor& end, Scalar weight) {
  check_lerp_dtypes(start, end, nullptr);
  return run_out(out, OpId::lerp_scalar, {&start, &end}, {weight.to_double()});
}
Tensor lerp_out(const Tensor& out, const Tensor& start, const Tensor& end, const Tensor& weight) {
  check_lerp_dtypes(start, end, &weight);
  return run_out(out, OpId::lerp, {&start, &end, &weight});
}
Tensor addcmul_out(const Tensor& out, const Tensor& a, const Tensor& t1, const Tensor& t2,
                   Scalar value) {
  return run_out(out, OpId::addcmul, {&a, &t1, &t2}, {value.to_double()});
}
Tensor addcdiv_out(const Tensor& out, const Tensor& a, const Tensor& t1, const Tensor& t2,
                   Scalar value) {
  return run_out(out, OpId::addcdiv, {&a, &t1, &t2}, {value.to_double()});
}
Tensor neg_out(const Tensor& out, const Tensor& a) { return run_out(out, OpId::neg, {&a}); }
Tensor abs_out(const Tensor& out, const Tensor& a) { return run_out(out, OpId::abs, {&a}); }
Tensor sqrt_out(const Tensor& out, const Tensor& a) { return run_out(out, OpId::sqrt, {&a}); }
Tensor rsqrt_out(const Tensor& out, const Tensor& a) { return run_out(out, OpId::rsqrt, {&a}); }
Tensor exp_out(const Tensor& out, const Tensor& a) { return run_out(out, OpId::exp, {&a}); }
Tensor log_out(const Tensor& out, const Tensor& a) { return run_out(out, OpId::log, {&a}); }
Tensor log1p_out(const Tensor& out, const Tensor& a) { return run_out(out, OpId::log1p, {&a}); }
Tensor expm1_out(const Tensor& out, const Tensor& a) { return run_out(out, OpId::expm1, {&a}); }
Tensor erf_out(const Tensor& out, const Tensor& a) { return run_out(out, OpId::erf, {&a}); }
Tensor relu_out(const Tensor& out, const Tensor& a) {
  refuse_bool_relu(a);
  return run_out(out, OpId::relu, {&a});
}
Tensor gelu_out(const Tensor& out, const Tensor& a) { return run_out(out, OpId::gelu, {&a}); }
Tensor sigmoid_out(const Tensor& out, const Tensor& a) { return run_out(out, OpId::sigmoid, {&a}); }
Tensor tanh_out(const Tensor& out, const Tensor& a) { return run_out(out, OpId::tanh, {&a}); }
Tensor square_out(const Tensor& out, const Tensor& a) { return run_out(out, OpId::square, {&a}); }
Tensor reciprocal_out(const Tensor& out, const Tensor& a) {
  return run_out(out, OpId::reciprocal, {&a});
}
Tensor clamp_out(const Tensor& out, const Tensor& a, std::optional<Scalar> min,
                 std::optional<Scalar> max) {
  detail::Call call = clamp_call(OpId::clamp, a, min, max);
  call.out = &out;
  return detail::run(call);
}
Tensor eq_out(const Tensor& out, const Tensor& a, const Tensor& b) {
  return run_out(out, OpId::eq, {&a, &b});
}
Tensor ne_out(const Tensor& out, const Tensor& a, const Tensor& b) {
  return run_out(out, OpId::ne, {&a, &b});
}
Tensor lt_out(const Tensor& out, const Tensor& a, const Tensor& b) {
  return run_out(out, OpId::lt, {&a, &b});
}
Tensor le_out(const Tensor& out, const Tensor& a, const Tensor& b) {
  return run_out(out, OpId::le, {&a, &b});
}
Tensor gt_out(const Tensor& out, const Tensor& a, const Tensor& b) {
  return run_out(out, OpId::gt, {&a, &b});
}
Tensor ge_out(const Tensor& out, const Tensor& a, const Tensor& b) {
  return run_out(out, OpId::ge, {&a, &b});
}

// ---- in-place forms -----------------------------------------------------------------------------

Tensor& Tensor::add_(const Tensor& other, Scalar alpha) {
  return run_inplace(*this, OpId::add, {this, &other}, alpha_of(*this, other, alpha));
}
Tensor& Tensor::add_(Scalar other) { return add_(wrap(*this, other)); }
Tensor& Tensor::sub_(const Tensor& other, Scalar alpha) {
  refuse_bool_sub(*this, other);
  return run_inplace(*this, OpId::sub, {this, &other}, alpha_of(*this, other, alpha));
}
Tensor& Tensor::sub_(Scalar other) {
  refuse_bool_sub(dtype() == kBool, is_bool(other));
  return sub_(wrap(*this, other));
}
Tensor& Tensor::mul_(const Tensor& other) { return run_inplace(*this, OpId::mul, {this, &other}); }
Tensor& Tensor::mul_(Scalar other) { return mul_(wrap(*this, other)); }
Tensor& Tensor::div_(const Tensor& other) { return run_inplace(*this, OpId::div, {this, &other}); }
Tensor& Tensor::div_(Scalar other) { return div_(wrap(*this, other)); }
Tensor& Tensor::pow_(const Tensor& exponent) {
  return run_inplace(*this, OpId::pow, {this, &exponent});
}
Tensor& Tensor::pow_(Scalar exponent) {
  if (bool_to_bool_power(*this, exponent)) {
    const Tensor e = wrap(*this, exponent);
    return run_inplace(*this, OpId::ge, {this, &e});
  }
  refuse_negative_integer_powers(*this, exponent);
  const Tensor e = wrap(*this, exponent);
  detail::Call call = pow_scalar_call(*this, e, exponent.to_double());
  call.out = this;
  call.inplace = true;
  detail::run(call);
  return *this;
}
Tensor& Tensor::neg_() { return run_inplace(*this, OpId::neg, {this}); }
Tensor& Tensor::abs_() { return run_inplace(*this, OpId::abs, {this}); }
Tensor& Tensor::sqrt_() { return run_inplace(*this, OpId::sqrt, {this}); }
Tensor& Tensor::rsqrt_() { return run_inplace(*this, OpId::rsqrt, {this}); }
Tensor& Tensor::exp_() { return run_inplace(*this, OpId::exp, {this}); }
Tensor& Tensor::log_() { return run_inplace(*this, OpId::log, {this}); }
Tensor& Tensor::log1p_() { return run_inplace(*this, OpId::log1p, {this}); }
Tensor& Tensor::expm1_() { return run_inplace(*this, OpId::expm1, {this}); }
Tensor& Tensor::erf_() { return run_inplace(*this, OpId::erf, {this}); }
Tensor& Tensor::relu_() {
  refuse_bool_relu(*this);
  return run_inplace(*this, OpId::relu, {this});
}
Tensor& Tensor::sigmoid_() { return run_inplace(*this, OpId::sigmoid, {this}); }
Tensor& Tensor::tanh_() { return run_inplace(*this, OpId::tanh, {this}); }
Tensor& Tensor::square_() { return run_inplace(*this, OpId::square, {this}); }
Tensor& Tensor::reciprocal_() { return run_inplace(*this, OpId::reciprocal, {this}); }
// clamp_min_ and clamp_max_ are recorded as themselves (ClampMinBackward0, ClampMaxBackward0), as
// in PyTorch; clamp_ with one bound is recorded as clamp.
namespace {
Tensor& clamp_inplace(Tensor& self, OpId id, std::optional<Scalar> min, std::optional<Scalar> max) {
  detail::Call call = clamp_call(id, self, min, max);
  call.out = &self;
  call.inplace = true;
  detail::run(call);
  return self;
}
}  // namespace
Tensor& Tensor::clamp_(std::optional<Scalar> min, std::optional<Scalar> max) {
  return clamp_inplace(*this, OpId::clamp, min, max);
}
Tensor& Tensor::clamp_min_(Scalar min) {
  return clamp_inplace(*this, OpId::clamp_min, min, std::nullopt);
}
Tensor& Tensor::clamp_max_(Scalar max) {
  return clamp_inplace(*this, OpId::clamp_max, std::nullopt, max);
}
Tensor& Tensor::lerp_(const Tensor& end, Scalar weight) {
  check_lerp_dtypes(*this, end, nullptr);
  return run_inplace(*this, OpId::lerp_scalar, {this, &end}, {weight.to_double()});
}
Tensor& Tensor::lerp_(const Tensor& end, const Tensor& weight) {
  check_lerp_dtypes(*this, end, &weight);
  return run_inplace(*this, OpId::lerp, {this, &end, &weight});
}
Tensor& Tensor::addcmul_(const Tensor& t1, const Tensor& t2, Scalar value) {
  return run_inplace(*this, OpId::addcmul, {this, &t1, &t2}, {value.to_double()});
}
Tensor& Tensor::addcdiv_(const Tensor& t1, const Tensor& t2, Scalar value) {
  return run_inplace(*this, OpId::addcdiv, {this, &t1, &t2}, {value.to_double()});
}

// ---- where --------------------------------------------------------------------------------------

Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b) {
  const Device device = detail::op_device("where", {&condition, &a, &b});
  if (condition.dtype() != kBool)
    throw RuntimeError(
        std::string(
            "where expected condition to be a boolean tensor, but got a tensor with dtype ") +
        dtype_legacy_name(condition.dtype()));
  const DType dt = result_type(a, b);
  const Shape shape = broadcast_shapes(condition.shape(), broadcast_shapes(a.shape(), b.shape()));
  Tensor out = empty(shape, dt, device);
  {
    NoGradGuard plain;
    const detail::fusion::Tracer::Pause part_of_where;  // the conversions belong to where
    detail::launch(detail::backend(device).where, out, condition, a.to(dt), b.to(dt));
  }
  if (auto* tracer = detail::fusion::Tracer::active()) tracer->on_where(condition, a, b, out);
  count_op_cost(
      0, static_cast<double>(condition.nbytes() + a.nbytes() + b.nbytes() + out.nbytes()));
  if (detail::should_record({&a, &b})) {
    // The gradient goes to a where the condition holds and to b elsewhere.
    detail::SavedTensor c(condition, "WhereBackward0");
    detail::record(
        out, "WhereBackward0", {a, b},
        [c](const Tensor& g) {
          const Tensor cond = c.unpack(), zero = detail::number_tensor(0, g.dtype()).to(g.device());
          return std::vector<Tensor>{where(cond, g, zero), where(cond, zero, g)};
        },
        0, 0);
  }
  return out;
}

// ---- triangles ----------------------------------------------------------------------------------

namespace {
// Keeps the elements of the last two dims for which keep(row, col) holds and zeroes the rest:
// where() with a mask built once, on the host, for one matrix (it is the same for every matrix
// of a batch and is small next to them), then moved to the input's device.
template <typename Keep> Tensor triangle(const char* op, const Tensor& a, Keep keep) {
  detail::op_device(op, {&a});
  if (a.dim() < 2)
    throw RuntimeError(std::string(op) + ": input tensor must have at least 2 dimensions");
  const int64_t R = a.size(-2), C = a.size(-1);
  Tensor mask = empty({R, C}, kBool);
  {
    const detail::HostScope constant;  // the mask depends on the shape alone: a graph keeps it
    bool* k = mask.data<bool>();
    for (int64_t i = 0; i < R; ++i)
      for (int64_t j = 0; j < C; ++j) k[i * C + j] = keep(i, j);
  }
  return where(mask.to(a.device()), a, detail::number_tensor(0, a.dtype()));
}

// The gradient of a masked copy is the same mask (`same`: triu or tril) applied to the gradient.
Tensor record_triangle(Tensor out, const Tensor& a, const char* name,
                       Tensor (*same)(const Tensor&, int64_t), int64_t diagonal) {
  if (detail::should_record({&a}))
    detail::record(
        out, name, {a},
        [same, diagonal](const Tensor& g) { return std::vector<Tensor>{same(g, diagonal)}; }, 0, 0);
  return out;
}
}  // namespace

Tensor triu(const Tensor& a, int64_t diagonal) {
  return record_triangle(
      triangle("triu", a.detach(), [diagonal](int64_t i, int64_t j) { return j - i >= diagonal; }),
      a, "TriuBackward0", triu, diagonal);
}

Tensor tril(const Tensor& a, int64_t diagonal) {
  return record_triangle(
      triangle("tril", a.detach(), [diagonal](int64_t i, int64_t j) { return j - i <= diagonal; }),
      a, "TrilBackward0", tril, diagonal);
}

// ---- whole-tensor comparisons -------------------------------------------------------------------

bool equal(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape()) return false;
  return sum(ne(a, b)).item() == 0;
}

bool allclose(const Tensor& a, const Tensor& b, double rtol, double atol) {
  detail::op_device("allclose", {&a, &b});
  const Tensor x = a.to(kFloat64).cpu(), y = b.to(kFloat64).cpu();
  const Shape shape = broadcast_shapes(x.shape(), y.shape());
  const Tensor xe = x.expand(shape).contiguous(), ye = y.expand(shape).contiguous();
  const double* px = xe.data<double>();
  const double* py = ye.data<double>();
  for (int64_t i = 0; i < xe.numel(); ++i) {
    if (std::isnan(px[i]) || std::isnan(py[i])) return false;
    if (px[i] == py[i]) continue;  // equal infinities
    if (!(std::fabs(px[i] - py[i]) <= atol + rtol * std::fabs(py[i]))) return false;
  }
  return true;
}

// ---- operators ----------------------------------------------------------------------------------

Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator-(const Tensor& a) { return neg(a); }

Tensor operator+(const Tensor& a, Scalar b) { return add(a, wrap(a, b)); }
Tensor operator-(const Tensor& a, Scalar b) {
  refuse_bool_sub(a.dtype() == kBool, is_bool(b));
  return sub(a, wrap(a, b));
}
Tensor operator*(const Tensor& a, Scalar b) { return mul(a, wrap(a, b)); }
Tensor operator/(const Tensor& a, Scalar b) { return div(a, wrap(a, b)); }
Tensor operator+(Scalar a, const Tensor& b) { return add(wrap(b, a), b); }
// A number minus a tensor is rsub (RsubBackward1); a number over a tensor is the tensor's
// reciprocal times the number: PyTorch's graph and PyTorch's roundings.
Tensor operator-(Scalar a, const Tensor& b) {
  const Tensor n = wrap(b, a);
  refuse_bool_sub(is_bool(a), b.dtype() == kBool);
  return run(OpId::rsub, {&b, &n}, {1.0});
}
Tensor operator*(Scalar a, const Tensor& b) { return mul(wrap(b, a), b); }
Tensor operator/(Scalar a, const Tensor& b) {
  const Tensor r = reciprocal(b);
  return mul(r, wrap(r, a));
}

Tensor operator==(const Tensor& a, const Tensor& b) { return eq(a, b); }
Tensor operator!=(const Tensor& a, const Tensor& b) { return ne(a, b); }
Tensor operator<(const Tensor& a, const Tensor& b) { return lt(a, b); }
Tensor operator<=(const Tensor& a, const Tensor& b) { return le(a, b); }
Tensor operator>(const Tensor& a, const Tensor& b) { return gt(a, b); }
Tensor operator>=(const Tensor& a, const Tensor& b) { return ge(a, b); }
Tensor operator==(const Tensor& a, Scalar b) { return eq(a, wrap(a, b)); }
Tensor operator!=(const Tensor& a, Scalar b) { return ne(a, wrap(a, b)); }
Tensor operator<(const Tensor& a, Scalar b) { return lt(a, wrap(a, b)); }
Tensor operator<=(const Tensor& a, Scalar b) { return le(a, wrap(a, b)); }
Tensor operator>(const Tensor& a, Scalar b) { return gt(a, wrap(a, b)); }
Tensor operator>=(const Tensor& a, Scalar b) { return ge(a, wrap(a, b)); }

// ---- Tensor methods that forward to the free functions ------------------------------------------

Tensor Tensor::pow(const Tensor& e) const { return tiny::pow(*this, e); }
Tensor Tensor::pow(Scalar e) const { return tiny::pow(*this, e); }
Tensor Tensor::sqrt() const { return tiny::sqrt(*this); }
Tensor Tensor::rsqrt() const { return tiny::rsqrt(*this); }
Tensor Tensor::exp() const { return tiny::exp(*this); }
Tensor Tensor::log() const { return tiny::log(*this); }
Tensor Tensor::abs() const { return tiny::abs(*this); }
Tensor Tensor::relu() const { return tiny::relu(*this); }
Tensor Tensor::sigmoid() const { return tiny::sigmoid(*this); }
Tensor Tensor::tanh() const { return tiny::tanh(*this); }
Tensor Tensor::square() const { return tiny::square(*this); }
Tensor Tensor::clamp(std::optional<Scalar> min, std::optional<Scalar> max) const {
  return tiny::clamp(*this, min, max);
}
Tensor Tensor::sum() const { return tiny::sum(*this); }
Tensor Tensor::sum(const std::vector<int64_t>& d, bool k) const { return tiny::sum(*this, d, k); }
Tensor Tensor::mean() const { return tiny::mean(*this); }
Tensor Tensor::mean(const std::vector<int64_t>& d, bool k) const { return tiny::mean(*this, d, k); }
Tensor Tensor::max() const { return tiny::max(*this); }
Tensor Tensor::matmul(const Tensor& other) const { return tiny::matmul(*this, other); }
Tensor Tensor::triu(int64_t diagonal) const { return tiny::triu(*this, diagonal); }
Tensor Tensor::tril(int64_t diagonal) const { return tiny::tril(*this, diagonal); }

}  // namespace tiny
