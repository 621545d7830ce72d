#!/usr/bin/env bash
# The CUDA evidence run recorded in repro-kernels/README.md, as one script so it can be repeated.
#   repro-kernels/gpu-evidence.sh OUTDIR PART GGML_SRC [STEPS]
# PART: "kernel" (setrows-kernel under compute-sanitizer), "facts" (setrows-kernel's wave_size/arch
# keys), "graphs" (or "graphs-on" / "graphs-off" for one build: ggml built twice, -DGGML_CUDA_GRAPHS=ON and OFF, the definition grepped from the
# build, then the replay runs on each), "graphs+facts", "graphs+types", "checkcost" (graphs-on build;
# the bare loop, --check-every 0, and --check-every 1 side by side, twice each, at ring 64 and 256, in
# both modes; the three injected faults at --check-every 1; compute-sanitizer memcheck on the replay),
# or "all".
# Every log goes into OUTDIR; OUTDIR/summary.txt has the build line before every figure.
set -u
out=$1; part=$2; src=${3:-}; steps=${4:-100000}
here=$(cd "$(dirname "$0")" && pwd)
export GGML_NO_BACKTRACE=1
mkdir -p "$out"
say() { echo "== $*" | tee -a "$out/summary.txt"; }

kernel_part() {
  local kd=/tmp/setrows-kernel
  mkdir -p $kd
  for w in 32 64; do
    nvcc -O2 -std=c++17 -arch=sm_90 -DDFLASH_WAVE_SIZE=$w -I "$here/setrows-kernel" \
      "$here/setrows-kernel/setrows-kernel.cu" -o $kd/k$w 2>&1 | tee -a "$out/kernel.log"
  done
  # width 128 + guard 16 = pitch 144 elements; 15,000,000 rows put the end past 2^31 elements
  # (2.16e9; f32: 8.64 GB, past 2^31 bytes too); rows from 14,990,000 sit at offsets past 2^31.
  local big="--width 128 --guard 16 --rows 15000000 --start-row 14990000 --rows-per-launch 4 --stride 97 --launches 12"
  for w in 32 64; do
    for bs in 64 128 256 512 1024; do
      for grid in exact oversubscribe; do
        say "kernel w$w bs$bs grid=$grid f32 big"
        compute-sanitizer --tool memcheck --error-exitcode 9 $kd/k$w --block-size $bs --grid $grid $big 2>&1 \
          | tee -a "$out/kernel.log" | grep -E "SETROWS_RESULT|ERROR SUMMARY|Invalid|rror" | tee -a "$out/summary.txt"
        say "rc=${PIPESTATUS[0]}"
      done
    done
    say "kernel w$w bs256 f16 i32 big (elements > 2^31, bytes > 2^32)"
    compute-sanitizer --tool memcheck --error-exitcode 9 $kd/k$w --block-size 256 --dst-type f16 --index-type i32 $big 2>&1 \
      | tee -a "$out/kernel.log" | grep -E "SETROWS_RESULT|ERROR SUMMARY" | tee -a "$out/summary.txt"
    say "rc=${PIPESTATUS[0]}"
    say "kernel w$w bs1024 grid=wave many rows per launch (fastdiv over 2^20 threads)"
    compute-sanitizer --tool memcheck --error-exitcode 9 $kd/k$w --block-size 1024 --grid wave --width 256 --guard 8 \
      --rows 65536 --rows-per-launch 4096 --stride 7 --launches 4 2>&1 \
      | tee -a "$out/kernel.log" | grep -E "SETROWS_RESULT|ERROR SUMMARY" | tee -a "$out/summary.txt"
    say "rc=${PIPESTATUS[0]}"
  done
  say "negative control: 32-bit destination offset (a planted bug), no sanitizer, then memcheck"
  $kd/k32 --offset-math i32 $big 2>&1 | tee -a "$out/kernel.log" | tail -3 | tee -a "$out/summary.txt"
  say "rc=${PIPESTATUS[0]}"
  compute-sanitizer --tool memcheck --error-exitcode 9 $kd/k32 --offset-math i32 $big 2>&1 \
    | tee -a "$out/kernel.log" | grep -E -m3 "Invalid|SETROWS_RESULT|ERROR SUMMARY|rror" | tee -a "$out/summary.txt"
  say "rc=${PIPESTATUS[0]}"
}

