#!/usr/bin/env bash
# Helper P's device driver for issue 27 item 2 (H200): memory placement for the decode probe.
#   bash .work/helper-p/p.sh SECONDS     (in the device's copy of the repo; $OUT set)
# The llama.cpp tree: .work/helper-p/llama.git, one commit of the vendored llama.cpp (llama + ggml-cpu + ggml-cuda).
# 1. the tool's own view of the cells (--list, --dry-run) and the host refusal (exit 2, flag and matrix forms);
# 2. `setrows-bisect matrix` over one llama.cpp commit: decode probe, CUDA sm_90, graphs on, FA off,
#    memory device and unified; each cell's decode-probe reports where its KV cache and a weight are;
# 3. negative control: the decode-probe the matrix built, run directly with --memory unified and
#    without GGML_CUDA_ENABLE_UNIFIED_MEMORY (device pointers), and with it (managed).
set -u
H=$(pwd)/.work/helper-p; S=/tmp/sp; O=$OUT; mkdir -p $S/bin
T0=$(date +%s); stop_at=$(( T0 + $1 ))
ph() { echo "$(date -u +%T) +$(( $(date +%s) - T0 ))s $*" | tee -a $O/phases.txt; }
export GGML_NO_BACKTRACE=1 CMAKE_BUILD_PARALLEL_LEVEL=16
cp $H/setrows-bisect $S/bin/; B=$S/bin/setrows-bisect
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; nvcc --version | tail -2
  cmake --version | head -1; echo "ninja $(ninja --version)"; command -v ccache || echo "no ccache"; $B --version
  echo "nproc $(nproc)"; free -g | head -2; uname -r; lscpu | grep -E 'Model name'; } > $O/setup.txt 2>&1
ph clone  # the carried bare repo as a repo with an empty work tree (no git CLI needed)
mkdir -p $S/llama; cp -r $H/llama.git $S/llama/.git; sed -i 's/bare = true/bare = false/' $S/llama/.git/config
{ git -C $S/llama log --format='%H %s' || cat $S/llama/.git/packed-refs; } > $O/llama-commit.txt 2>&1
M=(--matrix $H/h200-decode.toml --repo $S/llama --engine none --work-dir $S/w)
{ echo "\$ setrows-bisect matrix --matrix h200-decode.toml --repo llama --engine none --list"; $B matrix "${M[@]}" --list
  echo "\$ setrows-bisect matrix ... --dry-run"; $B matrix "${M[@]}" --dry-run; } > $O/cells.txt 2>&1
{ echo "\$ setrows-bisect --repo llama --probe-kind decode --backend cuda --gpu-target 90 --graphs on --memory host --good master --bad master --engine none"
  $B --repo $S/llama --probe-kind decode --backend cuda --gpu-target 90 --graphs on --memory host --good master --bad master --engine none --work-dir $S/w-host; echo "exit $?"
  sed 's/"device", "unified"/"device", "unified", "host"/' $H/h200-decode.toml > $S/host.toml
  echo "\$ setrows-bisect matrix --matrix h200-decode.toml-with-host --repo llama --engine none --list"
  $B matrix --matrix $S/host.toml --repo $S/llama --engine none --work-dir $S/w-host --list; echo "exit $?"
  echo "work dir written: $(ls $S/w-host 2>/dev/null | wc -l) entries"; } > $O/host-refused.txt 2>&1
ph "matrix starts: setrows-bisect matrix ${M[*]} --out OUT/matrix"
timeout -s INT $(( stop_at - $(date +%s) - 60 )) $B matrix "${M[@]}" --out $O/matrix > $O/matrix.log 2>&1
ph "matrix exits rc=$?"
for f in $(find $S/w $O/matrix -name '*.log' -not -path '*/CMakeFiles/*' -newer $O/setup.txt 2>/dev/null); do
  echo "== $f"; grep -E "decode-probe: (memory|[0-9]+ tokens)|SETROWS_RESULT|GGML_CUDA_ENABLE|llama.cpp API|pointer attributes" $f; done > $O/cell-placement.txt 2>&1
for f in $(find $S/w -name compile_commands.json); do d=$(dirname $f)
  echo "== $d: $(grep -c -- '-DGGML_CUDA_USE_GRAPHS' $f) of $(grep -c '"command"' $f) compile commands define GGML_CUDA_USE_GRAPHS"
  grep -E '^GGML_CUDA_(GRAPHS|FA):|^CMAKE_CUDA_ARCHITECTURES:|^CMAKE_GENERATOR:' $d/CMakeCache.txt
  echo "ninja_log entries: $(grep -vc '^#' $d/.ninja_log)"; done > $O/build-proof.txt 2>&1
DP=$(find $S/w -type f -name decode-probe -perm -u+x | head -1); MOD=$(find $S/w -name '*.gguf' | head -1)
ph "negative control: $DP on $MOD"
if [ -n "$DP" ] && [ -n "$MOD" ]; then
  for env in "" "GGML_CUDA_ENABLE_UNIFIED_MEMORY=1"; do
    echo "\$ ${env:-(no env)} decode-probe --model $(basename $MOD) --memory unified --steps 2000"
    env $env $DP --model $MOD --memory unified --steps 2000 2>&1 | grep -E "decode-probe: (memory|[0-9]+ tokens)|SETROWS_RESULT"; echo "exit ${PIPESTATUS[0]}"
  done > $O/negative-control.txt 2>&1
  env $DP --model $MOD --memory unified --steps 2000 2>/dev/null | grep SETROWS_RESULT > $O/decode-unified-without-env-h200.txt
  env GGML_CUDA_ENABLE_UNIFIED_MEMORY=1 $DP --model $MOD --memory unified --steps 2000 2>/dev/null | grep SETROWS_RESULT > $O/decode-unified-h200.txt
fi
ph done
