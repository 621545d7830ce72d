#!/usr/bin/env bash
# The CUDA evidence run recorded in repro-kernels/README.md, as one script so it can be repeated.
#   repro-kernels/gpu-evidence.sh OUTDIR PART GGML_SRC [STEPS]
# PART: "kernel" (setrows-kernel under compute-sanitizer), "replay" (build ggml+replay, run both
# modes with CUDA graphs on and off), or "all". Every log is tee'd into OUTDIR.
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

replay_part() {
  local b=/tmp/build-$(basename "$src")
  local t0=$(date +%s)
  cmake -S "$here" -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_SOURCE_DIR="$src" -DGGML_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_CUDA_FA=OFF -DGGML_CUDA_NCCL=OFF -DSETROWS_KERNEL=OFF >"$out/build-$(basename "$src").log" 2>&1
  ninja -C $b -j16 setrows-replay >>"$out/build-$(basename "$src").log" 2>&1
  say "build $(basename "$src") rc=$? in $(( $(date +%s) - t0 )) s"
  for graphs in on off; do
    for mode in reuse rebuild; do
      say "replay $(basename "$src") mode=$mode cuda_graphs=$graphs steps=$steps"
      if [ $graphs = off ]; then export GGML_CUDA_DISABLE_GRAPHS=1; else unset GGML_CUDA_DISABLE_GRAPHS; fi
      timeout 100 $b/setrows-replay --backend CUDA0 --mode $mode --steps $steps 2>&1 \
        | tee "$out/replay-$(basename "$src")-$mode-graphs$graphs.log" | tail -2 | tee -a "$out/summary.txt"
      say "rc=${PIPESTATUS[0]}"
    done
  done
  unset GGML_CUDA_DISABLE_GRAPHS
}

types_part() {
  local b=/tmp/build-$(basename "$src")
  for t in f16 bf16 q8_0 q4_0; do
    say "replay $(basename "$src") reuse dst=$t idx=i32 ring 2^20 rows, start-row high, 10000 steps"
    timeout 60 $b/setrows-replay --backend CUDA0 --mode reuse --dst-type $t --index-type i32 --ring-rows 1048576 \
      --start-row 1040000 --check-every 2000 --steps 10000 2>&1 | tail -1 | tee -a "$out/summary.txt"
    say "rc=${PIPESTATUS[0]}"
  done
}

inject_part() {
  local b=/tmp/build-$(basename "$src")
  for inj in corrupt skip-write stale-read; do
    say "replay $(basename "$src") reuse inject=$inj (must be caught: exit 1)"
    timeout 60 $b/setrows-replay --backend CUDA0 --mode reuse --steps 2000 --inject $inj 2>&1 | grep -v "^setrows-replay: device" \
      | tee -a "$out/summary.txt" | tail -1 >/dev/null
    say "rc=${PIPESTATUS[0]}"
  done
}

nvidia-smi -L 2>&1 | tee -a "$out/summary.txt"
case $part in
  kernel) kernel_part ;;
  replay) replay_part ;;
  replay+types) replay_part; types_part; inject_part ;;
  all) kernel_part; replay_part ;;
esac
