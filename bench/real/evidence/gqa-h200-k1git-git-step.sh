#!/bin/sh
# git bisect run's step (bench/real/cuda_case.sh): 0 good, 1 bad, 125 skip; 255 stops the run
# (not enough time left in this call for a cold build), the next call resumes.
S='/work/main/.work/real-state-gqa'; b=$S/git-build
now=$(date +%s)
h=$(git rev-parse --short=8 HEAD)
if [ -n "${GIT_STEP_DEADLINE:-}" ] && [ $((now + ${GIT_STEP_NEED:-190})) -gt "$GIT_STEP_DEADLINE" ]; then
  echo "git-stop $h $(date -u +%T): $((GIT_STEP_DEADLINE - now)) s left in this call < ${GIT_STEP_NEED:-190} s a step may need; the next call resumes" >>"$S/git-steps.txt"
  exit 255
fi
n=$(grep -c '^git-step ' "$S/git-steps.txt" 2>/dev/null); n=$((${n:-0} + 1))
up=$(git log -1 --format=%B | sed -n 's/^Upstream-commit: //p' | cut -c1-9); up=${up:-none}
mkdir -p "$S/git-logs"; p=$S/git-logs/$n-$h; start=$(date -u +%T)
t0=$(date +%s.%N)
cmake -S '/work/main/.work/real-state-gqa/git-inputs/setrows-decode-8f4672323c2f/decode-probe' -B "$b" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_EXPORT_COMPILE_COMMANDS=ON "-DLLAMA_SOURCE_DIR=$PWD" \
  -DGGML_CCACHE=OFF -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 >"$p.configure.log" 2>&1 &&
  cmake --build "$b" --target decode-probe >"$p.build.log" 2>&1; brc=$?
t1=$(date +%s.%N)
if [ $brc -ne 0 ]; then
  rc=build-failed v=skip ec=125
else
  "$b/decode-probe" --model '/work/main/.work/real-state-gqa/git-inputs/tiny-llama-s42-f16-h128-g3-kv2-5324757ad665.gguf' --flash-attn on --batch-size 2 --cpu-nmse 1e-3 >"$p.run.log" 2>&1; rc=$?
  case $rc in 0) v=good ec=0 ;; 1) v=bad ec=1 ;; *) v=skip ec=125 ;; esac
fi
t2=$(date +%s.%N)
sig=$(grep -h -o -e 'SETROWS_MISMATCH.*' -e 'GGML_ASSERT.*' -e '"status":"[a-z_]*"' "$p.run.log" 2>/dev/null | head -1 | cut -c1-120)
echo "git-step $n $h upstream $up start $start build_s $(awk "BEGIN{printf \"%.1f\", $t1 - $t0}") run_s $(awk "BEGIN{printf \"%.1f\", $t2 - $t1}") rc $rc verdict $v | $(git log -1 --format=%s | cut -c1-60) | $sig" >>"$S/git-steps.txt"
exit $ec