# ggml's CUDA graphs are a BUILD option: standalone ggml defaults GGML_CUDA_GRAPHS to OFF (only
# llama.cpp turns it on), and GGML_CUDA_DISABLE_GRAPHS=1 at run time only matters when it was on.
# So every build passes -DGGML_CUDA_GRAPHS=ON|OFF explicitly, the compile definition is grepped
# from the generated build, and the replay's own result line must list (or not) USE_GRAPHS.
build_variant() {  # $1 = on|off -> builds /tmp/build-<tree>-graphs-$1
  local g=$1 name=$(basename "$src") t0=$(date +%s)
  local b=/tmp/build-$name-graphs-$g flag=OFF
  [ "$g" = on ] && flag=ON
  local line="cmake -S repro-kernels -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_SOURCE_DIR=$src -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_CUDA_FA=OFF -DGGML_CUDA_NCCL=OFF -DGGML_CUDA_GRAPHS=$flag -DSETROWS_KERNEL=OFF -DCMAKE_EXPORT_COMPILE_COMMANDS=ON && ninja -C $b -j16 setrows-replay"
  say "build line (graphs-$g): $line"
  cmake -S "$here" -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_SOURCE_DIR="$src" -DGGML_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_CUDA_FA=OFF -DGGML_CUDA_NCCL=OFF -DGGML_CUDA_GRAPHS=$flag -DSETROWS_KERNEL=OFF \
    -DCMAKE_EXPORT_COMPILE_COMMANDS=ON >"$out/build-$name-graphs-$g.log" 2>&1
  ninja -C $b -j16 setrows-replay >>"$out/build-$name-graphs-$g.log" 2>&1
  say "build $name graphs-$g rc=$? in $(( $(date +%s) - t0 )) s"
  say "GGML_CUDA_GRAPHS in CMakeCache: $(grep -E '^GGML_CUDA_GRAPHS:' $b/CMakeCache.txt)"
  say "compile commands defining GGML_CUDA_USE_GRAPHS: $(grep -c -- '-DGGML_CUDA_USE_GRAPHS' $b/compile_commands.json) of $(grep -c '"command"' $b/compile_commands.json); build.ninja lines: $(grep -c -- '-DGGML_CUDA_USE_GRAPHS' $b/build.ninja)"
  say "set-rows.cu compile command has it: $(grep '"command"' $b/compile_commands.json | grep 'set-rows.cu' | grep -o -- '-DGGML_CUDA_USE_GRAPHS' | head -1 || true)"
}

# One run: $1 = build variant, $2 = label, rest = replay flags. The last line (SETROWS_RESULT) and
# the count of ggml's own CUDA-graph log lines (printed by ggml-cuda.cu when it captures a graph)
# go into the summary.
run_replay() {
  local g=$1 label=$2; shift 2
  local b=/tmp/build-$(basename "$src")-graphs-$g log="$out/replay-graphs-$g-$label.log"
  say "graphs-$g $label: setrows-replay --backend CUDA0 $*"
  timeout 150 $b/setrows-replay --backend CUDA0 "$@" >"$log" 2>&1
  local rc=$?
  grep -E "^setrows-replay: (backend|pass|unchecked|graph)|SETROWS_MISMATCH" "$log" | tee -a "$out/summary.txt"
  tail -1 "$log" | tee -a "$out/summary.txt"
  say "rc=$rc; ggml 'CUDA graph warmup complete' lines: $(grep -c 'CUDA graph warmup complete' "$log"); 'warmup reset': $(grep -c 'CUDA graph warmup reset' "$log")"
}

graphs_variant() {  # $1 = on|off: build, then every run on that build
  local g=$1 s=${steps}
  build_variant $g
  run_replay $g reuse-ce1 --mode reuse --steps $s --check-every 1
  run_replay $g reuse-ce100 --mode reuse --steps $s --check-every 100
  run_replay $g rebuild --mode rebuild --steps 20000
  run_replay $g loop-nocheck --mode reuse --steps $s --check-every 1000000
  run_replay $g inject-stale-ce1 --mode reuse --steps 20000 --check-every 1 --inject stale-read --inject-step 12345
  run_replay $g inject-stale-ce100 --mode reuse --steps 20000 --check-every 100 --inject stale-read --inject-step 12345
}
graphs_part() { graphs_variant on; graphs_variant off; }

