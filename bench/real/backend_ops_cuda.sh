# shellcheck shell=bash
# The common part of the real CUDA (sm_90) cases for --probe-kind backend-ops (issue 46):
# sourced by a case script (backend_ops_repeat_cuda.sh, backend_ops_fwht_cuda.sh) after it sets,
# for its thread:
#
#   CASE          the bundle's name ($REAL/$CASE.bundle) and the state/out suffix
#   GOOD_UP BAD_UP FIRST_BAD_UP END_UP   the upstream ends (END_UP: the window's last commit)
#   GOOD_NAME BAD_NAME FIRST_BAD_NAME    how the summary names them
#   OP            the test-backend-ops op (-o)
#   CMAKE_EXTRA   (array) CMake flags beyond the tool's defaults, the same on both sides
#   APPLY_UP APPLY_PATH  (optional) the fix whose test is applied to every tree: the tool gets
#                 `--apply <fix>:APPLY_PATH`; git's step applies the same diff with `git apply -3`
#                 before its build and restores the tree after its run (a tree it does not apply
#                 to is a skip, 125)
#
# then calls `backend_ops_cuda_main "$@"`:
#
#   prepare [LLAMA_CPP_GIT_DIR]
#       here: writes $REAL/$CASE.bundle (bench/real/window.sh); both sides run cold, so no
#       ccache is carried. Then `strip -o $REAL/setrows-bisect target/release/setrows-bisect`.
#   run [SECONDS]
#       on the H200 (16 cores, CUDA 13, no network), carrying $REAL: the user's command, then
#       `git bisect run` with the same build line (-DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90
#       -DLLAMA_BUILD_TESTS=ON, target test-backend-ops) and the same test-backend-ops line, both
#       cold (CCACHE_DISABLE=1, -DGGML_CCACHE=OFF), within SECONDS (default 570). State under
#       .work/real-state-bo-$CASE: a second call on the still-warm machine resumes the tool (its
#       journal) and git (its bisect state; a git step starts only with GIT_STEP_NEED, default
#       240 s, left). TOOL_SIDE=0 / GIT_SIDE=0 leave a side out; GIT_FIRST=1 runs git's side
#       first. Figures: $OUT/summary.txt (default $REAL/out-bo-$CASE).
# shellcheck disable=SC2154  # the case variables come from the case script

backend_ops_cuda_main() {
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 2
# shellcheck source=bench/real/case_lib.sh
. bench/real/case_lib.sh
local ROOT=$PWD REAL=${REAL:-.work/real}
local BUNDLE=$ROOT/$REAL/$CASE.bundle budget
case ${1:-} in
prepare)
  window_bundle "${2:-/work/.mirror/wangqi+llama.cpp/repo}" "$GOOD_UP" "$END_UP" "$BUNDLE" || exit 3
  exit 0 ;;
run) budget=${2:-570} ;;
*) echo "usage: $0 prepare [LLAMA_CPP_GIT_DIR] | run [SECONDS]" >&2; exit 2 ;;
esac

[ -f "$BUNDLE" ] || { echo "no $BUNDLE: run '$0 prepare' where the mirror is, and carry it" >&2; exit 2; }
BIN=$(carried_bin "$ROOT" "$REAL") || exit 2
S=$ROOT/.work/real-state-bo-$CASE
OUT=${OUT:-$ROOT/$REAL/out-bo-$CASE}
mkdir -p "$S" "$OUT"
T0=$(date +%s) stop_at=$(($(date +%s) + budget))
export GGML_NO_BACKTRACE=1 CCACHE_DISABLE=1 CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}
{ date -u; nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader; nvcc --version | tail -2
  cmake --version | head -1; echo "ninja $(ninja --version)"; "$BIN" --version; nproc
  command -v ccache || echo "no ccache"; } >"$OUT/setup.txt" 2>&1

