#!/usr/bin/env bash
# Real case 23 (bench/real/README.md): llama.cpp #14482 (01612b740, 2025-07-17, "llama : reuse
# compute graphs") let a reused graph's inputs keep references to the llm_graph_params of the
# llama_decode call that built it; the next call reads them after that frame returned.
# #14960 (1e15bfd42, 2025-07-30, "graph : fix stack-use-after-return"): "The graph reuse logic
# (#14482) was broken because the graph inputs could hold dangling references to llama_hparams
# and llama_cparams. This was spotted after enabling LLAMA_SET_ROWS=1 in the CI". The thread's
# settings, then: graph reuse on (LLAMA_SET_ROWS=1, which trees of that month need for it) and
# a build with AddressSanitizer, as CI's sanitizer job. The user's command:
#
#   setrows-bisect --repo <llama.cpp> --probe-kind decode --good 01612b740^ --bad 1e15bfd42^ \
#     --cmake-arg=-DCMAKE_C_FLAGS=-fsanitize=address --cmake-arg=-DCMAKE_CXX_FLAGS=-fsanitize=address \
#     --launch-env LLAMA_SET_ROWS=1 --launch-env ASAN_OPTIONS=detect_stack_use_after_return=1
#
# (GCC's ASan checks use-after-return only with detect_stack_use_after_return=1.)
#
#   bench/real/stackreuse_asan.sh [tool|git|both] [LLAMA_CPP_GIT_DIR]
#
# The window (110 commits: #14482's parent .. #14960) is recommitted from the fetched fork by
# bench/real/window.sh under .work/real/stackreuse, or cloned from .work/real/stackreuse/window.bundle
# where no mirror is (a device run carries the bundle). git bisect run gets the same build line
# (the tool's, with the same two CMake flags) and decode-probe run (fresh clone, fresh build dir).
# Cold by default (CCACHE_DISABLE=1); CCACHE_DISABLE=0 lets ccache help. BIN=... for another
# binary; WINDOW_DIR=... for another place of the window (a device run carries only the bundle).
# State and logs: .work/real/stackreuse-<mode> (the tool's is kept and resumes; git's is fresh each
# call). What every case script shares: bench/real/case_lib.sh.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
root_dir=$PWD
mode=${1:-both}
mirror=${2:-/work/.mirror/wangqi+llama.cpp/repo}
GOOD_UP=086cf81e88fb75287b71ff19c08a206b7bc2e02f      # parent of #14482
FIRST_BAD_UP=01612b74090df592663cfa01f661c9628f403b59 # #14482 (#14960: "The graph reuse logic (#14482) was broken")
BAD_UP=a118d80233d3bf92569c051346fd2638f87bf202       # last commit before the fix
FIX_UP=1e15bfd42c3938506e0da5939bf7f42780965f01       # #14960
export GGML_NO_BACKTRACE=1
. bench/real/case_lib.sh
if [ "${CCACHE_DISABLE:-1}" = 0 ]; then unset CCACHE_DISABLE; else export CCACHE_DISABLE=1; fi
BIN=${BIN:-$root_dir/target/release/setrows-bisect}
[ -x "$BIN" ] || cargo build --release --quiet || exit 2
SETTINGS=(--cmake-arg=-DCMAKE_C_FLAGS=-fsanitize=address --cmake-arg=-DCMAKE_CXX_FLAGS=-fsanitize=address
          --launch-env LLAMA_SET_ROWS=1 --launch-env ASAN_OPTIONS=detect_stack_use_after_return=1)
W=${WINDOW_DIR:-$root_dir/.work/real/stackreuse}
if [ ! -d "$W/repo" ]; then
  if [ -f "$W/window.bundle" ]; then
    git clone -q -b window "$W/window.bundle" "$W/repo" || exit 3
  else
    bash bench/real/window.sh "$mirror" "$GOOD_UP" "$FIX_UP" "$W" >"$W.window.txt" || exit 3
  fi
fi
good=$(up "$W/repo" "$GOOD_UP") bad=$(up "$W/repo" "$BAD_UP") first_bad=$(up "$W/repo" "$FIRST_BAD_UP")
if [ -z "$good" ] || [ -z "$bad" ] || [ -z "$first_bad" ]; then echo "window lacks its endpoints" >&2; exit 3; fi
TOOL_S=$root_dir/.work/real/stackreuse-tool

if [ "$mode" = tool ] || [ "$mode" = both ]; then
  echo "command: setrows-bisect --repo <window> --probe-kind decode --good <#14482^> --bad <#14960^> ${SETTINGS[*]}"
  run_tool "$TOOL_S" --repo "$W/repo" --probe-kind decode --good "$good" --bad "$bad" "${SETTINGS[@]}"
fi

if [ "$mode" = git ] || [ "$mode" = both ]; then
  S=$root_dir/.work/real/stackreuse-git
  rm -rf "$S"; mkdir -p "$S"
  decode_inputs "$TOOL_S" 'tiny-llama-*.gguf' || exit 3
  decode_git_step "$S" "-DCMAKE_C_FLAGS=-fsanitize=address -DCMAKE_CXX_FLAGS=-fsanitize=address" \
    "LLAMA_SET_ROWS=1 ASAN_OPTIONS=detect_stack_use_after_return=1" ""
  git clone -q -b window "$W/repo" "$S/src"
  t0=$(now)
  git_bisect_run "$S" "$good" "$bad" "$t0"
fi
echo "the thread's first bad (#14482): $first_bad"
