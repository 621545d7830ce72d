#!/usr/bin/env bash
# What the real HIP build test (tests/hip_build.rs) needs: the ROCm image built from Debian sid's
# own packages (scripts/rocm-image.sh sid: HIP 6.4.3, clang 21; nothing pulled from AMD). The
# tree it builds is the llama.cpp that 33-llama.sh unpacks (SETROWS_LLAMA_SRC: ggml-cuda/ and
# ggml-hip/ as upstream has them). Idempotent.
# Logs go to stderr; stdout carries one KEY=VALUE line: SETROWS_ROCM_IMAGE_SID.
# Needs root and podman (30-podman.sh runs first); without them it says so and prints nothing,
# and the test fails under CI.
set -euo pipefail
cd "$(dirname "$0")/../.."
log() { echo "35-rocm: $*" >&2; }

if [ "$(id -u)" != 0 ] || ! command -v podman >/dev/null; then
  log "needs root and podman (scripts/setup.d/30-podman.sh): the HIP build test will fail under CI"
  exit 0
fi
cache=${SETROWS_CONTAINER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/setrows-bisect/containers}
export CONTAINERS_CONF=${CONTAINERS_CONF:-$cache/containers.conf}
bash scripts/rocm-image.sh sid

