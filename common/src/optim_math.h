// optim_math.h: one element of each optimizer's update, written once for the CPU loops
// (cpu/optim.cpp) and the CUDA kernel (../cuda/optim.cu). Not part of the public API.
//
// PyTorch runs an optimizer step as a chain of tensor ops (mul_, add_, addcmul_, sqrt, div,
// add_, addcdiv_), each a full pass over memory that rounds its result to the parameter's
// dtype. Here the whole chain runs in one pass, element by element, but rounds at exactly the
// same places, so the result is the same bits for a fraction of the memory traffic:
//   - every op's result is rounded to the storage type T (a no-op for float and double);
//   - each Python number becomes a value of the tensor's dtype first, as a wrapped scalar does
//     (S below), except addcmul_'s and addcdiv_'s `value`, which stays in the compute type (F);
//   - where PyTorch's vectorised CPU kernels fuse a multiply and an add (add_ with alpha,
//     addcmul_ after its first product), `mul_add` fuses too, but only in the copy compiled for
//     processors with FMA: PyTorch's kernels for older processors do not fuse, and neither
//     does our plain copy. On the GPU mul_add always fuses, as nvcc fuses PyTorch's CUDA
//     kernels; optim.cu is compiled with --fmad=false so that nothing else is.
#pragma once
#include <cmath>
#include <cstdint>

#include "tiny/config.h"
#include "tiny/dtype.h"
#include "mul_add.h"
#include "tiny/error.h"  // a starter copy throws NotImplementedError here

