# shellcheck shell=bash
# What every bench/real/*.sh case script does the same way, sourced by them: the tool's side (the
# user's command, timed, its result summarised) and, for the decode probe, the inputs git's side
# needs (the decode-probe sources and model the tool's probes used). Each script
# keeps what is its own: the window, the thread's settings, git's step.
# Expects BIN (the setrows-bisect binary) and defines `now`.

now() { date +%s.%N; }

# ph TEXT: one line of the run's phases (clock time, seconds since T0) on stdout and in
# $OUT/phases.txt.
ph() { echo "$(date -u +%T) +$(($(date +%s) - T0))s $*" | tee -a "$OUT/phases.txt"; }

# up REPO UPSTREAM: the window's commit whose Upstream-commit trailer starts with UPSTREAM
# (bench/real/window.sh recommits each upstream commit with that trailer).
up() { git -C "$1" log --format=%H -1 --grep="^Upstream-commit: $2" window; }

# run_tool STATE_DIR ARGS...: setrows-bisect ARGS with its work dir, JSON and report under
# STATE_DIR (a resumed run appends to tool.out), then the answer and every probe, one line each.
# TOOL_JOBS (environment, e.g. `auto` or 2) passes `--jobs`; unset, the tool's default. The
# builds the work dir measured (`<work>/build-use`: CPU and wall seconds, what `--jobs auto`
# chooses from) are printed after the probes.
run_tool() {
  local S=$1 t0 rc
  shift
  mkdir -p "$S"
  t0=$(now)
  "$BIN" "$@" ${TOOL_JOBS:+--jobs "$TOOL_JOBS"} --work-dir "$S/work" --json "$S/tool.json" --report "$S/tool.md" >>"$S/tool.out" 2>&1
  rc=$?
  echo "tool exit $rc, wall $(python3 -c "print(round($(now) - $t0, 1))") s ($(nproc) cores)${TOOL_JOBS:+, --jobs $TOOL_JOBS}"
  echo "build-use: $(cat "$S/work/build-use" 2>/dev/null || echo none)"
  python3 - "$S/tool.json" <<'PY'
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except Exception as e:
    print("no result json:", e); sys.exit()
print("answer:", r.get("first_bad"), "| term:", r.get("term"), "| executed:", r.get("executed"))
for p in r.get("probes", []):
    print(f"  probe {p['sha'][:10]} {p['outcome']} {p['verdict']} {p.get('duration_s') or 0:.1f}s {p.get('signature') or ''}")
PY
  tail -5 "$S/tool.out"
  return $rc
}

# decode_inputs TOOL_STATE_DIR MODEL_GLOB: sets DP (the decode-probe sources the tool built) and M
# (its model) from the tool side's work dir, so git's steps build and run exactly what the tool's
# probes did (a dry run writes neither: run the tool side first, on the same machine).
decode_inputs() {
  local T=$1 glob=$2
  # the newest, where a later tool run built other sources beside older ones
  DP=$(find "$T/work" -type d -name 'setrows-decode-*' -printf '%T@ %p\n' 2>/dev/null | sort -rn | head -1 | cut -d' ' -f2-)
  M=$(find "$T/work" -name "$glob" -printf '%T@ %p\n' 2>/dev/null | sort -rn | head -1 | cut -d' ' -f2-)
  if [ -z "$DP" ] || [ -z "$M" ]; then
    echo "no decode-probe sources or model in $T/work (run the tool side first)" >&2
    return 3
  fi
}

# git_bisect_run STATE_DIR GOOD BAD T0: `git bisect run` of STATE_DIR/git-step.sh in the clone
# STATE_DIR/src (each step appends a line to STATE_DIR/steps.txt), then its answer, steps and wall
# since T0 (the caller's start: a recording before the bisect counts on git's side too).
git_bisect_run() {
  local S=$1 good=$2 bad=$3 t0=$4
  (cd "$S/src" && git bisect start "$bad" "$good" >/dev/null && git bisect run sh "$S/git-step.sh") >"$S/git.out" 2>&1
  echo "git bisect run: $(grep -oE '^[0-9a-f]{40} is the first bad commit' "$S/git.out" || echo 'no answer'), $(grep -c . "$S/steps.txt" 2>/dev/null || echo 0) steps, wall $(python3 -c "print(round($(now) - $t0, 1))") s ($(nproc) cores)"
  cat "$S/steps.txt" 2>/dev/null
}

# decode_git_step STATE_DIR EXTRA_CMAKE RUN_ENV RUN_ARGS: writes STATE_DIR/git-step.sh, git bisect
# run's step for the decode probe: the tool's build line (ccache as the launcher where the machine
# has it, as the tool's build script; DP, M from decode_inputs) plus EXTRA_CMAKE, then decode-probe
# with RUN_ENV before it and RUN_ARGS after the model (both copied into the script as written, so
# `${STEP_ARGS-...}` is read when the step runs). Exit 0 pass = good, 1 (a mismatch, or a
# sanitizer's report) = bad, anything else (a build that fails, untestable) = skip. Each step
# appends its subject, build and run seconds, exit code and any sanitizer kind to steps.txt.
decode_git_step() {
  local S=$1 extra=$2 env=$3 args=$4
  cat >"$S/git-step.sh" <<STEP
#!/bin/sh
t0=\$(date +%s.%N); b=$S/build
launcher=''; command -v ccache >/dev/null 2>&1 && launcher='-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache'
cmake -S '$DP/decode-probe' -B \$b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_EXPORT_COMPILE_COMMANDS=ON "-DLLAMA_SOURCE_DIR=\$PWD" \\
  \$launcher -DGGML_CCACHE=OFF $extra >\$b.configure.log 2>&1 || exit 125
cmake --build \$b --target decode-probe >\$b.build.log 2>&1 || exit 125
t1=\$(date +%s.%N)
$env \$b/decode-probe --model '$M' $args >\$b.run.log 2>&1; rc=\$?
echo "\$(git log -1 --format=%s | cut -c1-50) build_s \$(python3 -c "print(round(\$t1 - \$t0, 1))") run_s \$(python3 -c "print(round(\$(date +%s.%N) - \$t1, 1))") rc \$rc \$(grep -m1 -o 'AddressSanitizer: [a-z-]*' \$b.run.log)" >>'$S/steps.txt'
case \$rc in 0) exit 0 ;; 1) exit 1 ;; *) exit 125 ;; esac
STEP
}

# window_bundle MIRROR GOOD END BUNDLE: the window GOOD..END of a fetched mirror as one git bundle
# at BUNDLE (bench/real/window.sh; what a device run carries, the machine having no network).
window_bundle() {
  local out
  out=$(mktemp -d /tmp/window-XXXX)
  bash bench/real/window.sh "$1" "$2" "$3" "$out" >"$out.txt" || { cat "$out.txt" >&2; return 3; }
  mkdir -p "$(dirname "$4")" && cp "$out/window.bundle" "$4" && rm -rf "$out" "$out.txt"
  ls -la "$4"
}

# carried_bin ROOT REAL: the binary a device run carries in REAL (stripped: the unstripped one is
# over the carry limit), else this checkout's release build.
carried_bin() {
  local b=$1/$2/setrows-bisect
  [ -x "$b" ] || b=$1/target/release/setrows-bisect
  [ -x "$b" ] || { echo "no binary: strip -o $2/setrows-bisect target/release/setrows-bisect here and carry $2" >&2; return 2; }
  echo "$b"
}
