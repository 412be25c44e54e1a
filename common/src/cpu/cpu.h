// cpu/cpu.h: the CPU backend's functions, which cpu/backend.cpp gathers into its Backend row
// (backend.h says what each one does). Not part of the public API.
#pragma once
#include <vector>

#include "../backend.h"

namespace tiny::detail::cpu {

void copy(const Tensor& dst, const Tensor& src);  // cpu/copy.cpp
void where(const Tensor& out, const Tensor& condition, const Tensor& a,
           const Tensor& b);                                                     // cpu/backend.cpp
Tensor sum(const Tensor& a, const std::vector<bool>& reduce, double divisor);    // cpu/reduce.cpp
void max_rows(const Tensor& values, const Tensor& indices, const Tensor& rows);  // cpu/reduce.cpp
void matmul(const Tensor& out, const Tensor& a, const Tensor& b);                // cpu/matmul.cpp
void optimizer_update(const UpdateArgs& args);                                   // cpu/optim.cpp

}  // namespace tiny::detail::cpu
