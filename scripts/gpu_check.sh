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
bench_lines=()
for b in "$build"/bench/bench_*; do
  [ -x "$b" ] || continue
  "$b" --benchmark_min_time=0.2 > "$b.log" 2>&1 && bench_lines+=("$(basename "$b"): ran")
done
echo
echo "== gpu-check summary ($(($(date +%s) - start)) s)"
printf '%-28s %s\n' "device" "$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 || echo none)"
printf '%-28s %s\n' "tests" "$(grep -E 'tests passed|tests failed' "$build/test.log" | tail -1)"
printf '%-28s %s\n' "skipped tests" "$(grep -c 'Skipped' "$build/test.log" || true)"
for line in "${bench_lines[@]:-}"; do [ -n "$line" ] && printf '%-28s %s\n' "benchmark" "$line"; done
exit $tests_rc
