# shellcheck shell=bash
# The common part of the real CUDA cases (bench/real/README.md): sourced by a case script
# (fwht_pdl_cuda.sh, kvpad_cuda.sh, gqa_fa_cuda.sh) after it sets, for its thread:
#
#   CASE            the bundle's name: $REAL/$CASE.bundle
#
# REAL (environment, default .work/real) is the folder carried to the H200: the bundle, the
# stripped binary, ccache. Point it at a folder holding only this case's files when .work/real
# has grown past the carry limit (64 MiB), e.g. REAL=.work/c3 with carry=[".work/c3"].
#   STATE           the resumable state dir, relative to the checkout (ignored, not carried)
#   GOOD_UP BAD_UP  the upstream ends of the bisect (the window's first commit and a bad one)
#   END_UP          the window's last upstream commit (BAD_UP or later, e.g. the fix)
#   FIRST_BAD_UP    the thread's first bad commit; FIRST_BAD_NAME its PR (#N)
#   GOOD_NAME BAD_NAME  how the phase log names the ends
#   SETTINGS        (array) the settings the thread names, as tool flags, each a flag and its
#                   value; git's step passes the decode-probe options among them, the tiny
#                   model's (--weight-type, --head-dim, --gqa, --n-head-kv, --sliding-window)
#                   being the model file the tool writes
#   GIT_BAD_RCS     (optional) the decode-probe exit statuses git's step calls bad, a `case`
#                   pattern (default 1, a mismatch; any other non-zero status is a skip, 125)
#
# TOOL_JOBS (environment, e.g. `auto`) passes `--jobs` to the tool; unset, its default (1).
# REPRO_ARGS (environment, default none) adds decode-probe options beyond the case's settings to
# both sides alike, words split on blanks, e.g. REPRO_ARGS="--cpu-nmse 1e-3": the tool gets each
# word as `--repro-arg=WORD` (as its endpoint advice words it), git's step the words as they are.
# Unset, both lines are the case's settings alone. A resumed git side keeps the step script it
# wrote first (GIT_FRESH=1 to change REPRO_ARGS mid-bisect).
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
#       user's command (its probes with ccache, from an empty cache; TOOL_SIDE=0 leaves it out),
#       then `git bisect run` with the same build line and decode-probe run (uncached:
#       -DGGML_CCACHE=OFF and CCACHE_DISABLE=1, a fresh clone and build dir; GIT_SIDE=0 leaves it
#       out), within SECONDS (default 560). Results under $OUT (or .work/real/out): summary.txt,
#       phases.txt and evidence.tar.gz (everything else; the device returns 8 files). State under
#       $STATE: a second call resumes the tool's bisect and git's (GIT_STEP_NEED, GIT_FRESH:
#       see the git part below).
# shellcheck disable=SC2154  # CASE, STATE, *_UP, *_NAME and SETTINGS come from the case script

cuda_case_main() {
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 2
# shellcheck source=bench/real/case_lib.sh
. bench/real/case_lib.sh
local root_dir=$PWD
local real=${REAL:-.work/real}
local bundle=$root_dir/$real/$CASE.bundle
local budget

case ${1:-} in
prepare)
  local mirror=${2:-/work/.mirror/wangqi+llama.cpp/repo}
  window_bundle "$mirror" "$GOOD_UP" "$END_UP" "$bundle" || exit 3
  if command -v ccache >/dev/null; then
    mkdir -p "$real/bin" "$real/lib"
    cp "$(command -v ccache)" "$real/bin/"
    for l in $(ldd "$(command -v ccache)" | awk '/hiredis|zstd/ {print $3}'); do cp -L "$l" "$real/lib/"; done
  fi
  exit 0 ;;
run) budget=${2:-560} ;;
*) echo "usage: $0 prepare [LLAMA_CPP_GIT_DIR] | run [SECONDS]" >&2; exit 2 ;;
esac

