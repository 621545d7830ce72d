#!/usr/bin/env bash
# Every test target, with the long ones beside the rest instead of after them. A long test
# waits on a compiler for minutes (the cold HIP build in a container, the decode bisect's
# llama.cpp build); the others wait mostly on short processes, so on CI's two cores running both
# at once costs far less than their sum.
# Same targets and the same failure rule as `cargo test --all-targets`; the long tests' output
# is printed whole when they end, not interleaved.
set -euo pipefail
cd "$(dirname "$0")/.."
long=(hip_build decode_bisect)

# Build everything first: one cargo at a time holds the build directory.
cargo test --locked --all-targets --no-run
exe() {
  cargo test --locked --test "$1" --no-run --message-format=json 2>/dev/null |
    python3 -c 'import json,sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == sys.argv[1]:
        print(m["executable"])' "$1"
}

logs=$(mktemp -d)
pids=()
# A stopped run stops the long tests too, with everything they started (their own process
# group: setsid).
# shellcheck disable=SC2317
stop() {
  for p in "${pids[@]}"; do [ -z "$p" ] || kill -- "-$p" 2>/dev/null || true; done
  rm -rf "$logs"
}
trap stop EXIT
for t in "${long[@]}"; do
  bin=$(exe "$t")
  [ -n "$bin" ] || { echo "test-split: no executable for tests/$t.rs" >&2; exit 1; }
  echo "== $t runs beside the other tests (output when it ends)" >&2
  setsid "$bin" >"$logs/$t.log" 2>&1 &
  pids+=($!)
done

targets=(--lib --bins --examples)
for f in tests/*.rs; do
  name=$(basename "$f" .rs)
  case " ${long[*]} " in *" $name "*) continue ;; esac
  targets+=(--test "$name")
done
status=0
# --no-fail-fast: one red run names every failing target, not only the first (CI's 25 minutes
# would otherwise be spent again per failure).
cargo test --locked --no-fail-fast "${targets[@]}" || status=$?

for i in "${!long[@]}"; do
  rc=0
  wait "${pids[$i]}" || rc=$?
  pids[i]=""
  echo "== ${long[$i]} (exit $rc)"
  cat "$logs/${long[$i]}.log"
  [ "$rc" -eq 0 ] || status=$rc
done
exit "$status"
