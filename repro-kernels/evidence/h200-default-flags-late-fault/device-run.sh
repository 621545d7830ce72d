#!/usr/bin/env bash
# helper F: issue 20 evidence. Planted CUDA set_rows fault after 30,000 launches, default reproducer vs --steps 2000.
set -u
export GGML_NO_BACKTRACE=1
here=$(cd "$(dirname "$0")" && pwd)
T0=$(date +%s)
E=$OUT/env.txt
{ date -u; uname -a; grep PRETTY /etc/os-release; ldd --version | head -1; nvidia-smi; nvcc --version; cmake --version | head -1; ninja --version; git --version; command -v ccache || echo "no ccache"; nproc; } > $E 2>&1
R=/tmp/ggml-planted; W=/tmp/sbw
git clone -q "$here/ggml-planted.bundle" $R -b master 2>>$E
git -C $R log --oneline >> $E 2>&1
GOOD=$(git -C $R rev-list --max-parents=0 HEAD); BAD=$(git -C $R rev-parse HEAD)
B=$here/setrows-bisect; chmod +x $B; $B --version >> $E 2>&1
COMMON="--repo $R --good $GOOD --bad $BAD --backend cuda --gpu-target 90 --graphs on --cmake-arg -DGGML_CUDA_FA=OFF --work-dir $W"
echo "== main: $B bisect $COMMON --json \$OUT/result.json --report \$OUT/report.md" | tee $OUT/main.txt
t=$(date +%s)
timeout 460 $B bisect $COMMON --json $OUT/result.json --report $OUT/report.md >> $OUT/main.txt 2>&1
echo "== main rc=$? wall=$(( $(date +%s) - t )) s" | tee -a $OUT/main.txt
left=$(( 575 - ($(date +%s) - T0) ))
CA="--repro-arg=--mode --repro-arg=reuse --repro-arg=--steps --repro-arg=2000 --repro-arg=--ring-rows --repro-arg=256 --repro-arg=--check-every --repro-arg=1"
echo "== control (timeout $left s): $B bisect $COMMON $CA --json \$OUT/result-control.json --report \$OUT/report-control.md" | tee $OUT/control.txt
t=$(date +%s)
timeout $left $B bisect $COMMON $CA --json $OUT/result-control.json --report $OUT/report-control.md >> $OUT/control.txt 2>&1
echo "== control rc=$? wall=$(( $(date +%s) - t )) s" | tee -a $OUT/control.txt
(cd $W && find . -name '*.log' -size -20M | tar czf $OUT/logs.tar.gz -T - ) 2>>$E
ls -la $W >> $E 2>&1
tail -5 $OUT/main.txt; tail -5 $OUT/control.txt
