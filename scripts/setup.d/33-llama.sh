#!/usr/bin/env bash
# What the decode probe's tests (tests/decode_*.rs) need: a whole llama.cpp source tree. CI
# reaches no GitHub, so it comes from a package registry: the llama-cpp-python sdist on PyPI
# vendors llama.cpp (vendor/llama.cpp, with ggml/). Pinned, cached, idempotent; the sdist itself
# is kept under the cache so 35-rocm.sh (its ggml/) does not fetch it a second time.
# Logs go to stderr; stdout carries SETROWS_LLAMA_SRC=<tree>. tests/decode_bisect.rs builds
# llama.cpp from it once, through the tool.
set -euo pipefail
cd "$(dirname "$0")/../.."
log() { echo "33-llama: $*" >&2; }

version=0.3.36
cache=${XDG_CACHE_HOME:-$HOME/.cache}/setrows-bisect
sdist=$cache/sdist/llama_cpp_python-$version.tar.gz
src=$cache/llama-cpp-$version
if [ ! -f "$src/include/llama.h" ] || [ ! -f "$src/src/llama-kv-cache.cpp" ]; then
  if [ ! -f "$sdist" ]; then
    log "fetching llama-cpp-python==$version (sdist) from PyPI for its vendored llama.cpp"
    mkdir -p "$cache/sdist"
    tmp=$(mktemp -d "$cache/sdist/.dl-XXXXXX")
    python3 -m pip download -q --disable-pip-version-check --no-binary :all: --no-deps \
      "llama-cpp-python==$version" -d "$tmp" >&2
    mv "$tmp/llama_cpp_python-$version.tar.gz" "$sdist"
    rm -rf "$tmp"
  fi
  rm -rf "$src.tmp"
  mkdir -p "$src.tmp"
  tar -xzf "$sdist" -C "$src.tmp" --strip-components=3 "llama_cpp_python-$version/vendor/llama.cpp"
  rm -rf "$src"
  mv "$src.tmp" "$src"
fi
[ -f "$src/include/llama.h" ] || { log "no include/llama.h in the sdist's vendor/llama.cpp"; exit 1; }
command -v cmake >/dev/null && command -v g++ >/dev/null || log "cmake and g++ are needed to build it (20-ggml.sh, 20-core-bisect.sh)"
echo "SETROWS_LLAMA_SRC=$src"
