// functional.cpp: losses and softmax, each one recorded node with PyTorch's name.
#include "tiny/functional.h"

#include "autograd_internal.h"
#include "capture_internal.h"
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

// PyTorch's ValueError for binary_cross_entropy_with_logits.
void require_same_shape(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape())
    throw ValueError("Target size (" + detail::torch_size_str(b.shape()) +
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
  // A target of another shape is broadcast against the input, after a warning: a (N, 1) output
  // against a (N,) target silently becomes an (N, N) average, the classic regression bug.
  if (input_.shape() != target_.shape())
    warn("Using a target size (" + detail::torch_size_str(target_.shape()) +
         ") that is different to the input size (" + detail::torch_size_str(input_.shape()) +
         "). This will likely lead to incorrect results due to broadcasting. Please ensure they "
         "have the same size.");
  const Shape shape = broadcast_shapes(input_.shape(), target_.shape());
  // torch.broadcast_tensors: an operand already of the broadcast shape is passed on as it is.
  const Tensor input_b = input_.shape() == shape ? input_ : input_.expand(shape);
  const Tensor target_b = target_.shape() == shape ? target_ : target_.expand(shape);
  const std::vector<Tensor> cast =
      detail::autocast({&input_b, &target_b}, detail::kAutocastFloat32);
  const Tensor &input = cast[0], &target = cast[1];
  const detail::AutocastOff inside;
  require_floating("mse_loss", input);
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
              mul(sub(si.unpack(), st.unpack()), div(mul(g, detail::number_tensor(2.0, g.dtype())),
                                                     detail::number_tensor(n, g.dtype())));
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
  require_same_shape(logits, target);
  Tensor out;
  {
    NoGradGuard values_only;
    // log(1 + exp(-|x|)) is at most log 2 and never overflows; max(x, 0) - x y supplies the rest.
    const Tensor softplus_tail =
        log(add(exp(neg(abs(logits))), detail::number_tensor(1, logits.dtype())));
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
                       scale = div(g, detail::number_tensor(n, g.dtype()));
          // d/dx = sigmoid(x) - y; d/dy = -x.
          return std::vector<Tensor>{mul(sub(sigmoid(x), y), scale), mul(neg(x), scale)};
        },
        6 * n, 4 * n);
  }
  return out;
}

Tensor nll_loss(const Tensor& input, const Tensor& target, int64_t ignore_index) {
  const Tensor log_probs = detail::autocast(input, detail::kAutocastFloat32);
  const detail::AutocastOff inside;
  require_floating("nll_loss", log_probs);
  // PyTorch's checks, in its order. Its three forms: one sample (C,) with a 0-dim (or one-element)
  // target; a batch (N, C) with targets (N,); and (N, C, d1, ...) with targets (N, d1, ...), for
  // a class per pixel or per position, which PyTorch computes as its 2-D-image loss.
  const int64_t dims = log_probs.dim();
  if (dims == 0) throw ValueError("Expected 1 or more dimensions (got 0)");
  // (PyTorch reads a 0-dim target's batch size as 0.)
  const int64_t target_batch = target.dim() >= 1 ? target.size(0) : 0;
  if (dims != 1 && log_probs.size(0) != target_batch)
    throw ValueError("Expected input batch_size (" + std::to_string(log_probs.size(0)) +
                     ") to match target batch_size (" + std::to_string(target_batch) + ").");
  const char* node = "NllLossBackward0";
  Tensor lp = log_probs;
  if (dims <= 2) {
    if (target.dim() > 1)
      throw RuntimeError("0D or 1D target tensor expected, multi-target not supported");
    if (dims == 1 && target.dim() == 1 && target.size(0) != 1)
      throw ValueError("For 1D input, 1D target must have size 1, but got target size: " +
                       std::to_string(target.size(0)));
  } else {
    Shape expected{log_probs.size(0)};
    expected.insert(expected.end(), log_probs.shape().begin() + 2, log_probs.shape().end());
    if (dims != 4 && target.shape() != expected)
      throw RuntimeError("Expected target size " + detail::shape_str(expected) + ", got " +
                         detail::shape_str(target.shape()));
    if (dims == 4 && target.dim() != 3)
      throw RuntimeError(
          "only batches of spatial targets supported (3D tensors) but got targets of dimension: " +
          std::to_string(target.dim()));
    if (dims == 4 && target.shape() != expected)
      throw RuntimeError("size mismatch (got input: " + detail::shape_str(log_probs.shape()) +
                         " , target: " + detail::shape_str(target.shape()));
    // Other ranks become the 4-D form through a view (ViewBackward0), as in PyTorch.
    if (dims != 4) {
      const int64_t rest = log_probs.numel() > 0 ? -1 : 0;  // -1 cannot be inferred from 0
      lp = log_probs.contiguous().view(
          {log_probs.size(0), log_probs.size(1), rest == 0 ? 0 : 1, rest});
    }
    node = "NllLoss2DBackward0";
  }
  // PyTorch 2.x takes class indices as int64 or uint8 (1.13: int64 only).
  if (target.dtype() != kInt64 && target.dtype() != kUInt8)
    throw RuntimeError(std::string("expected target dtype to be Long or Byte, but got ") +
                       dtype_legacy_name(target.dtype()));
  const int64_t C = lp.size(dims == 1 ? 0 : 1);
  // The classes, read on the CPU in the target's order: the first one out of range is named, and
  // an ignored one becomes -1, which matches no class; `count` is the number not ignored, the
  // mean's denominator. This reads the targets' values on the host, so it is a host step: a
  // CPUGraph that captures the loss checks and counts each replay's targets afresh.
  const Tensor classes = empty(target.shape(), kInt64);
  const Tensor count = empty({}, kFloat64);
  // The count becomes a number of lp's dtype below, and float16 holds 65504 at most.
  const double most = finfo(lp.dtype()).max;
  const char* type_name = detail::convert_type_name(lp.dtype());
  detail::host_step([target, classes, count, C, ignore_index, most, type_name] {
    Tensor converted;  // only when the targets are not int64 already, in order, on the CPU
    const bool usable =
        target.dtype() == kInt64 && target.is_contiguous() && target.device().is_cpu();
    const Tensor& given = usable ? target : (converted = target.to(kInt64).contiguous().cpu());
    const int64_t* in = given.data<int64_t>();
    int64_t* cls = classes.data<int64_t>();
    int64_t counted = 0;
    for (int64_t i = 0, n = classes.numel(); i < n; ++i) {
      if (in[i] == ignore_index) {
        cls[i] = -1;
        continue;
      }
      if (in[i] < 0 || in[i] >= C)
        throw IndexError("Target " + std::to_string(in[i]) + " is out of bounds.");
      cls[i] = in[i];
      ++counted;
    }
    if (static_cast<double>(counted) > most)
      throw RuntimeError(std::string("value cannot be converted to type ") + type_name +
                         " without overflow");
    *count.data<double>() = static_cast<double>(counted);
  });
  // A one-hot mask along the class dimension picks lp[..., target, ...]: the targets laid out
  // like lp with its class dimension of size 1, against 0, 1, ..., C - 1 along it.
  Shape class_axis(static_cast<size_t>(lp.dim()), 1), target_axis = lp.shape();
  const size_t at = dims == 1 ? 0 : 1;
  class_axis[at] = C;
  target_axis[at] = 1;
  const Tensor picked =
      eq(arange(C).to(lp.device()).view(class_axis), classes.to(lp.device()).reshape(target_axis));
  Tensor out;
  {
    NoGradGuard values_only;
    // With every target ignored this is 0 / 0: NaN, as in PyTorch. The count is divided as a
    // number of lp's dtype (a 0-dim CPU tensor), as PyTorch divides by its integer count.
    out = neg(
        div(sum(where(picked, lp, detail::number_tensor(0, lp.dtype()))), count.to(lp.dtype())));
  }
  if (detail::should_record({&lp})) {
    detail::record(
        out, node, {lp},
        [picked, count](const Tensor& g) {
          const Tensor each = div(neg(g), count.to(g.dtype()));
          return std::vector<Tensor>{where(picked, each, detail::number_tensor(0, g.dtype()))};
        },
        static_cast<double>(classes.numel()), static_cast<double>(classes.numel()));
  }
  return out;
}

