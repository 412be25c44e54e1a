#!/usr/bin/env bash
# make gpu-check: on a machine with an NVIDIA GPU (and nvcc, CMake, ninja), build with CUDA, run
# every test (the GPU ones run for real there instead of skipping; among them chapter 09's
# fusion_test and cuda_jit_test, whose NVRTC kernels are loaded and run against eager), run the
# chapters that time the GPU and the benchmarks that can be built (bench_fusion among them), and
# print a short summary table last. Each stage says what it is doing as it goes (the build's
# progress every tenth, the tests' count and each failure, each chapter and benchmark), its
# whole output going to a log in build-gpu/. Works without network and without GoogleTest
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

# Progress: every stage writes its whole output to a log in $build/ and prints a line or a few
# here as it goes, so that the quarter of an hour this takes is never silent.
# step TEXT: a stage begins, with the seconds since the start.
step() { echo "== [$(($(date +%s) - start)) s] $*"; }
# build_progress: reads the build's output and prints a line each time it passes another tenth
# (ninja's "[n/N] ..." lines, or make's "[ p%] ...").
build_progress() {
  local line pct shown=0
  while IFS= read -r line; do
    if [[ $line =~ ^\[([0-9]+)/([0-9]+)\] ]]; then
      pct=$((100 * BASH_REMATCH[1] / BASH_REMATCH[2]))
      ((pct >= shown + 10)) && { echo "   built ${BASH_REMATCH[1]}/${BASH_REMATCH[2]} ($pct%)"; shown=$pct; }
    elif [[ $line =~ ^\[\ *([0-9]+)%\] ]]; then
      pct=${BASH_REMATCH[1]}
      ((pct >= shown + 10)) && { echo "   built $pct%"; shown=$pct; }
    fi
  done
}
# test_progress: reads ctest's output ("  12/505 Test  #40: Name ....   Passed  0.01 sec") and
# prints each test that neither passed nor skipped as it ends, and the count every tenth.
test_progress() {
  local line name done_ total pct shown=0 failed=0
  while IFS= read -r line; do
    [[ $line =~ ^\ *([0-9]+)/([0-9]+)\ Test\ +#[0-9]+:\ ([^ ]+) ]] || continue
    done_=${BASH_REMATCH[1]} total=${BASH_REMATCH[2]} name=${BASH_REMATCH[3]}
    if [[ ! $line =~ \ Passed\ |\*\*\*Skipped ]]; then
      failed=$((failed + 1))
      # ctest's word for it: "***Failed", "***Timeout", "***Exception: SegFault".
      [[ $line =~ \*\*\*([A-Za-z:\ ]*[A-Za-z]) ]] && echo "   failed: $name (${BASH_REMATCH[1]})"
    fi
    pct=$((100 * done_ / total))
    ((pct >= shown + 10)) && { echo "   tests $done_/$total, $failed failed"; shown=$pct; }
  done
}
# chapter NAME ARGS...: runs a chapter, its output in $build/chNN.log, and says how it went.
chapter() {
  local name=$1 log="$build/${1:0:4}.log" t0 rc
  step "$* (log: $log)"
  shift
  t0=$(date +%s)
  "$build/$name" "$@" > "$log" 2>&1
  rc=$?
  if [ $rc -eq 0 ]; then
    echo "   ok, $(($(date +%s) - t0)) s"
  else
    # A shell reports a program that signal N ended as 128 + N.
    ((rc > 128)) && rc="$rc, signal SIG$(kill -l $rc)"
    echo "   $name failed (exit status $rc):"
    tail -20 "$log"
    tests_rc=1
  fi
}

step "configure $build with CUDA (log: $build/configure.log)"
cmake -S . -B "$build" "${generator[@]}" "${flags[@]}" > "$build/configure.log" 2>&1 || { tail -30 "$build/configure.log"; exit 1; }
step "build (log: $build/build.log)"
cmake --build "$build" -j "$(nproc)" 2>&1 | tee "$build/build.log" | build_progress
[ "${PIPESTATUS[0]}" -eq 0 ] || { tail -40 "$build/build.log"; exit 1; }
step "tests (log: $build/test.log)"
rm -f "$build/Testing/junit.xml"
(cd "$build" && ctest -j "$(nproc)" --output-on-failure --output-junit Testing/junit.xml 2>&1) | tee "$build/test.log" | test_progress
tests_rc=${PIPESTATUS[0]}
# Passed, skipped (by reason) and failed, as make test ends (ctest counts a skip as a pass).
python3 scripts/ctest_results.py "$build/Testing/junit.xml" | sed 's/^/   /'
# The chapter measures what the summary reports (TFLOP/s, the bus, bandwidth) and writes it as
# CSV; Google Benchmark's programs run too where that library was found at configure time.
chapter ch04_devices --csv "$build/csv"
# Chapter 08 times its matrix products in each precision on the GPU too (one line).
chapter ch08_mixed_precision
# Chapter 09 compiles its two chains for CUDA tensors through NVRTC and times them against eager
# and the GPU's clone (three "on CUDA:" lines), on a quiet GPU (ctest ran it alongside other
# tests); --csv adds those points to the roofline figure's data.
chapter ch09_fusion --csv "$build/csv"
# fusion_test and cuda_jit_test were built with everything and ctest ran them; say so if either
# is missing (a build without CUDA would skip their GPU tests, which the summary would show).
for t in fusion_test cuda_jit_test; do
  [ -x "$build/tests/$t" ] || { echo "gpu-check: $build/tests/$t was not built"; tests_rc=1; }
done
bench_lines=()
benches=()
for b in "$build"/bench/bench_*; do
  [ -f "$b" ] && [ -x "$b" ] && benches+=("$b")
done
for i in "${!benches[@]}"; do
  b=${benches[$i]}
  step "benchmark $((i + 1))/${#benches[@]} $(basename "$b") (log: $b.log)"
  # JSON, not CSV: Debian's Google Benchmark keeps its checks (scripts/bench.sh), and its CSV
  # writer aborts a program whose benchmarks report different counters (bench_elementwise's
  # x_memcpy); the JSON writer takes each run's own.
  "$b" --benchmark_min_time=0.2 --benchmark_out="$b.json" --benchmark_out_format=json > "$b.log" 2>&1
  rc=$?
  if [ $rc -eq 0 ] && grep -q '^bench_cuda: skipped' "$b.log"; then
    bench_lines+=("$(head -1 "$b.log")")
  elif [ $rc -eq 0 ]; then
    bench_lines+=("$(basename "$b"): ran, log in $b.log")
  else
    bench_lines+=("$(basename "$b"): failed (exit status $rc), log in $b.log")
    echo "   failed (exit status $rc); the end of $b.log:"
    tail -5 "$b.log"
  fi
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
printf '%-34s %s\n' "tests, skips counted apart" "$(python3 scripts/ctest_results.py "$build/Testing/junit.xml" | sed -n '1s/^== tests: //p')"
# Chapter 10 on the GPUs: its DDP run with NCCL (one line), and the CUDA collectives' test.
printf '%-34s %s\n' "ch10 DDP with NCCL" "$(grep -m1 -E '^([0-9]+ GPUs?, a process each|skipped: )' "$build/chapter_output/ch10_parallel.txt" 2>/dev/null || echo 'not run (no MPI in this build?)')"
printf '%-34s %s\n' "ch10 NCCL collectives" "$(grep -E 'Test +#[0-9]+: distributed\.nccl ' "$build/test.log" | sed -E 's/.* (Passed|\*\*\*[A-Za-z]+).*/\1/' | head -1)"
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
bf="$build/bench/bench_fusion.json"
if [ -f "$bf" ]; then
  # ms NAME: the benchmark's real time per iteration (its unit is milliseconds), or "-".
  ms() { python3 -c 'import json, sys
runs = {run["name"]: run for run in json.load(open(sys.argv[1]))["benchmarks"]}
print(runs[sys.argv[2]]["real_time"] if sys.argv[2] in runs else "-")' "$bf" "$1/real_time"; }
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
