/// @file einops.h
/// @brief Named dimensions, einops style: rearrange, reduce and einsum with written-out patterns.
///
/// A pattern names each dimension: "batch seq hidden -> batch hidden". Parentheses group
/// dimensions that are split or merged ("... (heads hidden1) -> ... heads hidden1"), "..."
/// stands for any number of unnamed leading dimensions, and a name missing on the right of
/// reduce or einsum is summed (or averaged, maxed, minned or multiplied) away. "1" or "()" is a
/// dimension of length 1; reduce also takes other numbers on the left, as axes of that length
/// ("(h 2) w -> h w" pools pairs of rows). Patterns are read and refused as einops 0.8 reads
/// them, with its messages: EinopsError (a RuntimeError) for a pattern einops refuses.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "tiny/tensor.h"

namespace tiny {

/// Sizes of named dimensions that a pattern cannot infer, e.g. {{"heads", 2}}.
using AxisSizes = std::map<std::string, int64_t>;

/// Reorders, splits and merges dimensions; a view when the strides allow, else a copy.
Tensor rearrange(const Tensor& x, const std::string& pattern, const AxisSizes& sizes = {});
/// Like rearrange, reducing the dimensions missing on the right with "sum", "mean", "max", "min",
/// "prod", "any" or "all" (the last two give bool).
Tensor reduce(const Tensor& x, const std::string& pattern, const std::string& reduction,
              const AxisSizes& sizes = {});
/// Multiplies and sums over named dimensions:
/// einsum({q, k}, "batch query dim, batch key dim -> batch query key").
/// A name given twice in one input takes the diagonal: einsum(m, "i i -> i") is m's diagonal,
/// "i i ->" its trace. As in einops.einsum, each name is one dimension: parentheses, "1", "()" and numbers raise
/// NotImplementedError, an output name no input has EinopsError, a pattern without "->"
/// ValueError; operands that do not fit the pattern raise torch.einsum's RuntimeError, which
/// names an axis by the letter einops gives it (a, b, c, ... in order of first appearance).
Tensor einsum(const std::vector<Tensor>& operands, const std::string& pattern);
/// einsum of one tensor.
inline Tensor einsum(const Tensor& a, const std::string& pattern) {
  return einsum(std::vector<Tensor>{a}, pattern);
}
/// einsum of two tensors, in einops' argument order.
inline Tensor einsum(const Tensor& a, const Tensor& b, const std::string& pattern) {
  return einsum(std::vector<Tensor>{a, b}, pattern);
}

}  // namespace tiny
