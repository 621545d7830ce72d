#!/usr/bin/env bash
# Real case 3 (bench/real/README.md): CUDA's fast Walsh-Hadamard transform (llama.cpp #23615) ran
# without its Programmatic Dependent Launch sync until #23690: with a quantized KV cache (which
# llama.cpp rotates with that transform) and flash attention, garbage on Hopper and newer.
# The window is the range the #23693 reporter gave, b9174 (59778f019, good) .. b9333 (35c9b1f39,
# the last commit before the fix, bad), 160 first-parent commits; #23615's bisect names c1f1e28d2.
#
#   bench/real/fwht_pdl_cuda.sh prepare [LLAMA_CPP_GIT_DIR]
#       here (needs the fetched fork, default the `fetch github:wangqi/llama.cpp` snapshot, whose
#       master carries upstream's commits): writes .work/real/fwht.bundle (17 MB, bench/real/window.sh)
#       and copies this machine's ccache into .work/real/bin (the H200 has none). Then put the
#       binary there too: cargo build --release && strip -o .work/real/setrows-bisect target/release/setrows-bisect
#   bench/real/fwht_pdl_cuda.sh run [SECONDS]
#       on the H200, in the device's copy of the checkout, no network: carry `.work/real`. The
#       user's command (its probes with ccache, from an empty cache), then `git bisect run` with
#       the same build line and decode-probe run (uncached: CCACHE_DISABLE=1, a fresh clone and
#       build dir; GIT_SIDE=0 leaves it out), within SECONDS (default 560). Results under $OUT
#       (or .work/real/out). State under .work/real-state: a second call resumes the tool's bisect.
#
# Example device call: run(command="GIT_SIDE=0 bash bench/real/fwht_pdl_cuda.sh run 560",
#   carry=[".work/real"], kind="nvidia-h200").
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
root_dir=$PWD
bundle=$root_dir/.work/real/fwht.bundle
GOOD_UP=59778f0196a82db32580bb649d5d839355d6d7bf   # b9174
BAD_UP=35c9b1f39                                   # b9333, the #23693 report
FIRST_BAD_UP=c1f1e28d2                             # #23615, per its thread's bisect
FIX_UP=192d8ae8b8826642f15836570b944ecd68cf175c    # #23690
# The settings the #23615 thread names: quantized K and V cache, flash attention on.
SETTINGS=(--cache-type-k q8_0 --cache-type-v q8_0 --flash-attn on)

case ${1:-} in
prepare)
  mirror=${2:-/work/.mirror/wangqi+llama.cpp/repo}
  out=$(mktemp -d /tmp/fwht-window-XXXX)
  bash bench/real/window.sh "$mirror" "$GOOD_UP" "$FIX_UP" "$out"
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
BIN=$root_dir/.work/real/setrows-bisect
[ -x "$BIN" ] || BIN=$root_dir/target/release/setrows-bisect
[ -x "$BIN" ] || { echo "no binary: strip -o .work/real/setrows-bisect target/release/setrows-bisect here and carry .work/real" >&2; exit 2; }
OUT=${OUT:-$root_dir/.work/real/out}
mkdir -p "$OUT"
# The state lives under an ignored path that is not carried (.work/real is, and is replaced on
# every call): a second call on the same warm machine resumes the tool's bisect from its store.
S=$root_dir/.work/real-state
mkdir -p "$S"
export CCACHE_DIR=$S/ccache
T0=$(date +%s); stop_at=$((T0 + budget))
ph() { echo "$(date -u +%T) +$(($(date +%s) - T0))s $*" | tee -a "$OUT/phases.txt"; }
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
up() { git -C "$1" log --format=%H -1 --grep="^Upstream-commit: $2" window; }
ph clone
[ -d "$S/tool-src" ] || git clone -q -b window "$bundle" "$S/tool-src" || exit 3
good=$(up "$S/tool-src" "$GOOD_UP") bad=$(up "$S/tool-src" "$BAD_UP") first_bad=$(up "$S/tool-src" "$FIRST_BAD_UP")
if [ -z "$good" ] || [ -z "$bad" ] || [ -z "$first_bad" ]; then echo "the bundle lacks the window's endpoints" >&2; exit 3; fi
A=(--repo "$S/tool-src" --probe-kind decode --backend cuda --gpu-target 90 --engine none
   --good "$good" --bad "$bad" "${SETTINGS[@]}" --work-dir "$S/w")
"$BIN" "${A[@]}" --dry-run >"$OUT/dry-run.txt" 2>&1
ph "tool starts: setrows-bisect --repo <bundle clone> --probe-kind decode --backend cuda --gpu-target 90 --good <b9174> --bad <b9333> ${SETTINGS[*]}"
t0=$(date +%s.%N)
timeout -s INT $((stop_at - $(date +%s) - 30)) "$BIN" "${A[@]}" --json "$OUT/tool.json" --report "$OUT/tool.md" >"$OUT/tool.log" 2>&1
ph "tool exits rc=$?"
tool_wall=$(python3 -c "print(round($(date +%s.%N) - $t0, 1))")

# git bisect run: the tool's build line and run line (read from its dry run: the decode probe's
# sources and the model file it materialised in its work dir), a fresh clone, a cold build dir.
DP=$(find "$S/w" -type d -name 'setrows-decode-*' | head -1)
M=$(find "$S/w" -name '*.gguf' | head -1)
cat >"$S/git-step.sh" <<STEP
#!/bin/sh
t0=\$(date +%s.%N); b=$S/git-build
cmake -S '$DP' -B \$b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_EXPORT_COMPILE_COMMANDS=ON "-DLLAMA_SOURCE_DIR=\$PWD" \\
  -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 >\$b.configure.log 2>&1 || exit 125
cmake --build \$b --target decode-probe >\$b.build.log 2>&1 || exit 125
t1=\$(date +%s.%N)
\$b/decode-probe --model '$M' ${SETTINGS[*]} >\$b.run.log 2>&1; rc=\$?
echo "git-step \$(git log -1 --format=%s | cut -c1-50) build_s \$(python3 -c "print(round(\$t1 - \$t0, 1))") run_s \$(python3 -c "print(round(\$(date +%s.%N) - \$t1, 1))") rc \$rc \$(grep -h -o 'SETROWS_MISMATCH.*' \$b.run.log | head -1 | cut -c1-160)" >>'$OUT/git-steps.txt'
case \$rc in 0) exit 0 ;; 1) exit 1 ;; *) exit 125 ;; esac
STEP
left=$((stop_at - $(date +%s)))
git_wall=
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
  echo "expected first bad (#23615): $first_bad"
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
  ans=$(python3 -c "import json; print(json.load(open('$OUT/tool.json')).get('first_bad') or '')" 2>/dev/null)
  [ -z "$ans" ] || echo "tool answer upstream: $(git -C "$S/tool-src" log -1 --format=%B "$ans" | sed -n 's/^Upstream-commit: //p') (#23615 is $FIRST_BAD_UP)"
  echo "git: $(grep -oE '^[0-9a-f]{40} is the first bad commit' "$OUT/git-bisect.log" 2>/dev/null || echo 'no answer') steps $(grep -c . "$OUT/git-steps.txt" 2>/dev/null || echo 0) wall ${git_wall:-not run} s"
} | tee "$OUT/summary.txt"
tar -czf "$OUT/tool-logs.tar.gz" -C "$S/w" logs journal 2>/dev/null || true
cp "$S"/git-build.*.log "$OUT/" 2>/dev/null || true
# $S is kept: a later call resumes; remove .work/real-state for a cold run.
