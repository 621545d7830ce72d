#!/usr/bin/env bash
# Real case 14 (bench/real/README.md): llama.cpp #15505 (8a4280ce4, 2025-08-28) made
# llama_kv_cache::prepare search contiguous cells again (find_slot(ubatch, true)); #15638
# (c8d0d14e7, the same day) put back `false`. The thread names no setting, so the user's command
# is the default decode (one token per ubatch), where `cont` changes nothing (find_slot tests
# `cont ? n_tokens : 1` cells): the decode probe is expected to pass on the bad tree, and the tool
# to report that --bad does not reproduce. `git bisect run` trusts --bad instead.
#
#   bench/real/findslot_default.sh [tool|git|both] [LLAMA_CPP_GIT_DIR]
#
# The window (5 commits: #15505's parent .. #15638) is recommitted from the fetched fork by
# bench/real/window.sh (default the `fetch github:wangqi/llama.cpp` snapshot) under
# .work/real/findslot. The user's command runs against --bad = the commit before the fix; git
# bisect run gets the same build line and decode-probe run (fresh clone, fresh build dir). Cold by
# default (CCACHE_DISABLE=1, as bench/real/*.sh); CCACHE_DISABLE=0 to let ccache help.
# State and logs: .work/real/findslot-<mode> (kept; delete for a fresh run).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
root_dir=$PWD
mode=${1:-both}
mirror=${2:-/work/.mirror/wangqi+llama.cpp/repo}
GOOD_UP=64387f6e95434b393ac3df285864692b7fd9c4d2   # parent of #15505
FIRST_BAD_UP=8a4280ce431da6b33e5a95ae1fd61472c8c3f8cc # #15505 (the thread's "cont #15505")
BAD_UP=84ab83cc0                                   # last commit before the fix
FIX_UP=c8d0d14e7                                   # #15638
export GGML_NO_BACKTRACE=1
. bench/real/case_lib.sh
# ccache reads any set CCACHE_DISABLE as a boolean and rejects "0" (every compile fails):
# CCACHE_DISABLE=0 here means "leave ccache on", so unset it.
if [ "${CCACHE_DISABLE:-1}" = 0 ]; then unset CCACHE_DISABLE; else export CCACHE_DISABLE=1; fi
BIN=$root_dir/target/release/setrows-bisect
[ -x "$BIN" ] || cargo build --release --quiet || exit 2
W=$root_dir/.work/real/findslot
if [ ! -d "$W/repo" ]; then
  bash bench/real/window.sh "$mirror" "$GOOD_UP" "$FIX_UP" "$W" >"$W.window.txt" || exit 3
fi
good=$(up "$W/repo" "$GOOD_UP") bad=$(up "$W/repo" "$(git -C "$mirror" rev-parse "$BAD_UP")") first_bad=$(up "$W/repo" "$FIRST_BAD_UP")
[ -n "$good" ] && [ -n "$bad" ] && [ -n "$first_bad" ] || { echo "window lacks its endpoints" >&2; exit 3; }

if [ "$mode" = tool ] || [ "$mode" = both ]; then
  S=$root_dir/.work/real/findslot-tool
  mkdir -p "$S"
  echo "command: setrows-bisect --repo <window> --probe-kind decode --good <#15505^> --bad <#15638^>"
  run_tool "$S" --repo "$W/repo" --probe-kind decode --good "$good" --bad "$bad"
fi

if [ "$mode" = git ] || [ "$mode" = both ]; then
  S=$root_dir/.work/real/findslot-git
  rm -rf "$S"; mkdir -p "$S"
  # The decode-probe sources and model the tool's probes used.
  decode_inputs "$root_dir/.work/real/findslot-tool" 'tiny-llama-*.gguf' || exit 3
  decode_git_step "$S" "" "" ""
  git clone -q -b window "$W/repo" "$S/src"
  t0=$(now)
  git_bisect_run "$S" "$good" "$bad" "$t0"
fi
echo "the thread's first bad (#15505): $first_bad; the decode probe is expected not to see it with the default settings"
