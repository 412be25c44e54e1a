// ops.cpp: elementwise ops (unary, binary, comparisons, where) with broadcasting and promotion.
//
// Every op follows the same four steps: pick the device (detail::op_device), pick the dtype
// (result_type), bring the inputs to that dtype, and run one strided loop over the broadcast
// shape. The loop's inner row is specialised for the common layouts (all contiguous, one side a
// broadcast scalar) so that the compiler can vectorise it.
#include "tiny/ops.h"

#include <cmath>
#include <limits>

#include "autograd_internal.h"
#include "cuda_backend.h"
#include "elementwise_ops.h"
#include "internal.h"

namespace tiny {

// ---- type promotion ---------------------------------------------------------------------------

namespace {

// Promotion state: the best dtype among dimensioned tensors, among 0-dim tensors, and among
// plain numbers (PyTorch's ResultTypeState).
struct PromotionState {
  std::optional<DType> dim_result, zero_result, number_result;
};

void update(std::optional<DType>& slot, DType d) { slot = slot ? promote_types(*slot, d) : d; }

int category(DType d) { return d == kBool ? 0 : is_integral(d) ? 1 : 2; }

// A lower-priority operand changes the result only if it is of a higher category
// (a float number makes an integer tensor float, but a float64 number leaves float16 alone).
std::optional<DType> combine(std::optional<DType> higher, std::optional<DType> lower) {
  if (!higher) return lower;
  if (!lower) return higher;
  if (category(*lower) > category(*higher)) return promote_types(*higher, *lower);
  return higher;
}

DType finish(const PromotionState& s) {
  return combine(s.dim_result, combine(s.zero_result, s.number_result)).value_or(kFloat32);
}

void add_tensor(PromotionState& s, const Tensor& t) {
  update(t.dim() > 0 ? s.dim_result : s.zero_result, t.dtype());
}

}  // namespace

DType result_type(const Tensor& a, const Tensor& b) {
  PromotionState s;
  add_tensor(s, a);
  add_tensor(s, b);
  return finish(s);
}

DType result_type(const Tensor& a, Scalar b) {
  PromotionState s;
  add_tensor(s, a);
  update(s.number_result, b.default_dtype());
  return finish(s);
}

Tensor scalar_tensor(Scalar s, std::optional<DType> dtype) {
  const DType dt = dtype.value_or(s.default_dtype());
  Tensor out = empty({}, dt);
  dispatch_dtype(dt, [&]<typename T>() {
    T* p = out.data<T>();
    if (s.kind() == Scalar::Kind::Float) *p = detail::convert<T>(s.to_double());
    else *p = detail::convert<T>(s.to_int());
  });
  return out;
}

// ---- the loops --------------------------------------------------------------------------------

namespace {

template <typename T> using M = opmath_t<T>;

// out[i] = f(a[i]) over a contiguous output; `a` any strides (broadcast to out's shape).
template <typename In, typename Out, typename F>
void unary_loop(const Tensor& out, const Tensor& a, F f) {
  Out* po = out.data<Out>();
  const In* pa = a.data<In>();
  const Strides sa = detail::broadcast_strides(a, out.shape());
  detail::for_each_row<2>(out.shape(), {&out.strides(), &sa},
                          [&](int64_t n, const auto& off, const auto& step) {
                            Out* o = po + off[0];
                            const In* x = pa + off[1];
                            if (step[0] == 1 && step[1] == 1) {
                              for (int64_t i = 0; i < n; ++i) o[i] = Out(f(M<In>(x[i])));
                            } else {
                              for (int64_t i = 0; i < n; ++i)
                                o[i * step[0]] = Out(f(M<In>(x[i * step[1]])));
                            }
                          });
}

// out[i] = f(a[i], b[i]) over a contiguous output; a and b broadcast to out's shape.
template <typename In, typename Out, typename F>
void binary_loop(const Tensor& out, const Tensor& a, const Tensor& b, F f) {
  Out* po = out.data<Out>();
  const In* pa = a.data<In>();
  const In* pb = b.data<In>();
  const Strides sa = detail::broadcast_strides(a, out.shape());
  const Strides sb = detail::broadcast_strides(b, out.shape());
  detail::for_each_row<3>(
      out.shape(), {&out.strides(), &sa, &sb}, [&](int64_t n, const auto& off, const auto& step) {
        Out* o = po + off[0];
        const In* x = pa + off[1];
        const In* y = pb + off[2];
        if (step[0] == 1 && step[1] == 1 && step[2] == 1) {
          for (int64_t i = 0; i < n; ++i) o[i] = Out(f(M<In>(x[i]), M<In>(y[i])));
        } else if (step[0] == 1 && step[1] == 1 && step[2] == 0) {
          const M<In> yv = M<In>(*y);
          for (int64_t i = 0; i < n; ++i) o[i] = Out(f(M<In>(x[i]), yv));
        } else if (step[0] == 1 && step[1] == 0 && step[2] == 1) {
          const M<In> xv = M<In>(*x);
          for (int64_t i = 0; i < n; ++i) o[i] = Out(f(xv, M<In>(y[i])));
        } else {
          for (int64_t i = 0; i < n; ++i)
            o[i * step[0]] = Out(f(M<In>(x[i * step[1]]), M<In>(y[i * step[2]])));
        }
      });
}

std::string not_implemented(const char* op, DType d) {
  return std::string("\"") + op + "\" not implemented for '" + dtype_legacy_name(d) + "'";
}

// A large input read across its rows (a transpose: stride 1 on an outer dimension, not on the
// last) is first copied into row order by the tiled copy. One cache-friendly pass, then a
// vectorised op, beats reading it column by column inside the op.
Tensor in_row_order(const Tensor& t) {
  if (t.numel() < (int64_t(1) << 15) || t.dim() < 2 || t.stride(-1) == 1 || t.is_contiguous()) return t;
  bool outer_unit = false;
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (t.stride(d) == 0) return t;  // a broadcast: nothing to gain
    outer_unit |= t.stride(d) == 1 && t.size(d) > 1;
  }
  return outer_unit ? t.contiguous() : t;
}

// Which dtypes a binary op accepts.
enum class Kinds { All, NoBool };

// Runs a binary op whose result has the promoted dtype (or bool, for comparisons).
template <typename Op>
Tensor binary_op(const char* name, const Tensor& a, const Tensor& b, DType compute, bool to_bool,
                 Kinds kinds, Op f) {
  const Device device = detail::op_device(name, {&a, &b});
  if (kinds == Kinds::NoBool && compute == kBool) throw TypeError(not_implemented(name, compute));
  const Shape shape = broadcast_shapes(a.shape(), b.shape());
  Tensor out = empty(shape, to_bool ? kBool : compute, device);
  if (device.is_cuda()) {
    detail::cuda::binary<Op>(out, a.to(compute), b.to(compute));
    return out;
  }
  const Tensor x = in_row_order(a.to(compute)), y = in_row_order(b.to(compute));
  dispatch_dtype(compute, [&]<typename T>() {
    if (to_bool) binary_loop<T, bool>(out, x, y, f);
    else binary_loop<T, T>(out, x, y, f);
  });
  return out;
}

// The dtype a float-valued unary op computes in: integers and bool become float32.
DType float_result(DType d) { return is_floating(d) ? d : kFloat32; }

// Runs a unary op whose result has dtype `compute`; `floating_only` ops are instantiated for
// the float types alone (their inputs were promoted to float first).
template <typename Op>
Tensor unary_op(const char* name, const Tensor& a, DType compute, Op f) {
  const Device device = detail::op_device(name, {&a});
  if (Op::floating_only && !is_floating(compute)) throw TypeError(not_implemented(name, compute));
  Tensor out = empty(a.shape(), compute, device);
  if (device.is_cuda()) {
    detail::cuda::unary<Op>(out, a.to(compute));
    return out;
  }
  const Tensor x = in_row_order(a.to(compute));
  auto run = [&]<typename T>() { unary_loop<T, T>(out, x, f); };
  if constexpr (Op::floating_only) dispatch_floating(compute, name, run);
  else dispatch_dtype(compute, run);
  return out;
}

}  // namespace

