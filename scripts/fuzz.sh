#!/usr/bin/env bash
# Runs each libFuzzer harness for a while and prints how many inputs it ran.
#
#   scripts/fuzz.sh BUILD SECONDS fuzz_views fuzz_einops ...
#   FUZZ_JOBS=2 scripts/fuzz.sh ...      two at a time (one core each)
#
# Each fuzzer starts from its committed seeds (tests/fuzz/corpus/<target>/) and grows a working
# corpus of its own in BUILD/fuzz/<target>/corpus, so the committed seeds stay small. A crash,
# a sanitizer report, an uncaught exception, a hang (-timeout) or runaway memory (-rss_limit_mb)
# stops that fuzzer and leaves the input in BUILD/fuzz/<target>/; the others still run, and the
# script fails at the end.
set -uo pipefail
build=$1
seconds=$2
shift 2
# FUZZ_JOBS fuzzers run at once (default 1); each uses one core.
jobs=${FUZZ_JOBS:-1}

run_one() {
  local fuzzer=$1 target=${1#fuzz_}
  local work=$build/fuzz/$target
  mkdir -p "$work/corpus"
  "$build/tests/fuzz/$fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -max_len=4096 -print_final_stats=1 -artifact_prefix="$work/" \
    "$work/corpus" "tests/fuzz/corpus/$target" > "$work/log.txt" 2>&1
  echo $? > "$work/status"
}

for fuzzer in "$@"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n; done
  run_one "$fuzzer" &
done
wait

failed=()
printf '%-22s %10s %10s %8s\n' fuzzer executions per_second result
for fuzzer in "$@"; do
  work=$build/fuzz/${fuzzer#fuzz_}
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log.txt" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$work/log.txt" | tail -1)
  result=ok
  if [ "$(cat "$work/status")" -ne 0 ]; then
    result=FAILED
    failed+=("$fuzzer")
  fi
  printf '%-22s %10s %10s %8s\n' "$fuzzer" "${runs:-?}" "${rate:-?}" "$result"
done
if [ ${#failed[@]} -ne 0 ]; then
  for fuzzer in "${failed[@]}"; do
    echo "== $fuzzer: $build/fuzz/${fuzzer#fuzz_}/log.txt"
    grep -m1 -A12 -E 'FUZZ FINDING|ERROR: (AddressSanitizer|libFuzzer)|runtime error|uncaught' \
      "$build/fuzz/${fuzzer#fuzz_}/log.txt"
  done
  exit 1
fi