[ -d "$S/tool-src" ] || git clone -q -b window "$BUNDLE" "$S/tool-src" || exit 3
good=$(up "$S/tool-src" "$GOOD_UP") bad=$(up "$S/tool-src" "$BAD_UP") first_bad=$(up "$S/tool-src" "$FIRST_BAD_UP")
[ -n "$good" ] && [ -n "$bad" ] && [ -n "$first_bad" ] || { echo "the bundle lacks the window's endpoints" >&2; exit 3; }
local a
TOOL_ARGS=(--repo "$S/tool-src" --good "$good" --bad "$bad" --probe-kind backend-ops --op "$OP"
   --backend cuda --gpu-target 90 --engine none)
for a in ${CMAKE_EXTRA[@]+"${CMAKE_EXTRA[@]}"}; do TOOL_ARGS+=("--cmake-arg=$a"); done
fix=
if [ -n "${APPLY_UP:-}" ]; then
  fix=$(up "$S/tool-src" "$APPLY_UP")
  [ -n "$fix" ] || { echo "the bundle lacks the applied fix $APPLY_UP" >&2; exit 3; }
  TOOL_ARGS+=(--apply "$fix:$APPLY_PATH")
fi
TOOL_ARGS+=(--work-dir "$S/w")
"$BIN" "${TOOL_ARGS[@]}" --dry-run >"$OUT/dry-run.txt" 2>&1
if [ "${GIT_FIRST:-0}" = 1 ]; then bo_git_side; bo_tool_side; else bo_tool_side; bo_git_side; fi
bo_summary
}

# The tool: the command a user types (a resumed call is the same command: its journal).
bo_tool_side() {
  [ "${TOOL_SIDE:-1}" != 0 ] && ! [ -s "$OUT/tool.json" ] || return 0
  ph "tool: setrows-bisect --good <$GOOD_NAME> --bad <$BAD_NAME> --probe-kind backend-ops --op $OP --backend cuda --gpu-target 90${CMAKE_EXTRA[*]:+ --cmake-arg=${CMAKE_EXTRA[*]}}${APPLY_UP:+ --apply <$APPLY_UP>:$APPLY_PATH}"
  local t0 rc
  t0=$(date +%s.%N)
  timeout -s INT $((stop_at - $(date +%s) - 20)) "$BIN" "${TOOL_ARGS[@]}" --json "$OUT/tool.json.part" --report "$OUT/tool.md" >>"$OUT/tool.log" 2>&1
  rc=$?
  echo "call wall_s $(python3 -c "print(round($(date +%s.%N) - $t0, 1))") rc $rc" >>"$OUT/tool-calls.txt"
  [ $rc -eq 0 ] && [ -s "$OUT/tool.json.part" ] && mv "$OUT/tool.json.part" "$OUT/tool.json"
  ph "tool exits rc=$rc"
}

