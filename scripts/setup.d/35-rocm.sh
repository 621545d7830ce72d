#!/usr/bin/env bash
# What the real HIP build test (tests/hip_build.rs) needs: the ROCm image built from Debian sid's
# own packages (scripts/rocm-image.sh sid: HIP 6.4.3, clang 21; nothing pulled from AMD) and a
# real ggml source tree with its HIP backend. CI reaches no GitHub, so the tree comes from a
# package registry: the llama-cpp-python sdist on PyPI vendors llama.cpp, ggml/ included
# (ggml-cuda/ and ggml-hip/ as upstream has them). Pinned, cached, idempotent.
# Logs go to stderr; stdout carries KEY=VALUE lines: SETROWS_ROCM_IMAGE_SID, SETROWS_HIP_GGML_SRC.
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

version=0.3.36
src_cache=${XDG_CACHE_HOME:-$HOME/.cache}/setrows-bisect/hip-ggml-$version
if [ ! -f "$src_cache/ggml/src/ggml-hip/CMakeLists.txt" ]; then
  log "fetching llama-cpp-python==$version (sdist) from PyPI for its vendored ggml"
  tmp=$(mktemp -d)
  # 33-llama.sh keeps the same sdist: no second download
  sdist=${XDG_CACHE_HOME:-$HOME/.cache}/setrows-bisect/sdist/llama_cpp_python-$version.tar.gz
  if [ -f "$sdist" ]; then cp "$sdist" "$tmp/"; else
    python3 -m pip download -q --disable-pip-version-check --no-binary :all: --no-deps \
      "llama-cpp-python==$version" -d "$tmp" >&2
  fi
  rm -rf "$src_cache"
  mkdir -p "$src_cache"
  tar -xzf "$tmp"/llama_cpp_python-"$version".tar.gz -C "$src_cache" --strip-components=3 \
    "llama_cpp_python-$version/vendor/llama.cpp/ggml"
  rm -rf "$tmp"
fi
[ -f "$src_cache/ggml/src/ggml-hip/CMakeLists.txt" ] || { log "no ggml/src/ggml-hip in the sdist"; exit 1; }
echo "SETROWS_HIP_GGML_SRC=$src_cache/ggml"
