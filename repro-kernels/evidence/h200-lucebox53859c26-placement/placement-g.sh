#!/usr/bin/env bash
# The H200 evidence of issue 26, as one script so it can be repeated:
#   repro-kernels/gpu-placement.sh OUTDIR STAGE [STEPS_CELL]
# STAGE holds repro-kernels/ and bench/setrows-loop/ (this checkout's), ggml-<sha>.tar.gz (git
# archive of the tree) and old-replay/setrows-replay.cpp (the replay before issue 26, built in the
# same tree as a third target, so "before" and "after" are one build).
# 1. ggml built with graphs ON (the issue's build line), the definition grepped from the build;
# 2. the plain loop (bench/setrows-loop), the replay and the old replay side by side, 100,000
#    decode-reuse steps, two rounds, alternating, nothing else running;
# 3. memory device/unified/host x {decode-reuse, decode-ds4} with the placement proof printed,
#    the injected faults, compute-sanitizer memcheck on short runs; meanwhile graphs OFF is built;
# 4. the same cells on the graphs-OFF build.
# OUTDIR/summary.txt has the build line before every figure; OUTDIR/logs.tar.gz every log.
set -u
T0=$(date +%s)
out=$1; st=$(cd "$2" && pwd); cell_steps=${3:-20000}
export GGML_NO_BACKTRACE=1
S=$out/summary.txt; L=/tmp/gpu-placement-logs
mkdir -p "$out" $L /tmp/src /tmp/ggml
say() { echo "== $*" | tee -a "$S"; }
trap 'exit 143' TERM
trap 'tar -czf "$out/logs.tar.gz" -C $L . 2>/dev/null' EXIT
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee -a "$S"
nvcc --version | tail -1 | tee -a "$S"
tarball=$(ls "$st"/ggml-*.tar.gz | head -1)
tar -xzf "$tarball" -C /tmp/ggml
cp -r "$st/repro-kernels" "$st/bench" /tmp/src/
sha256sum /tmp/src/repro-kernels/setrows-replay/* /tmp/src/bench/setrows-loop/* | tee -a "$S"
build() {  # $1 = ON|OFF
  local g=$1 b=/tmp/b-$1 t0=$(date +%s)
  local line="cmake -S repro-kernels -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_SOURCE_DIR=ggml-$(basename "$tarball" .tar.gz | sed 's/ggml-//') -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_CUDA_FA=OFF -DGGML_CUDA_NCCL=OFF -DGGML_CUDA_GRAPHS=$g -DSETROWS_KERNEL=OFF -DCMAKE_EXPORT_COMPILE_COMMANDS=ON && ninja -C $b -j\$j setrows-replay setrows-loop"
  cmake -S /tmp/src/repro-kernels -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_SOURCE_DIR=/tmp/ggml -DGGML_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_CUDA_FA=OFF -DGGML_CUDA_NCCL=OFF -DGGML_CUDA_GRAPHS=$g -DSETROWS_KERNEL=OFF \
    -DCMAKE_EXPORT_COMPILE_COMMANDS=ON > $L/configure-$g.log 2>&1
  ninja -C $b -j${2:-16} setrows-replay setrows-loop > $L/build-$g.log 2>&1
  local rc=$?
  {
    echo "== BUILD graphs=$g rc=$rc in $(( $(date +%s) - t0 )) s: $line"
    grep -E "^GGML_CUDA_GRAPHS:|^GGML_CUDA_FA:" $b/CMakeCache.txt
    echo "compile commands defining GGML_CUDA_USE_GRAPHS: $(grep -c -- '-DGGML_CUDA_USE_GRAPHS' $b/compile_commands.json) of $(grep -c '"command"' $b/compile_commands.json)"
    grep "setrows: " $L/configure-$g.log
    [ $rc = 0 ] || { tail -25 $L/configure-$g.log; grep -m5 -B2 -A8 "error" $L/build-$g.log; }
  } >> "$S"
}

# one run: label, env, binary, args -> its log; one line of figures + the placement proof
run() {
  local label=$1 envs=$2 bin=$3; shift 3
  local t0=$(date +%s.%N)
  env $envs timeout 300 $bin "$@" > $L/$label.log 2>&1
  local rc=$? t1=$(date +%s.%N)
  python3 - "$label" "$rc" "$t0" "$t1" $L/$label.log >> "$S" <<'PY'
import json, sys
label, rc, t0, t1, path = sys.argv[1:6]
wall = float(t1) - float(t0)
text = open(path, errors="replace").read()
res = next((json.loads(l.split(" ", 1)[1]) for l in reversed(text.splitlines())
            if l.startswith(("SETROWS_RESULT ", "SETROWS_LOOP "))), None)
warm = text.count("CUDA graph warmup complete")
mism = next((l for l in text.splitlines() if "MISMATCH" in l), "")
if res is None:
    print(f"{label}: rc={rc} wall={wall}s NO RESULT LINE; tail: {text[-300:]!r}")
    sys.exit()
t = res.get("timings", res)
f = res.get("features", {})
mem = res.get("memory") or {}
proof = " ".join(f"{b['name']}={b['buft']}/{b['pointer']}" for b in mem.get("buffers", []))
print(f"{label}: rc={rc} status={res.get('status')} steps={res.get('steps_run', res.get('steps'))} "
      f"wall={float(wall):.2f}s loop_steps_per_s={t.get('loop_steps_per_s')} "
      f"first_failing={res.get('first_failing_step')} USE_GRAPHS={f.get('USE_GRAPHS', '-')} warmups={warm} "
      f"uploads={res.get('uploads_per_step')} {mism}")
if mem:
    print(f"  memory requested={mem.get('requested')} via {mem.get('pointer_api')}: {proof}")
PY
}

reuse="--mode reuse --steps 100000 --ring-rows 256 --check-every 1"
build ON 16
B=/tmp/b-ON
say "helper G: speed rounds (loop/replay/old replay) and the old replay SKIPPED for device time"
build OFF 16 &
off_pid=$!
cells() {  # $1 = ON|OFF
  local b=/tmp/b-$1
  say "cells graphs=$1, $cell_steps steps each (concurrent with the OFF build when ON)"
  for mem in device unified host; do
    local envs="" flag="--memory $mem"
    [ $mem = unified ] && envs="GGML_CUDA_ENABLE_UNIFIED_MEMORY=1"
    run cell-$1-$mem-decode-reuse "$envs" $b/setrows-replay --backend CUDA0 $flag --mode reuse --steps $cell_steps --ring-rows 256 --check-every 1
    run cell-$1-$mem-decode-ds4 "$envs" $b/setrows-replay --backend CUDA0 $flag --engine ds4 --mode reuse --steps $cell_steps --check-every 1
  done
  # the negative control of the proof: unified asked but the env not set (what the tool must refuse)
  run cell-$1-unified-without-env "" $b/setrows-replay --backend CUDA0 --memory unified --mode reuse --steps 2000 --ring-rows 256
}
cells ON
say "injected faults, graphs ON, step 12345 of 20000"
for eng in generic ds4; do
  for f in corrupt skip-write stale-read; do
    run inject-$eng-$f "" $B/setrows-replay --backend CUDA0 --engine $eng --mode reuse --steps 20000 --ring-rows 256 --inject $f --inject-step 12345
  done
done
run inject-host-generic-stale-read "" $B/setrows-replay --backend CUDA0 --memory host --mode reuse --steps 20000 --ring-rows 256 --inject stale-read --inject-step 12345
run inject-unified-ds4-skip-write "GGML_CUDA_ENABLE_UNIFIED_MEMORY=1" $B/setrows-replay --backend CUDA0 --engine ds4 --mode reuse --steps 20000 --inject skip-write --inject-step 12345
say "compute-sanitizer memcheck, graphs ON"
[ $(( $(date +%s) - T0 )) -lt 300 ] || { say "memcheck SKIPPED: $(( $(date +%s) - T0 )) s elapsed"; }
[ $(( $(date +%s) - T0 )) -lt 300 ] && for spec in "device --steps 2000 --ring-rows 256" "host --steps 1000 --ring-rows 256" "device --engine ds4 --steps 1000" "host --engine ds4 --steps 500"; do
  lab=memcheck-$(echo "$spec" | tr -d ' -' | cut -c1-40)
  timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 $B/setrows-replay --backend CUDA0 --mode reuse --memory $spec > $L/$lab.log 2>&1
  say "$lab rc=$? $(grep -m1 'ERROR SUMMARY' $L/$lab.log) $(grep -o '"status":"[a-z]*"' $L/$lab.log | head -1)"
  grep -m2 -E "Device not supported|Invalid" $L/$lab.log >> "$S"
done
wait $off_pid
cells OFF
say "done after $(( $(date +%s) - T0 )) s"
