// cpu/optim.cpp: the fused optimizer updates on the CPU: one pass over a parameter, its
// gradient and its state, element by element (../optim_math.h says how that stays bitwise equal
// to PyTorch's chain of ops).
//
// Each rule is compiled twice: plainly, and for processors with AVX2 and FMA, where madd is one
// fused instruction, as in PyTorch's AVX2 kernels; cpu_capability() (device.h) picks the copy
// at run time, as PyTorch picks its own.
// This file is compiled with -ffp-contract=off, so that the compiler fuses nothing on its own
// (a fused plain copy would no longer match PyTorch's plain kernels), and with -fno-math-errno,
// so that sqrt vectorises.
#include "../internal.h"
#include "../optim_math.h"

#include "cpu.h"
#include "tiny/device.h"

namespace tiny::detail::cpu {

namespace {

template <UpdateRule Rule, typename T> void plain_rows(const UpdateArgs& a) {
  for (int64_t i = 0; i < a.n; ++i) update_element<Rule, false, T, opmath_t<T>>(a, i);
}

#if defined(__x86_64__) && defined(__GNUC__)
template <UpdateRule Rule, typename T>
__attribute__((target("avx2,fma"))) void fused_rows(const UpdateArgs& a) {
  for (int64_t i = 0; i < a.n; ++i) update_element<Rule, true, T, opmath_t<T>>(a, i);
}
#endif

template <UpdateRule Rule> void run(const UpdateArgs& a) {
  dispatch_floating(a.dtype, "optimizer step", [&]<typename T>() {
#if defined(__x86_64__) && defined(__GNUC__)
    if (cpu_capability() == CpuCapability::Avx2) return fused_rows<Rule, T>(a);
#endif
    plain_rows<Rule, T>(a);
  });
}

}  // namespace

void optimizer_update(const UpdateArgs& a) {
  switch (a.rule) {
    case UpdateRule::Sgd: return run<UpdateRule::Sgd>(a);
    case UpdateRule::Adagrad: return run<UpdateRule::Adagrad>(a);
    case UpdateRule::DocumentAdaGrad: return run<UpdateRule::DocumentAdaGrad>(a);
    case UpdateRule::Rmsprop: return run<UpdateRule::Rmsprop>(a);
    case UpdateRule::Adam: return run<UpdateRule::Adam>(a);
    case UpdateRule::AdamW: return run<UpdateRule::AdamW>(a);
  }
}

}  // namespace tiny::detail::cpu
