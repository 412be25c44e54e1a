#!/usr/bin/env bash
# make gpu-check: on a machine with an NVIDIA GPU (and nvcc, CMake, ninja), build with CUDA, run
# every test (the GPU ones run for real there instead of skipping; among them chapter 09's
# fusion_test and cuda_jit_test, whose NVRTC kernels are loaded and run against eager), run the
# chapters that time the GPU and the benchmarks that can be built (bench_fusion among them), and
# print a short summary table last. Works without network and without GoogleTest
# or Google Benchmark installed: GoogleTest is built from third_party/googletest, which
# `make third_party` copies from Debian's /usr/src/googletest on a development machine (carry
# that folder to the GPU machine).
set -uo pipefail
cd "$(dirname "$0")/.."
build=build-gpu
flags=(-DCMAKE_BUILD_TYPE=Release -DTINY_CUDA=ON)
if [ ! -e /usr/include/gtest/gtest.h ] && [ ! -e /usr/local/include/gtest/gtest.h ]; then
  [ -d third_party/googletest ] || { echo "gpu-check: no GoogleTest: run 'make third_party' where it is installed and carry third_party/"; exit 1; }
  flags+=(-DTINY_GTEST_SOURCE_DIR="$PWD/third_party/googletest")
fi
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
start=$(date +%s)
mkdir -p "$build"
cmake -S . -B "$build" "${generator[@]}" "${flags[@]}" > "$build/configure.log" 2>&1 || { tail -30 "$build/configure.log"; exit 1; }
cmake --build "$build" -j "$(nproc)" > "$build/build.log" 2>&1 || { tail -40 "$build/build.log"; exit 1; }
(cd "$build" && ctest -j "$(nproc)" --output-on-failure > test.log 2>&1)
tests_rc=$?
# The chapter measures what the summary reports (TFLOP/s, the bus, bandwidth) and writes it as
# CSV; Google Benchmark's programs run too where that library was found at configure time.
"$build/ch04_devices" --csv "$build/csv" > "$build/ch04.log" 2>&1 || { echo "ch04_devices failed:"; tail -20 "$build/ch04.log"; tests_rc=1; }
# Chapter 08 times its matrix products in each precision on the GPU too (one line).
"$build/ch08_mixed_precision" > "$build/ch08.log" 2>&1 || { echo "ch08_mixed_precision failed:"; tail -20 "$build/ch08.log"; tests_rc=1; }
# Chapter 09 compiles its two chains for CUDA tensors through NVRTC and times them against eager
# and the GPU's clone (three "on CUDA:" lines), on a quiet GPU (ctest ran it alongside other
# tests); --csv adds those points to the roofline figure's data.
"$build/ch09_fusion" --csv "$build/csv" > "$build/ch09.log" 2>&1 || { echo "ch09_fusion failed:"; tail -20 "$build/ch09.log"; tests_rc=1; }
# fusion_test and cuda_jit_test were built with everything and ctest ran them; say so if either
# is missing (a build without CUDA would skip their GPU tests, which the summary would show).
for t in fusion_test cuda_jit_test; do
  [ -x "$build/tests/$t" ] || { echo "gpu-check: $build/tests/$t was not built"; tests_rc=1; }
done
bench_lines=()
for b in "$build"/bench/bench_*; do
  [ -x "$b" ] || continue
  "$b" --benchmark_min_time=0.2 --benchmark_out="$b.csv" --benchmark_out_format=csv > "$b.log" 2>&1 && bench_lines+=("$(basename "$b"): ran, log in $b.log")
