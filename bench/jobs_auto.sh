#!/usr/bin/env bash
# `--jobs auto` on this host (issue 45 item 3): the CPU use of one cold ggml-cuda build, the K
# `--jobs auto` chooses from it, and the wall time of the same bisection with `--jobs auto`,
# `--jobs 1` and `git bisect run`.
#
#   bench/jobs_auto.sh TREE [COMMITS]
#
# TREE: a llama.cpp or ggml source, a git directory or a git bundle (no network needed).
# COMMITS (default 16): the first-parent range HEAD~COMMITS..HEAD. A fault is planted without
# rewriting history: the culprit is the middle commit that changes a file under ggml/src (or
# src/ for ggml), and a commit is "bad" when that file's blob is one the file has at or after
# the culprit (`git hash-object`, no .git needed in the checkout).
# Needs cmake, ninja, nvcc (CUDA arch 90), the release binary (cargo build --release) or
# SETROWS_BISECT_BIN. No ccache is used (CCACHE_DISABLE=1).
set -euo pipefail
TREE=$(realpath "$1")
COMMITS=${2:-16}
HERE=$(cd "$(dirname "$0")/.." && pwd)
BIN=${SETROWS_BISECT_BIN:-$HERE/target/release/setrows-bisect}
export CCACHE_DISABLE=1
T=$(mktemp -d /tmp/jobs-auto.XXXXXX)
echo "scratch: $T"
git clone -q "$TREE" "$T/repo"
R=$T/repo
cd "$R"
if [ -d ggml/src ]; then SUB=ggml/src; else SUB=src; fi
mapfile -t RANGE < <(git rev-list --first-parent --reverse "HEAD~$COMMITS..HEAD")
GOOD=$(git rev-parse "HEAD~$COMMITS")
BAD=${RANGE[-1]}
# The culprit: the first commit at or after the middle that changes a file under $SUB.
CULPRIT="" FILE=""
for ((i = ${#RANGE[@]} / 2; i < ${#RANGE[@]}; i++)); do
  f=$(git diff --name-only "${RANGE[i]}^" "${RANGE[i]}" -- "$SUB" | head -1)
  if [ -n "$f" ] && git cat-file -e "${RANGE[i]}:$f" 2>/dev/null; then CULPRIT=${RANGE[i]} FILE=$f; break; fi
done
[ -n "$CULPRIT" ] || { echo "no commit in the second half changes $SUB" >&2; exit 2; }
BLOBS=""
for ((j = i; j < ${#RANGE[@]}; j++)); do
  BLOBS+=" $(git rev-parse "${RANGE[j]}:$FILE" 2>/dev/null || true)"
done
echo "range: $GOOD..$BAD (${#RANGE[@]} commits), planted culprit $CULPRIT ($FILE)"
# BACKEND_FLAGS: the CUDA build by default; `BACKEND_FLAGS=-DGGML_CUDA=OFF` checks the script
# on a host without nvcc (its figures then are a CPU build's).
BACKEND_FLAGS=${BACKEND_FLAGS:--DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90}
CMAKE="-G Ninja -DCMAKE_BUILD_TYPE=Release $BACKEND_FLAGS -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DGGML_BUILD_TESTS=OFF -DGGML_BUILD_EXAMPLES=OFF"
BUILD="test -f build.ninja || cmake -S \"\$SRC\" -B . $CMAKE >/dev/null; cmake --build . --target ggml"
TEST="h=\$(git hash-object \"\$SRC/$FILE\"); case \" $BLOBS \" in *\" \$h \"*) exit 1;; esac; nvidia-smi -L >/dev/null; exit 0"

# 1. One cold ggml-cuda build of --bad, measured by bash's `time` (user + sys over real).
git worktree add -q "$T/cold" "$BAD"
TIMEFORMAT='%R %U %S'
read -r real user sys < <({ time (cd "$T/cold" && cmake -S . -B build $CMAKE >/dev/null && cmake --build build --target ggml >/dev/null && touch "$T/cold.ok"); } 2>&1 | tail -1)
[ -f "$T/cold.ok" ] || { echo "the cold ggml-cuda build failed (rerun it in $T/cold to see why)" >&2; exit 2; }
USE=$(awk -v r="$real" -v u="$user" -v s="$sys" 'BEGIN { printf "%.2f", (u + s) / r }')
echo "cold ggml-cuda build: ${real} s wall, ${user} s user, ${sys} s sys: CPU use ${USE} on $(nproc) cores"

# 2. The K --jobs auto chooses from that figure (the file a run on this work dir would write).
mkdir -p "$T/w-auto"
printf '{"cpu_s":%s,"wall_s":%s,"builds":1}' "$(awk -v u="$user" -v s="$sys" 'BEGIN{print u+s}')" "$real" > "$T/w-auto/build-use"
"$BIN" --repo "$R" --good "$GOOD" --bad "$BAD" --build "$BUILD" --script "$TEST" \
  --work-dir "$T/w-auto" --jobs auto --dry-run | grep -E '^(slots|expected probes):'

run() { # name, work dir, flags...
  local name=$1 w=$2; shift 2
  local t0 t1
  t0=$(date +%s.%N)
  "$BIN" --repo "$R" --good "$GOOD" --bad "$BAD" --build "$BUILD" --script "$TEST" \
    --work-dir "$w" --json "$w.json" "$@" >"$w.out" 2>"$w.err" || true
  t1=$(date +%s.%N)
  python3 - "$name" "$w.json" "$t0" "$t1" "$CULPRIT" <<'PY'
import json, sys
name, path, t0, t1, culprit = sys.argv[1:]
r = json.load(open(path))
probes = [p for p in r["probes"] if not p.get("cached")]
print(f"{name}: {float(t1) - float(t0):.0f} s wall, {len(probes)} probes, "
      f"answer {str(r.get('first_bad'))[:12]} ({'right' if r.get('first_bad') == culprit else 'WRONG'})")
PY
}
# 3. The same bisection, each in a fresh store (nothing reused between them).
run "--jobs auto" "$T/w-auto" --jobs auto
grep -h -- '--jobs auto:' "$T/w-auto.err" | head -1 || true
echo "recorded by that run: $(cat "$T/w-auto/build-use")"
run "--jobs 1" "$T/w-one" --jobs 1

# 4. git bisect run with the same build and test, one build dir.
git worktree add -q "$T/gb" "$BAD"
cat > "$T/gb.sh" <<SH
#!/usr/bin/env bash
export SRC=$T/gb
mkdir -p $T/gb-build && cd $T/gb-build || exit 125
$BUILD >/dev/null 2>&1 || exit 125
$TEST
SH
chmod +x "$T/gb.sh"
t0=$(date +%s.%N)
(cd "$T/gb" && git bisect start --first-parent "$BAD" "$GOOD" >/dev/null && git bisect run "$T/gb.sh" >"$T/gb.out" 2>&1; git bisect reset >/dev/null 2>&1) || true
t1=$(date +%s.%N)
found=$(grep -m1 -oE '^[0-9a-f]{40} is the first bad commit' "$T/gb.out" | cut -c1-40 || true)
steps=$(grep -c '^running' "$T/gb.out" || true)
echo "git bisect run: $(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.0f", b-a}') s wall, $steps runs, answer ${found:0:12} ($([ "$found" = "$CULPRIT" ] && echo right || echo WRONG))"
