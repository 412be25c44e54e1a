// functional.cpp: losses and softmax, each one recorded node with PyTorch's name.
#include "tiny/functional.h"

#include "autograd_internal.h"
#include "dispatch.h"
#include "internal.h"
#include "tiny/ops.h"

namespace tiny {

using detail::SavedTensor;

namespace {
double n_of(const Tensor& t) { return static_cast<double>(t.numel()); }

void require_floating(const char* op, const Tensor& t) {
  if (!is_floating(t.dtype()))
    throw not_implemented_for(op, t.dtype());
}

// The kernel PyTorch names when softmax or log_softmax gets a dtype it lacks: one per op over the
// last dimension, one for both over any other.
const char* softmax_kernel(const std::string& op, const Tensor& x, int64_t dim) {
  if (dim != std::max<int64_t>(x.dim() - 1, 0)) return "softmax_kernel_impl";
  return op == "softmax" ? "softmax_lastdim_kernel_impl" : "log_softmax_lastdim_kernel_impl";
}

// PyTorch's ValueError for binary_cross_entropy_with_logits; mse_loss, which PyTorch broadcasts
// with a warning, refuses here in the same words, prefixed with its name.
void require_same_shape(const char* prefix, const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape())
    throw ValueError(std::string(prefix) + "Target size (" + detail::torch_size_str(b.shape()) +
                     ") must be the same as input size (" + detail::torch_size_str(a.shape()) +
                     ")");
}
}  // namespace

// Each function below first casts its inputs as autocast's lists say, then computes with autocast
// off, so that the ops it is made of run in the dtype chosen for the whole (as PyTorch's autocast
// runs an op it has cast with its own dispatch key excluded).

Tensor log_softmax(const Tensor& input, int64_t dim) {
  const Tensor x = detail::autocast(input, detail::kAutocastFloat32OnCuda);
  const detail::AutocastOff inside;
  dim = wrap_dim(dim, x.dim());
  require_floating(softmax_kernel("log_softmax", x, dim), x);
  Tensor out;
  if (x.numel() == 0) {
    out = empty(x.shape(), x.dtype(), x.device());  // nothing to normalise (max would refuse)
  } else {
    NoGradGuard values_only;
    const Tensor shifted = sub(x, max(x, dim, true).values);
    out = sub(shifted, log(sum(exp(shifted), {dim}, true)));
  }
  if (detail::should_record({&x})) {
    SavedTensor so(out, "LogSoftmaxBackward0", /*is_output=*/true);
    detail::record(
        out, "LogSoftmaxBackward0", {x},
        [so, dim](const Tensor& g) {
          // d/dx_i of log softmax_j is [i == j] - softmax_i.
          return std::vector<Tensor>{sub(g, mul(exp(so.unpack()), sum(g, {dim}, true)))};
        },
        4 * n_of(x), 3 * n_of(x));
  }
  return out;
}

Tensor softmax(const Tensor& input, int64_t dim) {
  const Tensor x = detail::autocast(input, detail::kAutocastFloat32OnCuda);
  const detail::AutocastOff inside;
  dim = wrap_dim(dim, x.dim());
  require_floating(softmax_kernel("softmax", x, dim), x);
  Tensor out;
  if (x.numel() == 0) {
    out = empty(x.shape(), x.dtype(), x.device());  // nothing to normalise (max would refuse)
  } else {
    NoGradGuard values_only;
    const Tensor e = exp(sub(x, max(x, dim, true).values));
    out = div(e, sum(e, {dim}, true));
  }
  if (detail::should_record({&x})) {
    SavedTensor so(out, "SoftmaxBackward0", /*is_output=*/true);
    detail::record(
        out, "SoftmaxBackward0", {x},
        [so, dim](const Tensor& g) {
          const Tensor y = so.unpack();
          return std::vector<Tensor>{mul(y, sub(g, sum(mul(g, y), {dim}, true)))};
        },
        4 * n_of(x), 3 * n_of(x));
  }
  return out;
}