facts_part() {  # setrows-kernel's new wave_size / arch keys, both DFLASH_WAVE_SIZE builds, small run
  local kd=/tmp/setrows-kernel
  mkdir -p $kd
  for w in 32 64; do
    say "nvcc -O2 -std=c++17 -arch=sm_90 -DDFLASH_WAVE_SIZE=$w -I repro-kernels/setrows-kernel repro-kernels/setrows-kernel/setrows-kernel.cu"
    nvcc -O2 -std=c++17 -arch=sm_90 -DDFLASH_WAVE_SIZE=$w -I "$here/setrows-kernel" \
      "$here/setrows-kernel/setrows-kernel.cu" -o $kd/k$w >>"$out/kernel.log" 2>&1
    $kd/k$w --rows 4096 --launches 8 --block-size 256 2>&1 | tee -a "$out/kernel.log" | tail -2 | tee -a "$out/summary.txt"
    say "rc=${PIPESTATUS[0]}"
  done
}

types_part() {
  local b=/tmp/build-$(basename "$src")-graphs-on
  for t in f16 bf16 q8_0 q4_0; do
    say "replay $(basename "$src") graphs-on reuse dst=$t idx=i32 ring 2^20 rows, start-row high, 10000 steps"
    timeout 60 $b/setrows-replay --backend CUDA0 --mode reuse --dst-type $t --index-type i32 --ring-rows 1048576 \
      --start-row 1040000 --check-every 2000 --steps 10000 2>&1 | tail -1 | tee -a "$out/summary.txt"
    say "rc=${PIPESTATUS[0]}"
  done
}

# Issue 20: what a check costs. Pairs run back to back on one build (the loop rate, loop_steps_per_s,
# leaves device init out); a pair's two runs report the same "graph" fingerprint.
checkcost_part() {
  local s=${steps} b=/tmp/build-$(basename "$src")-graphs-on
  build_variant on
  for round in 1 2; do
    run_replay on r64-bare-$round --mode reuse --steps $s --check-every 0
    run_replay on r64-ce1-$round --mode reuse --steps $s --check-every 1
  done
  for f in stale-read corrupt skip-write; do
    run_replay on inject-$f-ce1 --mode reuse --steps 20000 --check-every 1 --inject $f --inject-step 12345
  done
  memcheck_run ce1 --mode reuse --steps 2000 --check-every 1
  memcheck_run bare --mode reuse --steps 2000 --check-every 0
  memcheck_run inject-stale-read-ce1 --mode reuse --steps 2000 --check-every 1 --inject stale-read --inject-step 1234
  for round in 1 2; do
    run_replay on r256-bare-$round --mode reuse --ring-rows 256 --steps $((s / 2)) --check-every 0
    run_replay on r256-ce1-$round --mode reuse --ring-rows 256 --steps $((s / 2)) --check-every 1
  done
  run_replay on rebuild-bare --mode rebuild --steps 20000 --check-every 0
  run_replay on rebuild-ce1 --mode rebuild --steps 20000 --check-every 1
  run_replay on r64-ce100 --mode reuse --steps $s --check-every 100
  run_replay on q4_0-r256-bare --mode reuse --dst-type q4_0 --ring-rows 256 --steps 20000 --check-every 0
  run_replay on q4_0-r256-ce1 --mode reuse --dst-type q4_0 --ring-rows 256 --steps 20000 --check-every 1
}

memcheck_run() {  # $1 = label, rest = replay flags; on the graphs-on build
  local label=$1; shift
  local b=/tmp/build-$(basename "$src")-graphs-on log="$out/memcheck-$label.log"
  say "memcheck $label: compute-sanitizer --tool memcheck --error-exitcode 9 setrows-replay --backend CUDA0 $*"
  timeout 240 compute-sanitizer --tool memcheck --error-exitcode 9 $b/setrows-replay --backend CUDA0 "$@" >"$log" 2>&1
  local rc=$?
  grep -E "ERROR SUMMARY|^setrows-replay: (pass|unchecked)|SETROWS_MISMATCH" "$log" | tee -a "$out/summary.txt"
  say "rc=$rc"
}

nvidia-smi -L 2>&1 | tee -a "$out/summary.txt"
case $part in
  kernel) kernel_part ;;
  facts) facts_part ;;
  graphs) graphs_part ;;
  graphs-on) graphs_variant on ;;
  graphs-off) graphs_variant off ;;
  graphs+facts) facts_part; graphs_part ;;
  graphs+types) graphs_part; types_part ;;
  all) kernel_part; facts_part; graphs_part ;;
  checkcost) checkcost_part ;;
  *) echo "unknown PART $part" >&2; exit 2 ;;
esac
