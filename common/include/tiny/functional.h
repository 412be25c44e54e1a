/// @file functional.h
/// @brief Linear layers, losses and normalisations, as torch.nn.functional has them,
/// differentiable and in their numerically stable forms.
#pragma once
#include "tiny/tensor.h"

namespace tiny {

/// input @ weight.T + bias (F.linear), weight (out_features, in_features), bias (out_features) or
/// undefined. Recorded as PyTorch records it: one AddmmBackward0 for a 2-D input with a bias.
/// Under autocast all three are cast to the lower precision, the weight's copy made once per
/// scope.
Tensor linear(const Tensor& input, const Tensor& weight, const Tensor& bias = Tensor());

/// log(softmax(x)) along `dim`, computed as x - max - log(sum(exp(x - max))) so that large
/// logits do not overflow.
Tensor log_softmax(const Tensor& x, int64_t dim);
/// exp(x) / sum(exp(x)) along `dim`, shifted by the maximum first.
Tensor softmax(const Tensor& x, int64_t dim);
/// Mean squared error: mean((input - target)^2).
Tensor mse_loss(const Tensor& input, const Tensor& target);
/// Mean binary cross-entropy of sigmoid(logits) against targets in [0, 1], computed from the
/// logits as max(x, 0) - x y + log(1 + exp(-|x|)), which never takes the log of 0.
Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& target);
/// Mean negative log-likelihood, -mean(log_probs[i, target[i]]), over the targets that are not
/// `ignore_index` (PyTorch's default -100, the usual mark for padding; NaN when every target is
/// ignored). `target` holds int64 (or uint8) classes. The shapes PyTorch takes: log_probs (N, C)
/// with targets (N,); one sample (C,) with a 0-dim target; and (N, C, d1, ...) with targets
/// (N, d1, ...), a class per position (NllLoss2DBackward0, as PyTorch computes it).
Tensor nll_loss(const Tensor& log_probs, const Tensor& target, int64_t ignore_index = -100);
/// Cross-entropy of logits against classes: nll_loss(log_softmax(logits, 1), target), dimension 0
/// for one sample (C,). Or, for a floating `target` shaped like the logits holding class
/// probabilities, -sum target * log_softmax(logits) divided by the number of samples (times
/// positions), as PyTorch computes it; `ignore_index` must then be left negative.
Tensor cross_entropy(const Tensor& logits, const Tensor& target, int64_t ignore_index = -100);

}  // namespace tiny
