// bench_common.h: context every benchmark prints, so its numbers can be read later.
#pragma once
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <string>

#include "cpu/cpu.h"
#include "cpu/isa.h"
#include "tiny/tiny.h"

// Records the matmul backend and OPENBLAS_CORETYPE (which, when set to Haswell on an AVX-512
// machine, halves OpenBLAS's sgemm) in the benchmark's header.
inline void add_tiny_context() {
  benchmark::AddCustomContext("tiny matmul", tiny::matmul_backend_description());
  // The instruction set the elementwise loops and sums run (TINY_CPU_ISA may ask for less).
  benchmark::AddCustomContext("tiny cpu isa", tiny::detail::cpu::isa_name(tiny::detail::cpu::cpu_isa()));
  // Whether blocks of 2 MiB and more are offered for huge pages (TINY_HUGE_PAGES=1).
  benchmark::AddCustomContext("tiny huge pages", tiny::detail::cpu::huge_pages() ? "on" : "off");
  const char* core = std::getenv("OPENBLAS_CORETYPE");
  benchmark::AddCustomContext("OPENBLAS_CORETYPE", core ? core : "(unset)");
}

// What every benchmark program's main does; a program with its own main (bench_cuda's, which
// first checks for a device) ends by calling it.
inline int run_benchmarks(int argc, char** argv) {
  add_tiny_context();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

#define TINY_BENCHMARK_MAIN() \
  int main(int argc, char** argv) { return run_benchmarks(argc, argv); }
