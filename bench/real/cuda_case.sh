# shellcheck shell=bash
# The common part of the real CUDA cases (bench/real/README.md): sourced by a case script
# (fwht_pdl_cuda.sh, kvpad_cuda.sh) after it sets, for its thread:
#
#   CASE            the bundle's name: .work/real/$CASE.bundle
#   STATE           the resumable state dir, relative to the checkout (ignored, not carried)
#   GOOD_UP BAD_UP  the upstream ends of the bisect (the window's first commit and a bad one)
#   END_UP          the window's last upstream commit (BAD_UP or later, e.g. the fix)
#   FIRST_BAD_UP    the thread's first bad commit; FIRST_BAD_NAME its PR (#N)
#   GOOD_NAME BAD_NAME  how the phase log names the ends
#   SETTINGS        (array) the settings the thread names, as decode-probe/tool flags
#   GIT_BAD_RCS     (optional) the decode-probe exit statuses git's step calls bad, a `case`
#                   pattern (default 1, a mismatch; any other non-zero status is a skip, 125)
#
# then calls `cuda_case_main "$@"`:
#
#   prepare [LLAMA_CPP_GIT_DIR]
#       here (needs the fetched fork, default the `fetch github:wangqi/llama.cpp` snapshot, whose
#       master carries upstream's commits): writes .work/real/$CASE.bundle (bench/real/window.sh)
#       and copies this machine's ccache into .work/real/bin (the H200 has none). Then put the
#       binary there too: cargo build --release && strip -o .work/real/setrows-bisect target/release/setrows-bisect
#   run [SECONDS]
#       on the H200, in the device's copy of the checkout, no network: carry `.work/real`. The
#       user's command (its probes with ccache, from an empty cache), then `git bisect run` with
#       the same build line and decode-probe run (uncached: CCACHE_DISABLE=1, a fresh clone and
#       build dir; GIT_SIDE=0 leaves it out), within SECONDS (default 560). Results under $OUT
#       (or .work/real/out). State under $STATE: a second call resumes the tool's bisect.
# shellcheck disable=SC2154  # CASE, STATE, *_UP, *_NAME and SETTINGS come from the case script

cuda_case_main() {
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 2
local root_dir=$PWD
local bundle=$root_dir/.work/real/$CASE.bundle
local budget

case ${1:-} in
prepare)
  local mirror=${2:-/work/.mirror/wangqi+llama.cpp/repo}
  local out
  out=$(mktemp -d "/tmp/$CASE-window-XXXX")
  bash bench/real/window.sh "$mirror" "$GOOD_UP" "$END_UP" "$out"
  mkdir -p "$(dirname "$bundle")"
  cp "$out/window.bundle" "$bundle"
  if command -v ccache >/dev/null; then
    mkdir -p .work/real/bin .work/real/lib
    cp "$(command -v ccache)" .work/real/bin/
    for l in $(ldd "$(command -v ccache)" | awk '/hiredis|zstd/ {print $3}'); do cp -L "$l" .work/real/lib/; done
  fi
  rm -rf "$out"
  ls -la "$bundle"
  exit 0 ;;
run) budget=${2:-560} ;;
*) echo "usage: $0 prepare [LLAMA_CPP_GIT_DIR] | run [SECONDS]" >&2; exit 2 ;;
esac

[ -f "$bundle" ] || { echo "no $bundle: run '$0 prepare' where the fork is fetched, and carry .work/real" >&2; exit 2; }
# The binary travels inside .work/real (stripped: the unstripped one is over the carry limit).
local BIN=$root_dir/.work/real/setrows-bisect
[ -x "$BIN" ] || BIN=$root_dir/target/release/setrows-bisect
[ -x "$BIN" ] || { echo "no binary: strip -o .work/real/setrows-bisect target/release/setrows-bisect here and carry .work/real" >&2; exit 2; }
OUT=${OUT:-$root_dir/.work/real/out}
mkdir -p "$OUT"
# The state lives under an ignored path that is not carried (.work/real is, and is replaced on
# every call): a second call on the same warm machine resumes the tool's bisect from its store.
local S=$root_dir/$STATE
mkdir -p "$S"
export CCACHE_DIR=$S/ccache
T0=$(date +%s)
local stop_at=$((T0 + budget))
export GGML_NO_BACKTRACE=1 CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}
# The H200 has no ccache. Item 4 of issue 34 measures the tool's probes with ccache in their
# environment: `prepare` copies this machine's ccache (and the two libraries it needs) into
# .work/real; its cache starts empty under the state dir, so the first probe is a cold build.
# git bisect run's side stays uncached (CCACHE_DISABLE=1, ggml's own GGML_CCACHE finds it too).
if [ -x "$root_dir/.work/real/bin/ccache" ]; then
  export PATH=$root_dir/.work/real/bin:$PATH LD_LIBRARY_PATH=$root_dir/.work/real/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
{ date -u; nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader; nvcc --version | tail -2
  cmake --version | head -1; echo "ninja $(ninja --version)"; "$BIN" --version; nproc
  command -v ccache && ccache --version | head -1; } >"$OUT/setup.txt" 2>&1
ph clone
[ -d "$S/tool-src" ] || git clone -q -b window "$bundle" "$S/tool-src" || exit 3
local good bad first_bad
good=$(up "$S/tool-src" "$GOOD_UP") bad=$(up "$S/tool-src" "$BAD_UP") first_bad=$(up "$S/tool-src" "$FIRST_BAD_UP")
if [ -z "$good" ] || [ -z "$bad" ] || [ -z "$first_bad" ]; then echo "the bundle lacks the window's endpoints" >&2; exit 3; fi
local A=(--repo "$S/tool-src" --probe-kind decode --backend cuda --gpu-target 90 --engine none
   --good "$good" --bad "$bad" "${SETTINGS[@]}" --work-dir "$S/w")
