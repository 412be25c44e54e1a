// op_list.h: the op table itself, one line per elementwise op. Not part of the public API.
//
// Adding an op is: its struct in elementwise_ops.h (the per-element math, and its name in the
// TINY_*_OPS list there), one line here, its backward formula in derivatives.cpp, and a
// one-line public function in ops.cpp that calls the dispatcher. Everything else (dtypes,
// devices, autocast, out= and in-place forms, cost, the autograd node, the CUDA kernel and the
// source text for generated kernels) comes from the row.
//
// Columns: the row's name (PyTorch's), the struct in elementwise_ops.h that computes it,
// PyTorch's autograd node (nullptr: not differentiable), the DTypeRule, the AutocastClass,
// FLOPs per output element, and what the scalars a and b mean.
#pragma once

// clang-format off
#define TINY_OP_ROWS(X)                                                                          \
  /* one input */                                                                                \
  X(neg,           Neg,          "NegBackward0",      Promote,        None,           1, "")        \
  X(abs,           Abs,          "AbsBackward0",      Promote,        None,           1, "")        \
  X(relu,          Relu,         "ReluBackward0",     Promote,        None,           1, "")        \
  X(sqrt,          Sqrt,         "SqrtBackward0",     IntegerToFloat, None,           1, "")        \
  X(rsqrt,         Rsqrt,        "RsqrtBackward0",    IntegerToFloat, Float32,        1, "")        \
  X(exp,           Exp,          "ExpBackward0",      IntegerToFloat, Float32,        1, "")        \
  X(log,           Log,          "LogBackward0",      IntegerToFloat, Float32,        1, "")        \
  X(log1p,         Log1p,        "Log1PBackward0",    IntegerToFloat, Float32,        1, "")        \
  X(expm1,         Expm1,        "Expm1Backward0",    IntegerToFloat, Float32,        1, "")        \
  X(erf,           Erf,          "ErfBackward0",      IntegerToFloat, None,           1, "")        \
  X(sigmoid,       Sigmoid,      "SigmoidBackward0",  IntegerToFloat, None,           1, "")        \
  X(tanh,          Tanh,         "TanhBackward0",     IntegerToFloat, None,           1, "")        \
  X(gelu,          Gelu,         "GeluBackward0",     FloatOnly,      None,           1, "")        \
  X(square,        Square,       "PowBackward0",      Promote,        Float32,        1, "")        \
  X(cube,          Cube,         nullptr,             FloatOnly,      Float32,        2, "")        \
  X(reciprocal,    Reciprocal,   "ReciprocalBackward0", IntegerToFloat, Float32,      1, "")        \
  X(clamp,         Clamp,        "ClampBackward1",    Promote,        None,           2, "min, max") \
  X(clamp_min,     ClampMin,     "ClampMinBackward0", Promote,        None,           1, "min")     \
  X(clamp_max,     ClampMax,     "ClampMaxBackward0", Promote,        None,           1, "-, max")  \
  /* two inputs */                                                                               \
  X(add,           Add,          "AddBackward0",      Promote,        None,           1, "alpha")   \
  X(sub,           Sub,          "SubBackward0",      Promote,        None,           1, "alpha")   \
  X(rsub,          Rsub,         "RsubBackward1",     Promote,        None,           1, "alpha")   \
  X(mul,           Mul,          "MulBackward0",      Promote,        None,           1, "")        \
  X(div,           Div,          "DivBackward0",      IntegerToFloat, None,           1, "")        \
  X(pow,           Pow,          "PowBackward1",      Promote,        Float32,        1, "")        \
  X(pow_scalar,    Pow,          "PowBackward0",      Promote,        Float32,        1, "exponent") \
  X(maximum,       Maximum,      "MaximumBackward0",  Promote,        None,           1, "")        \
  X(minimum,       Minimum,      "MinimumBackward0",  Promote,        None,           1, "")        \
  X(lerp_scalar,   LerpScalar,   "LerpBackward0",     Promote,        None,           3, "weight")  \
  X(gelu_backward, GeluBackward, nullptr,             FloatOnly,      None,           8, "")        \
  X(eq,            Eq,           nullptr,             Compare,        None,           1, "")        \
  X(ne,            Ne,           nullptr,             Compare,        None,           1, "")        \
  X(lt,            Lt,           nullptr,             Compare,        None,           1, "")        \
  X(le,            Le,           nullptr,             Compare,        None,           1, "")        \
  X(gt,            Gt,           nullptr,             Compare,        None,           1, "")        \
  X(ge,            Ge,           nullptr,             Compare,        None,           1, "")        \
  /* three inputs */                                                                             \
  X(lerp,          Lerp,         "LerpBackward1",     Promote,        None,           3, "")        \
  X(addcmul,       Addcmul,      "AddcmulBackward0",  Promote,        Promote,        3, "value")   \
  X(addcdiv,       Addcdiv,      "AddcdivBackward0",  Promote,        Promote,        3, "value")
// clang-format on
