#!/usr/bin/env bash
# Helper H's device driver for issue 27 item 4 (H200): the decode commit bisect through the tool,
# then (with what is left of the call) `git bisect run` over the same history with the tool's own
# build and run lines, for a ratio.
#   bash .work/helper-h/d.sh SECONDS     (in the device's copy of the repo; $OUT set)
set -u
H=$(pwd)/.work/helper-h; S=/tmp/sh; O=$S/out; mkdir -p $S/bin $O
T0=$(date +%s); stop_at=$(( T0 + $1 ))
ph() { echo "$(date -u +%T) +$(( $(date +%s) - T0 ))s $*" | tee -a $O/phases.txt; }
export GGML_NO_BACKTRACE=1 CMAKE_BUILD_PARALLEL_LEVEL=16
cp $H/setrows-bisect $S/bin/; B=$S/bin/setrows-bisect
ph setup
{ date -u; nvidia-smi; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  nvcc --version; cmake --version | head -1; echo "ninja $(ninja --version)"; git --version
  command -v ccache || echo "no ccache"; $B --version; echo "nproc $(nproc)"; free -g | head -2; uname -r
  lscpu | grep -E 'Model name|^CPU\(s\)'; } > $O/setup.txt 2>&1
ph clone; git clone -q $H/history.bundle $S/hist || exit 1
git -C $S/hist log --format='%H %s' > $O/history.txt
GOOD=$(git -C $S/hist rev-list --max-parents=0 HEAD)
A=(--repo $S/hist --probe-kind decode --backend cuda --graphs on --gpu-target 90 --cmake-arg=-DGGML_CUDA_FA=OFF
   --engine none --good $GOOD --bad master --work-dir $S/w)
$B "${A[@]}" --dry-run > $O/dry-run.txt 2>&1
ph "bisect starts: setrows-bisect ${A[*]} --report report.md --json result.json"
timeout -s INT $(( stop_at - $(date +%s) - 20 )) $B "${A[@]}" --report $OUT/report.md --json $OUT/result.json > $OUT/bisect.log 2>&1
ph "bisect exits rc=$?"
$B log --work-dir $S/w > $O/log.txt 2>&1
for f in $(find $S/w -name compile_commands.json); do d=$(dirname $f)
  echo "== $d: $(grep -c -- '-DGGML_CUDA_USE_GRAPHS' $f) of $(grep -c '"command"' $f) compile commands define GGML_CUDA_USE_GRAPHS"
  grep -E '^GGML_CUDA_(GRAPHS|FA|NCCL):|^CMAKE_CUDA_ARCHITECTURES:|^CMAKE_GENERATOR:' $d/CMakeCache.txt
  echo "ninja_log entries: $(grep -vc '^#' $d/.ninja_log)"; done > $O/graphs-proof.txt 2>&1
# git bisect run: a fresh clone, a cold build dir, the tool's build line (no ccache here) and run line
DP=$(find $S/w -type d -name 'setrows-decode-*' | head -1); M=$(find $S/w -name '*.gguf' | head -1)
cat > $S/gb-probe.sh <<PROBE
#!/bin/sh
# one git bisect run step: build decode-probe against this checkout, run it on the tool's model
t0=\$(date +%s.%N); b=$S/gb-build
cmake -S $DP -B \$b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_EXPORT_COMPILE_COMMANDS=ON -DLLAMA_SOURCE_DIR=\$PWD -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_CUDA_GRAPHS=ON -DGGML_CUDA_FA=OFF > \$b.configure.log 2>&1 || exit 125
cmake --build \$b --target decode-probe > \$b.build.log 2>&1 || exit 125
t1=\$(date +%s.%N)
\$b/decode-probe --model $M > \$b.run.log 2>&1; rc=\$?
grep -h SETROWS_RESULT \$b.run.log | cut -c1-400
echo "gb-step \$(git rev-parse --short HEAD) build_s \$(echo "\$t1 - \$t0" | bc) run_s \$(echo "\$(date +%s.%N) - \$t1" | bc) rc \$rc"
case \$rc in 0) exit 0;; 1) exit 1;; *) exit 125;; esac
PROBE
chmod +x $S/gb-probe.sh; cp $S/gb-probe.sh $O/
left=$(( stop_at - $(date +%s) ))
if [ -n "$DP" ] && [ -n "$M" ] && [ $left -gt 60 ]; then
  ph "git bisect run starts (${left}s left)"; git clone -q $H/history.bundle $S/gb
  ( cd $S/gb && git bisect start master $GOOD >/dev/null && timeout -s INT $left git bisect run $S/gb-probe.sh ) > $OUT/gitbisect.log 2>&1
  ph "git bisect run exits rc=$?"
else ph "git bisect run skipped (${left}s left, sources '$DP', model '$M')"; fi
cat $O/setup.txt $O/phases.txt $O/graphs-proof.txt > $OUT/summary.txt
tar -czf $OUT/results.tar.gz -C $S out $(cd $S && find w gb-build.*.log \( -name '*.log' -o -name '*.json' -o -name '*.toml' -o -name CMakeCache.txt -o -name .ninja_log \) -not -path '*/CMakeFiles/*' -not -path '*/checkouts/*/src/*' -size -8M 2>/dev/null)
ls -la $OUT