# git bisect run: the tool's build line less its ccache launcher, the same test-backend-ops line;
# the step a user writes: exit 0 when the program ran cases and exited 0, 1 when it printed a
# FAIL or died (a crash before it flushed a line counts), 125 when it did not build.
bo_git_side() {
  [ "${GIT_SIDE:-1}" != 0 ] || return 0
  local G=$S/git-src need=${GIT_STEP_NEED:-240} t0
  if [ ! -f "$G/.git/BISECT_START" ]; then
    rm -rf "$G" "$S/git-steps.txt" "$S/git-build"*
    git clone -q -b window "$BUNDLE" "$G" && (cd "$G" && git bisect start "$bad" "$good" >/dev/null) || exit 3
  fi
  cat >"$S/git-step.sh" <<STEP
b='$S/git-build'; h=\$(git rev-parse --short=10 HEAD)
if [ -n '$fix' ]; then
  git diff '$fix^' '$fix' -- '${APPLY_PATH:-}' | git apply -3 >"\$b.apply.log" 2>&1 ||
    { git reset -q --hard; echo "git-step \$h apply-failed" >>'$S/git-steps.txt'; exit 125; }
fi
if [ \$((\$(date +%s) + $need)) -gt $((stop_at - 15)) ]; then echo "git-stop \$h: too little time left in this call" >>'$S/git-steps.txt'; exit 255; fi
t0=\$(date +%s.%N)
cmake -S . -B "\$b" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CCACHE=OFF -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 ${CMAKE_EXTRA[*]} \\
  -DLLAMA_BUILD_TESTS=ON -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_CURL=OFF >"\$b.configure.log" 2>&1 &&
  cmake --build "\$b" --target test-backend-ops >"\$b.build.log" 2>&1 || { [ -z '$fix' ] || git reset -q --hard; echo "git-step \$h build-failed" >>'$S/git-steps.txt'; exit 125; }
t1=\$(date +%s.%N)
"\$b/bin/test-backend-ops" test -o $OP -b CUDA0 >"\$b.run.log" 2>&1; rc=\$?
[ -z '$fix' ] || git reset -q --hard
fails=\$(grep -c 'FAIL\$' "\$b.run.log"); cases=\$(grep -c '^  $OP(' "\$b.run.log")
echo "git-step \$h upstream \$(git log -1 --format=%B | sed -n 's/^Upstream-commit: //p' | cut -c1-9) build_s \$(python3 -c "print(round(\$t1 - \$t0, 1))") run_s \$(python3 -c "print(round(\$(date +%s.%N) - \$t1, 1))") rc \$rc cases \$cases fail_lines \$fails" >>'$S/git-steps.txt'
[ \$rc -ne 0 ] && exit 1
[ "\$cases" -gt 0 ] || exit 125
exit 0
STEP
  if git -C "$G" bisect log | grep -q '^# first bad commit'; then
    ph "git: already done"
  elif [ $((stop_at - $(date +%s))) -gt $((need + 20)) ]; then
    ph "git bisect run starts"
    t0=$(date +%s.%N)
    (cd "$G" && timeout -s INT $((stop_at - $(date +%s) - 5)) git bisect run sh "$S/git-step.sh") >>"$S/git-bisect.log" 2>&1
    echo "call wall_s $(python3 -c "print(round($(date +%s.%N) - $t0, 1))") rc $?" >>"$OUT/git-calls.txt"
    ph "git bisect run exits"
  fi
  git -C "$G" bisect log >"$OUT/git-bisect-log.txt" 2>&1
  cp "$S/git-steps.txt" "$OUT/git-steps.txt" 2>/dev/null
  tail -c 3000 "$S/git-build.run.log" >"$OUT/git-last-run.log.tail" 2>/dev/null
}

bo_summary() {
  {
    echo "expected first bad ($FIRST_BAD_NAME): $first_bad; $(nproc) cores"
    grep -m3 -e 'cmake' -e 'build' "$OUT/dry-run.txt" | sed 's/^/tool plan: /'
    [ -s "$OUT/tool.json" ] && python3 - "$OUT/tool.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(f"tool: answer {r.get('first_bad')} probes {len(r['probes'])} ({r['executed']} run)")
for p in r["probes"]:
    print(f"  probe {p['sha'][:10]} {p['outcome']} {p['verdict']} {p.get('duration_s') or 0:.1f}s {p.get('signature') or ''}")
PY
    sed 's/^/tool /' "$OUT/tool-calls.txt" 2>/dev/null
    local ans
    ans=$(python3 -c "import json; print(json.load(open('$OUT/tool.json')).get('first_bad') or '')" 2>/dev/null)
    [ -z "$ans" ] || echo "tool answer upstream: $(git -C "$S/tool-src" log -1 --format=%B "$ans" | sed -n 's/^Upstream-commit: //p')"
    echo "git: $(grep -m1 -oE '[0-9a-f]{40} is the first bad commit' "$S/git-bisect.log" 2>/dev/null || echo 'no answer yet')"
    cat "$S/git-steps.txt" 2>/dev/null
    sed 's/^/git /' "$OUT/git-calls.txt" 2>/dev/null
  } >"$OUT/summary.txt" 2>&1
  cat "$OUT/summary.txt"
}
