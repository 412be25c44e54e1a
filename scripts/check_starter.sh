#!/usr/bin/env bash
# For each chapter with exercises, generates a starter copy without that chapter's solutions,
# builds it, and checks that its failing tests are exactly that chapter's "not implemented"
# failures, each exercise failing at least one test (scripts/grade.py --starter). Run by .ci/run.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
generator=""
command -v ninja >/dev/null && generator="-G Ninja"
# The starter copies differ from each other only in a few files, and each is built at the same
# path, so with ccache (when installed) every build after the first compiles little. Its cache
# lives in the temporary folder: nothing is left behind.
launcher=""
if command -v ccache >/dev/null; then
  export CCACHE_DIR="$tmp/ccache" CCACHE_BASEDIR="$tmp" CCACHE_NOHASHDIR=1
  launcher="-DCMAKE_CXX_COMPILER_LAUNCHER=ccache"
fi
all_chapters=$(cd chapters && ls -d ch[0-9][0-9]_*)
# The chapters to check: those named on the command line (scripts/check_starter.sh ch05), or all
# that have exercises.
with_exercises=${*:-$(grep -rhoE "BEGIN SOLUTION ch[0-9]{2}" common chapters | awk '{print $3}' | sort -u)}
for ch in $with_exercises; do
  echo "== starter for $ch"
  rm -rf "$tmp/starter"
  python3 scripts/make_starter.py . "$tmp/starter" "$ch" | tail -n +2
  # -O1: a starter build only has to show which tests fail, and compiles a third faster so.
  # Chapter 10's processes (MPI) are started only in its own copy. In the others its tests
  # would fail only through exercises whose own chapters' tests fail already, and they take half
  # a minute on two cores; without MPI they skip.
  mpi=-DTINY_MPI=OFF
  [ "$ch" = ch10 ] && mpi=-DTINY_MPI=ON
  cmake -S "$tmp/starter" -B "$tmp/starter/build" $generator -DCMAKE_BUILD_TYPE=Release \
    -DTINY_BENCH=OFF -DTINY_CUDA=OFF -DCMAKE_CXX_FLAGS_RELEASE="-O1 -DNDEBUG" $mpi $launcher > "$tmp/configure.log"
  cmake --build "$tmp/starter/build" -j "$(nproc)" > "$tmp/build.log" 2>&1 || { tail -40 "$tmp/build.log"; exit 1; }
  # The labels graded: every chapter's, and this exercise's own when no chapter folder has that
  # number yet (library tests labelled for a chapter still being written, such as ch08's).
  graded=$all_chapters
  ls -d chapters/"$ch"_* > /dev/null 2>&1 || graded="$graded $ch"
  python3 scripts/grade.py --starter "$tmp/starter/build" $graded
done
