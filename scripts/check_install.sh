#!/usr/bin/env bash
# make check-install: builds examples/my_mlp against the library the three ways a user's own
# project would, and runs it each time (it exits 1 unless its network learned):
#   1. find_package(tiny) against a copy installed with `cmake --install BUILD --prefix DIR`;
#   2. pkg-config's flags from that copy's tiny.pc, with the compiler alone;
#   3. add_subdirectory of this clone from the example's own CMakeLists.txt (FetchContent does
#      the same), with BUILD's settings, so that ccache (when installed) reuses its objects.
# Everything it writes goes to a temporary folder, removed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
[ -f "$build/CMakeCache.txt" ] || { echo "check-install: build the library first (make build)"; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
# The settings of BUILD that change what the library is (the same ones give ccache hits).
cuda=$(sed -n 's/^TINY_CUDA:[A-Z]*=//p' "$build/CMakeCache.txt")
cxx=$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$build/CMakeCache.txt")
step() { echo "check-install: $*"; }
quiet() { "$@" > "$tmp/log" 2>&1 || { tail -40 "$tmp/log"; exit 1; }; }

step "cmake --install $build --prefix $tmp/prefix"
quiet cmake --install "$build" --prefix "$tmp/prefix"

step "1. find_package(tiny): examples/my_mlp with CMAKE_PREFIX_PATH=<prefix>"
quiet cmake -S examples/my_mlp -B "$tmp/find_package" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_PREFIX_PATH="$tmp/prefix"
quiet cmake --build "$tmp/find_package"
"$tmp/find_package/my_mlp"

step "2. pkg-config: $cxx my_mlp.cpp \$(pkg-config --cflags --libs tiny)"
pc_dir=$(dirname "$(find "$tmp/prefix" -name tiny.pc | head -1)")
flags=$(PKG_CONFIG_PATH="$pc_dir" pkg-config --cflags --libs tiny)
quiet "$cxx" -O2 examples/my_mlp/my_mlp.cpp $flags -o "$tmp/my_mlp_pkg_config"
"$tmp/my_mlp_pkg_config"

# With BUILD's settings the library's compile commands are BUILD's, which is what ccache matches.
# The folder sits beside BUILD, so that they match also where ccache's base_dir rewrites paths
# relative to the folder a compile runs in (Ninja runs them all from the top of its build folder).
sub="$(dirname "$build")/build-check-install"
trap 'rm -rf "$tmp" "$sub"' EXIT
rm -rf "$sub"
step "3. add_subdirectory: examples/my_mlp with TINY_SOURCE_DIR=$PWD"
quiet cmake -S examples/my_mlp -B "$sub" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CXX_COMPILER="$cxx" -DTINY_SOURCE_DIR="$PWD" -DTINY_CUDA="${cuda:-AUTO}"
quiet cmake --build "$sub" -j "$(nproc 2>/dev/null || echo 2)"
"$sub/my_mlp"
step "OK: the example builds and runs against the installed library, with pkg-config and as a subproject"
