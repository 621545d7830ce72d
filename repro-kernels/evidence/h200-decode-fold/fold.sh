#!/usr/bin/env bash
# Lead's device check after folding decode-probe's reference schedulers into one worker pool:
# checked vs unchecked on CUDA and the CPU backend, K = 1 and the default, and the planted fault.
#   bash .work/lead-mp/mp.sh    (in the device's copy of the repo; $OUT set)
set -u
C=$(pwd)/.work/lead-mp; S=/tmp/mp; B=$S/b/decode-probe; mkdir -p $S
export GGML_NO_BACKTRACE=1
T0=$(date +%s)
ph() { echo "$(date -u +%T) +$(( $(date +%s) - T0 ))s $*" | tee -a $OUT/phases.txt; }
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; nvcc --version | tail -2
  cmake --version | head -1; echo "nproc $(nproc)"; lscpu | grep -E 'Model name|^CPU\(s\)'; } > $OUT/setup.txt 2>&1
git clone -q $C/history.bundle $S/llama && git -C $S/llama checkout -q "$(git -C $S/llama rev-list --max-parents=0 HEAD)" || exit 1
CM="-DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_CUDA_FA=OFF -DGGML_CUDA_GRAPHS=ON"
echo "build line: cmake -G Ninja -S rk/decode-probe -B b -DLLAMA_SOURCE_DIR=<llama-cpp-python 0.3.36 vendor/llama.cpp> $CM; cmake --build b --target decode-probe -j 16" | tee $OUT/runs.txt
ph configure
cmake -G Ninja -S $C/rk/decode-probe -B $S/b -DLLAMA_SOURCE_DIR=$S/llama $CM > $OUT/configure.txt 2>&1 || { tail -30 $OUT/configure.txt; exit 1; }
ph build
cmake --build $S/b --target decode-probe -j 16 > $OUT/build.txt 2>&1 || { tail -40 $OUT/build.txt; exit 1; }
ph built
{ echo "$(grep -c -- '-DGGML_CUDA_USE_GRAPHS' $S/b/compile_commands.json) of $(grep -c '"command"' $S/b/compile_commands.json) compile commands define GGML_CUDA_USE_GRAPHS"
  ldd $B | grep -E 'llama|ggml'; } | tee -a $OUT/runs.txt
M=$C/m16.gguf
# N processes at once, each `decode-probe ARGS`; env E (may be empty); their rates and the aggregate
par() { local n=$1 e=$2; shift 2
  echo "== $n process(es) at once: ${e:+$e }decode-probe $*" | tee -a $OUT/runs.txt
  local s=$(date +%s.%N) pids=()
  for i in $(seq $n); do env $e timeout 120 $B "$@" > $S/o$i.txt 2>&1 & pids+=($!); done
  for p in "${pids[@]}"; do wait $p; done
  for i in $(seq $n); do grep -hE "^decode-probe: [0-9]|MISMATCH" $S/o$i.txt | head -2 | sed "s/^/  p$i /"; done | tee -a $OUT/runs.txt
  grep -h '^SETROWS_RESULT' $S/o1.txt | cut -c1-600 >> $OUT/results.txt
  echo "  wall $(echo "$(date +%s.%N) - $s" | bc) s" | tee -a $OUT/runs.txt; }
par 1 "" --model $M --check none
par 1 "" --model $M --check none
par 1 "" --model $M --ref-workers 1
par 1 "" --model $M --ref-workers 1
par 1 "" --model $M
par 1 "" --model $M
par 1 "" --model $M --backend CPU --check none
par 1 "" --model $M --backend CPU --ref-workers 1
par 1 "" --model $M --backend CPU
ph planted
python3 $C/plant.py $S/llama/src/llama-context.cpp && cmake --build $S/b --target decode-probe -j 16 > $OUT/build2.txt 2>&1 || tail -20 $OUT/build2.txt
par 1 "" --model $M --ref-workers 1
par 1 "" --model $M
par 1 "" --model $M --backend CPU
grep -h '^SETROWS_MISMATCH' $S/o1.txt | cut -c1-300 | tee -a $OUT/runs.txt
ph done
