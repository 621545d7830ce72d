#!/usr/bin/env bash
# Real case 22 (bench/real/README.md): ggml-alloc's graph reallocation with several chunks.
# llama.cpp #15815 (ggml 254ea3e5, 2025-09-24, "split graph allocations according to backend max
# buffer size") split a graph's compute buffer into chunks no larger than the buffer type's
# maximum size, but ggml_gallocr_reserve_n still compared only the chunks' total with the current
# total; #16396 (ggml b3f27f37, 2025-10-03, "reallocation is needed if a single chunk grows in size,
# even if total allocation size stays the same or is lower"; it fixes #16383 and #16298, and in
# #15815's review its author answers "it's something I missed after changing chunks to have
# individual size") compares chunk by chunk. The thread names no setting, so the user's command is
# the default replay (CPU backend). The CPU buffer type has no maximum size (get_max_size NULL,
# SIZE_MAX), so every CPU graph is one chunk and the changed comparison is the old one: the replay
# is expected to pass on the bad trees and the tool to report that --bad does not reproduce; `git
# bisect run` trusts --bad instead.
#
#   bench/real/allocchunks_default.sh [tool|git|both|probe] [GGML_GIT_DIR]
#
# `probe` runs only the tool's single probes (`--probe`) of --bad and of --good, what was run so far.
# Note: the good end 058c3973 and the 32 commits after it (to ecdd3836^) lie inside real case 1's bug window
# (ggml_scale_bias's x86 SIMD path, 3ae98975 .. ecdd3836^), where the default replay fails with
# case 1's signature; the user's command over this range meets that bug, not this one.
#
# Range: ggml 058c3973 (the parent of #15815) .. 39ac3ea3 (the commit before #16396), 62
# first-parent commits after the good end, from the `fetch github:ggml-org/ggml` snapshot by default; both get a
# fresh clone and a fresh build dir, cold (CCACHE_DISABLE=1 as bench/real/*.sh; CCACHE_DISABLE=0
# leaves ccache on). BIN=... for another setrows-bisect binary. State and logs:
# .work/real/allocchunks-<mode> (kept; delete for a fresh run).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
root_dir=$PWD
mode=${1:-both}
src=${2:-/work/.mirror/ggml-org+ggml/repo}
GOOD=058c39731b3395b82bd5d8525d0b689a71bdd278      # parent of #15815
FIRST_BAD=254ea3e588432e6b2814b82f324fe6bb25d78a25 # #15815 (#16396 fixes the chunk comparison it introduced)
BAD=39ac3ea392ffdc9689ca11122af40ce2ed46b8ec       # last commit before the fix
FIX=b3f27f37aeb76b6cd5df332f6c0206e01f8437b2       # #16396
export GGML_NO_BACKTRACE=1
. bench/real/case_lib.sh
# ccache reads any set CCACHE_DISABLE as a boolean and rejects "0": CCACHE_DISABLE=0 here means
# "leave ccache on", so unset it.
if [ "${CCACHE_DISABLE:-1}" = 0 ]; then unset CCACHE_DISABLE; else export CCACHE_DISABLE=1; fi
BIN=${BIN:-$root_dir/target/release/setrows-bisect}
[ -x "$BIN" ] || cargo build --release --quiet || exit 2
git -C "$src" merge-base --is-ancestor "$FIRST_BAD" "$FIX" || { echo "$src lacks the range" >&2; exit 3; }

if [ "$mode" = probe ]; then
  S=$root_dir/.work/real/allocchunks-probe
  rm -rf "$S"; mkdir -p "$S"
  git clone -q "$src" "$S/src"
  echo "command: setrows-bisect --repo <clone> --good ${GOOD:0:8} --bad ${BAD:0:8} --probe ${BAD:0:8}"
  t0=$(now)
  "$BIN" --repo "$S/src" --good "$GOOD" --bad "$BAD" --probe "$BAD" --work-dir "$S/work" >"$S/probe.out" 2>&1
  echo "probe exit $?, wall $(python3 -c "print(round($(now) - $t0, 1))") s"
  tail -8 "$S/probe.out"
  # The good end too: inside case 1's bug, the default replay fails there with case 1's signature.
  echo "command: setrows-bisect --repo <clone> --good ${GOOD:0:8} --bad ${BAD:0:8} --probe ${GOOD:0:8}"
  t0=$(now)
  "$BIN" --repo "$S/src" --good "$GOOD" --bad "$BAD" --probe "$GOOD" --work-dir "$S/work" >"$S/probe-good.out" 2>&1
  echo "probe exit $?, wall $(python3 -c "print(round($(now) - $t0, 1))") s"
  tail -8 "$S/probe-good.out"
  grep -h 'SETROWS_RESULT' "$S"/work/logs/*.log 2>/dev/null | cut -c1-400
fi

if [ "$mode" = tool ] || [ "$mode" = both ]; then
  S=$root_dir/.work/real/allocchunks-tool
  rm -rf "$S"; mkdir -p "$S"
  git clone -q "$src" "$S/src"
  echo "command: setrows-bisect --repo <clone> --good ${GOOD:0:8} --bad ${BAD:0:8}  ($(git -C "$S/src" rev-list --count --first-parent "$GOOD..$BAD") commits)"
  run_tool "$S" --repo "$S/src" --good "$GOOD" --bad "$BAD"
fi

if [ "$mode" = git ] || [ "$mode" = both ]; then
  S=$root_dir/.work/real/allocchunks-git
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
echo "the thread's first bad (#15815): ${FIRST_BAD:0:8}; fix (#16396): ${FIX:0:8}; the replay is expected not to see it"