// ---- recording helpers ------------------------------------------------------------------------

namespace {

using detail::SavedTensor;

// One FLOP per output element, the convention for elementwise ops.
double per_element(const Tensor& t) { return static_cast<double>(t.numel()); }

// Records a unary op whose rule needs the input (`x`) and/or the output (`y`).
template <typename Rule>
Tensor record_unary(Tensor out, const Tensor& a, const char* name, bool save_input, bool save_output, Rule rule) {
  if (!detail::should_record({&a})) return out;
  SavedTensor x(save_input ? a : Tensor()), y(save_output ? out : Tensor());
  detail::record(out, name, {a},
                 [x, y, rule](const Tensor& g) { return std::vector<Tensor>{rule(g, x.unpack(), y.unpack())}; },
                 per_element(out), per_element(out));
  return out;
}

}  // namespace

// ---- binary arithmetic ------------------------------------------------------------------------

Tensor add(const Tensor& a, const Tensor& b) {
  // bool + bool stays bool (logical or), as in PyTorch.
  Tensor out = binary_op("add", a, b, result_type(a, b), false, Kinds::All, ops::Add{});
  if (detail::should_record({&a, &b}))
    detail::record(out, "AddBackward0", {a, b}, [](const Tensor& g) { return std::vector<Tensor>{g, g}; },
                   per_element(out), 0);
  return out;
}

