#!/usr/bin/env bash
# Runs per answer of the real binary with --confidence on histories from the project's own
# generator (`setrows-bisect demo --generate-only`: a C ring-buffer library with a planted
# change and a broken-build range), the test made intermittent: a failing test run is reported
# as a failure only with probability RATE/256 (from /dev/urandom), a passing one always passes.
# Each history gets its own work dir. Prints a markdown table (BENCHMARKS.md, "Flaky faults").
#
#   bench/flaky-demo.sh [first_seed] [last_seed] [commits] [rate_of_256] [confidence]
#
# Defaults: seeds 1..6, 400 commits, 77/256 = 30.1%, --confidence 0.95.
# SETROWS_BISECT_BIN=path measures another build (default: target/release/setrows-bisect);
# KEEP=1 keeps the repositories, work dirs and JSON results (the temp dir is printed).
set -euo pipefail
first=${1:-1}
last=${2:-6}
commits=${3:-400}
rate=${4:-77}
conf=${5:-0.95}
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${SETROWS_BISECT_BIN:-$root/target/release/setrows-bisect}
tmp=$(mktemp -d /tmp/flaky-demo-XXXX)
[ -n "${KEEP:-}" ] && echo "kept: $tmp" >&2 || trap 'rm -rf "$tmp"' EXIT
echo "| seed | planted at | answer | runs | distinct commits run | right |"
echo "|---|---|---|---|---|---|"
total=0; right=0; n=0
for seed in $(seq "$first" "$last"); do
  dir="$tmp/s$seed"
  eval "$("$bin" demo --seed "$seed" --commits "$commits" --out "$dir" --generate-only 2>/dev/null)"
  want=$(git -C "$REPO" log --format=%H --grep '^ringbuf: speed up index wrap$')
  at=$(git -C "$REPO" rev-list --reverse HEAD | grep -n "$want" | cut -d: -f1)
  flaky="$TEST || { [ \$(od -An -N1 -tu1 /dev/urandom) -lt $rate ] && exit 1; exit 0; }"
  "$bin" --repo "$REPO" --good "$GOOD" --bad "$BAD" --build "$BUILD" --script "$flaky" \
    --confidence "$conf" --work-dir "$dir/work" --json "$dir/r.json" >"$dir/out" 2>"$dir/err" || true
  read -r runs distinct ok got < <(python3 - "$dir/r.json" "$want" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
probes = r["probes"]
fb = r.get("first_bad") or "none"
print(len(probes), len({p.get("sha") for p in probes}), int(fb == sys.argv[2]), fb[:10])
PY
)
  echo "| $seed | $((at - 1)) (${want:0:10}) | $got | $runs | $distinct | $([ "$ok" = 1 ] && echo yes || echo NO) |"
  total=$((total + runs)); right=$((right + ok)); n=$((n + 1))
done
python3 -c "import sys; t,r,n=map(int,sys.argv[1:]); print(f'\nmean runs per answer {t/n:.1f} over {n} histories; right {r}/{n}')" "$total" "$right" "$n"
