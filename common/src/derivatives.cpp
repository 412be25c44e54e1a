// derivatives.cpp: the backward formula of every differentiable elementwise op, one row each
// (see derivatives.h). Formulas run with recording off (the backward pass is not recorded), so
// they call the public ops freely.
#include "derivatives.h"

#include "dispatch.h"
#include "internal.h"
#include "tiny/ops.h"

namespace tiny::detail {

namespace {

using Grads = std::array<Tensor, 3>;

// A number in the dtype of `like`, to multiply a gradient by.
Tensor number(double value, const Tensor& like) {
  return detail::number_tensor(value, like.dtype());
}

// ---- two inputs ---------------------------------------------------------------------------------

Grads add_backward(const BackwardArgs& a) {
  const double alpha = a.scalars.a;
  return {a.grad, alpha == 1 ? a.grad : mul(a.grad, number(alpha, a.grad))};
}

Grads sub_backward(const BackwardArgs& a) {
  const double alpha = a.scalars.a;
  return {a.grad, alpha == 1 ? neg(a.grad) : mul(a.grad, number(-alpha, a.grad))};
}

// rsub(x, y) = y - alpha x; y is a number (never differentiated).
Grads rsub_backward(const BackwardArgs& a) {
  return {mul(a.grad, number(-a.scalars.a, a.grad)), Tensor()};
}

// d(xy)/dx = y and d(xy)/dy = x: each input's gradient needs the other input.
Grads mul_backward(const BackwardArgs& a) {
  return {a.needs[0] ? mul(a.grad, a.input[1]) : Tensor(),
          a.needs[1] ? mul(a.grad, a.input[0]) : Tensor()};
}

// d(x/y)/dx = 1/y; d(x/y)/dy = -x/y^2.
Grads div_backward(const BackwardArgs& a) {
  const Tensor& y = a.input[1];
  return {a.needs[0] ? div(a.grad, y) : Tensor(),
          a.needs[1] ? neg(div(mul(a.grad, a.input[0]), mul(y, y))) : Tensor()};
}

// d(x^e)/dx = e x^(e-1), taken as 0 where e = 0 (x^0 is 1 for every x, but 0 * 0^-1 would be
// NaN at x = 0); d(x^e)/de = x^e ln x, taken as 0 where x = 0 and e >= 0 (its limit; the
// product would be 0 * -inf). Both as PyTorch does.
Grads pow_backward(const BackwardArgs& a) {
  const Tensor &x = a.input[0], &e = a.input[1];
  Tensor dx, de;
  if (a.needs[0]) {
    const Tensor slope = mul(a.grad, mul(e, pow(x, sub(e, number(1, e)))));
    dx = where(eq(e, number(0, e)), number(0, a.grad), slope);
  }
  if (a.needs[1]) {
    const Tensor limit = mul(eq(x, number(0, x)), ge(e, number(0, e)));
    de = mul(a.grad, where(limit, number(0, a.result), mul(a.result, log(x))));
  }
  return {dx, de};
}

// A fixed exponent e (scalars.a): e x^(e-1), and zeros for e = 0 (see pow_backward).
Grads pow_scalar_backward(const BackwardArgs& a) {
  const double e = a.scalars.a;
  const Tensor& x = a.input[0];
  if (e == 0) return {zeros(x.shape(), x.dtype(), x.device())};
  return {mul(a.grad, mul(pow(x, Scalar(e - 1)), number(e, x)))};
}

// The gradient of max(x, y) goes to the larger input, split in half on ties.
Grads extremum_backward(const BackwardArgs& a) {
  const Tensor &x = a.input[0], &y = a.input[1], &m = a.result, &g = a.grad;
  const Tensor tie = eq(x, y).to(g.dtype());
  const Tensor half_tie = mul(tie, number(0.5, g));
  return {mul(g, sub(eq(x, m).to(g.dtype()), half_tie)),
          mul(g, sub(eq(y, m).to(g.dtype()), half_tie))};
}

// lerp(x, y, w) = x + w (y - x): d/dx = 1 - w, d/dy = w.
Grads lerp_scalar_backward(const BackwardArgs& a) {
  const double w = a.scalars.a;
  return {mul(a.grad, number(1 - w, a.grad)), mul(a.grad, number(w, a.grad))};
}

// ---- three inputs -------------------------------------------------------------------------------

// ... and with a tensor of weights, d/dw = y - x.
Grads lerp_backward(const BackwardArgs& a) {
  const Tensor &x = a.input[0], &y = a.input[1], &w = a.input[2];
  return {a.needs[0] ? mul(a.grad, sub(number(1, w), w)) : Tensor(),
          a.needs[1] ? mul(a.grad, w) : Tensor(), a.needs[2] ? mul(a.grad, sub(y, x)) : Tensor()};
}

// x + v y z: d/dy = v z, d/dz = v y.
Grads addcmul_backward(const BackwardArgs& a) {
  const Tensor v = number(a.scalars.a, a.grad);
  return {a.grad, a.needs[1] ? mul(a.grad, mul(a.input[2], v)) : Tensor(),
          a.needs[2] ? mul(a.grad, mul(a.input[1], v)) : Tensor()};
}

// x + v y / z: d/dy = v / z, d/dz = -v y / z^2.
Grads addcdiv_backward(const BackwardArgs& a) {
  const Tensor v = number(a.scalars.a, a.grad);
  const Tensor& z = a.input[2];
  return {a.grad, a.needs[1] ? mul(a.grad, div(v, z)) : Tensor(),
          a.needs[2] ? neg(mul(a.grad, div(mul(v, a.input[1]), mul(z, z)))) : Tensor()};
}

// ---- one input ----------------------------------------------------------------------------------

Grads neg_backward(const BackwardArgs& a) { return {neg(a.grad)}; }

Grads abs_backward(const BackwardArgs& a) {  // sign(x)
  const Tensor &x = a.input[0], &g = a.grad, zero = number(0, x);
  return {mul(g, sub(gt(x, zero).to(g.dtype()), lt(x, zero).to(g.dtype())))};
}

Grads sqrt_backward(const BackwardArgs& a) {  // 1 / (2 sqrt(x))
  return {div(a.grad, mul(a.result, number(2, a.result)))};
}

Grads rsqrt_backward(const BackwardArgs& a) {  // -y^3 / 2
  const Tensor& y = a.result;
  return {mul(a.grad, mul(mul(y, mul(y, y)), number(-0.5, y)))};
}

Grads exp_backward(const BackwardArgs& a) { return {mul(a.grad, a.result)}; }

Grads log_backward(const BackwardArgs& a) { return {div(a.grad, a.input[0])}; }

Grads log1p_backward(const BackwardArgs& a) {  // 1 / (1 + x)
  return {div(a.grad, add(a.input[0], number(1, a.input[0])))};
}

Grads expm1_backward(const BackwardArgs& a) {  // e^x = y + 1
  return {mul(a.grad, add(a.result, number(1, a.result)))};
}

Grads erf_backward(const BackwardArgs& a) {  // 2 / sqrt(pi) e^(-x^2)
  const Tensor& x = a.input[0];
  return {mul(a.grad, mul(number(1.12837916709551257390, x), exp(neg(mul(x, x)))))};
}

Grads relu_backward(const BackwardArgs& a) {  // 1 where the output is positive
  return {mul(a.grad, gt(a.result, number(0, a.result)).to(a.grad.dtype()))};
}

Grads gelu_backward(const BackwardArgs& a) {  // one kernel: grad * (Phi(x) + x phi(x))
  return {run({.op = &op_entry(OpId::gelu_backward), .inputs = {&a.grad, &a.input[0]}})};
}

Grads reciprocal_backward(const BackwardArgs& a) {  // -1 / x^2 = -y^2
  return {mul(a.grad, neg(mul(a.result, a.result)))};
}

Grads sigmoid_backward(const BackwardArgs& a) {  // y (1 - y)
  const Tensor& y = a.result;
  return {mul(a.grad, mul(y, sub(number(1, y), y)))};
}

Grads tanh_backward(const BackwardArgs& a) {  // 1 - y^2
  const Tensor& y = a.result;
  return {mul(a.grad, sub(number(1, y), mul(y, y)))};
}

Grads square_backward(const BackwardArgs& a) {  // 2 x
  return {mul(a.grad, mul(a.input[0], number(2, a.input[0])))};
}

// clamp passes the gradient where the input was strictly inside the bounds: PyTorch 2.x gives 0
// at a bound itself, where the derivative is undefined (checked against 2.15, in place and not);
// a missing bound is an infinite one.
Grads clamp_backward(const BackwardArgs& a) {
  const Tensor& x = a.input[0];
  const Tensor inside = mul(gt(x, number(a.scalars.a, x)), lt(x, number(a.scalars.b, x)));
  return {where(inside, a.grad, number(0, a.grad))};
}
Grads clamp_min_backward(const BackwardArgs& a) {
  const Tensor& x = a.input[0];
  return {where(gt(x, number(a.scalars.a, x)), a.grad, number(0, a.grad))};
}
Grads clamp_max_backward(const BackwardArgs& a) {
  const Tensor& x = a.input[0];
  return {where(lt(x, number(a.scalars.b, x)), a.grad, number(0, a.grad))};
}

constexpr uint8_t kIf0 = kIfInput0NeedsGrad, kIf1 = kIfInput1NeedsGrad, kIf2 = kIfInput2NeedsGrad;

// op, kept inputs, kept output, formula, backward FLOPs per element for each input's gradient.
const Derivative kDerivatives[] = {
    {"add", {kNever, kNever}, kNever, add_backward, {0, 0}},
    {"sub", {kNever, kNever}, kNever, sub_backward, {0, 1}},
    {"rsub", {kNever, kNever}, kNever, rsub_backward, {1, 0}},
    {"mul", {kIf1, kIf0}, kNever, mul_backward, {1, 1}},
    {"div", {kIf1, kAlways}, kNever, div_backward, {1, 3}},
    {"pow", {kAlways, kAlways}, kIf1, pow_backward, {3, 2}},
    {"pow_scalar", {kAlways}, kNever, pow_scalar_backward, {3}},
    {"maximum", {kAlways, kAlways}, kAlways, extremum_backward, {1, 1}},
    {"minimum", {kAlways, kAlways}, kAlways, extremum_backward, {1, 1}},
    {"lerp_scalar", {kNever, kNever}, kNever, lerp_scalar_backward, {1, 1}},
    {"lerp", {kIf2, kIf2, kIf0 | kIf1 | kIf2}, kNever, lerp_backward, {1, 1, 2}},
    {"addcmul", {kNever, kIf2, kIf1}, kNever, addcmul_backward, {0, 2, 2}},
    {"addcdiv", {kNever, kIf1 | kIf2, kAlways}, kNever, addcdiv_backward, {0, 2, 4}},
    {"neg", {kNever}, kNever, neg_backward, {1}},
    {"abs", {kAlways}, kNever, abs_backward, {1}},
    {"sqrt", {kNever}, kAlways, sqrt_backward, {1}},
    {"rsqrt", {kNever}, kAlways, rsqrt_backward, {1}},
    {"exp", {kNever}, kAlways, exp_backward, {1}},
    {"log", {kAlways}, kNever, log_backward, {1}},
    {"log1p", {kAlways}, kNever, log1p_backward, {2}},
    {"expm1", {kNever}, kAlways, expm1_backward, {2}},
    {"erf", {kAlways}, kNever, erf_backward, {5}},
    {"relu", {kNever}, kAlways, relu_backward, {1}},
    {"gelu", {kAlways}, kNever, gelu_backward, {1}},
    {"sigmoid", {kNever}, kAlways, sigmoid_backward, {1}},
    {"tanh", {kNever}, kAlways, tanh_backward, {1}},
    {"reciprocal", {kNever}, kAlways, reciprocal_backward, {1}},
    {"square", {kAlways}, kNever, square_backward, {1}},
    {"clamp", {kAlways}, kNever, clamp_backward, {1}},
    {"clamp_min", {kAlways}, kNever, clamp_min_backward, {1}},
    {"clamp_max", {kAlways}, kNever, clamp_max_backward, {1}},
};

}  // namespace

const Derivative* find_derivative(std::string_view op) {
  for (const Derivative& d : kDerivatives)
    if (op == d.op) return &d;
  return nullptr;
}

}  // namespace tiny::detail
