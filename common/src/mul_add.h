// mul_add.h: `a * b + c` as each of PyTorch's CPU kernel families computes it. Not part of the
// public API.
//
// PyTorch's AVX2 build is compiled so that the compiler fuses a multiply and the add that uses
// it into one FMA instruction, rounded once; its default build (plain x86-64, no FMA) rounds
// twice. Where the library must give PyTorch's bits (random numbers, optimizer steps),
// it says which it wants instead of leaving it to the compiler: mul_add<true> fuses,
// mul_add<false> never does. Used by random.cpp and optim_math.h (CPU and CUDA).
#pragma once
#include <cmath>

#include "tiny/config.h"

namespace tiny::detail {

/// The product a * b, rounded before anything is added to it. Compiled for a processor with FMA
/// instructions (-march=native, or any AArch64 build), the compiler may fuse `a * b + c`; the
/// volatile store keeps the two roundings. Plain x86-64 has no FMA instruction to fuse with.
template <typename M> TINY_HD inline M rounded_product(M a, M b) {
#if defined(__FMA__) || defined(__aarch64__) || defined(__CUDA_ARCH__)
  volatile M p = a * b;
  return p;
#else
  return a * b;
#endif
}

/// a * b + c: rounded once when Fused, twice otherwise.
template <bool Fused, typename M> TINY_HD inline M mul_add(M a, M b, M c) {
  using std::fma;  // the float overload for float (a double fma would round differently)
  if constexpr (Fused) return fma(a, b, c);
  else return rounded_product(a, b) + c;
}

}  // namespace tiny::detail
