#!/usr/bin/env bash
# Real CUDA (sm_90) case for --probe-kind backend-ops (issue 46): llama.cpp #23615 ("CUDA: add
# fast walsh-hadamard transform", c1f1e28d2, its thread's bisect names it) ran its transform
# without the Programmatic Dependent Launch sync until #23690 (192d8ae8b, "CUDA: missing PDL sync
# for FWHT, better fallback"): garbage on Hopper and newer (the #23693 report: b9174 good, b9333
# bad). Real case 3 of bench/real/README.md found it with the decode probe; here the same window
# with ggml's own test: #23615 routes the op test-backend-ops names MUL_MAT_HADAMARD (a mul_mat
# with GGML_HINT_SRC0_IS_HADAMARD, a case since #22631, before the window) through the new
# kernel, and adds a batched case of it. Chosen by the thread; whether test-backend-ops sees the
# race on an H200 is what this run answers (say so either way).
#
#   bench/real/backend_ops_fwht_cuda.sh prepare [LLAMA_CPP_GIT_DIR]
#       here: writes .work/real/fwht.bundle (bench/real/window.sh: b9174 .. the fix, 160
#       first-parent commits, about 17 MB; both sides run cold, so no ccache is carried); then
#       `strip -o .work/real/setrows-bisect target/release/setrows-bisect`.
#   bench/real/backend_ops_fwht_cuda.sh run [SECONDS]
#       on the H200 (16 cores, CUDA 13, no network), carrying .work/real/fwht.bundle and
#       .work/real/setrows-bisect: the user's command, then `git bisect run` with the same build
#       line (the tool's: -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DLLAMA_BUILD_TESTS=ON,
#       target test-backend-ops, flash attention kernels off on both sides to fit the calls) and
#       the same test-backend-ops line, both cold (CCACHE_DISABLE=1), within SECONDS (default 570).
#       State under .work/real-state-bo-fwht: a second call on the still-warm machine resumes the
#       tool (its journal; a build cut off resumes in its Ninja tree) and git (its bisect state;
#       a git step starts only with GIT_STEP_NEED, default 240 s, left). TOOL_SIDE=0 / GIT_SIDE=0
#       leave a side out. Figures: .work/real/out-bo-fwht/summary.txt.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
ROOT=$PWD
REAL=${REAL:-.work/real}
BUNDLE=$ROOT/$REAL/fwht.bundle
GOOD_UP=59778f0196a82db32580bb649d5d839355d6d7bf   # b9174, the #23693 report's good
BAD_UP=35c9b1f39                                   # b9333, the report's bad (the fix's parent)
FIRST_BAD_UP=c1f1e28d2                             # #23615, per its thread's bisect
END_UP=192d8ae8b8826642f15836570b944ecd68cf175c    # #23690, the fix (the window's last commit)
OP=MUL_MAT_HADAMARD
CMAKE_EXTRA=(-DGGML_CUDA_FA=OFF)

case ${1:-} in
prepare)
  mirror=${2:-/work/.mirror/wangqi+llama.cpp/repo}
  out=$(mktemp -d /tmp/bo-fwht-window-XXXX)
  bash bench/real/window.sh "$mirror" "$GOOD_UP" "$END_UP" "$out" || exit 3
  mkdir -p "$(dirname "$BUNDLE")" && cp "$out/window.bundle" "$BUNDLE" && rm -rf "$out"
  ls -la "$BUNDLE"
  exit 0 ;;
run) budget=${2:-570} ;;
*) echo "usage: $0 prepare [LLAMA_CPP_GIT_DIR] | run [SECONDS]" >&2; exit 2 ;;
esac

[ -f "$BUNDLE" ] || { echo "no $BUNDLE: run '$0 prepare' where the mirror is, and carry it" >&2; exit 2; }
BIN=$ROOT/$REAL/setrows-bisect
[ -x "$BIN" ] || BIN=$ROOT/target/release/setrows-bisect
[ -x "$BIN" ] || { echo "no binary: strip -o $REAL/setrows-bisect target/release/setrows-bisect" >&2; exit 2; }
S=$ROOT/.work/real-state-bo-fwht
OUT=${OUT:-$ROOT/$REAL/out-bo-fwht}
mkdir -p "$S" "$OUT"
T0=$(date +%s) stop_at=$(($(date +%s) + budget))
export GGML_NO_BACKTRACE=1 CCACHE_DISABLE=1 CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}
ph() { echo "[$(($(date +%s) - T0))s] $*" | tee -a "$OUT/phases.txt"; }
up() { git -C "$1" log --format='%H %B' window | awk -v u="$2" '/^[0-9a-f]{40} /{h=$1} /^Upstream-commit: /{if (index($2, u) == 1) {print h; exit}}'; }
{ date -u; nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader; nvcc --version | tail -2
  cmake --version | head -1; echo "ninja $(ninja --version)"; "$BIN" --version; nproc; } >"$OUT/setup.txt" 2>&1

[ -d "$S/tool-src" ] || git clone -q -b window "$BUNDLE" "$S/tool-src" || exit 3
good=$(up "$S/tool-src" "$GOOD_UP") bad=$(up "$S/tool-src" "$BAD_UP") first_bad=$(up "$S/tool-src" "$FIRST_BAD_UP")
[ -n "$good" ] && [ -n "$bad" ] && [ -n "$first_bad" ] || { echo "the bundle lacks the window's endpoints" >&2; exit 3; }

