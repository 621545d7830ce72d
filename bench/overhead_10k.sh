#!/usr/bin/env bash
# Orchestration overhead: a synthetic 10,000-commit linear history (written with git
# fast-import) whose trivial test flips at one commit. Reports the tool's own time: wall time of
# the whole command minus the time the probes themselves took (from --json), for a cold run and
# for a repeated run that answers from the store.
#
#   bench/overhead_10k.sh [COMMITS] [FLIP_AT]      (defaults: 10000 7013)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
BIN=$PWD/target/release/setrows-bisect
n=${1:-10000}; flip=${2:-7013}
root=$(mktemp -d /tmp/setrows-overhead-XXXX)
git init -q -b main "$root/repo"
python3 - "$n" "$flip" >"$root/stream" <<'PY'
import sys
n, flip = int(sys.argv[1]), int(sys.argv[2])
w = sys.stdout.buffer.write
for i in range(n):
    state = b"bad\n" if i >= flip else b"good\n"
    num = b"%d\n" % i
    msg = b"commit %d\n" % i
    w(b"commit refs/heads/main\nmark :%d\ncommitter Bench <b@e> %d +0000\n" % (i + 1, 1700000000 + i))
    w(b"data %d\n%s" % (len(msg), msg))
    if i > 0:
        w(b"from :%d\n" % i)
    w(b"M 100644 inline n\ndata %d\n%s" % (len(num), num))
    w(b"M 100644 inline state\ndata %d\n%s\n" % (len(state), state))
PY
git -C "$root/repo" fast-import --quiet <"$root/stream"
good=$(git -C "$root/repo" rev-list --max-parents=0 main)
expected=$(git -C "$root/repo" rev-list --reverse main | sed -n "$((flip + 1))p")
for run in cold repeat; do
  t0=$(date +%s.%N)
  "$BIN" --repo "$root/repo" --good "$good" --bad main --script 'grep -q good state' \
    --work-dir "$root/work" --json "$root/$run.json" >/dev/null 2>&1 || true
  t1=$(date +%s.%N)
  python3 - "$root/$run.json" "$t0" "$t1" "$expected" "$run" "$n" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); t0, t1 = float(sys.argv[2]), float(sys.argv[3])
probe = sum(p["duration_s"] for p in r["probes"] if not p["cached"])
wall = t1 - t0
print(f"| {sys.argv[6]} commits | {sys.argv[5]} | {len(r['probes'])} probes ({r['executed']} run) | "
      f"found: {'yes' if r['first_bad'] == sys.argv[4] else 'NO'} | wall {wall:.3f}s | "
      f"probes {probe:.3f}s | tool's own {wall - probe:.3f}s |")
PY
done
rm -rf "$root"