Tensor mse_loss(const Tensor& input_, const Tensor& target_) {
  const std::vector<Tensor> cast = detail::autocast({&input_, &target_}, detail::kAutocastFloat32);
  const Tensor &input = cast[0], &target = cast[1];
  const detail::AutocastOff inside;
  require_floating("mse_loss", input);
  require_same_shape("mse_loss: ", input, target);
  Tensor out;
  {
    NoGradGuard values_only;
    const Tensor d = sub(input, target);
    out = mean(mul(d, d));
  }
  if (detail::should_record({&input, &target})) {
    SavedTensor si(input, "MseLossBackward0"), st(target, "MseLossBackward0");
    const double n = n_of(input);
    detail::record(
        out, "MseLossBackward0", {input, target},
        [si, st, n](const Tensor& g) {
          const Tensor d =
              mul(sub(si.unpack(), st.unpack()),
                  div(mul(g, scalar_tensor(2.0, g.dtype())), scalar_tensor(n, g.dtype())));
          return std::vector<Tensor>{d, neg(d)};  // 2 (x - y) / n, and its negative
        },
        3 * n, 3 * n);
  }
  return out;
}

Tensor binary_cross_entropy_with_logits(const Tensor& logits_, const Tensor& target_) {
  const std::vector<Tensor> cast = detail::autocast({&logits_, &target_}, detail::kAutocastFloat32);
  const Tensor &logits = cast[0], &target = cast[1];
  const detail::AutocastOff inside;
  require_floating("binary_cross_entropy_with_logits", logits);
  require_same_shape("", logits, target);
  Tensor out;
  {
    NoGradGuard values_only;
    // log(1 + exp(-|x|)) is at most log 2 and never overflows; max(x, 0) - x y supplies the rest.
    const Tensor softplus_tail = log(add(exp(neg(abs(logits))), scalar_tensor(1, logits.dtype())));
    out = mean(add(sub(relu(logits), mul(logits, target)), softplus_tail));
  }
  if (detail::should_record({&logits, &target})) {
    const char* node = "BinaryCrossEntropyWithLogitsBackward0";
    SavedTensor sx(logits, node), sy(target, node);
    const double n = n_of(logits);
    detail::record(
        out, "BinaryCrossEntropyWithLogitsBackward0", {logits, target},
        [sx, sy, n](const Tensor& g) {
          const Tensor x = sx.unpack(), y = sy.unpack(),
                       scale = div(g, scalar_tensor(n, g.dtype()));
          // d/dx = sigmoid(x) - y; d/dy = -x.
          return std::vector<Tensor>{mul(sub(sigmoid(x), y), scale), mul(neg(x), scale)};
        },
        6 * n, 4 * n);
  }
  return out;
}

Tensor nll_loss(const Tensor& input, const Tensor& target) {
  const Tensor log_probs = detail::autocast(input, detail::kAutocastFloat32);
  const detail::AutocastOff inside;
  require_floating("nll_loss", log_probs);
  // PyTorch's checks in its order; then the library's own limit (PyTorch also takes one sample
  // of shape (C,), and (N, C, d1, ...) with targets (N, d1, ...)).
  if (log_probs.dim() == 0) throw ValueError("Expected 1 or more dimensions (got 0)");
  if (log_probs.dim() == 2 && target.dim() >= 1 && target.size(0) != log_probs.size(0))
    throw ValueError("Expected input batch_size (" + std::to_string(log_probs.size(0)) +
                     ") to match target batch_size (" + std::to_string(target.size(0)) + ").");
  if (log_probs.dim() <= 2 && target.dim() > 1)
    throw RuntimeError("0D or 1D target tensor expected, multi-target not supported");
  if (log_probs.dim() != 2 || target.dim() != 1 || target.size(0) != log_probs.size(0))
    throw ValueError("nll_loss: expected log_probs of shape (N, C) and target of shape (N,), got " +
                     detail::shape_str(log_probs.shape()) + " and " +
                     detail::shape_str(target.shape()));
  // PyTorch 2.x takes class indices as int64 or uint8 (1.13: int64 only).
  if (target.dtype() != kInt64 && target.dtype() != kUInt8)
    throw RuntimeError(std::string("expected target dtype to be Long or Byte, but got ") +
                       dtype_legacy_name(target.dtype()));
  const int64_t N = log_probs.size(0), C = log_probs.size(1);
  const Tensor t = target.to(kInt64).contiguous().cpu();  // the check reads the classes here
  const int64_t* cls = t.data<int64_t>();
  for (int64_t i = 0; i < N; ++i)
    if (cls[i] < 0 || cls[i] >= C)
      throw IndexError("Target " + std::to_string(cls[i]) + " is out of bounds.");
  // A one-hot mask picks log_probs[i, target[i]].
  const Tensor picked = eq(arange(C).to(target.device()).unsqueeze(0), target.unsqueeze(1));
  Tensor out;
  {
    NoGradGuard values_only;
    out = neg(div(sum(where(picked, log_probs, scalar_tensor(0, log_probs.dtype()))),
                  scalar_tensor(static_cast<double>(N), log_probs.dtype())));
  }
  if (detail::should_record({&log_probs})) {
    detail::record(
        out, "NllLossBackward0", {log_probs},
        [picked, N](const Tensor& g) {
          const Tensor each = div(neg(g), scalar_tensor(static_cast<double>(N), g.dtype()));
          return std::vector<Tensor>{where(picked, each, scalar_tensor(0, g.dtype()))};
        },
        static_cast<double>(N), static_cast<double>(N));
  }
  return out;
}