# The tool: the command a user types (the resumed run is the same command: its journal).
A=(--repo "$S/tool-src" --good "$good" --bad "$bad" --probe-kind backend-ops --op "$OP"
   --backend cuda --gpu-target 90 --engine none --cmake-arg "${CMAKE_EXTRA[0]}" --work-dir "$S/w")
"$BIN" "${A[@]}" --dry-run >"$OUT/dry-run.txt" 2>&1
if [ "${TOOL_SIDE:-1}" != 0 ] && ! [ -s "$OUT/tool.json" ]; then
  ph "tool: setrows-bisect --good <b9174> --bad <b9333> --probe-kind backend-ops --op $OP --backend cuda --gpu-target 90 --cmake-arg ${CMAKE_EXTRA[*]}"
  t0=$(date +%s.%N)
  timeout -s INT $((stop_at - $(date +%s) - 20)) "$BIN" "${A[@]}" --json "$OUT/tool.json.part" --report "$OUT/tool.md" >>"$OUT/tool.log" 2>&1
  rc=$?
  echo "call wall_s $(python3 -c "print(round($(date +%s.%N) - $t0, 1))") rc $rc" >>"$OUT/tool-calls.txt"
  [ $rc -eq 0 ] && [ -s "$OUT/tool.json.part" ] && mv "$OUT/tool.json.part" "$OUT/tool.json"
  ph "tool exits rc=$rc"
fi

# git bisect run: the tool's build line (from its first probe's log, else the same spelling),
# the same test-backend-ops line; exit 0 good (a pass), 1 bad (a FAIL line or a crash), 125 skip.
G=$S/git-src need=${GIT_STEP_NEED:-240}
if [ "${GIT_SIDE:-1}" != 0 ]; then
  if [ ! -f "$G/.git/BISECT_START" ]; then
    rm -rf "$G" "$S/git-steps.txt"
    git clone -q -b window "$BUNDLE" "$G" && (cd "$G" && git bisect start "$bad" "$good" >/dev/null) || exit 3
  fi
  cat >"$S/git-step.sh" <<STEP
b='$S/git-build'; h=\$(git rev-parse --short=10 HEAD)
if [ \$((\$(date +%s) + $need)) -gt $((stop_at - 15)) ]; then echo "git-stop \$h: too little time left in this call" >>'$S/git-steps.txt'; exit 255; fi
t0=\$(date +%s.%N)
cmake -S . -B "\$b" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CCACHE=OFF -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 ${CMAKE_EXTRA[*]} \\
  -DLLAMA_BUILD_TESTS=ON -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_CURL=OFF >"\$b.configure.log" 2>&1 &&
  cmake --build "\$b" --target test-backend-ops >"\$b.build.log" 2>&1 || { echo "git-step \$h build-failed" >>'$S/git-steps.txt'; exit 125; }
t1=\$(date +%s.%N)
"\$b/bin/test-backend-ops" test -o $OP -b CUDA0 >"\$b.run.log" 2>&1; rc=\$?
fails=\$(grep -c 'FAIL\$' "\$b.run.log"); cases=\$(grep -c '^  $OP(' "\$b.run.log")
echo "git-step \$h upstream \$(git log -1 --format=%B | sed -n 's/^Upstream-commit: //p' | cut -c1-9) build_s \$(python3 -c "print(round(\$t1 - \$t0, 1))") run_s \$(python3 -c "print(round(\$(date +%s.%N) - \$t1, 1))") rc \$rc cases \$cases fail_lines \$fails" >>'$S/git-steps.txt'
[ "\$cases" -gt 0 ] || exit 125
case \$rc in 0) exit 0 ;; *) exit 1 ;; esac
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
fi

{
  echo "expected first bad (#23615): $first_bad; $(nproc) cores"
  grep -m3 -e 'cmake' -e 'build' "$OUT/dry-run.txt" | sed 's/^/tool plan: /'
  [ -s "$OUT/tool.json" ] && python3 - "$OUT/tool.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(f"tool: answer {r.get('first_bad')} probes {len(r['probes'])} ({r['executed']} run)")
for p in r["probes"]:
    print(f"  probe {p['sha'][:10]} {p['outcome']} {p['verdict']} {p.get('duration_s') or 0:.1f}s {p.get('signature') or ''}")
PY
  cat "$OUT/tool-calls.txt" 2>/dev/null | sed 's/^/tool /'
  ans=$(python3 -c "import json; print(json.load(open('$OUT/tool.json')).get('first_bad') or '')" 2>/dev/null)
  [ -z "$ans" ] || echo "tool answer upstream: $(git -C "$S/tool-src" log -1 --format=%B "$ans" | sed -n 's/^Upstream-commit: //p')"
  echo "git: $(grep -m1 -oE '[0-9a-f]{40} is the first bad commit' "$S/git-bisect.log" 2>/dev/null || echo 'no answer yet')"
  cat "$S/git-steps.txt" 2>/dev/null
  cat "$OUT/git-calls.txt" 2>/dev/null | sed 's/^/git /'
} >"$OUT/summary.txt" 2>&1
cat "$OUT/summary.txt"
