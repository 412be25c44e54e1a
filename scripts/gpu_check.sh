#!/usr/bin/env bash
# make gpu-check: on a machine with an NVIDIA GPU (and nvcc, CMake, ninja), build with CUDA, run
# every test (the GPU ones run for real there instead of skipping), run the benchmarks that can
# be built, and print a short summary table last. Works without network and without GoogleTest
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
bench_lines=()
for b in "$build"/bench/bench_*; do
  [ -x "$b" ] || continue
  "$b" --benchmark_min_time=0.2 > "$b.log" 2>&1 && bench_lines+=("$(basename "$b"): ran, log in $b.log")
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
