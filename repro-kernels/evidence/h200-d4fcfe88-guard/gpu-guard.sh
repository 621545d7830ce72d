#!/usr/bin/env bash
# The vacuous-pass guard on real hardware: the tool itself builds ggml d4fcfe88 for sm_90 with
# CUDA graphs asked ON, (a) as asked and (b) with a later -DGGML_CUDA_GRAPHS=OFF that silently
# wins (the negative control). (a) must pass with USE_GRAPHS proven; (b) must be untestable.
set -u
export GGML_NO_BACKTRACE=1
B=$PWD/ggml-src/bin/setrows-bisect
R=$PWD/ggml-src/repo
G=$(git -C "$R" rev-parse HEAD~1); H=$(git -C "$R" rev-parse HEAD)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/gpu.txt" 2>&1
nvcc --version | tail -2 >> "$OUT/gpu.txt"
common=(--repo "$R" --good "$G" --bad "$H" --backend cuda --gpu-target 90
  --cmake-arg -DGGML_CUDA_FA=OFF --cmake-arg -DGGML_CUDA_NCCL=OFF
  --repro-arg --mode --repro-arg reuse --repro-arg --steps --repro-arg 20000 --timeout 900)
run() {
  local name=$1; shift
  local W=/tmp/w-$name
  local t0=$(date +%s)
  echo "+ setrows-bisect ${common[*]} $* --work-dir $W --probe $H" > "$OUT/$name.cmd"
  "$B" "${common[@]}" "$@" --work-dir "$W" --probe "$H" > "$OUT/$name.json" 2> "$OUT/$name.err"
  echo "rc=$? wall_s=$(( $(date +%s) - t0 ))" >> "$OUT/$name.cmd"
  find "$W/results" -name 'run-*.json' -exec cp {} "$OUT/$name-run.json" \;
  find "$W/results" -name '*.log' | head -1 | xargs -r tail -c 20000 > "$OUT/$name-log-tail.txt"
  grep -rl GGML_CUDA_USE_GRAPHS --include=compile_commands.json "$W" | head -3 > "$OUT/$name-defs.txt"
  grep -rc GGML_CUDA_USE_GRAPHS --include=compile_commands.json "$W" >> "$OUT/$name-defs.txt"
}
run graphs-on --graphs on
run graphs-forced-off --graphs on --cmake-arg -DGGML_CUDA_GRAPHS=OFF
