#!/usr/bin/env bash
# Installs what a fresh Debian machine may lack. Checks first and does nothing when everything is
# there, so the Makefile can call it on every configure.
#
#   scripts/deps.sh          the build: CMake, a compiler, GoogleTest (required for the tests),
#                            Google Benchmark and OpenBLAS (optional: without them the benchmarks
#                            are skipped and matmul uses the library's own loops), Open MPI
#                            (chapter 10's processes; without it that chapter cannot measure)
#   scripts/deps.sh plots    Debian's python3-matplotlib, for make plots
#   scripts/deps.sh docs     Doxygen, for make docs
#   scripts/deps.sh sanitize clang (with its sanitizer and libFuzzer runtimes), for make sanitize
set -euo pipefail

missing=()
have_header() { [ -e "/usr/include/$1" ] || [ -e "/usr/local/include/$1" ]; }
case "${1:-build}" in
  build)
    command -v cmake >/dev/null || missing+=(cmake)
    command -v g++ >/dev/null || missing+=(g++)
    command -v ninja >/dev/null || missing+=(ninja-build)
    have_header gtest/gtest.h || missing+=(libgtest-dev)
    have_header benchmark/benchmark.h || missing+=(libbenchmark-dev)
    ls /usr/lib/*/libopenblas.so >/dev/null 2>&1 || missing+=(libopenblas-dev)
    { have_header mpi.h || ls /usr/lib/*/openmpi/include/mpi.h >/dev/null 2>&1; } || missing+=(libopenmpi-dev)
    command -v mpirun >/dev/null || missing+=(openmpi-bin)
    ;;
  plots) /usr/bin/python3 -c "import matplotlib" 2>/dev/null || missing+=(python3-matplotlib) ;;
  docs) command -v doxygen >/dev/null || missing+=(doxygen) ;;
  sanitize) command -v clang++ >/dev/null || missing+=(clang) ;;
  *) echo "usage: scripts/deps.sh [build|plots|docs|sanitize]" >&2; exit 2 ;;
esac

[ ${#missing[@]} -eq 0 ] && exit 0

echo "deps: installing ${missing[*]}"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
# Another apt-get at work (an unattended upgrade, a second terminal) holds dpkg's lock: wait for
# it for up to two minutes instead of failing at once.
apt=(apt-get -o DPkg::Lock::Timeout=120)
if ! { $sudo "${apt[@]}" update -q && $sudo "${apt[@]}" install -y -q --no-install-recommends "${missing[@]}"; }; then
  echo "deps: apt-get could not install ${missing[*]}." >&2
  [ "${1:-build}" = build ] || exit 1
  echo "deps: GoogleTest and CMake are required; OpenBLAS, Google Benchmark and Open MPI are optional." >&2
  have_header gtest/gtest.h && command -v cmake >/dev/null || exit 1
fi
