#!/usr/bin/env bash
# Wall time of real bisections with --jobs K = 1, 2, 4 on a generated repository whose test
# sleeps to stand in for a GPU run. Prints a markdown table (BENCHMARKS.md, "Flaky faults and
# multisection").
#
#   bench/flaky-wall.sh [commits] [sleep_s] [bug_at]
#
# Rows: a deterministic bug with plain bisection, and a 50%-reproducible bug with
# --confidence 0.95 (the failure draws from /dev/urandom, so that row varies run to run).
set -euo pipefail
commits=${1:-200}
sleep_s=${2:-0.3}
bug_at=${3:-137}
root=$(cd "$(dirname "$0")/.." && pwd)
cargo build --release --quiet --manifest-path "$root/Cargo.toml" >&2
bin="$root/target/release/setrows-bisect"
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
run() { # name script flags k
  local name=$1 script=$2 flags=$3 k=$4 work="$tmp/work-$RANDOM"
  local t0 t1
  t0=$(date +%s.%N)
  # shellcheck disable=SC2086
  "$bin" --repo "$repo" --good "$good" --bad "$bad" --script "$script" --jobs "$k" \
    --work-dir "$work" --json "$tmp/r.json" $flags >/dev/null 2>"$tmp/err" || true
  t1=$(date +%s.%N)
  python3 - "$tmp/r.json" "$name" "$flags" "$k" "$t0" "$t1" "$want" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
name, flags, k, t0, t1, want = sys.argv[2:]
right = "yes" if r.get("first_bad") == want else "no"
print(f"| {name} | `{flags or '(plain)'}` | {k} | {float(t1) - float(t0):.1f} s | {r['steps']} | {len(r['probes'])} | {right} |")
PY
}
for k in 1 2 4; do run "deterministic, sleep $sleep_s s" "$det" "" "$k"; done
for k in 1 2 4; do run "50% flaky, sleep $sleep_s s" "$flaky" "--confidence 0.95" "$k"; done
