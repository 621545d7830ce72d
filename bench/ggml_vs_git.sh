#!/usr/bin/env bash
# setrows-bisect against `git bisect run` on a real ggml-org/ggml range, CPU test through ggml's
# public API (a fix search; bench/ggml/$TEST.c, default setrows_i32 whose fix is f24cca7c), the
# same build script (bench/ggml/build.sh: Ninja, Debug, configure once, only the test's target)
# for both.
#
#   [TEST=conv_t2d_f32 FIX=83d1f963] bench/ggml_vs_git.sh GGML_GIT_DIR GOOD BAD [TOOL_FLAGS...]
#
# Each row ends with the 1-min load average before and after that tool's run (other work on the
# machine slows both tools; the ccache misses printed below do not depend on it).
# GGML_GIT_DIR is any ggml clone (a bare mirror works); the project never ships ggml code.
# Both tools start cold (fresh clone, build dir, work dir and CCACHE_DIR) and both use ccache;
# run back to back, tool first. Prints one markdown row per tool, then the tool's probe times.
# OVERLAP=N then runs the tool again with both endpoints moved N first-parent commits inwards
# (same work dir, same ccache): the overlapping second bisect. KEEP=1 keeps the temp dir.
set -euo pipefail
cd "$(dirname "$0")/.."
MIRROR=$1 GOOD=$2 BAD=$3; shift 3
TEST=${TEST:-setrows_i32} FIX=${FIX:-f24cca7c}
export TEST GGML_NO_BACKTRACE=1
cargo build --release --quiet
BIN=$PWD/target/release/setrows-bisect
BUILD_SH=$PWD/bench/ggml/build.sh
root=$(mktemp -d /tmp/ggml-bench-XXXX)
now() { date +%s.%N; }
git clone -q "$MIRROR" "$root/tool-src"
git clone -q "$MIRROR" "$root/git-src"
for d in tool-src git-src; do git -C "$root/$d" checkout -q "$BAD"; done
# The fix: ggml's own commit, or in a llama.cpp-layout history (bench/llama_layout.py) the one
# that carries its tree.
fix_expected=$(git -C "$root/tool-src" log --format=%H --grep="ggml-org/ggml $FIX" | tail -1)
[ -n "$fix_expected" ] || fix_expected=$(git -C "$root/tool-src" rev-parse --verify -q "$FIX^{commit}")
load() { cut -d' ' -f1 /proc/loadavg; }

# tool_run G B NAME: one setrows-bisect run in the shared work dir and cache; sets wall, probes,
# executed, found.
tool_run() {
  local t0 t1
  t0=$(now)
  # shellcheck disable=SC2016 # $WORK is the tool's, expanded in the probe
  CCACHE_DIR=$root/cc-tool "$BIN" --repo "$root/tool-src" --good "$1" --bad "$2" --regress success \
    --build "TEST=$TEST sh $BUILD_SH" --script "\"\$WORK/$TEST\"" --work-dir "$root/work" \
    --json "$root/$3.json" "${TOOL_FLAGS[@]}" >"$root/$3.out" 2>&1 || true
  t1=$(now)
  wall=$(python3 -c "print($t1 - $t0)")
  read -r probes executed found < <(python3 -c "
import json; r=json.load(open('$root/$3.json'))
print(len(r['probes']), r['executed'], (r.get('first_bad') or '?')[:8])")
}
TOOL_FLAGS=("$@")
l0=$(load)
tool_run "$GOOD" "$BAD" tool
tool_wall=$wall
printf '| setrows-bisect %s | %s (%s run) | %s | %.1f | %s / %s |\n' "$*" "$probes" "$executed" "$found" "$tool_wall" "$l0" "$(load)"

l0=$(load); t0=$(now)
(
  export CCACHE_DIR=$root/cc-git CMAKE_C_COMPILER_LAUNCHER=ccache CMAKE_CXX_COMPILER_LAUNCHER=ccache
  mkdir -p "$root/git-build"
  cd "$root/git-src"
  git bisect start --term-old=broken --term-new=fixed "$BAD" "$GOOD" >/dev/null
  git bisect run sh -c "s=\$(date +%s.%N); cd '$root/git-build' && SRC='$root/git-src' sh '$BUILD_SH' >/dev/null 2>&1 || exit 125; echo \$(git -C '$root/git-src' rev-parse --short=8 HEAD):\$(python3 -c \"print(round(\$(date +%s.%N) - \$s, 1))\")s >> '$root/git-times'; '$root/git-build/$TEST' >/dev/null 2>&1 && exit 1 || exit 0" >"$root/git.out" 2>&1 || true
)
t1=$(now)
found=$(grep -oE '^[0-9a-f]{40} is the first fixed commit' "$root/git.out" | cut -c1-8 || true)
runs=$(git -C "$root/git-src" bisect log | grep -cE '^git bisect (broken|fixed|skip) ' || true)
printf '| git bisect run | %s | %s | %.1f | %s / %s |\n' "$runs" "${found:-?}" "$(python3 -c "print($t1 - $t0)")" "$l0" "$(load)"
echo "expected: ${fix_expected:0:8}"
echo "git builds: $(tr '\n' ' ' < "$root/git-times")"
for c in tool git; do
  echo "ccache $c: $(CCACHE_DIR=$root/cc-$c ccache -s 2>/dev/null | grep -E '^ *(Hits|Misses):' | tr -s ' ' | tr '\n' ' ')"
done
python3 - "$root/tool.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print("tool probes:", " ".join(f"{p['sha'][:8]}:{p['verdict']}:{p.get('duration_s') or 0:.1f}s{'(stored)' if p.get('cached') else ''}" for p in r['probes']))
PY
if [ -n "${OVERLAP:-}" ]; then
  g2=$(git -C "$root/tool-src" rev-list --first-parent --reverse "$GOOD..$BAD" | sed -n "${OVERLAP}p")
  b2=$(git -C "$root/tool-src" rev-list --first-parent "$GOOD..$BAD" | sed -n "$((OVERLAP + 1))p")
  tool_run "$g2" "$b2" overlap
  w=$wall
  printf '| overlap %s..%s | %s (%s run) | %s | %.1f | first/overlap %.1fx |\n' "${g2:0:8}" "${b2:0:8}" "$probes" "$executed" "$found" "$w" "$(python3 -c "print($tool_wall / $w)")"
fi
if [ "${KEEP:-}" = 1 ]; then echo "kept: $root"; else rm -rf "$root"; fi
