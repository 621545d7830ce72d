#!/usr/bin/env bash
# The README's test command. Installs what a fresh machine lacks (each concern has one script
# under scripts/setup.d/, which prints the environment its tests need), then runs every test.
set -euo pipefail
cd "$(dirname "$0")/.."
envfile=$(mktemp)
for s in scripts/setup.d/*.sh; do
  [ -f "$s" ] || continue
  echo "== setup: $s" >&2
  bash "$s" >>"$envfile"
done
# shellcheck disable=SC1090
set -a; . "$envfile"; set +a
rm -f "$envfile"
cargo fmt --check
cargo clippy --all-targets --locked -- -D warnings
if [ $# -gt 0 ]; then
  cargo test --locked --all-targets "$@"
else
  ./scripts/test-split.sh
fi
# --all-targets leaves out doc tests; examples in doc comments must compile and pass too.
cargo test --locked --doc
