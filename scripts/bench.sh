#!/usr/bin/env bash
# make bench: runs every Google Benchmark program in BUILD/bench/ (the list is bench/CMakeLists.txt's
# TINY_BENCHES, and bench_libtorch where libtorch is installed), each named before it starts, and
# says at the end which of them failed. Flags after BUILD go to every program:
#   scripts/bench.sh build --benchmark_min_time=0.1
#
# Debian's libbenchmark is compiled without NDEBUG (its package uses CMake's build type "None":
# -O2, assertions kept), so every program prints "***WARNING*** Library was built as DEBUG.
# Timings may be affected." The warning concerns the library's own bookkeeping: its checks that a
# run is started, not finished and without error are compiled in, and the code around them is
# optimised (objdump -d of State::PauseTiming shows it). The timed loop, `for (auto _ : state)`,
# is inline in benchmark.h and so compiled into our programs, in Release, with the code it times.
# For Debian's package, then, the line is left out and one line below says what it meant; a
# library from anywhere else keeps its warning, which may be true of it.
set -uo pipefail
build=${1:-build}
shift $(($# > 0 ? 1 : 0))
warning='***WARNING*** Library was built as DEBUG. Timings may be affected.'

programs=()
for b in "$build"/bench/bench_*; do
  [ -f "$b" ] && [ -x "$b" ] && programs+=("$b")
done
if [ ${#programs[@]} -eq 0 ]; then
  echo "bench: no benchmark programs in $build/bench/: Google Benchmark was not found when $build was configured (make deps installs it; then rm -rf $build and make bench)"
  exit 1
fi

# The library the programs load, and whether it is Debian's build that warns.
library=$(ldd "${programs[0]}" 2>/dev/null | awk '$1 ~ /^libbenchmark\.so/ { print $3; exit }')
filter=0
if [ -n "$library" ] && grep -qF "$warning" "$library" &&
   package=$(dpkg -S "$(readlink -f "$library")" 2>/dev/null); then
  filter=1
  echo "note: Google Benchmark here is Debian's ${package%%:*}, optimised but without NDEBUG, so it warns \"Library was built as DEBUG\" (its own checks are on); the timed loops are ours, built in Release, and that warning is left out below"
fi

failed=()
i=0
for b in "${programs[@]}"; do
  i=$((i + 1))
  name=$(basename "$b")
  echo "== [$i/${#programs[@]}] $name"
  if [ $filter = 1 ]; then
    # Google Benchmark flushes each result, and grep passes it on at once, so each result still
    # shows as it is measured.
    "$b" "$@" 2>&1 | grep --line-buffered -vxF "$warning"
    rc=${PIPESTATUS[0]}
  else
    "$b" "$@"
    rc=$?
  fi
  if [ "$rc" -gt 128 ]; then
    failed+=("$name (killed by signal $((rc - 128)), SIG$(kill -l "$rc"))")
  elif [ "$rc" -ne 0 ]; then
    failed+=("$name (exit status $rc)")
  fi
done
echo
if [ ${#failed[@]} -eq 0 ]; then
  echo "== bench: ${#programs[@]} programs ran"
  exit 0
fi
echo "== bench: ${#programs[@]} programs ran, ${#failed[@]} failed:"
printf '   %s\n' "${failed[@]}"
exit 1
