// cpu/isa.cpp: the run-time choice of instruction set for the multiversioned CPU loops (isa.h).
#include "isa.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace tiny::detail::cpu {

Isa detected_isa() {
#if defined(__x86_64__) && defined(__GNUC__)
  static const Isa isa = [] {
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl"))
      return Isa::Avx512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return Isa::Avx2;
    return Isa::Baseline;
  }();
  return isa;
#else
  return Isa::Baseline;
#endif
}

namespace {

// The detected instruction set, lowered by TINY_CPU_ISA when that names a lesser one.
Isa initial_isa() {
  const Isa best = detected_isa();
  const char* want = std::getenv("TINY_CPU_ISA");
  if (!want) return best;
  for (Isa isa : {Isa::Baseline, Isa::Avx2, Isa::Avx512})
    if (std::strcmp(want, isa_name(isa)) == 0) return isa < best ? isa : best;
  return best;
}

std::atomic<Isa>& chosen() {
  static std::atomic<Isa> isa{initial_isa()};
  return isa;
}

}  // namespace

Isa cpu_isa() { return chosen().load(std::memory_order_relaxed); }

Isa set_cpu_isa(Isa isa) {
  const Isa best = detected_isa();
  return chosen().exchange(isa < best ? isa : best);
}

bool sums_prefetch_ahead() {
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool intel = __builtin_cpu_is("intel");
  return intel;
#else
  return false;
#endif
}

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::Avx512: return "avx512";
    case Isa::Avx2: return "avx2";
    case Isa::Baseline: return "baseline";
  }
  return "baseline";
}

}  // namespace tiny::detail::cpu
