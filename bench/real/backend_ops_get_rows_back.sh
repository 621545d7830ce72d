#!/usr/bin/env bash
# Real CPU case for --probe-kind backend-ops (issue 46): ggml-org/ggml #1190 ("cpu: fix cpu
# backend's supports-op for GET_ROWS_BACK", f71d538e, 2025-04-11). Its thread: `test-backend-ops
# -b CPU` dies in `GET_ROWS_BACK(type=bf16,n=256,m=5,r=4,b=1,v=0): ...ops.cpp:4468: fatal error`,
# since the CPU backend said it supported bf16 GET_ROWS_BACK, which its kernel aborts on; the fix
# makes supports_op decline it. The thread names the fix and the failing case, not a first bad
# commit, so the question is the fix's: "12 first-parent commits before f71d538e it crashes,
# 3 after it passes: which commit fixed it?" (`--regress success`), the CPU backend, the op of
# the thread. Window: 2af91a99 (f71d538e~12, crashes) .. de1a1d02 (3 after the fix, passes).
#
#   bench/real/backend_ops_get_rows_back.sh [GGML_GIT_DIR]
#       GGML_GIT_DIR: a ggml-org/ggml clone holding the window (default: the fetch tool's
#       mirror). The tool's command cold (its own work dir, CCACHE_DISABLE=1), then `git bisect
#       run` with the tool's build line and the same test-backend-ops line, cold too. State and
#       figures under .work/real-state-get-rows-back (summary.txt).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
SRC=${1:-/work/.mirror/ggml-org+ggml/repo}
GOOD=2af91a99b979   # f71d538e~12: crashes in GET_ROWS_BACK bf16
BAD=de1a1d02b1b5    # 3 first-parent commits after the fix: passes
FIX=f71d538ece3fb32a04824dc6d1e73e360be9d22f
BIN=${BIN:-$PWD/target/release/setrows-bisect}
[ -x "$BIN" ] || BIN=$PWD/target/debug/setrows-bisect
S=$PWD/.work/real-state-get-rows-back
rm -rf "$S" && mkdir -p "$S"
export GGML_NO_BACKTRACE=1 CCACHE_DISABLE=1
now() { date +%s.%N; }
git clone -q --no-checkout "$SRC" "$S/tool-src" && git clone -q --no-checkout "$SRC" "$S/git-src" || exit 3
{ date -u; nproc; uptime; cmake --version | head -1; echo "ninja $(ninja --version)"; c++ --version | head -1; "$BIN" --version; } >"$S/setup.txt" 2>&1

# The tool: the command a user types.
t0=$(now)
"$BIN" --repo "$S/tool-src" --good "$GOOD" --bad "$BAD" --regress success \
  --probe-kind backend-ops --op GET_ROWS_BACK --backend cpu \
  --work-dir "$S/work" --json "$S/tool.json" --report "$S/tool.md" >"$S/tool.out" 2>&1
tool_rc=$? tool_wall=$(python3 -c "print(round($(now) - $t0, 1))")
# Its build line, as its first probe's log ran it (git's step runs the same).
log=$(find "$S/work/logs" -name '*.log' | head -1)
build_line=$(grep -m1 -o 'cmake -S .*' "$log" 2>/dev/null || true)

# git bisect run: old = broken (crashes), new = fixed; the tool's build line and the same
# test-backend-ops line. Exit 0 is the old term (the crash), 1 the new (a pass), 125 a skip.
cat >"$S/git-step.sh" <<STEP
t0=\$(date +%s.%N); b='$S/git-build'
cmake -S . -B "\$b" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CCACHE=OFF -DGGML_BUILD_TESTS=ON -DGGML_BUILD_EXAMPLES=OFF >"\$b.configure.log" 2>&1 &&
  cmake --build "\$b" --target test-backend-ops >"\$b.build.log" 2>&1 || exit 125
t1=\$(date +%s.%N)
"\$b/bin/test-backend-ops" test -o GET_ROWS_BACK -b CPU >"\$b.run.log" 2>&1; rc=\$?
echo "git-step \$(git rev-parse --short=10 HEAD) build_s \$(python3 -c "print(round(\$t1 - \$t0, 1))") run_s \$(python3 -c "print(round(\$(date +%s.%N) - \$t1, 1))") rc \$rc" >>'$S/git-steps.txt'
case \$rc in 0) exit 1 ;; 134|6|1) exit 0 ;; *) exit 125 ;; esac
STEP
t0=$(now)
(cd "$S/git-src" && git bisect start --term-old=broken --term-new=fixed "$BAD" "$GOOD" >/dev/null &&
  git bisect run sh "$S/git-step.sh") >"$S/git.out" 2>&1
git_wall=$(python3 -c "print(round($(now) - $t0, 1))")

{
  echo "case: ggml-org/ggml #1190, fix $FIX; window $GOOD..$BAD; $(nproc) cores (a loaded, shared machine: noisy)"
  echo "tool: exit $tool_rc, wall $tool_wall s"
  python3 - "$S/tool.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(f"tool: answer {r.get('first_bad')} ({r.get('term')}), {r['executed']} probes run")
for p in r["probes"]:
    print(f"  probe {p['sha'][:10]} {p['outcome']} {p['verdict']} {p.get('duration_s') or 0:.1f}s {p.get('signature') or ''}")
g = r.get("grouping") or {}
print(f"tool: grouping {g.get('candidates')} candidates -> {g.get('groups')} groups")
PY
  echo "tool build line: $build_line"
  echo "git: $(grep -m1 -oE '^[0-9a-f]{40} is the first fixed commit' "$S/git.out" || echo 'no answer'), $(grep -c '^git-step' "$S/git-steps.txt") steps, wall $git_wall s"
  cat "$S/git-steps.txt"
  echo "git build line: cmake -S . -B <b> -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CCACHE=OFF -DGGML_BUILD_TESTS=ON -DGGML_BUILD_EXAMPLES=OFF; cmake --build <b> --target test-backend-ops"
} | tee "$S/summary.txt"