Tensor cross_entropy(const Tensor& input, const Tensor& target) {
  // PyTorch's CPU list casts cross_entropy to float32; its CUDA list leaves that to its parts,
  // log_softmax and nll_loss, which are on the list themselves.
  const Tensor logits =
      detail::autocast(input, {.cpu = AutocastClass::Float32, .cuda = AutocastClass::None});
  // A target shaped like the logits holds class probabilities, one row per sample (PyTorch
  // decides by shape alone, so integer classes laid out that way are an error, in its words).
  if (target.shape() == logits.shape()) {
    if (!is_floating(target.dtype()))
      throw RuntimeError(
          std::string("Expected floating point type for target with class probabilities, got ") +
          dtype_legacy_name(target.dtype()));
    // -sum_c p_c log q_c per sample, averaged over the N samples.
    const Tensor per_sample = -(log_softmax(logits, 1) * target).sum({1});
    return per_sample.sum() / static_cast<double>(logits.numel() / logits.size(1));
  }
  return nll_loss(log_softmax(logits, 1), target);
}

Tensor linear(const Tensor& input_, const Tensor& weight_, const Tensor& bias_) {
  // The weight and the bias are leaves: under autocast their 16-bit copies come from the cache.
  const std::vector<Tensor> cast =
      detail::autocast({&input_, &weight_, &bias_}, detail::kAutocastLowerPrecision);
  const Tensor &input = cast[0], &weight = cast[1], &bias = cast[2];
  const detail::AutocastOff inside;
  if (weight.dim() != 2)
    throw RuntimeError("linear(): weight must be 2-D (out_features, in_features), got " +
                       std::to_string(weight.dim()) + "-D");
  if (input.dim() == 0)
    throw RuntimeError("both arguments to linear need to be at least 1D, but they are 0D and 2D");
  // PyTorch 2.x's three forms, with its graphs and its messages: one addmm for a matrix
  // (AddmmBackward0); the same on the rows of any other contiguous input with a 1-D bias, viewed
  // back as PyTorch's _unsafe_view (UnsafeViewBackward0); otherwise a matmul followed by the bias
  // (AddBackward0). weight.t() is TBackward0 in all three.
  if (bias.defined() && input.dim() == 2) return addmm(bias, input, weight.t());
  if (bias.defined() && bias.dim() == 1 && input.is_contiguous()) {
    Shape shape(input.shape().begin(), input.shape().end() - 1);
    const int64_t rows = shape_numel(shape);  // counted: reshape({-1, K}) fails when K is 0
    const Tensor flat = addmm(bias, input.view({rows, input.size(-1)}), weight.t());
    shape.push_back(flat.size(1));
    return detail::unsafe_view(flat, shape);
  }
  const Tensor out = matmul(input, weight.t());
  return bias.defined() ? add(out, bias) : out;
}

}  // namespace tiny
