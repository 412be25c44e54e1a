// cpu/isa.h: which x86-64 vector instructions the CPU kernels may use, found once when the
// program starts. Not part of the public API.
//
// The library is compiled for plain x86-64, so that one build runs on every such processor.
// The loops that gain most from wider vectors and fused multiply-adds (the elementwise ops
// whose math calls fma, and every op's loop that streams a large result: cpu/elementwise.h)
// are compiled three times, and cpu_isa() says which copy runs. Tests and benchmarks may ask for a lesser one (set_cpu_isa) to check that every
// copy gives the same bits, or to time it; TINY_CPU_ISA=avx512|avx2|baseline in the
// environment does the same for a whole run. Two choices follow the processor's maker rather
// than its instructions: how sums prefetch, and whether the vector math streams.
#pragma once

namespace tiny::detail::cpu {

/// The instruction sets the CPU kernels are compiled for, from the least to the most.
enum class Isa { Baseline, Avx2, Avx512 };

/// What the processor has: AVX-512 (F, DQ, BW and VL), AVX2 with FMA, or neither.
Isa detected_isa();

/// The copy of a multiversioned loop that runs: detected_isa(), or less if asked for.
Isa cpu_isa();

/// Makes cpu_isa() return `isa`, or detected_isa() where the processor lacks `isa`; returns
/// what it returned before. For tests and benchmarks: not meant to be changed while kernels run.
Isa set_cpu_isa(Isa isa);

/// "avx512", "avx2" or "baseline".
const char* isa_name(Isa isa);

/// How a sum along memory asks for its data before it adds it (a hint: the time changes, never
/// the bits). Intel's cores gain from asking for a line a page (4 KiB) ahead of every line they
/// add; AMD's lose by that, but gain from asking once per page for the first line of the next
/// one, unless large blocks are in huge pages (huge_pages(), cpu.h), where asking at all was
/// slower. cpu/reduce.cpp has the measurements; the choice follows the processor's maker and
/// that switch.
enum class SumPrefetch { EveryLine, NextPage, None };
SumPrefetch sum_prefetch();

/// Whether the large float32 results of the ops compiled with fused multiply-adds (the vector
/// math: exp, erf, tanh, ...) go to memory with streaming stores, as every other op's do
/// (cpu/elementwise.h). It changes the time, never the bits. These ops are bound by their
/// arithmetic; streaming their results is a win on Intel's cores and a small loss on AMD's (the
/// measurements are in cpu/elementwise.h), so it follows the processor's maker, unless
/// TINY_STREAM_VECTOR_MATH=1 or 0 in the environment says otherwise.
bool vector_math_streams();

/// Makes vector_math_streams() return `on`; returns what it returned before. For tests and
/// benchmarks, as set_cpu_isa is.
bool set_vector_math_streams(bool on);

}  // namespace tiny::detail::cpu
