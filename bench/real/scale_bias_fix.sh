#!/usr/bin/env bash
# Real case 1 (bench/real/README.md): the fix of ggml_scale_bias's x86 SIMD path, llama.cpp #16307.
# The user's command (default flags, CPU backend, the bundled replay with its default parameters)
# against `git bisect run` with the same build line and the same replay run, both cold
# (fresh clones, fresh build dirs, CCACHE_DISABLE=1), tool first, one run each.
#
#   bench/real/scale_bias_fix.sh ggml  [GGML_GIT_DIR]   # ggml-org/ggml 3ae98975..ecdd3836 (412 commits),
#                                                       # default the `fetch github:ggml-org/ggml` snapshot
#   [GIT_FIRST=1] bench/real/scale_bias_fix.sh pypi     # llama-cpp-python 0.3.14..0.3.17 vendored ggml
#                                                       # (scripts/setup.d/34-real-history.sh), what CI runs
#
# Prints one markdown row per side (answer, probes, wall), the expected answer, the replay's
# signature line on the answer's parent (the last broken tree) and each tool probe. KEEP=1 keeps
# the temp dir. The project ships no ggml code: the history is fetched or built from PyPI.
set -euo pipefail
cd "$(dirname "$0")/../.."
root_dir=$PWD
mode=${1:-ggml}
case $mode in
  ggml)
    src=${2:-/work/.mirror/ggml-org+ggml/repo}
    good=3ae98975 bad=ecdd3836 expected=ecdd3836 ;;
  pypi)
    src=$(bash scripts/setup.d/34-real-history.sh | sed -n 's/^SETROWS_REAL_GGML_HISTORY=//p')
    good=v0.3.14 bad=v0.3.17 expected=v0.3.17 ;;
  *) echo "usage: $0 ggml [GGML_GIT_DIR] | pypi" >&2; exit 2 ;;
esac
export GGML_NO_BACKTRACE=1 CCACHE_DISABLE=1
cargo build --release --quiet
BIN=$root_dir/target/release/setrows-bisect
root=$(mktemp -d /tmp/real-scale-bias-XXXX)
now() { date +%s.%N; }
git clone -q "$src" "$root/tool-src"
git clone -q "$src" "$root/git-src"
# Tags travel with the clone; resolve everything to full ids in the clone.
good=$(git -C "$root/tool-src" rev-parse "$good^{commit}")
bad=$(git -C "$root/tool-src" rev-parse "$bad^{commit}")
expected=$(git -C "$root/tool-src" rev-parse "$expected^{commit}")
commits=$(git -C "$root/tool-src" rev-list --count --first-parent "$good..$bad")

tool_side() {
# The user's command.
cmd=("$BIN" --repo "$root/tool-src" --good "$good" --bad "$bad" --regress success)
echo "command: setrows-bisect --repo <clone> --good ${good:0:8} --bad ${bad:0:8} --regress success  ($commits commits)"
t0=$(now)
"${cmd[@]}" --work-dir "$root/work" --json "$root/tool.json" --report "$root/tool.md" >"$root/tool.out" 2>&1 || true
t1=$(now)
read -r probes executed found < <(python3 -c "
import json; r=json.load(open('$root/tool.json'))
print(len(r['probes']), r['executed'], (r.get('first_bad') or '?'))")
tool_wall=$(python3 -c "print(round($t1 - $t0, 1))")
}

# git bisect run: the tool's build line (src/probe/repro.rs build_script and `--dry-run`: the ccache
# launcher, a pass-through under CCACHE_DISABLE=1, and GGML_CCACHE=OFF) and the replay's default run
# (matrix.toml [params.decode-reuse]); exit 0 while broken (old term), 1 once fixed (new term).
git_side() {
mkdir -p "$root/git-build"
cat >"$root/git-step.sh" <<STEP
#!/bin/sh
s=\$(date +%s.%N)
cmake -S '$root_dir/repro-kernels' -B '$root/git-build' -G Ninja -DCMAKE_BUILD_TYPE=Release \\
  -DCMAKE_EXPORT_COMPILE_COMMANDS=ON "-DGGML_SOURCE_DIR=\$PWD" -DGGML_CCACHE=OFF \\
  -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache >'$root/git-build.log' 2>&1 || exit 125
cmake --build '$root/git-build' --target setrows-replay >>'$root/git-build.log' 2>&1 || exit 125
b=\$(date +%s.%N)
'$root/git-build/setrows-replay' --mode reuse --steps 100000 --ring-rows 256 --check-every 1 >'$root/git-run.log' 2>&1
rc=\$?
echo "\$(git rev-parse --short=8 HEAD) build \$(python3 -c "print(round(\$b - \$s, 1))")s run \$(python3 -c "print(round(\$(date +%s.%N) - \$b, 1))")s rc \$rc" >>'$root/git-steps'
case \$rc in 0) exit 1 ;; 1) exit 0 ;; *) exit 125 ;; esac
STEP
t0=$(now)
(
  cd "$root/git-src"
  git bisect start --term-old=broken --term-new=fixed "$bad" "$good" >/dev/null
  git bisect run sh "$root/git-step.sh" >"$root/git.out" 2>&1 || true
)
t1=$(now)
git_found=$(grep -oE '^[0-9a-f]{40} is the first fixed commit' "$root/git.out" | cut -c1-40 || true)
git_runs=$(grep -c . "$root/git-steps" || true)
git_wall=$(python3 -c "print(round($t1 - $t0, 1))")
}

# GIT_FIRST=1 runs git's side first (the issue's once-in-the-other-order run): same clones, same cold builds.
if [ "${GIT_FIRST:-0}" = 1 ]; then git_side; tool_side; else tool_side; git_side; fi
echo "order: $([ "${GIT_FIRST:-0}" = 1 ] && echo 'git first' || echo 'tool first'); load at end: $(cut -d' ' -f1-3 /proc/loadavg)"

echo
echo "| side | answer | probes | wall s |"
echo "| --- | --- | --- | --- |"
echo "| setrows-bisect (user's command) | ${found:0:8} | $probes ($executed run) | $tool_wall |"
echo "| git bisect run | ${git_found:0:8} | $git_runs | $git_wall |"
echo "expected (the thread's fix): ${expected:0:8}  tool $([ "$found" = "$expected" ] && echo agrees || echo DIFFERS)  git $([ "$git_found" = "$expected" ] && echo agrees || echo DIFFERS)"
echo "ratio tool/git wall: $(python3 -c "print(round($tool_wall / $git_wall, 2))")"
python3 - "$root/tool.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
for p in r['probes']:
    print(f"tool probe {p['sha'][:8]} {p['outcome']} {p['verdict']} {p.get('duration_s') or 0:.1f}s signature: {p.get('signature') or '-'}")
PY
echo "git steps:"; cat "$root/git-steps"
grep -h 'SETROWS_MISMATCH' "$root"/work/logs/*.log 2>/dev/null | sort -u | head -3 || true
if [ "${KEEP:-}" = 1 ]; then echo "kept: $root"; else rm -rf "$root"; fi