Tensor sub(const Tensor& a, const Tensor& b) {
  if (a.dtype() == kBool && b.dtype() == kBool)
    throw TypeError("Subtraction, the `-` operator, with two bool tensors is not supported. "
                    "Use the `^` or `logical_xor()` operator instead.");
  Tensor out = binary_op("sub", a, b, result_type(a, b), false, Kinds::All, ops::Sub{});
  if (detail::should_record({&a, &b}))
    detail::record(out, "SubBackward0", {a, b}, [](const Tensor& g) { return std::vector<Tensor>{g, neg(g)}; },
                   per_element(out), b.requires_grad() ? per_element(out) : 0);
  return out;
}

Tensor mul(const Tensor& a, const Tensor& b) {
  Tensor out = binary_op("mul", a, b, result_type(a, b), false, Kinds::All, ops::Mul{});
  if (detail::should_record({&a, &b})) {
    // d(ab)/da = b and d(ab)/db = a: each input's gradient needs the other input.
    const bool ga = a.requires_grad(), gb = b.requires_grad();
    SavedTensor sa(gb ? a : Tensor()), sb(ga ? b : Tensor());
    detail::record(out, "MulBackward0", {a, b},
                   [sa, sb, ga, gb](const Tensor& g) {
                     return std::vector<Tensor>{ga ? mul(g, sb.unpack()) : Tensor(), gb ? mul(g, sa.unpack()) : Tensor()};
                   },
                   per_element(out), per_element(out) * (ga + gb));
  }
  return out;
}

Tensor div(const Tensor& a, const Tensor& b) {
  // True division: integer inputs are divided as float32.
  Tensor out = binary_op("div", a, b, float_result(result_type(a, b)), false, Kinds::All, ops::Div{});
  if (detail::should_record({&a, &b})) {
    // d(a/b)/da = 1/b; d(a/b)/db = -a/b^2.
    const bool ga = a.requires_grad(), gb = b.requires_grad();
    SavedTensor sa(gb ? a : Tensor()), sb(b);
    detail::record(out, "DivBackward0", {a, b},
                   [sa, sb, ga, gb](const Tensor& g) {
                     const Tensor bv = sb.unpack();
                     return std::vector<Tensor>{ga ? div(g, bv) : Tensor(),
                                                gb ? neg(div(mul(g, sa.unpack()), mul(bv, bv))) : Tensor()};
                   },
                   per_element(out), per_element(out) * (ga + 3 * gb));
  }
  return out;
}

namespace {
Tensor pow_values(const Tensor& a, const Tensor& b) {
  const DType dt = result_type(a, b);
  if (is_integral(dt) && sum(lt(b, scalar_tensor(0, b.dtype()))).item() > 0)
    throw RuntimeError("Integers to negative integer powers are not allowed.");
  // A float raised to one of the common fixed exponents is a multiply or a root: std::pow costs
  // some 20 ns per element, enough to dominate a backward pass through x.pow(2).
  if (b.dim() == 0 && is_floating(dt) && a.dtype() == dt) {
    const double e = b.item();
    if (e == 1) return a.clone().detach();
    if (e == 2) return unary_op("pow", a, dt, ops::Square{});
    if (e == 3) return unary_op("pow", a, dt, ops::Cube{});
    if (e == 0.5) return unary_op("pow", a, dt, ops::Sqrt{});
    if (e == -1) return unary_op("pow", a, dt, ops::Reciprocal{});
  }
  return binary_op("pow", a, b, dt, false, Kinds::NoBool, ops::Pow{});
}
}  // namespace

