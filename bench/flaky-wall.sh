#!/usr/bin/env bash
# Wall time of real bisections with --jobs K = 1, 2, 4 on a generated repository whose test
# sleeps to stand in for a GPU run. Prints a markdown table (BENCHMARKS.md, "Flaky faults and
# multisection").
#
#   bench/flaky-wall.sh [commits] [sleep_s] [bug_at] [reps]
#
# Rows: a deterministic bug with plain bisection, and a 50%-reproducible bug with
# --confidence 0.95 (the failure draws from /dev/urandom, so that row varies run to run: with
# reps > 1 each row is the mean of reps bisections, and "right" counts the right answers).
# SETROWS_BISECT_BIN=path runs another build of the tool (e.g. an older commit) instead of
# building this checkout.
set -euo pipefail
commits=${1:-200}
sleep_s=${2:-0.3}
bug_at=${3:-137}
reps=${4:-1}
root=$(cd "$(dirname "$0")/.." && pwd)
if [ -n "${SETROWS_BISECT_BIN:-}" ]; then
  bin=$SETROWS_BISECT_BIN
else
  cargo build --release --quiet --manifest-path "$root/Cargo.toml" >&2
  bin="$root/target/release/setrows-bisect"
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
repo="$tmp/repo"
git init -q "$repo"
git -C "$repo" config user.email bench@localhost
git -C "$repo" config user.name bench
mkdir -p "$repo/changes"
for i in $(seq 0 $((commits - 1))); do
  echo "$i" >"$repo/changes/$i"
  [ "$i" -eq "$bug_at" ] && echo bug >"$repo/BUG"
  git -C "$repo" add -A
  git -C "$repo" commit -q -m "change $i"
done
good=$(git -C "$repo" rev-list --max-parents=0 HEAD)
bad=$(git -C "$repo" rev-parse HEAD)
want=$(git -C "$repo" rev-list --reverse HEAD | sed -n "$((bug_at + 1))p")
det="sleep $sleep_s; test ! -f BUG"
flaky="sleep $sleep_s; if [ -f BUG ] && [ \$(od -An -N1 -tu1 /dev/urandom) -lt 128 ]; then exit 1; fi; exit 0"
echo "| test | flags | K | wall time | search rounds | runs | right |"
echo "|---|---|---|---|---|---|---|"
run() { # name script flags k: one row, the mean of $reps bisections
  local name=$1 script=$2 flags=$3 k=$4 i work t0 t1
  : >"$tmp/rows"
  for i in $(seq "$reps"); do
    work="$tmp/work-$k-$i-$RANDOM"
    t0=$(date +%s.%N)
    # shellcheck disable=SC2086
    "$bin" --repo "$repo" --good "$good" --bad "$bad" --script "$script" --jobs "$k" \
      --work-dir "$work" --json "$tmp/r.json" $flags >/dev/null 2>"$tmp/err" || true
    t1=$(date +%s.%N)
    python3 - "$tmp/r.json" "$t0" "$t1" "$want" >>"$tmp/rows" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
t0, t1, want = sys.argv[2:]
print(float(t1) - float(t0), r["steps"], len(r["probes"]), int(r.get("first_bad") == want))
PY
    rm -rf "$work"
  done
  python3 - "$tmp/rows" "$name" "$flags" "$k" <<'PY'
import sys
rows = [list(map(float, l.split())) for l in open(sys.argv[1]) if l.strip()]
name, flags, k = sys.argv[2:]
n = len(rows)
mean = lambda j: sum(r[j] for r in rows) / n
right = sum(int(r[3]) for r in rows)
ok = ("yes" if right else "no") if n == 1 else f"{right}/{n}"
print(f"| {name} | `{flags or '(plain)'}` | {k} | {mean(0):.1f} s | {mean(1):.1f} | {mean(2):.1f} | {ok} |")
PY
}
for k in 1 2 4; do run "deterministic, sleep $sleep_s s" "$det" "" "$k"; done
for k in 1 2 4; do run "50% flaky, sleep $sleep_s s" "$flaky" "--confidence 0.95" "$k"; done
