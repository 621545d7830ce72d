#!/usr/bin/env bash
# Helper G's device driver for issue 26.5 (H200): resumable across chained calls.
#   bash .work/helper-g/g.sh OUTDIR SECONDS
# Work lives in /tmp/sg (kept while the machine stays warm); every phase is a setrows-bisect
# command that resumes from its store when run again, so a second call continues the first.
# Phases run at once, niced so the small one finishes first:
#   planted  (nice 0, -j16): bisect-config --axis memory, then the commit bisect --memory unified
#   lucebox graphs ON (nice 5, -j12) and OFF (nice 10, -j10): `matrix`, 6 cells each
set -u
out=$1; stop_at=$(( $(date +%s) + $2 - 30 ))
H=$(pwd)/.work/helper-g; S=/tmp/sg
mkdir -p $S/bin $S/state $S/out "$out"
D=$out/driver.log
log() { echo "$(date -u +%T) $*" | tee -a $S/driver.log; }
export GGML_NO_BACKTRACE=1
# ccache: Debian 12's 4.7.5 carried with its libhiredis (libzstd only if the image lacks it)
libs=$H/lib; ldconfig -p | grep -q 'libzstd.so.1 ' || libs=$libs:$H/lib-zstd
printf '#!/bin/sh\nLD_LIBRARY_PATH=%s exec %s/ccache.bin "$@"\n' "$libs" "$H" > $S/bin/ccache; chmod +x $S/bin/ccache
export PATH=$S/bin:$PATH CCACHE_DIR=$S/ccache CCACHE_BASEDIR=$S CCACHE_MAXSIZE=40G CCACHE_NOHASHDIR=1
B=$S/bin/setrows-bisect; [ -x $B ] || cp $H/setrows-bisect $B
if [ ! -f $S/state/setup ]; then
  { date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; nvcc --version | tail -2
    cmake --version | head -1; echo "ninja $(ninja --version)"; ccache --version | head -1; $B --version
    echo "nproc $(nproc)"; free -g | head -2; uname -r; command -v git || echo "no git"; } > $S/state/setup 2>&1
  for r in planted lucebox; do  # the carried bare repos as non-bare repos with an empty work tree
    mkdir -p $S/repos/$r; cp -r $H/$r.git $S/repos/$r/.git; sed -i 's/bare = true/bare = false/' $S/repos/$r/.git/config
  done
fi
log "call starts; state: $(ls $S/state | tr '\n' ' ')"
# phase NAME NICE JOBS -- command...: runs unless done; done = the tool ended by itself (not 130)
phase() {
  local name=$1 n=$2 j=$3; shift 4
  [ -f $S/state/$name.rc ] && { log "$name already done (rc $(cat $S/state/$name.rc))"; return 0; }
  log "$name starts: $*"
  local t0=$(date +%s)
  CMAKE_BUILD_PARALLEL_LEVEL=$j nice -n $n "$@" >> $S/out/$name.log 2>&1 &
  echo $! > $S/state/$name.pid
  wait $!
  local rc=$?
  rm -f $S/state/$name.pid
  echo "$name: rc=$rc $(( $(date +%s) - t0 )) s this call" >> $S/state/times
  log "$name exits rc=$rc after $(( $(date +%s) - t0 )) s"
  if [ $rc = 130 ] || [ -f $S/state/stop ]; then return 1; fi
  echo $rc > $S/state/$name.rc
}
rm -f $S/state/stop
PM="--matrix $H/h200-planted.toml --repo $S/repos/planted --engine none --work-dir $S/w-planted"
LM="--matrix $H/h200-lucebox.toml --repo $S/repos/lucebox --engine none"
( phase planted-config 0 16 -- $B bisect-config $PM --config $(cat $H/id-planted) --axis memory --values device,host,unified --rev master --out $S/out/planted-config \
  && phase planted-bisect 0 16 -- $B --repo $S/repos/planted --work-dir $S/w-planted --engine none --backend cuda --gpu-target 90 --graphs on --memory unified --cmake-arg=-DGGML_CUDA_FA=OFF --cmake-arg=-DGGML_CUDA_NCCL=OFF --good $(cat $H/planted-good) --bad master --json $S/out/planted-bisect.json --report $S/out/planted-bisect.md ) &
p1=$!
( phase lucebox-on 5 12 -- $B matrix $LM --work-dir $S/w-lon --only $(cat $H/ids-on) --out $S/out/lucebox-on ) &
p2=$!
( phase lucebox-off 10 10 -- $B matrix $LM --work-dir $S/w-loff --only $(cat $H/ids-off) --out $S/out/lucebox-off ) &
p3=$!
while [ $(date +%s) -lt $stop_at ] && { kill -0 $p1 || kill -0 $p2 || kill -0 $p3; } 2>/dev/null; do sleep 2; done
if kill -0 $p1 2>/dev/null || kill -0 $p2 2>/dev/null || kill -0 $p3 2>/dev/null; then
  log "deadline: interrupting the tools"; touch $S/state/stop
  for f in $S/state/*.pid; do [ -f "$f" ] && kill -INT "$(cat "$f")"; done; sleep 15
fi
wait
{ cat $S/state/setup; echo; cat $S/state/times 2>/dev/null; ls $S/state; ccache -s 2>&1 | head -20
  for f in $(find $S/w-* -name compile_commands.json 2>/dev/null); do d=$(dirname $f)
    echo "== $d: $(grep -c -- '-DGGML_CUDA_USE_GRAPHS' $f) of $(grep -c '"command"' $f) compile commands define GGML_CUDA_USE_GRAPHS"
    grep -E '^GGML_CUDA_(GRAPHS|FA|NCCL):|^CMAKE_CUDA_ARCHITECTURES:|^CMAKE_CUDA_COMPILER_LAUNCHER:' $d/CMakeCache.txt
    echo "ninja_log entries: $(grep -vc '^#' $d/.ninja_log 2>/dev/null)"
  done
  for f in $S/out/*.log; do echo "== tail $f"; tail -25 $f; done; } > "$out/summary.txt" 2>&1
cp $S/driver.log "$out/"
tar -czf "$out/results.tar.gz" -C $S out state $(cd $S && find w-* \( -name '*.ninja_log' -o -name .ninja_log -o -name '*.log' -o -name '*.json' -o -name CMakeCache.txt \) -not -path '*/CMakeFiles/*' -size -4M 2>/dev/null) 2>/dev/null
ls -la "$out"
