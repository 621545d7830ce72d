#!/usr/bin/env bash
# The CPU side of the check-cost figures in BENCHMARKS.md: the bare loop (--check-every 0) and
# --check-every 1 of one replay build, and --check-every 1 of an older build (the previous checker),
# in interleaved rounds (a shared machine: compare medians, not single runs).
#   repro-kernels/cpu-checkcost.sh NEW_REPLAY OLD_REPLAY [ROUNDS]
export GGML_NO_BACKTRACE=1
new=$1; old=$2; rounds=${3:-5}
lscpu | grep -E "Model name|^CPU\(s\)"; uptime
for r in $(seq $rounds); do
  for cfg in "r64:--ring-rows 64" "r256:--ring-rows 256"; do
    label=${cfg%%:*}; flags=${cfg#*:}
    for ce in 0 1; do
      $new --backend CPU --mode reuse $flags --steps 20000 --check-every $ce 2>/dev/null | tail -1 | \
        python3 -c "import sys,json; j=json.loads(sys.stdin.read()[15:]); t=j['timings']; print('$label new ce$ce', j['status'], j['checks_run'], round(t['loop_steps_per_s'],1), j['graph']['fingerprint'])"
    done
    $old --backend CPU --mode reuse $flags --steps 20000 --check-every 1 2>/dev/null | tail -1 | \
      python3 -c "import sys,json; j=json.loads(sys.stdin.read()[15:]); t=j['timings']; print('$label old ce1', j['status'], round(t['steps_per_s'],1))"
  done
  for ce in 0 1; do
    $new --backend CPU --mode rebuild --steps 20000 --check-every $ce 2>/dev/null | tail -1 | \
      python3 -c "import sys,json; j=json.loads(sys.stdin.read()[15:]); t=j['timings']; print('rebuild new ce$ce', j['status'], j['checks_run'], round(t['loop_steps_per_s'],1))"
  done
done
uptime