done
[ ${#bench_lines[@]} -eq 0 ] && bench_lines+=("none built (no Google Benchmark here); ch04 measured the GPU")

# value <csv> <awk condition> <column>: the first matching row's column, or "-".
value() { awk -F, -v col="$3" "NR > 1 && $2 { print \$col; found = 1; exit } END { if (!found) print \"-\" }" "$1"; }
mm="$build/csv/ch04_matmul.csv"
bw="$build/csv/ch04_bandwidth.csv"
fmt() { [ "$1" = "-" ] && echo "-" || printf "%.${2}f" "$1"; }
echo
echo "== gpu-check summary ($(($(date +%s) - start)) s)"
printf '%-34s %s\n' "device" "$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 || echo none)"
printf '%-34s %s\n' "tests" "$(grep -E 'tests passed|tests failed' "$build/test.log" | tail -1)"
printf '%-34s %s\n' "skipped tests" "$(grep -c '(Skipped)' "$build/test.log" || true)"
printf '%-34s %s\n' "CUDA tests passed" "$(grep -E 'Test +#[0-9]+: Cuda' "$build/test.log" | grep -c ' Passed' || true)"
# Chapter 06's GPU tests: the optimizers against PyTorch's bits, training and get_batch on CUDA.
printf '%-34s %s\n' "ch06 GPU tests passed (of 4)" "$(grep -E 'Test +#[0-9]+: (Optim.OnTheGpu|Nn.TrainingOnTheGpu|Data.GetBatchOnCuda|Random.CudaTensors)' "$build/test.log" | grep -c ' Passed' || true)"
printf '%-34s %s\n' "ch07 GPU tests passed (of 1)" "$(grep -E 'Test +#[0-9]+: Memory.StepOnTheGpu' "$build/test.log" | grep -c ' Passed' || true)"
printf '%-34s %s\n' "ch08 GPU tests passed (of 1)" "$(grep -E 'Test +#[0-9]+: AutocastCuda' "$build/test.log" | grep -c ' Passed' || true)"
printf '%-34s %s\n' "ch08 matmul by precision" "$(grep -E '^cuda, n = ' "$build/ch08.log" | head -1 || true)"
# Chapter 09's GPU tests: NVRTC and the driver (cuda_jit_test: 5 compile, 1 launch, 2 on the GPU),
# fused CUDA source compiled and run against eager (fusion_test), and the chapter's golden output
# with its CUDA lines.
printf '%-34s %s\n' "ch09 GPU tests passed (of 11)" "$(grep -E 'Test +#[0-9]+: (CudaJitCompile\.|CudaJitLaunch\.|CudaJitGpu\.|Fusion\.(GeneratedCudaCompilesWithNvrtc|CudaKernelsMatchEager) |Ch09_Fusion\.RunsAndMatchesGoldenOutput )' "$build/test.log" | grep -c ' Passed' || true)"
printf '%-34s %s\n' "ch09 fusion_test, cuda_jit_test" "$(awk '/Test +#[0-9]+: (Fusion|CudaJit)[A-Za-z]*\./ { n++; if (/ Passed/) p++; else if (/Skipped/) s++; else f++ } END { printf "%d passed, %d failed, %d skipped", p, f, s }' "$build/test.log")"
# The chapter's CUDA lines, each without its "on CUDA: <name>" and with its spaces squeezed; or
# the one line that says why they were skipped.
if grep -q '^on CUDA: skipped' "$build/ch09.log" 2>/dev/null; then
  printf '%-34s %s\n' "ch09 fusion on CUDA" "$(grep -m1 '^on CUDA: skipped' "$build/ch09.log" | sed 's/^on CUDA: //')"
else
  for row in "GELU chain|GELU, scale, shift, add" "scale-shift chain|scale, shift, add" "clone|x\.clone\(\)"; do
    pattern=${row#*|}
    printf '%-34s %s\n' "ch09 CUDA ${row%%|*}" "$(grep -m1 -E "^on CUDA: $pattern " "$build/ch09.log" | sed -E "s/^on CUDA: $pattern +//; s/ +/ /g" || true)"
  done
fi
# bench_fusion (on the CPU): each chain eager and fused (generated C++) as multiples of the clone,
# and a first call with an empty kernel cache.
bf="$build/bench/bench_fusion.csv"
if [ -f "$bf" ]; then
  ms() { awk -F, -v name="\"$1/real_time\"" '$1 == name { print $3; found = 1; exit } END { if (!found) print "-" }' "$bf"; }
  times() { awk -v a="$1" -v c="$(ms BM_Clone)" 'BEGIN { if (a == "-" || c == "-" || c == 0) print "-"; else printf "%.2fx", a / c }'; }
  printf '%-34s %s\n' "bench_fusion x*g+b+x / clone" "fused $(times "$(ms BM_FusedScaleShift/1)"), eager $(times "$(ms BM_EagerScaleShift)") (clone $(fmt "$(ms BM_Clone)" 1) ms)"
  printf '%-34s %s\n' "bench_fusion GELU chain / clone" "fused $(times "$(ms BM_FusedGeluChain/1)"), eager $(times "$(ms BM_EagerGeluChain)")"
  printf '%-34s %s\n' "bench_fusion first call" "$(fmt "$(ms BM_FirstCall/iterations:3)" 0) ms (empty kernel cache)"
else
  printf '%-34s %s\n' "bench_fusion" "not run (no Google Benchmark here, or it failed: $build/bench/bench_fusion.log)"
fi
if [ -f "$mm" ]; then
  for dt in float32 tf32 float16 bfloat16; do
    printf '%-34s %s\n' "matmul 4096 cuda $dt TFLOP/s" "$(fmt "$(value "$mm" "\$1 == \"cuda\" && \$2 == \"$dt\" && \$3 == 4096" 4)" 1)"
  done
  printf '%-34s %s\n' "matmul 8192 cuda bfloat16 TFLOP/s" "$(fmt "$(value "$mm" "\$1 == \"cuda\" && \$2 == \"bfloat16\" && \$3 == 8192" 4)" 1)"
  printf '%-34s %s\n' "matmul 4096 cpu float32 TFLOP/s" "$(fmt "$(value "$mm" "\$1 == \"cpu\" && \$3 == 4096" 4)" 2)"
fi
if [ -f "$bw" ]; then
  for what in h2d_pageable h2d_pinned d2h_pageable d2h_pinned copy add; do
    printf '%-34s %s\n' "GB/s $what" "$(fmt "$(value "$bw" "\$1 == \"$what\"" 2)" 1)"
  done
  copy=$(value "$bw" '$1 == "copy"' 2); add=$(value "$bw" '$1 == "add"' 2)
  [ "$copy" != "-" ] && printf '%-34s %s\n' "x + y against the copy" "$(awk -v a="$add" -v c="$copy" 'BEGIN { printf "%.0f%%", 100 * a / c }')"
fi
for line in "${bench_lines[@]}"; do printf '%-34s %s\n' "benchmark" "$line"; done
exit $tests_rc
