/// @file init.h
/// @brief Weight initialisation with PyTorch's torch.nn.init semantics, bit for bit.
///
/// Each function fills a tensor in place with autograd switched off (so a parameter that
/// requires grad can be filled) and returns it; those that draw take a Generator (the default
/// generator when none is given) and give PyTorch's numbers after the same seed (random.h says
/// which numbers depend on the processor). The scale of each comes from the tensor's fan-in and
/// fan-out, PyTorch's rule: for a weight of shape (out, in, k1, k2, ...), fan_in is in * k1 * k2
/// * ... and fan_out is out * k1 * k2 * ...; so nn.Linear's (out, in) weight has fan_in =
/// size(1).
///
///     Tensor w = empty({256, 128});               // (out, in)
///     init::kaiming_uniform_(w, std::sqrt(5.0));  // what nn.Linear does
///     init::trunc_normal_(w, 0, 0.02, -0.04, 0.04);
#pragma once
#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>

#include "tiny/random.h"
#include "tiny/tensor.h"

namespace tiny::init {

/// Which fan kaiming_uniform_ scales by: fan_in keeps the forward pass's variance, fan_out the
/// backward pass's.
enum class FanMode { FanIn, FanOut };

/// The recommended gain for a nonlinearity (nn.init.calculate_gain): 1 for linear, conv* and
/// sigmoid, 5/3 for tanh, sqrt(2) for relu, sqrt(2 / (1 + slope^2)) for leaky_relu (slope
/// `param`, 0.01 when absent), 3/4 for selu. ValueError for any other name.
double calculate_gain(std::string_view nonlinearity, std::optional<double> param = std::nullopt);

/// {fan_in, fan_out} of a weight (nn.init._calculate_fan_in_and_fan_out); ValueError for a
/// tensor of fewer than 2 dimensions.
std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Tensor& t);

/// Uniform numbers in [a, b) (nn.init.uniform_).
Tensor& uniform_(Tensor& t, double a = 0, double b = 1, Generator& gen = default_generator());
/// Normal numbers of mean `mean` and standard deviation `std` (nn.init.normal_).
Tensor& normal_(Tensor& t, double mean = 0, double std = 1, Generator& gen = default_generator());
/// All zeros (nn.init.zeros_); any dtype.
Tensor& zeros_(Tensor& t);
/// All ones (nn.init.ones_); any dtype.
Tensor& ones_(Tensor& t);
/// Glorot uniform: U(-bound, bound) with bound = gain * sqrt(6 / (fan_in + fan_out))
/// (nn.init.xavier_uniform_).
Tensor& xavier_uniform_(Tensor& t, double gain = 1, Generator& gen = default_generator());
/// Glorot normal: N(0, std^2) with std = gain * sqrt(2 / (fan_in + fan_out))
/// (nn.init.xavier_normal_).
Tensor& xavier_normal_(Tensor& t, double gain = 1, Generator& gen = default_generator());
/// He uniform: U(-bound, bound) with bound = calculate_gain(nonlinearity, a) * sqrt(3 / fan),
/// fan chosen by `mode` (nn.init.kaiming_uniform_). A tensor with no elements is left alone,
/// with PyTorch's warning on stderr.
Tensor& kaiming_uniform_(Tensor& t, double a = 0, FanMode mode = FanMode::FanIn,
                         std::string_view nonlinearity = "leaky_relu",
                         Generator& gen = default_generator());
/// Normal numbers of mean `mean` and standard deviation `std` truncated to [a, b] (absolute
/// bounds, as nn.init.trunc_normal_), drawn as PyTorch 2.x draws them: where more than 30% of
/// the normal lies inside [a, b], normals redrawn (for the whole tensor at a time) until none is
/// outside; otherwise uniform candidates in [a, b], each accepted with probability
/// pdf(x) / pdf(mode). Warns on stderr, as PyTorch does, when mean is more than 2 std outside
/// [a, b]; ZeroDivisionError when std = 0 (PyTorch's Python divides by it); a > b fails in
/// uniform_, and integer tensors in normal_ or uniform_, with their errors.
Tensor& trunc_normal_(Tensor& t, double mean = 0, double std = 1, double a = -2, double b = 2,
                      Generator& gen = default_generator());

}  // namespace tiny::init
