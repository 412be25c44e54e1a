#!/usr/bin/env bash
# Generates a starter copy, builds it, and checks that its failing tests are exactly the
# exercises' "not implemented" failures (scripts/grade.py --starter). Run by .ci/run.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 scripts/make_starter.py . "$tmp/starter"
generator=""
command -v ninja >/dev/null && generator="-G Ninja"
cmake -S "$tmp/starter" -B "$tmp/starter/build" $generator -DCMAKE_BUILD_TYPE=Release \
  -DTINY_BENCH=OFF -DTINY_CUDA=OFF > "$tmp/configure.log"
cmake --build "$tmp/starter/build" -j "$(nproc)" > "$tmp/build.log" 2>&1 || { tail -40 "$tmp/build.log"; exit 1; }
chapters=$(cd chapters && ls -d ch[0-9][0-9]_*)
python3 scripts/grade.py --starter "$tmp/starter/build" $chapters