Tensor pow(const Tensor& a, const Tensor& b) {
  Tensor out = pow_values(a, b);
  if (detail::should_record({&a, &b})) {
    // d(a^b)/da = b a^(b-1); d(a^b)/db = a^b ln a.
    const bool ga = a.requires_grad(), gb = b.requires_grad();
    SavedTensor sa(a), sb(b), so(gb ? out : Tensor());
    detail::record(out, "PowBackward1", {a, b},
                   [sa, sb, so, ga, gb](const Tensor& g) {
                     const Tensor x = sa.unpack(), e = sb.unpack();
                     return std::vector<Tensor>{ga ? mul(g, mul(e, pow_values(x, sub(e, scalar_tensor(1, e.dtype()))))) : Tensor(),
                                                gb ? mul(g, mul(so.unpack(), log(x))) : Tensor()};
                   },
                   per_element(out), per_element(out) * 3);
  }
  return out;
}

Tensor pow(const Tensor& a, Scalar b) {
  Tensor out = pow_values(a, scalar_tensor(b, result_type(a, b)));
  if (detail::should_record({&a})) {
    SavedTensor sa(a);
    const double e = b.to_double();
    detail::record(out, "PowBackward0", {a},
                   [sa, e](const Tensor& g) {
                     const Tensor x = sa.unpack();
                     return std::vector<Tensor>{mul(g, mul(pow_values(x, scalar_tensor(e - 1, x.dtype())), scalar_tensor(e, x.dtype())))};
                   },
                   per_element(out), per_element(out) * 3);
  }
  return out;
}

namespace {
// The gradient of max(a, b) goes to the larger input, split in half on ties.
Tensor record_extremum(Tensor out, const Tensor& a, const Tensor& b, const char* name) {
  if (!detail::should_record({&a, &b})) return out;
  SavedTensor sa(a), sb(b), so(out);
  detail::record(out, name, {a, b},
                 [sa, sb, so](const Tensor& g) {
                   const Tensor x = sa.unpack(), y = sb.unpack(), m = so.unpack();
                   const Tensor tie = eq(x, y).to(g.dtype());
                   const Tensor wa = sub(eq(x, m).to(g.dtype()), mul(tie, scalar_tensor(0.5, g.dtype())));
                   const Tensor wb = sub(eq(y, m).to(g.dtype()), mul(tie, scalar_tensor(0.5, g.dtype())));
                   return std::vector<Tensor>{mul(g, wa), mul(g, wb)};
                 },
                 per_element(out), per_element(out) * 2);
  return out;
}
}  // namespace

Tensor maximum(const Tensor& a, const Tensor& b) {
  return record_extremum(binary_op("maximum", a, b, result_type(a, b), false, Kinds::All, ops::Maximum{}),
                         a, b, "MaximumBackward0");
}

Tensor minimum(const Tensor& a, const Tensor& b) {
  return record_extremum(binary_op("minimum", a, b, result_type(a, b), false, Kinds::All, ops::Minimum{}),
                         a, b, "MinimumBackward0");
}

// ---- unary ------------------------------------------------------------------------------------

Tensor neg(const Tensor& a) {
  if (a.dtype() == kBool)
    throw TypeError("Negation, the `-` operator, on a bool tensor is not supported. If you are "
                    "trying to invert a mask, use the `~` or `logical_not()` operator instead.");
  return record_unary(unary_op("neg", a, a.dtype(), ops::Neg{}), a, "NegBackward0", false, false, [](const Tensor& g, const Tensor&, const Tensor&) { return neg(g); });
}

Tensor abs(const Tensor& a) {
  if (a.dtype() == kBool) throw TypeError(not_implemented("abs", kBool));
  return record_unary(unary_op("abs", a, a.dtype(), ops::Abs{}), a, "AbsBackward0", true, false, [](const Tensor& g, const Tensor& x, const Tensor&) {
    const Tensor zero = scalar_tensor(0, x.dtype());
    return mul(g, sub(gt(x, zero).to(g.dtype()), lt(x, zero).to(g.dtype())));  // sign(x)
  });
}

Tensor sqrt(const Tensor& a) {
  return record_unary(unary_op("sqrt", a, float_result(a.dtype()), ops::Sqrt{}),
                      a, "SqrtBackward0", false, true,
                      [](const Tensor& g, const Tensor&, const Tensor& y) { return div(g, mul(y, scalar_tensor(2.0, y.dtype()))); });
}

