#!/usr/bin/env bash
# Real case 21 (bench/real/README.md): ggml-alloc's in-place reuse of a larger parent.
# llama.cpp #16679 (ggml 9dea367c, 2025-10-20, "fix leak when reusing a tensor with a larger size")
# made ggml_gallocr_allocate_node free the parent's extra space when a node reuses a parent (or a
# view's source) larger than itself; #17884 (ggml 3129a944, 2025-12-11, "cont #16679": "a bug in
# the logic for parent buffer reuse which occurs when the alloc size of the node and the parent are
# not aligned to the buffer alignment ... could lead to corruption of the allocator chunks") aligns
# both sizes first. The thread names no setting, so the user's command is the default replay
# (CPU backend). The replay's graphs never reuse a larger parent that the allocator owns (every
# view in them is of an input or persistent tensor in the replay's own buffers, or a reshape of
# the whole tensor), so the replay is expected to pass on the bad trees and the tool to report
# that --bad does not reproduce; `git bisect run` trusts --bad instead.
#
#   bench/real/allocreuse_default.sh [tool|git|both] [GGML_GIT_DIR]
#
# Range: ggml 95e5e82c (the parent of #16679) .. c1974453 (the commit before #17884), 287
# first-parent commits after the good end, from the `fetch github:ggml-org/ggml` snapshot by default; both get a
# fresh clone and a fresh build dir, cold (CCACHE_DISABLE=1 as bench/real/*.sh; CCACHE_DISABLE=0
# leaves ccache on). BIN=... for another setrows-bisect binary. State and logs:
# .work/real/allocreuse-<mode> (kept; delete for a fresh run).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
root_dir=$PWD
mode=${1:-both}
src=${2:-/work/.mirror/ggml-org+ggml/repo}
GOOD=95e5e82cfc3742d67d45b1646abe7faae901ba37      # parent of #16679
FIRST_BAD=9dea367c355b47051483c630afb2ae66b1ff7d1d # #16679 (#17884: "cont #16679")
BAD=c197445324bf733728eac9582ee013525effda0f       # last commit before the fix
FIX=3129a9442f54763409c7dd488964817e8be1f3d9       # #17884
export GGML_NO_BACKTRACE=1
. bench/real/case_lib.sh
# ccache reads any set CCACHE_DISABLE as a boolean and rejects "0": CCACHE_DISABLE=0 here means
# "leave ccache on", so unset it.
if [ "${CCACHE_DISABLE:-1}" = 0 ]; then unset CCACHE_DISABLE; else export CCACHE_DISABLE=1; fi
BIN=${BIN:-$root_dir/target/release/setrows-bisect}
[ -x "$BIN" ] || cargo build --release --quiet || exit 2
git -C "$src" merge-base --is-ancestor "$FIRST_BAD" "$FIX" || { echo "$src lacks the range" >&2; exit 3; }

if [ "$mode" = tool ] || [ "$mode" = both ]; then
  S=$root_dir/.work/real/allocreuse-tool
  rm -rf "$S"; mkdir -p "$S"
  git clone -q "$src" "$S/src"
  echo "command: setrows-bisect --repo <clone> --good ${GOOD:0:8} --bad ${BAD:0:8}  ($(git -C "$S/src" rev-list --count --first-parent "$GOOD..$BAD") commits)"
  run_tool "$S" --repo "$S/src" --good "$GOOD" --bad "$BAD"
fi

if [ "$mode" = git ] || [ "$mode" = both ]; then
  S=$root_dir/.work/real/allocreuse-git
  rm -rf "$S"; mkdir -p "$S"
  git clone -q "$src" "$S/src"
  # The tool's build line (src/probe/repro.rs build_script, as its --dry-run prints it) and the
  # replay's default run ([params.decode-reuse] of matrix.toml): exit 0 pass = good, 1 mismatch =
  # bad, a signal (sh's 129-159) = bad as under the tool's default --regress error, else skip.
  cat >"$S/git-step.sh" <<STEP
#!/bin/sh
t0=\$(date +%s.%N); b='$S/build'
cmake -S '$root_dir/repro-kernels' -B "\$b" -G Ninja -DCMAKE_BUILD_TYPE=Release \\
  -DCMAKE_EXPORT_COMPILE_COMMANDS=ON "-DGGML_SOURCE_DIR=\$PWD" -DGGML_CCACHE=OFF \\
  -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache >"\$b.configure.log" 2>&1 || exit 125
cmake --build "\$b" --target setrows-replay >"\$b.build.log" 2>&1 || exit 125
t1=\$(date +%s.%N)
"\$b/setrows-replay" --mode reuse --steps 100000 --ring-rows 256 --check-every 1 >"\$b.run.log" 2>&1; rc=\$?
echo "\$(git rev-parse --short=8 HEAD) build_s \$(python3 -c "print(round(\$t1 - \$t0, 1))") run_s \$(python3 -c "print(round(\$(date +%s.%N) - \$t1, 1))") rc \$rc" >>'$S/steps.txt'
case \$rc in 0) exit 0 ;; 1) exit 1 ;; 129|13[0-9]|14[0-9]|15[0-9]) exit 1 ;; *) exit 125 ;; esac
STEP
  t0=$(now)
  git_bisect_run "$S" "$GOOD" "$BAD" "$t0"
fi
echo "the thread's first bad (#16679): ${FIRST_BAD:0:8}; fix (#17884): ${FIX:0:8}; the replay is expected not to see it"
