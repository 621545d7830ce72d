#!/bin/sh
# Build step shared by both tools in bench/ggml_vs_git.sh. Run in the build directory with
# SRC=<ggml checkout>: configure once (Ninja, Debug), then build only the test program.
set -e
here=$(cd "$(dirname "$0")" && pwd)
test -f CMakeCache.txt || cmake -S "$here" -B . -G Ninja -DCMAKE_BUILD_TYPE=Debug -DGGML_SRC="$SRC" >/dev/null
cmake --build . --target setrows_i32 >/dev/null