namespace tiny::detail {

/// Which update an UpdateArgs describes.
enum class UpdateRule { Sgd, Adagrad, DocumentAdaGrad, Rmsprop, Adam, AdamW };

/// One optimizer step for one parameter: its memory, and the numbers of the step, already
/// computed in double the way PyTorch's Python code computes them.
struct UpdateArgs {
  UpdateRule rule;
  DType dtype;     ///< of the parameter, its gradient and every state tensor
  int64_t n;       ///< elements, all contiguous
  int device = 0;  ///< the device index (CUDA)
  void* param;
  const void* grad;
  void* state[3];  ///< by rule: see the element functions below
  double lr = 0, weight_decay = 0, momentum = 0, dampening = 0, alpha = 0, beta1 = 0, beta2 = 0,
         eps = 0;
  double lr_decay = 0;               ///< Adagrad
  double step_size = 0;              ///< Adam(W): lr / (1 - beta1^step); Adagrad: the decayed lr
  double bias_correction2_sqrt = 1;  ///< Adam(W): sqrt(1 - beta2^step)
  bool maximize = false, nesterov = false, centered = false, amsgrad = false;
  bool first_step = false;  ///< SGD: the momentum buffer is the gradient itself on the first step
};

/// Calls `f.template operator()<Rule>()` with `rule` as a compile-time value: the one place
/// that lists the rules, for the CPU loops and the CUDA kernel alike.
template <typename F> void visit_rule(UpdateRule rule, F&& f) {
  switch (rule) {
    case UpdateRule::Sgd: return f.template operator()<UpdateRule::Sgd>();
    case UpdateRule::Adagrad: return f.template operator()<UpdateRule::Adagrad>();
    case UpdateRule::DocumentAdaGrad: return f.template operator()<UpdateRule::DocumentAdaGrad>();
    case UpdateRule::Rmsprop: return f.template operator()<UpdateRule::Rmsprop>();
    case UpdateRule::Adam: return f.template operator()<UpdateRule::Adam>();
    case UpdateRule::AdamW: return f.template operator()<UpdateRule::AdamW>();
  }
}

/// torch.lerp(start, end, weight) with a Python number for the weight, as PyTorch 2.x's CPU
/// kernels compute it: start + w (end - start) for |w| < 0.5, end - (end - start)(1 - w)
/// otherwise (exact at both ends); the vectorised kernels fuse either into one multiply-add,
/// the second as (w - 1)(end - start) + end. Adam's moving average and RMSprop's centered mean
/// use it (2.x's `exp_avg.lerp_(grad, 1 - beta1)`; 1.13 wrote mul_ and add_).
template <bool Fused, typename M> TINY_HD inline M lerp(M start, M end, M w) {
  const M d = end - start;
  if (w < M(0.5) && w > M(-0.5)) return mul_add<Fused>(w, d, start);
  if constexpr (Fused) return mul_add<true>(w - M(1), d, end);
  else return end - rounded_product(d, M(1) - w);
}

/// x.add_(y, alpha=a) (and add(x, y, alpha=a)), as PyTorch's add kernel computes it for storage
/// type T. Its vectorised kernels compute x + a y in the compute type, fused into one
/// multiply-add. Its plain kernels compute in T itself: for bfloat16 and float16, a * y is a
/// value of T (c10's BFloat16 * BFloat16 is a BFloat16) before x is added; for float32 and
/// float64 that is the usual double rounding.
/// The vectorised kernels also leave the last n mod 32 elements of a 16-bit tensor (after the
/// last full vectors) to their scalar code, which rounds a * y to T as the plain kernels do
/// while still fusing the other multiply-adds (the compiler contracts them there): `Tail` asks
/// for that rounding.
template <bool Fused, typename T, typename M, bool Tail = false>
TINY_HD inline M add_alpha(M x, M a, M y) {
  if constexpr (Fused && !Tail) return mul_add<true>(a, y, x);
  else return M(T(rounded_product(a, y))) + x;
}

/// The update of element i. T is the storage type, M the compute type (float for the 16-bit
/// types), R(x) rounds a compute value to storage, as writing a tensor does; Tail marks an
/// element PyTorch's vectorised kernels leave to their scalar code (add_alpha).
template <UpdateRule Rule, bool Fused, typename T, typename M, bool Tail = false>
TINY_HD inline void update_element(const UpdateArgs& a, int64_t i) {
  using std::sqrt;
  auto R = [](M x) { return M(T(x)); };
  // A Python number added to a tensor (add_(eps), add_(t, alpha=a)) becomes a value of the
  // tensor's dtype first, as PyTorch's add kernels take `scalar.to<scalar_t>()`: rounded to
  // bfloat16 next to a bfloat16 tensor, exact next to a float64 one.
  auto S = [](double x) { return M(T(x)); };
  // A number that multiplies or divides (mul_(beta), / bias_correction), addcmul_'s and
  // addcdiv_'s `value` and lerp_'s weight stay in the compute type: PyTorch 2.x's mul, div,
  // addcmul, addcdiv and lerp kernels read the scalar as float for the 16-bit types (1.13's mul
  // and div rounded it to the tensor's dtype). The same for float32 and float64.
  auto F = [](double x) { return M(x); };
  // x.add_(y, alpha=a), as the kernel family (and, in a 16-bit tensor, the element) computes it.
  auto A = [](M x, M alpha, M y) { return add_alpha<Fused, T, M, Tail>(x, alpha, y); };
  T* param = static_cast<T*>(a.param);
  const T* grad = static_cast<const T*>(a.grad);
  M p = M(param[i]);
  M g = M(grad[i]);
  if (a.maximize) g = -g;
  if constexpr (Rule == UpdateRule::Sgd) {
    // state[0]: momentum_buffer (when momentum != 0).
    if (a.weight_decay != 0) g = R(A(g, S(a.weight_decay), p));  // d_p.add(p, alpha=wd)
    if (a.momentum != 0) {
      T* buf = static_cast<T*>(a.state[0]);
      // buf.mul_(momentum).add_(d_p, alpha=1 - dampening)
      M b = a.first_step ? g : R(A(R(M(buf[i]) * F(a.momentum)), S(1 - a.dampening), g));
      buf[i] = T(b);
      g = a.nesterov ? R(A(g, S(a.momentum), b)) : b;  // d_p.add(buf, alpha=m)
    }
    param[i] = T(A(p, S(-a.lr), g));  // p.add_(d_p, alpha=-lr)
  } else if constexpr (Rule == UpdateRule::Adagrad) {
    // state[0]: sum of squared gradients.
    T* sum = static_cast<T*>(a.state[0]);
    if (a.weight_decay != 0) g = R(A(g, S(a.weight_decay), p));
    const M s = R(mul_add<Fused>(g, g, M(sum[i])));  // sum.addcmul_(g, g, value=1)
    sum[i] = T(s);
    const M stddev = R(R(sqrt(s)) + S(a.eps));         // sum.sqrt().add_(eps)
    param[i] = T(p + (F(-a.step_size) * g) / stddev);  // p.addcdiv_(g, std, value=-clr)
  } else if constexpr (Rule == UpdateRule::DocumentAdaGrad) {
    // The documents' AdaGrad: g2 += g^2; p -= lr * g / sqrt(g2 + eps). state[0]: g2.
    T* g2 = static_cast<T*>(a.state[0]);
    const M s = R(M(g2[i]) + R(g * g));
    g2[i] = T(s);
    param[i] = T(p - R(R(F(a.lr) * g) / R(sqrt(R(s + S(a.eps))))));
  } else if constexpr (Rule == UpdateRule::Rmsprop) {
    // state[0]: square_avg; state[1]: grad_avg (centered); state[2]: momentum_buffer.
    T* sq = static_cast<T*>(a.state[0]);
    if (a.weight_decay != 0) g = R(A(g, S(a.weight_decay), p));
    const M s = R(mul_add<Fused>(F(1 - a.alpha) * g, g, R(M(sq[i]) * F(a.alpha))));
    sq[i] = T(s);
    M avg;
    if (a.centered) {
      T* ga = static_cast<T*>(a.state[1]);
      const M mean = R(lerp<Fused>(M(ga[i]), g, F(1 - a.alpha)));  // grad_avg.lerp_(g, 1 - alpha)
      ga[i] = T(mean);
      avg = R(
          sqrt(R(mul_add<Fused>(-mean, mean, s))));  // square_avg.addcmul(ga, ga, value=-1).sqrt_()
    } else {
      avg = R(sqrt(s));
    }
    avg = R(avg + S(a.eps));
    if (a.momentum > 0) {
      T* buf = static_cast<T*>(a.state[2]);
      const M b = R(R(M(buf[i]) * F(a.momentum)) + g / avg);  // buf.mul_(m).addcdiv_(g, avg)
      buf[i] = T(b);
      param[i] = T(A(p, S(-a.lr), b));  // p.add_(buf, alpha=-lr)
    } else {
      param[i] = T(p + (F(-a.lr) * g) / avg);
    }
  } else {
    // Adam and AdamW. state[0]: exp_avg; state[1]: exp_avg_sq; state[2]: max_exp_avg_sq.
    T* m = static_cast<T*>(a.state[0]);
    T* v = static_cast<T*>(a.state[1]);
    if constexpr (Rule == UpdateRule::AdamW) {
      p = R(p * F(1 - a.lr * a.weight_decay));  // decoupled decay, first, on the old parameter
    } else if (a.weight_decay != 0) {
      g = R(A(g, S(a.weight_decay), p));  // Adam's decay is an L2 term in the gradient
    }
    // BEGIN SOLUTION ch06 adam_update
    const M mi = R(lerp<Fused>(M(m[i]), g, F(1 - a.beta1)));  // exp_avg.lerp_(g, 1 - beta1)
    const M vi = R(mul_add<Fused>(F(1 - a.beta2) * g, g, R(M(v[i]) * F(a.beta2))));
    m[i] = T(mi);
    v[i] = T(vi);
    M second = vi;
    if (a.amsgrad) {
      T* vmax = static_cast<T*>(a.state[2]);
      const M old = M(vmax[i]);
      second = (old != old || vi != vi) ? old + vi : (old > vi ? old : vi);  // torch.maximum
      vmax[i] = T(second);
    }
    const M denom = R(R(R(sqrt(second)) / F(a.bias_correction2_sqrt)) + S(a.eps));
    param[i] = T(p + (F(-a.step_size) * mi) / denom);  // p.addcdiv_(m, denom, value=-step_size)
    // END SOLUTION ch06 adam_update
  }
}

}  // namespace tiny::detail
