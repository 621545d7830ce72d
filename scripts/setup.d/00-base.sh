#!/usr/bin/env bash
# Build tools every part of the test suite uses: cmake (the demo's C library, the reproducers),
# ninja, ccache; jq, which the workflows' scripts use (tests/github_actions_run executes them). Prints nothing on stdout except KEY=VALUE lines for the test environment.
set -euo pipefail
need=()
for t in cmake ninja ccache jq; do command -v "$t" >/dev/null || need+=("$t"); done
if [ ${#need[@]} -gt 0 ]; then
  pkgs=("${need[@]/ninja/ninja-build}")
  if [ "$(id -u)" = 0 ]; then
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${pkgs[@]}"; } >&2
  else
    # jq has no pip wheel here: without root the workflow test fails loudly under CI.
    python3 -m pip install -q --user cmake ninja >&2
    echo "PATH=$HOME/.local/bin:$PATH"
  fi
fi