[ -f "$bundle" ] || { echo "no $bundle: run '$0 prepare' where the fork is fetched, and carry $real" >&2; exit 2; }
local BIN
BIN=$(carried_bin "$root_dir" "$real") || exit 2
OUT=${OUT:-$root_dir/$real/out}
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
if [ -x "$root_dir/$real/bin/ccache" ]; then
  export PATH=$root_dir/$real/bin:$PATH LD_LIBRARY_PATH=$root_dir/$real/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
{ date -u; nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader; nvcc --version | tail -2
  cmake --version | head -1; echo "ninja $(ninja --version)"; "$BIN" --version; nproc
  command -v ccache && ccache --version | head -1; } >"$OUT/setup.txt" 2>&1
ph clone
[ -d "$S/tool-src" ] || git clone -q -b window "$bundle" "$S/tool-src" || exit 3
local good bad first_bad
good=$(up "$S/tool-src" "$GOOD_UP") bad=$(up "$S/tool-src" "$BAD_UP") first_bad=$(up "$S/tool-src" "$FIRST_BAD_UP")
if [ -z "$good" ] || [ -z "$bad" ] || [ -z "$first_bad" ]; then echo "the bundle lacks the window's endpoints" >&2; exit 3; fi
# The decode probe's options: SETTINGS less the tiny model's settings (the model file is them).
local PROBE_SETTINGS=() i
for ((i = 0; i < ${#SETTINGS[@]}; i += 2)); do
  case ${SETTINGS[i]} in
  --weight-type|--head-dim|--gqa|--n-head-kv|--sliding-window) ;;
  *) PROBE_SETTINGS+=("${SETTINGS[i]}" "${SETTINGS[i + 1]}") ;;
  esac
done
# REPRO_ARGS (above): the same decode-probe options on both sides.
local REPRO=() TOOL_REPRO=() w
read -ra REPRO <<<"${REPRO_ARGS:-}"
for w in ${REPRO[@]+"${REPRO[@]}"}; do TOOL_REPRO+=("--repro-arg=$w"); done
PROBE_SETTINGS+=(${REPRO[@]+"${REPRO[@]}"})
local A0=(--repo "$S/tool-src" --probe-kind decode --backend cuda --gpu-target 90 --engine none
   --good "$good" --bad "$bad" "${SETTINGS[@]}" ${TOOL_REPRO[@]+"${TOOL_REPRO[@]}"}
   ${TOOL_JOBS:+--jobs "$TOOL_JOBS"})
local A=("${A0[@]}" --work-dir "$S/w")
"$BIN" "${A[@]}" --dry-run >"$OUT/dry-run.txt" 2>&1
local tool_wall='' t0
if [ "${TOOL_SIDE:-1}" = 0 ]; then
  ph "tool not run (TOOL_SIDE=0)"
else
  ph "tool starts: setrows-bisect --repo <bundle clone> --probe-kind decode --backend cuda --gpu-target 90 --good <$GOOD_NAME> --bad <$BAD_NAME> ${SETTINGS[*]}${TOOL_REPRO[*]:+ ${TOOL_REPRO[*]}}"
  t0=$(date +%s.%N)
  timeout -s INT $((stop_at - $(date +%s) - 30)) "$BIN" "${A[@]}" --json "$OUT/tool.json" --report "$OUT/tool.md" >"$OUT/tool.log" 2>&1
  ph "tool exits rc=$?"
  tool_wall=$(python3 -c "print(round($(date +%s.%N) - $t0, 1))")
fi

# git bisect run: the tool's build line (less its ccache launchers: -DGGML_CCACHE=OFF and
# CCACHE_DISABLE=1) and run line, on the decode probe's sources and the tiny model the tool
# writes, a fresh clone and a cold build dir. Resumable: the clone (with git's bisect state), the
# build dir and the step log stay under $S; a step starts only if GIT_STEP_NEED seconds (default
# 190: a cold CUDA build of the probe, ~160 s on the H200, and its run) are left before the
# call's end, else it exits 255 (git bisect run stops, the state stays) and the next call's `git
# bisect run` goes on from the commit git checked out. GIT_FRESH=1 starts over.
local G=$S/git-src I=$S/git-inputs need=${GIT_STEP_NEED:-190}
local left=$((stop_at - $(date +%s)))
local git_wall='' git_calls=''
if [ "${GIT_SIDE:-1}" = 0 ]; then
  ph "git bisect run not run (GIT_SIDE=0)"
else
  if [ "${GIT_FRESH:-0}" = 1 ] || [ ! -f "$G/.git/BISECT_START" ] || [ ! -f "$S/git-step.sh" ]; then
    ph "git side: fresh (clone, inputs, bisect start)"
    rm -rf "$G" "$I" "$S/git-build" "$S/git-logs" "$S/git-steps.txt" "$S/git-bisect.log" "$S/git-calls.txt" "$S/git-step.sh"
    mkdir -p "$I"
    # The inputs: the decode probe's sources folder (the one with its CMakeLists.txt, not a
    # build dir of the same prefix) and the tool's tiny model (not a vocabulary-only .gguf of
    # the tree), both named by content. From the tool's work dir when it ran; else the tool
    # writes them (one planned probe whose cmake is a stand-in that fails: no build, no store
    # entry under $S/w), in a work dir of their own.
    local dp m src
    dp=$(find "$S/w" -path '*/setrows-decode-*/decode-probe/CMakeLists.txt' 2>/dev/null | head -1)
    m=$(find "$S/w" -name 'tiny-llama-*.gguf' 2>/dev/null | head -1)
    src="the tool's work dir"
    if [ -z "$dp" ] || [ -z "$m" ]; then
      src="written by the tool for git's side (--probe with a stand-in cmake)"
      mkdir -p "$I/nocmake"
      printf '#!/bin/sh\necho "cmake stand-in (bench/real/cuda_case.sh): the inputs only, no build" >&2\nexit 1\n' >"$I/nocmake/cmake"
      chmod +x "$I/nocmake/cmake"
      local psha
      psha=$("$BIN" "${A0[@]}" --work-dir "$I/w" --plan-only 2>>"$OUT/git-inputs.log" |
        python3 -c 'import json, sys; print(json.load(sys.stdin)["probes"][0]["sha"])' 2>>"$OUT/git-inputs.log")
      [ -z "$psha" ] || PATH=$I/nocmake:$PATH "$BIN" "${A0[@]}" --work-dir "$I/w" --probe "$psha" >>"$OUT/git-inputs.log" 2>&1
      dp=$(find "$I/w" -path '*/setrows-decode-*/decode-probe/CMakeLists.txt' 2>/dev/null | head -1)
      m=$(find "$I/w" -name 'tiny-llama-*.gguf' 2>/dev/null | head -1)
    fi
    if [ -n "$dp" ] && [ -n "$m" ]; then
      dp=$(dirname "$(dirname "$dp")")   # setrows-decode-<hash>: decode-probe/ needs its siblings
      cp -r "$dp" "$I/" && cp "$m" "$I/"
      echo "inputs ($src): $(basename "$dp")/decode-probe, $(basename "$m") sha256 $(sha256sum "$m" | cut -c1-16)" | tee -a "$OUT/git-inputs.log"
      if ! { git clone -q -b window "$bundle" "$G" && (cd "$G" && git bisect start "$bad" "$good"); } >"$S/git-bisect.log" 2>&1; then
        echo "git side: clone or bisect start failed" | tee -a "$S/git-bisect.log"; rm -f "$G/.git/BISECT_START"
      elif [ -f "$root_dir/$real/git-resume/git-bisect-log.txt" ] || [ -f "$root_dir/$real/git-resume/evidence.tar.gz" ]; then
        # The machine was given back between calls (its state dir is gone): a previous call's
        # $OUT, carried back in $real/git-resume, replays git's verdicts so far; its step and
        # call records keep the figures whole. The build dir starts cold, as after a long jump.
        local R=$root_dir/$real/git-resume
        [ -f "$R/evidence.tar.gz" ] && tar -xzf "$R/evidence.tar.gz" -C "$R" 2>/dev/null
        (cd "$G" && git bisect replay "$R/git-bisect-log.txt") >>"$S/git-bisect.log" 2>&1 &&
          cp "$R/git-steps.txt" "$R/git-calls.txt" "$S/" 2>/dev/null
        mkdir -p "$S/git-logs" && tar -xzf "$R/git-logs.tar.gz" -C "$S" 2>/dev/null
        ph "git side: replayed $(nlines "$S/git-steps.txt" '^git-step ') steps from $real/git-resume (the machine was new)"
      fi
    else
      echo "git side: no probe sources or model ($src): see git-inputs.log" | tee -a "$OUT/git-inputs.log"
    fi
  else
    ph "git side: resumes ($(nlines "$S/git-steps.txt" '^git-step ') steps done, at $(git -C "$G" log -1 --format='%h %s' | cut -c1-60))"
  fi
  local DP M
  DP=$(find "$I" -maxdepth 3 -path "$I/setrows-decode-*/decode-probe/CMakeLists.txt" 2>/dev/null | head -1)
  DP=${DP%/CMakeLists.txt}
  M=$(find "$I" -maxdepth 1 -name 'tiny-llama-*.gguf' 2>/dev/null | head -1)
  if [ -n "$DP" ] && [ -n "$M" ] && [ -f "$G/.git/BISECT_START" ] && [ ! -f "$S/git-step.sh" ]; then
    cat >"$S/git-step.sh" <<STEP
#!/bin/sh
# git bisect run's step (bench/real/cuda_case.sh): 0 good, 1 bad, 125 skip; 255 stops the run
# (not enough time left in this call for a cold build), the next call resumes.
S='$S'; b=\$S/git-build
now=\$(date +%s)
h=\$(git rev-parse --short=8 HEAD)
if [ -n "\${GIT_STEP_DEADLINE:-}" ] && [ \$((now + \${GIT_STEP_NEED:-$need})) -gt "\$GIT_STEP_DEADLINE" ]; then
  echo "git-stop \$h \$(date -u +%T): \$((GIT_STEP_DEADLINE - now)) s left in this call < \${GIT_STEP_NEED:-$need} s a step may need; the next call resumes" >>"\$S/git-steps.txt"
  exit 255
fi
n=\$(grep -c '^git-step ' "\$S/git-steps.txt" 2>/dev/null); n=\$((\${n:-0} + 1))
up=\$(git log -1 --format=%B | sed -n 's/^Upstream-commit: //p' | cut -c1-9); up=\${up:-none}
mkdir -p "\$S/git-logs"; p=\$S/git-logs/\$n-\$h; start=\$(date -u +%T)
t0=\$(date +%s.%N)
cmake -S '$DP' -B "\$b" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_EXPORT_COMPILE_COMMANDS=ON "-DLLAMA_SOURCE_DIR=\$PWD" \\
  -DGGML_CCACHE=OFF -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 >"\$p.configure.log" 2>&1 &&
  cmake --build "\$b" --target decode-probe >"\$p.build.log" 2>&1; brc=\$?
t1=\$(date +%s.%N)
if [ \$brc -ne 0 ]; then
  rc=build-failed v=skip ec=125
else
  "\$b/decode-probe" --model '$M' ${PROBE_SETTINGS[*]} >"\$p.run.log" 2>&1; rc=\$?
  case \$rc in 0) v=good ec=0 ;; ${GIT_BAD_RCS:-1}) v=bad ec=1 ;; *) v=skip ec=125 ;; esac