Tensor cross_entropy(const Tensor& input, const Tensor& target, int64_t ignore_index) {
  // PyTorch's CPU list casts cross_entropy to float32; its CUDA list leaves that to its parts,
  // log_softmax and nll_loss, which are on the list themselves.
  const Tensor logits =
      detail::autocast(input, {.cpu = AutocastClass::Float32, .cuda = AutocastClass::None});
  const int64_t class_dim = logits.dim() == 1 ? 0 : 1;
  // A target shaped like the logits holds class probabilities (PyTorch decides by shape alone,
  // so integer classes laid out that way are an error, in its words).
  if (target.shape() == logits.shape()) {
    if (!is_floating(target.dtype()))
      throw RuntimeError(
          std::string("Expected floating point type for target with class probabilities, got ") +
          dtype_legacy_name(target.dtype()));
    if (ignore_index >= 0)
      throw RuntimeError("ignore_index is not supported for floating point target");
    // -sum p log q over every element, divided by the number of samples (positions included).
    const Tensor lsm = log_softmax(logits, class_dim);
    Tensor total = -(lsm * target).sum();
    if (lsm.numel() == 0) return total.fill_(NAN);
    // PyTorch divides by an integer count, not a tensor: its div.Scalar, DivBackward1.
    const double samples = static_cast<double>(lsm.numel() / lsm.size(class_dim));
    Tensor out;
    {
      NoGradGuard values_only;
      out = total / samples;
    }
    if (detail::should_record({&total}))
      detail::record(
          out, "DivBackward1", {total},
          [samples](const Tensor& g) { return std::vector<Tensor>{g / samples}; }, 1, 1);
    return out;
  }
  return nll_loss(log_softmax(logits, class_dim), target, ignore_index);
}

Tensor linear(const Tensor& input_, const Tensor& weight_, const Tensor& bias_) {
  // The weight and the bias are leaves: under autocast their 16-bit copies come from the cache.
  const std::vector<Tensor> cast =
      detail::autocast({&input_, &weight_, &bias_}, detail::kAutocastLowerPrecision);
  const Tensor &input = cast[0], &weight = cast[1], &bias = cast[2];
  const detail::AutocastOff inside;
  // PyTorch checks only this itself; a weight of another rank meets the checks of what follows
  // (t() refuses three or more dimensions, addmm a 1-D weight; a 1-D weight without a bias is a
  // matrix-vector product).
  if (input.dim() == 0 || weight.dim() == 0)
    throw RuntimeError("both arguments to linear need to be at least 1D, but they are " +
                       std::to_string(input.dim()) + "D and " + std::to_string(weight.dim()) + "D");
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