Tensor rsqrt(const Tensor& a) {
  return record_unary(unary_op("rsqrt", a, float_result(a.dtype()), ops::Rsqrt{}),
                      a, "RsqrtBackward0", false, true, [](const Tensor& g, const Tensor&, const Tensor& y) {
                        return mul(g, mul(mul(y, mul(y, y)), scalar_tensor(-0.5, y.dtype())));  // -y^3 / 2
                      });
}

Tensor exp(const Tensor& a) {
  return record_unary(unary_op("exp", a, float_result(a.dtype()), ops::Exp{}),
                      a, "ExpBackward0", false, true, [](const Tensor& g, const Tensor&, const Tensor& y) { return mul(g, y); });
}

Tensor log(const Tensor& a) {
  return record_unary(unary_op("log", a, float_result(a.dtype()), ops::Log{}),
                      a, "LogBackward0", true, false, [](const Tensor& g, const Tensor& x, const Tensor&) { return div(g, x); });
}

Tensor relu(const Tensor& a) {
  if (a.dtype() == kBool) throw TypeError(not_implemented("relu", kBool));
  return record_unary(unary_op("relu", a, a.dtype(), ops::Relu{}), a, "ReluBackward0", false, true, [](const Tensor& g, const Tensor&, const Tensor& y) {
    return mul(g, gt(y, scalar_tensor(0, y.dtype())).to(g.dtype()));  // 1 where the output is positive
  });
}

Tensor gelu(const Tensor& a) {
  if (!is_floating(a.dtype())) throw TypeError(not_implemented("GeluKernelImpl", a.dtype()));
  Tensor out = unary_op("gelu", a, a.dtype(), ops::Gelu{});
  return record_unary(out, a, "GeluBackward0", true, false, [](const Tensor& g, const Tensor& x, const Tensor&) {
    return mul(g, unary_op("gelu_backward", x, x.dtype(), ops::GeluBackward{}));
  });
}

Tensor sigmoid(const Tensor& a) {
  return record_unary(unary_op("sigmoid", a, float_result(a.dtype()), ops::Sigmoid{}),
                      a, "SigmoidBackward0", false, true, [](const Tensor& g, const Tensor&, const Tensor& y) {
                        return mul(g, mul(y, sub(scalar_tensor(1, y.dtype()), y)));  // y (1 - y)
                      });
}

Tensor tanh(const Tensor& a) {
  return record_unary(unary_op("tanh", a, float_result(a.dtype()), ops::Tanh{}),
                      a, "TanhBackward0", false, true, [](const Tensor& g, const Tensor&, const Tensor& y) {
                        return mul(g, sub(scalar_tensor(1, y.dtype()), mul(y, y)));  // 1 - y^2
                      });
}

// ---- comparisons and where --------------------------------------------------------------------

Tensor eq(const Tensor& a, const Tensor& b) {
  return binary_op("eq", a, b, result_type(a, b), true, Kinds::All, ops::Eq{});
}
Tensor ne(const Tensor& a, const Tensor& b) {
  return binary_op("ne", a, b, result_type(a, b), true, Kinds::All, ops::Ne{});
}
Tensor lt(const Tensor& a, const Tensor& b) {
  return binary_op("lt", a, b, result_type(a, b), true, Kinds::All, ops::Lt{});
}
Tensor le(const Tensor& a, const Tensor& b) {
  return binary_op("le", a, b, result_type(a, b), true, Kinds::All, ops::Le{});
}
Tensor gt(const Tensor& a, const Tensor& b) {
  return binary_op("gt", a, b, result_type(a, b), true, Kinds::All, ops::Gt{});
}
Tensor ge(const Tensor& a, const Tensor& b) {
  return binary_op("ge", a, b, result_type(a, b), true, Kinds::All, ops::Ge{});
}

Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b) {
  const Device device = detail::op_device("where", {&condition, &a, &b});
  if (condition.dtype() != kBool)
    throw TypeError(std::string("where expected condition to be a boolean tensor, but got a "
                                "tensor with dtype ") + dtype_legacy_name(condition.dtype()));
  const DType dt = result_type(a, b);
  const Shape shape = broadcast_shapes(condition.shape(), broadcast_shapes(a.shape(), b.shape()));
  const Tensor x = a.to(dt), y = b.to(dt);
  Tensor out = empty(shape, dt, device);
  if (device.is_cuda()) {
    detail::cuda::where(out, condition, x, y);
  } else {
    const Strides sc = detail::broadcast_strides(condition, shape);
    const Strides sa = detail::broadcast_strides(x, shape);
    const Strides sb = detail::broadcast_strides(y, shape);
    dispatch_dtype(dt, [&]<typename T>() {
      T* po = out.data<T>();
      const bool* pc = condition.data<bool>();
      const T* px = x.data<T>();
      const T* py = y.data<T>();
      detail::for_each_row<4>(shape, {&out.strides(), &sc, &sa, &sb},
                              [&](int64_t n, const auto& off, const auto& st) {
                                for (int64_t i = 0; i < n; ++i)
                                  po[off[0] + i * st[0]] = pc[off[1] + i * st[1]]
                                                               ? px[off[2] + i * st[2]]
                                                               : py[off[3] + i * st[3]];
                              });
    });
  }
  if (detail::should_record({&a, &b})) {
    SavedTensor c(condition);
    detail::record(out, "WhereBackward0", {a, b},
                   [c](const Tensor& g) {
                     const Tensor cond = c.unpack(), zero = scalar_tensor(0, g.dtype());
                     return std::vector<Tensor>{where(cond, g, zero), where(cond, zero, g)};
                   },
                   0, 0);
  }
  return out;
}

