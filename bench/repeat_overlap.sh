#!/usr/bin/env bash
# Reuse benchmark: a cold bisect of the demo repository, then (same work dir) the same command
# again, then a bisect of an overlapping range (commits 30..280; seed 3 has a broken build at 14..22) (different endpoints, inside the first), first
# with --lazy-endpoints and then with the default endpoint verification. Prints wall times and
# how many probes ran versus came from the store.
#
#   bench/repeat_overlap.sh [SEED]      (default seed 3)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
BIN=$PWD/target/release/setrows-bisect
seed=${1:-3}
root=$(mktemp -d /tmp/setrows-repeat-XXXX)
eval "$("$BIN" demo --seed "$seed" --out "$root" --generate-only 2>/dev/null)"
g2=$(git -C "$REPO" rev-list --reverse main | sed -n 31p)    # commit 30
b2=$(git -C "$REPO" rev-list --reverse main | sed -n 281p)   # commit 280
run() { # label good bad extra...
  local label=$1 good=$2 bad=$3; shift 3
  local t0 t1; t0=$(date +%s.%N)
  "$BIN" --repo "$REPO" --good "$good" --bad "$bad" --build "$BUILD" --script "$TEST" \
    --work-dir "$root/work" --json "$root/r.json" "$@" >/dev/null 2>&1 || true
  t1=$(date +%s.%N)
  python3 - "$root/r.json" "$t0" "$t1" "$label" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); wall = float(sys.argv[3]) - float(sys.argv[2])
print(f"| {sys.argv[4]} | {len(r['probes'])} | {r['executed']} | {r['first_bad'][:12] if r['first_bad'] else None} | {wall:.2f} |")
PY
}
echo "| run (seed $seed, 300 commits) | probes | run now | first bad | wall s |"
echo "|-----|--------|---------|-----------|--------|"
run "cold, commits 0..299" "$GOOD" "$BAD"
run "same command again" "$GOOD" "$BAD"
run "overlap 30..280, --lazy-endpoints" "$g2" "$b2" --lazy-endpoints
run "overlap 30..280, default (verifies endpoints)" "$g2" "$b2"
rm -rf "$root"
