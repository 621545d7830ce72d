#!/usr/bin/env bash
# The README's test command. Installs what a fresh machine lacks (each concern has one script
# under scripts/setup.d/, which prints the environment its tests need), then runs every test.
# The Rust build (clippy, then every test target) needs none of the setup: it runs beside it.
# On a fresh machine the setup mostly waits on the package registries (debootstrap, apt in the
# ROCm image, PyPI) and the build mostly waits on two cores; one after the other, CI paid both.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo fmt --check

build_log=$(mktemp)
envfile=$(mktemp)
# Its own process group (setsid), so that a failed setup or a stopped run stops cargo too.
setsid bash -c 'cargo clippy --all-targets --locked -- -D warnings &&
  cargo test --locked --all-targets --no-run' >"$build_log" 2>&1 &
build=$!
# shellcheck disable=SC2317
cleanup() {
  [ -z "$build" ] || kill -- "-$build" 2>/dev/null || true
  rm -f "$build_log" "$envfile"
}
trap cleanup EXIT
echo "== build: clippy and the test targets compile beside the setup (output when both end)" >&2

for s in scripts/setup.d/*.sh; do
  [ -f "$s" ] || continue
  echo "== setup: $s" >&2
  bash "$s" >>"$envfile"
done
set -a
# shellcheck disable=SC1090
. "$envfile"
set +a

rc=0
wait "$build" || rc=$?
build=""
echo "== build (exit $rc)" >&2
cat "$build_log" >&2
[ "$rc" -eq 0 ] || exit "$rc"

if [ $# -gt 0 ]; then
  cargo test --locked --all-targets "$@"
else
  ./scripts/test-split.sh
fi
# --all-targets leaves out doc tests; examples in doc comments must compile and pass too.
cargo test --locked --doc