"$BIN" "${A[@]}" --dry-run >"$OUT/dry-run.txt" 2>&1
ph "tool starts: setrows-bisect --repo <bundle clone> --probe-kind decode --backend cuda --gpu-target 90 --good <$GOOD_NAME> --bad <$BAD_NAME> ${SETTINGS[*]}"
local t0
t0=$(date +%s.%N)
timeout -s INT $((stop_at - $(date +%s) - 30)) "$BIN" "${A[@]}" --json "$OUT/tool.json" --report "$OUT/tool.md" >"$OUT/tool.log" 2>&1
ph "tool exits rc=$?"
local tool_wall
tool_wall=$(python3 -c "print(round($(date +%s.%N) - $t0, 1))")

# git bisect run: the tool's build line and run line (read from its dry run: the decode probe's
# sources and the model file it materialised in its work dir), a fresh clone, a cold build dir.
local DP M
# The sources' folder (the one with the probe's CMakeLists.txt, not a build dir of the same
# prefix) and the tool's tiny model (not a vocabulary-only .gguf of the checked-out tree).
DP=$(find "$S/w" -path '*/setrows-decode-*/decode-probe/CMakeLists.txt' | head -1)
DP=${DP%/CMakeLists.txt}
M=$(find "$S/w" -name 'tiny-llama-*.gguf' | head -1)
cat >"$S/git-step.sh" <<STEP
#!/bin/sh
t0=\$(date +%s.%N); b=$S/git-build
cmake -S '$DP' -B \$b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_EXPORT_COMPILE_COMMANDS=ON "-DLLAMA_SOURCE_DIR=\$PWD" \\
  -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 >\$b.configure.log 2>&1 || exit 125
cmake --build \$b --target decode-probe >\$b.build.log 2>&1 || exit 125
t1=\$(date +%s.%N)
\$b/decode-probe --model '$M' ${SETTINGS[*]} >\$b.run.log 2>&1; rc=\$?
echo "git-step \$(git log -1 --format=%s | cut -c1-50) build_s \$(python3 -c "print(round(\$t1 - \$t0, 1))") run_s \$(python3 -c "print(round(\$(date +%s.%N) - \$t1, 1))") rc \$rc \$(grep -h -o -e 'SETROWS_MISMATCH.*' -e 'GGML_ASSERT.*' \$b.run.log | head -1 | cut -c1-160)" >>'$OUT/git-steps.txt'
case \$rc in 0) exit 0 ;; ${GIT_BAD_RCS:-1}) exit 1 ;; *) exit 125 ;; esac
STEP
local left=$((stop_at - $(date +%s)))
local git_wall=
if [ "${GIT_SIDE:-1}" = 0 ]; then
  ph "git bisect run not run (GIT_SIDE=0)"
elif [ -n "$DP" ] && [ -n "$M" ] && [ $left -gt 120 ]; then
  ph "git bisect run starts (${left}s left)"
  rm -rf "$S/git-src" "$S/git-build"*; git clone -q -b window "$bundle" "$S/git-src"
  t0=$(date +%s.%N)
  (export CCACHE_DISABLE=1; cd "$S/git-src" && git bisect start "$bad" "$good" >/dev/null && timeout -s INT $((left - 20)) git bisect run sh "$S/git-step.sh") >"$OUT/git-bisect.log" 2>&1
  ph "git bisect run exits rc=$?"
  git_wall=$(python3 -c "print(round($(date +%s.%N) - $t0, 1))")
else
  ph "git bisect run skipped (${left}s left; decode sources '$DP', model '$M')"
fi
{
  echo "expected first bad ($FIRST_BAD_NAME): $first_bad"
  python3 - "$OUT/tool.json" "$tool_wall" <<'PY'
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except Exception as e:
    print("tool: no result", e); sys.exit()
hits = sum(p['ccache'].get('hits', 0) for p in r['probes'] if p.get('ccache'))
miss = sum(p['ccache'].get('misses', 0) for p in r['probes'] if p.get('ccache'))
print(f"tool: ccache hits {hits} misses {miss} over the probes built now")
print(f"tool: answer {r.get('first_bad')} probes {len(r['probes'])} ({r['executed']} run) wall {sys.argv[2]} s")
for p in r['probes']:
    print(f"  probe {p['sha'][:8]} {p['outcome']} {p['verdict']} {p.get('duration_s') or 0:.1f}s ccache {p.get('ccache')} {p.get('signature') or ''}")
PY
  local ans
  ans=$(python3 -c "import json; print(json.load(open('$OUT/tool.json')).get('first_bad') or '')" 2>/dev/null)
  [ -z "$ans" ] || echo "tool answer upstream: $(git -C "$S/tool-src" log -1 --format=%B "$ans" | sed -n 's/^Upstream-commit: //p') ($FIRST_BAD_NAME is $FIRST_BAD_UP)"
  echo "git: $(grep -oE '^[0-9a-f]{40} is the first bad commit' "$OUT/git-bisect.log" 2>/dev/null || echo 'no answer') steps $(grep -c . "$OUT/git-steps.txt" 2>/dev/null || echo 0) wall ${git_wall:-not run} s"
} | tee "$OUT/summary.txt"
tar -czf "$OUT/tool-logs.tar.gz" -C "$S/w" logs journal 2>/dev/null || true
cp "$S"/git-build.*.log "$OUT/" 2>/dev/null || true
# $S is kept: a later call resumes; remove $STATE for a cold run.
}

ph() { echo "$(date -u +%T) +$(($(date +%s) - T0))s $*" | tee -a "$OUT/phases.txt"; }
up() { git -C "$1" log --format=%H -1 --grep="^Upstream-commit: $2" window; }
