#!/usr/bin/env bash
# A build bisect over real ggml history in a ROCm image: when did ggml stop building for gfx1151
# under the image's HIP? setrows-bisect `--regress build` against `git bisect run`, the same build
# line (bench/hip/build.sh: configure ggml's HIP backend for gfx1151, compile set-rows.cu) run in
# the same image by both, both cold (fresh clones, build dirs and ccache), back to back.
#
#   bench/hip_build_bisect.sh GGML_GIT_DIR GOOD BAD [IMAGE]   (IMAGE: localhost/setrows-rocm:5.7.1-trixie)
#
# GOOD builds, BAD does not. Prints one markdown row per tool (probes, builds, answer, wall, load)
# and each tool's per-probe build times. KEEP=1 keeps the temp dir. Needs podman and the image
# (scripts/rocm-image.sh trixie).
set -euo pipefail
cd "$(dirname "$0")/.."
MIRROR=$1 GOOD=$2 BAD=$3 IMAGE=${4:-localhost/setrows-rocm:5.7.1-trixie}
BIN=${BIN:-$PWD/target/release/setrows-bisect}
[ -x "$BIN" ] || cargo build --release --quiet
BUILD=$(cat bench/hip/build.sh)
root=$(mktemp -d /tmp/hip-bisect-XXXX)
now() { date +%s.%N; }
load() { cut -d' ' -f1 /proc/loadavg; }
for d in tool-src git-src; do git clone -q "$MIRROR" "$root/$d"; git -C "$root/$d" checkout -q "$BAD"; done

l0=$(load); t0=$(now)
"$BIN" --repo "$root/tool-src" --good "$GOOD" --bad "$BAD" --regress build --build "$BUILD" \
  --engine podman --image "$IMAGE" --work-dir "$root/work" --json "$root/tool.json" \
  >"$root/tool.out" 2>&1 || true
t1=$(now)
python3 - "$root/tool.json" "$(python3 -c "print($t1 - $t0)")" "$l0" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
built = [p for p in r["probes"] if not p.get("cached")]
print(f"| setrows-bisect --regress build | {len(r['probes'])} | {len(built)} | {(r.get('first_bad') or '?')[:8]} | {float(sys.argv[2]):.1f} | {sys.argv[3]} |")
print("tool probes:", " ".join(f"{p['sha'][:8]}:{p['outcome']}:{p.get('duration_s') or 0:.1f}s" for p in r["probes"]))
PY

# git bisect run: the same script in the same image, one persistent build dir and ccache.
mkdir -p "$root/git-work"
printf '%s\n' "$BUILD" >"$root/build.sh"
cat >"$root/step.sh" <<STEP
#!/bin/sh
s=\$(date +%s.%N)
podman run --rm --pull never --network none -v "$root/git-src:/src:ro" -v "$root/git-work:/work" \
  -v "$root/build.sh:/build.sh:ro" -e SRC=/src -e WORK=/work -e CCACHE_DIR=/work/ccache \
  "$IMAGE" sh /build.sh >/dev/null 2>&1
rc=\$?
echo "\$(git -C "$root/git-src" rev-parse --short=8 HEAD):\$rc:\$(python3 -c "print(round(\$(date +%s.%N) - \$s, 1))")s" >> "$root/git-times"
[ \$rc -eq 0 ] && exit 0 || exit 1
STEP
chmod +x "$root/step.sh"
l0=$(load); t0=$(now)
(
  cd "$root/git-src"
  git bisect start "$BAD" "$GOOD" >/dev/null
  git bisect run "$root/step.sh" >"$root/git.out" 2>&1 || true
)
t1=$(now)
found=$(grep -oE '^[0-9a-f]{40} is the first bad commit' "$root/git.out" | cut -c1-8 || true)
runs=$(wc -l < "$root/git-times")
printf '| git bisect run | %s | %s | %s | %.1f | %s |\n' "$runs" "$runs" "${found:-?}" "$(python3 -c "print($t1 - $t0)")" "$l0"
echo "git builds: $(tr '\n' ' ' < "$root/git-times")"
if [ "${KEEP:-}" = 1 ]; then echo "kept: $root"; else rm -rf "$root"; fi
