// cpu/isa.cpp: the run-time choice of instruction set for the multiversioned CPU loops (isa.h).
#include "isa.h"

#include "cpu.h"

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

namespace {

bool made_by_intel() {
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool intel = __builtin_cpu_is("intel");
  return intel;
#else
  return false;
#endif
}

// Intel's cores stream, unless TINY_STREAM_VECTOR_MATH is 0 or 1.
std::atomic<bool>& vector_math_streaming() {
  static std::atomic<bool> on{[] {
    const char* want = std::getenv("TINY_STREAM_VECTOR_MATH");
    if (want && std::strcmp(want, "0") == 0) return false;
    if (want && std::strcmp(want, "1") == 0) return true;
    return made_by_intel();
  }()};
  return on;
}

}  // namespace

SumPrefetch sum_prefetch() {
  if (made_by_intel()) return SumPrefetch::EveryLine;
  return huge_pages() ? SumPrefetch::None : SumPrefetch::NextPage;
}

bool vector_math_streams() { return vector_math_streaming().load(std::memory_order_relaxed); }

bool set_vector_math_streams(bool on) { return vector_math_streaming().exchange(on); }

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::Avx512: return "avx512";
    case Isa::Avx2: return "avx2";
    case Isa::Baseline: return "baseline";
  }
  return "baseline";
}

}  // namespace tiny::detail::cpu