fi
t2=\$(date +%s.%N)
sig=\$(grep -h -o -e 'SETROWS_MISMATCH.*' -e 'GGML_ASSERT.*' -e '"status":"[a-z_]*"' "\$p.run.log" 2>/dev/null | head -1 | cut -c1-120)
echo "git-step \$n \$h upstream \$up start \$start build_s \$(awk "BEGIN{printf \\"%.1f\\", \$t1 - \$t0}") run_s \$(awk "BEGIN{printf \\"%.1f\\", \$t2 - \$t1}") rc \$rc verdict \$v | \$(git log -1 --format=%s | cut -c1-60) | \$sig" >>"\$S/git-steps.txt"
exit \$ec
STEP
  fi
  left=$((stop_at - $(date +%s)))
  if [ ! -f "$S/git-step.sh" ] || [ ! -f "$G/.git/BISECT_START" ]; then
    ph "git bisect run skipped (no step script or bisect state: see git-inputs.log)"
  elif git -C "$G" bisect log 2>/dev/null | grep -q '^# first bad commit'; then
    ph "git bisect run already done (GIT_FRESH=1 starts over)"
  elif [ "$left" -le $((need + 20)) ]; then
    ph "git bisect run skipped (${left}s left, a step needs ${need}s)"
  else
    ph "git bisect run starts (${left}s left)"
    local k0 k1 call
    k0=$(nlines "$S/git-steps.txt" '^git-step ')
    call=$(($(nlines "$S/git-calls.txt" '^call ') + 1))
    echo "== call $call $(date -u +%FT%T) ==" >>"$S/git-bisect.log"
    t0=$(date +%s.%N)
    (export CCACHE_DISABLE=1 GIT_STEP_DEADLINE=$((stop_at - 15)) GIT_STEP_NEED=$need
     cd "$G" && timeout -s INT $((stop_at - $(date +%s) - 5)) git bisect run sh "$S/git-step.sh") >>"$S/git-bisect.log" 2>&1
    local grc=$?
    git_wall=$(python3 -c "print(round($(date +%s.%N) - $t0, 1))")
    k1=$(nlines "$S/git-steps.txt" '^git-step ')
    echo "call $call wall_s $git_wall steps $((k1 - k0)) rc $grc" >>"$S/git-calls.txt"
    ph "git bisect run exits rc=$grc (${git_wall}s, $((k1 - k0)) steps)"
  fi
  git_calls=$(awk '/^call /{w += $4; n++} END {if (n) printf "%.1f s over %d call(s)", w, n}' "$S/git-calls.txt" 2>/dev/null)
