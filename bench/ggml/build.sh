#!/bin/sh
# Build step shared by both tools in bench/ggml_vs_git.sh. Run in the build directory with
# SRC=<ggml or llama.cpp checkout> (ggml under ggml/ in the latter): configure once (Ninja,
# Debug), then build only the test program ($TEST, default setrows_i32: one of the .c files here).
set -e
here=$(cd "$(dirname "$0")" && pwd)
ggml=$SRC; [ -f "$SRC/ggml/CMakeLists.txt" ] && ggml=$SRC/ggml
test -f CMakeCache.txt || cmake -S "$here" -B . -G Ninja -DCMAKE_BUILD_TYPE=Debug -DGGML_SRC="$ggml" >/dev/null
cmake --build . --target "${TEST:-setrows_i32}" >/dev/null
