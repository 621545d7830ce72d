#!/usr/bin/env bash
# Real case 19 (bench/real/README.md): llama.cpp #15798 (fb15d649e, 2025-09-04, EmbeddingGemma)
# moved the SWA test of the KV cache to llama_hparams::is_masked_swa(p0, p1), which reads the
# model's swa_type: an iSWA model's full-attention cache then masked (and, in find_slot, freed)
# cells as if it were sliding-window. #15811 (c610b6c11, the next day; "fix #15808", gpt-oss
# incoherent) gave the cache its own swa_type back. The thread names no setting, so the user's
# command is the default decode; the decode probe's tiny model is a plain llama (swa_type NONE,
# src/core/gguf/tiny_llama.rs writes no sliding-window key), where is_masked_swa returns false on
# both sides of the change: the probe is expected to pass on the bad tree, and the tool to report
# that --bad does not reproduce. `git bisect run` trusts --bad instead.
#
#   bench/real/swamask_default.sh [tool|git|both] [LLAMA_CPP_GIT_DIR]
#   GROWN=1 bench/real/swamask_default.sh ...
#
# GROWN=1 runs the probe grown for this case (2026-12-03): the model the thread names, an iSWA
# one with gpt-oss's 128-token window (--sliding-window 128), compared with the --good commit's
# own logits (--compare-good), since every path of a bad tree builds the same wrong mask. git's
# step then records the good commit's logits first (the same decode-probe run with --logits-out)
# and compares each step with them (--logits-ref), as the tool does. State under
# .work/real/swamask-grown-<mode>.
#
# The window (7 commits: #15798's parent .. #15811) is recommitted from the fetched fork by
# bench/real/window.sh (default the `fetch github:wangqi/llama.cpp` snapshot) under
# .work/real/swamask. The user's command runs against --bad = the commit before the fix; git
# bisect run gets the same build line and decode-probe run (fresh clone, fresh build dir). Cold by
# default (CCACHE_DISABLE=1, as bench/real/*.sh); CCACHE_DISABLE=0 to let ccache help. BIN=... to
# use another setrows-bisect binary. State and logs: .work/real/swamask-<mode> (kept; delete for a
# fresh run).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
root_dir=$PWD
mode=${1:-both}
mirror=${2:-/work/.mirror/wangqi+llama.cpp/repo}
GOOD_UP=856ed0947f27b4ec3ad269fceda0402fbab263d3   # parent of #15798
FIRST_BAD_UP=fb15d649ed14ab447eeab911e0c9d21e35fb243e # #15798 (#15811: "cont #15798", "a regression ... introduced in #15798")
BAD_UP=5d6688de0                                   # last commit before the fix
FIX_UP=c610b6c11                                   # #15811
export GGML_NO_BACKTRACE=1
. bench/real/case_lib.sh
# ccache reads any set CCACHE_DISABLE as a boolean and rejects "0" (every compile fails):
# CCACHE_DISABLE=0 here means "leave ccache on", so unset it.
if [ "${CCACHE_DISABLE:-1}" = 0 ]; then unset CCACHE_DISABLE; else export CCACHE_DISABLE=1; fi
BIN=${BIN:-$root_dir/target/release/setrows-bisect}
[ -x "$BIN" ] || cargo build --release --quiet || exit 2
W=$root_dir/.work/real/swamask
if [ "${GROWN:-0}" = 1 ]; then
  SETTINGS=(--sliding-window 128 --compare-good) TAG=swamask-grown MODEL_GLOB='tiny-gemma2-*swa128*.gguf'
else
  SETTINGS=() TAG=swamask MODEL_GLOB='tiny-llama-*.gguf'
fi
mkdir -p "$(dirname "$W")"
if [ ! -d "$W/repo" ]; then
  bash bench/real/window.sh "$mirror" "$GOOD_UP" "$FIX_UP" "$W" >"$W.window.txt" || exit 3
fi
good=$(up "$W/repo" "$GOOD_UP") bad=$(up "$W/repo" "$(git -C "$mirror" rev-parse "$BAD_UP")") first_bad=$(up "$W/repo" "$FIRST_BAD_UP")
if [ -z "$good" ] || [ -z "$bad" ] || [ -z "$first_bad" ]; then echo "window lacks its endpoints" >&2; exit 3; fi

if [ "$mode" = tool ] || [ "$mode" = both ]; then
  S=$root_dir/.work/real/$TAG-tool
  mkdir -p "$S"
  echo "command: setrows-bisect --repo <window> --probe-kind decode --good <#15798^> --bad <#15811^> ${SETTINGS[*]}"
  run_tool "$S" --repo "$W/repo" --probe-kind decode --good "$good" --bad "$bad" "${SETTINGS[@]}"
fi

if [ "$mode" = git ] || [ "$mode" = both ]; then
  S=$root_dir/.work/real/$TAG-git
  rm -rf "$S"; mkdir -p "$S"
  # The decode-probe sources and model the tool's probes used.
  decode_inputs "$root_dir/.work/real/$TAG-tool" "$MODEL_GLOB" || exit 3
  # --compare-good: the step compares with the good commit's logits, recorded by the same run
  # line with --logits-out (REF_ARGS stays empty for the default decode)
  REF_ARGS=""
  case " ${SETTINGS[*]} " in *" --compare-good "*) REF_ARGS="--logits-ref $S/good-logits.bin" ;; esac
  decode_git_step "$S" "" "" "\${STEP_ARGS-$REF_ARGS}"
  git clone -q -b window "$W/repo" "$S/src"
  t0=$(now)
  if [ -n "$REF_ARGS" ]; then
    # the recording, timed with git's side: the good commit through the same step
    (cd "$S/src" && git checkout -q "$good" && STEP_ARGS="--logits-out $S/good-logits.bin" sh "$S/git-step.sh") >"$S/record.out" 2>&1 ||
      { echo "the good commit did not pass the recording step" >&2; cat "$S/steps.txt" >&2; exit 3; }
  fi
  git_bisect_run "$S" "$good" "$bad" "$t0"
fi
if [ "${GROWN:-0}" = 1 ]; then
  echo "the thread's first bad (#15798): $first_bad; expected from both sides with the grown probe"
else
  echo "the thread's first bad (#15798): $first_bad; the decode probe is expected not to see it (no SWA in its model)"
fi
