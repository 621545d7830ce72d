#!/usr/bin/env bash
# Core bisect benchmark: setrows-bisect against `git bisect run` on the demo repository, with
# the same CMake build and the same test, for several seeds (each seed plants the change at a
# different commit). Prints one markdown table row per seed and tool.
#
#   bench/core_vs_git_bisect.sh [SEEDS...]      (default seeds: 1 2 3 4 5)
#
# Both tools start cold (fresh build dir, fresh ccache dir) and both use ccache. git bisect run
# trusts the endpoints; setrows-bisect verifies them first by default, so it is measured both
# ways (default, and --lazy-endpoints which, like git, tests an endpoint only when the answer
# touches it). A third setrows-bisect run repeats the first command (answers from the store).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
BIN=$PWD/target/release/setrows-bisect
seeds=("$@"); [ ${#seeds[@]} -gt 0 ] || seeds=(1 2 3 4 5)
GEN=""; command -v ninja >/dev/null && GEN="-G Ninja"
now() { date +%s.%N; }
echo "| seed | planted | tool | probes (builds+tests) | found | wall s |"
echo "|------|---------|------|-----------------------|-------|--------|"
for seed in "${seeds[@]}"; do
  root=$(mktemp -d /tmp/setrows-bench-XXXX)
  eval "$("$BIN" demo --seed "$seed" --out "$root" --generate-only 2>/dev/null)"
  planted=$(git -C "$REPO" log --format=%H --grep='speed up index wrap' | head -1)
  planted_idx=$(( $(git -C "$REPO" rev-list --count "$planted") - 1 ))
  for mode in default lazy repeat; do
    case $mode in
      default) wd=$root/work; extra=() ;;
      lazy) wd=$root/work-lazy; extra=(--lazy-endpoints) ;;
      repeat) wd=$root/work; extra=() ;;
    esac
    t0=$(now)
    "$BIN" --repo "$REPO" --good "$GOOD" --bad "$BAD" --build "$BUILD" --script "$TEST" \
      --work-dir "$wd" --json "$root/$mode.json" "${extra[@]}" >/dev/null 2>&1 || true
    t1=$(now)
    read -r probes executed found < <(python3 -c "
import json,sys; r=json.load(open('$root/$mode.json'))
print(len(r['probes']), r['executed'], 'yes' if r['first_bad']=='$planted' else 'NO')")
    printf '| %s | %s | setrows-bisect %s | %s (%s run) | %s | %.1f |\n' "$seed" "$planted_idx" "$mode" "$probes" "$executed" "$found" "$(python3 -c "print($t1 - $t0)")"
  done
  # git bisect run, in the repository's own working tree (that is how git works).
  export CCACHE_DIR=$root/git-ccache CMAKE_C_COMPILER_LAUNCHER=ccache
  t0=$(now)
  (
    cd "$REPO"
    git bisect start "$BAD" "$GOOD" >/dev/null
    git bisect run sh -c "{ test -f build/CMakeCache.txt || cmake -S . -B build $GEN -DCMAKE_BUILD_TYPE=Release; cmake --build build --target ringbuf_test; } >/dev/null 2>&1 || exit 125; ./build/ringbuf_test" >"$root/git-bisect.out" 2>&1 || true
  )
  t1=$(now)
  found=$(grep -q "^$planted is the first bad commit" "$root/git-bisect.out" && echo yes || echo NO)
  runs=$(git -C "$REPO" bisect log | grep -cE '^git bisect (good|bad|skip) ' || true)
  git -C "$REPO" bisect reset >/dev/null 2>&1 || true
  unset CCACHE_DIR CMAKE_C_COMPILER_LAUNCHER
  printf '| %s | %s | git bisect run | %s | %s | %.1f |\n' "$seed" "$planted_idx" "$runs" "$found" "$(python3 -c "print($t1 - $t0)")"
  rm -rf "$root"
done