fi
{
  echo "expected first bad ($FIRST_BAD_NAME): $first_bad"
  echo "tool --jobs ${TOOL_JOBS:-default}; build-use (CPU and wall s of the builds measured, what --jobs auto reads): $(cat "$S/w/build-use" 2>/dev/null || echo none)"
  python3 - "$OUT/tool.json" "$tool_wall" <<'PY'
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except Exception as e:
    print("tool: not run (TOOL_SIDE=0)" if sys.argv[2] == "" else f"tool: no result {e}"); sys.exit()
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
  if [ "${GIT_SIDE:-1}" != 0 ]; then
    local gans gtxt='no answer yet'
    gans=$(grep -oE '^[0-9a-f]{40} is the first bad commit' "$S/git-bisect.log" 2>/dev/null | tail -1 | cut -c1-40)
    [ -z "$gans" ] || gtxt="first bad $gans = upstream $(git -C "$G" log -1 --format=%B "$gans" | sed -n 's/^Upstream-commit: //p') ($FIRST_BAD_NAME is $FIRST_BAD_UP)"
    echo "git: $gtxt; steps $(nlines "$S/git-steps.txt" '^git-step '), wall ${git_calls:-not run} (this call ${git_wall:-not run} s)"
    awk '/^git-step /{b += $9; r += $11} END {if (NR) printf "git: build_s %.1f run_s %.1f over the steps\n", b, r}' "$S/git-steps.txt" 2>/dev/null
    cat "$S/git-steps.txt" 2>/dev/null
  fi
} | tee "$OUT/summary.txt"
tar -czf "$OUT/tool-logs.tar.gz" -C "$S/w" logs journal 2>/dev/null || true
if [ -d "$S/git-logs" ]; then
  cp "$S/git-steps.txt" "$S/git-bisect.log" "$S/git-calls.txt" "$S/git-step.sh" "$OUT/" 2>/dev/null
  git -C "$G" bisect log >"$OUT/git-bisect-log.txt" 2>&1
  tar -czf "$OUT/git-logs.tar.gz" -C "$S" git-logs 2>/dev/null || true
fi
# The device returns at most 8 files from $OUT: all but the summary and phases go into one
# tarball (evidence.tar.gz), so a run's tool.json and tool.log come back too.
(cd "$OUT" && find . -maxdepth 1 -type f ! -name summary.txt ! -name phases.txt ! -name evidence.tar.gz -printf '%P\n' |
  tar -czf evidence.tar.gz -T - --remove-files) 2>/dev/null || true
# $S is kept: a later call resumes; remove $STATE for a cold run.
}

nlines() { local n; n=$(grep -c "$2" "$1" 2>/dev/null); echo "${n:-0}"; }