// ---- whole-tensor comparisons -----------------------------------------------------------------

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

// ---- operators --------------------------------------------------------------------------------

Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator-(const Tensor& a) { return neg(a); }

// A number next to a tensor takes the dtype promotion gives the pair, so that `int64 * 2`
// stays int64 and `float16 * 2.5` stays float16.
#define TINY_SCALAR_OPERATOR(OP, FN)                                                    \
  Tensor operator OP(const Tensor& a, Scalar b) {                                       \
    return FN(a, scalar_tensor(b, result_type(a, b)));                                   \
  }                                                                                     \
  Tensor operator OP(Scalar a, const Tensor& b) {                                       \
    return FN(scalar_tensor(a, result_type(b, a)), b);                                   \
  }
TINY_SCALAR_OPERATOR(+, add)
TINY_SCALAR_OPERATOR(-, sub)
TINY_SCALAR_OPERATOR(*, mul)
TINY_SCALAR_OPERATOR(/, div)
#undef TINY_SCALAR_OPERATOR

Tensor operator==(const Tensor& a, const Tensor& b) { return eq(a, b); }
Tensor operator!=(const Tensor& a, const Tensor& b) { return ne(a, b); }
Tensor operator<(const Tensor& a, const Tensor& b) { return lt(a, b); }
Tensor operator<=(const Tensor& a, const Tensor& b) { return le(a, b); }
Tensor operator>(const Tensor& a, const Tensor& b) { return gt(a, b); }
Tensor operator>=(const Tensor& a, const Tensor& b) { return ge(a, b); }
Tensor operator==(const Tensor& a, Scalar b) { return eq(a, scalar_tensor(b, result_type(a, b))); }
Tensor operator!=(const Tensor& a, Scalar b) { return ne(a, scalar_tensor(b, result_type(a, b))); }
Tensor operator<(const Tensor& a, Scalar b) { return lt(a, scalar_tensor(b, result_type(a, b))); }
Tensor operator<=(const Tensor& a, Scalar b) { return le(a, scalar_tensor(b, result_type(a, b))); }
Tensor operator>(const Tensor& a, Scalar b) { return gt(a, scalar_tensor(b, result_type(a, b))); }
Tensor operator>=(const Tensor& a, Scalar b) { return ge(a, scalar_tensor(b, result_type(a, b))); }

// ---- Tensor methods that forward to the free functions ----------------------------------------

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
Tensor Tensor::sum() const { return tiny::sum(*this); }
Tensor Tensor::sum(const std::vector<int64_t>& d, bool k) const { return tiny::sum(*this, d, k); }
Tensor Tensor::mean() const { return tiny::mean(*this); }
Tensor Tensor::mean(const std::vector<int64_t>& d, bool k) const { return tiny::mean(*this, d, k); }
Tensor Tensor::max() const { return tiny::max(*this); }
Tensor Tensor::matmul(const Tensor& other) const { return tiny::matmul(*this, other); }
Tensor Tensor::triu(int64_t diagonal) const { return tiny::triu(*this, diagonal); }
Tensor Tensor::tril(int64_t diagonal) const { return tiny::tril(*this, diagonal); }

}  // namespace tiny
