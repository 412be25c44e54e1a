/// @file format.h
/// @brief Printing as a Python user reads it: float repr, tuples, lists, printf-style strings.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "tiny/tensor.h"

namespace tiny {

/// Python's repr of a float: the shortest digits that read back to the same double, with ".0"
/// on integral values and exponents from 1e16 and below 1e-4 (`0.1`, `100.0`, `1e-08`).
std::string repr(double value);
/// Python's repr of a list of floats: `[0.0, 100.0, 8.0, 1.0]`.
std::string format_list(const std::vector<double>& values);
/// Python's repr of a tuple of ints: `(3, 4)`, `(1,)`, `()`.
std::string format_tuple(const std::vector<int64_t>& values);
/// printf into a std::string (g++ 12 has no std::format).
std::string strprintf(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
/// An integer with thousands separators, as Python's `f"{n:,}"`: 8,393,728.
std::string with_commas(int64_t n);
/// PyTorch's printed form of a tensor (also Tensor::str() and operator<<).
std::string format_tensor(const Tensor& t);

}  // namespace tiny
