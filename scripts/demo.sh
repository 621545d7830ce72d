#!/usr/bin/env bash
# The README's first command: bisect a generated C library's history on this machine (no
# network beyond installing cmake when it is missing). Extra arguments go to `demo`
# (e.g. --seed 7, --commits 500, --out DIR, --jobs 2).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v cmake >/dev/null; then
  echo "demo.sh: cmake is missing; installing it" >&2
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq cmake >&2
  else
    python3 -m pip install -q --user cmake >&2
    export PATH="$HOME/.local/bin:$PATH"
  fi
fi
exec cargo run --quiet --release -- demo "$@"
