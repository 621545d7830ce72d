#!/usr/bin/env bash
# Helper C's device driver (issue 27, "checking costs at most half"): decode-probe with CUDA on
# the H200, checked (segmented references, --ref-workers) vs unchecked, back to back.
#   bash .work/helper-c/c.sh     (in the device's copy of the repo; $OUT set)
# .work/helper-c holds: decode-probe/ (the sources under test), history.bundle (helper H's: its
# root commit is the llama.cpp that llama-cpp-python 0.3.36 vendors, ggml backends but CPU and
# CUDA left out), plant.py (the planted reuse fault), m16.gguf/m32.gguf (the tool's tiny model).
set -u
C=$(pwd)/.work/helper-c; S=/tmp/sc; B=$S/b/decode-probe; mkdir -p $S
export GGML_NO_BACKTRACE=1
T0=$(date +%s)
ph() { echo "$(date -u +%T) +$(( $(date +%s) - T0 ))s $*" | tee -a $OUT/phases.txt; }
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; nvcc --version | tail -2
  cmake --version | head -1; echo "nproc $(nproc)"; lscpu | grep -E 'Model name|^CPU\(s\)'; uname -r; } > $OUT/setup.txt 2>&1
git clone -q $C/history.bundle $S/llama && git -C $S/llama checkout -q "$(git -C $S/llama rev-list --max-parents=0 HEAD)" || exit 1
git -C $S/llama log -1 --format='%H %s' >> $OUT/setup.txt
CM="-DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_CUDA_FA=OFF -DGGML_CUDA_GRAPHS=ON"
echo "build line: cmake -G Ninja -S decode-probe -B b -DLLAMA_SOURCE_DIR=<llama-cpp-python 0.3.36 vendor/llama.cpp> $CM; cmake --build b --target decode-probe -j 16" | tee $OUT/runs.txt
ph configure
cmake -G Ninja -S $C/decode-probe -B $S/b -DLLAMA_SOURCE_DIR=$S/llama $CM > $OUT/configure.txt 2>&1 || { tail -30 $OUT/configure.txt; exit 1; }
grep "decode-probe: llama.cpp API" $OUT/configure.txt | tee -a $OUT/runs.txt
ph build
cmake --build $S/b --target decode-probe -j 16 > $OUT/build.txt 2>&1 || { tail -40 $OUT/build.txt; exit 1; }
ph built
echo "$(grep -c -- '-DGGML_CUDA_USE_GRAPHS' $S/b/compile_commands.json) compile commands define GGML_CUDA_USE_GRAPHS" | tee -a $OUT/runs.txt
run() {
  echo "== decode-probe $*" | tee -a $OUT/runs.txt
  local s=$(date +%s.%N)
  timeout 60 $B "$@" > $S/o.txt 2>&1; local rc=$?
  grep -E "^decode-probe: |^SETROWS" $S/o.txt | tee -a $OUT/runs.txt | grep -E "decode-probe: [0-9]|MISMATCH"
  echo "rc $rc wall $(awk -v a="$s" -v b="$(date +%s.%N)" 'BEGIN { printf "%.3f", b - a }') s" | tee -a $OUT/runs.txt
}
M=$C/m16.gguf
for i in 1 2; do
  run --model $M --check none
  run --model $M --ref-workers 1
  run --model $M
done
run --model $M --ref-workers 4
run --model $M --ref-workers 12
run --model $M --cpu-reference off --ref-workers 1
run --model $M --cpu-reference off
run --model $C/m32.gguf --ref-workers 1
run --model $C/m32.gguf
run --model $M --check none
run --model $M
run --model $M --backend CPU --check none
run --model $M --backend CPU --ref-workers 1
run --model $M --backend CPU
ph planted
python3 $C/plant.py $S/llama/src/llama-context.cpp && cmake --build $S/b --target decode-probe -j 16 > $OUT/build2.txt 2>&1 || tail -20 $OUT/build2.txt
run --model $M --ref-workers 1
run --model $M
run --model $M --backend CPU
ph done
