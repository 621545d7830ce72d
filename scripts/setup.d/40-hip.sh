#!/usr/bin/env bash
# A HIP device compiler for scripts/hip-compile.sh: clang 19 (AMDGPU target, gfx1151 known) with
# lld, and the HIP runtime headers from Debian 12's main archive (libamdhip64-dev 5.2.3). No AMD GPU
# is needed: hip-compile.sh only compiles device code to AMDGPU assembly and checks it.
# Idempotent. Logs go to stderr; stdout carries only KEY=VALUE lines (tests/hip_compile.rs needs
# HIP_CLANG and HIP_INCLUDE; under CI it fails without them):
#   HIP_CLANG=/usr/bin/clang++-19  HIP_INCLUDE=/usr/include  HIP_VERSION=5.2.21153
# Not root and the tools missing: says so and prints nothing (hip-compile.sh then fails clearly).
set -euo pipefail
log() { echo "40-hip: $*" >&2; }

clang=${HIP_CLANG:-/usr/bin/clang++-19}
hdr=/usr/include/hip/hip_runtime.h
need=()
[ -x "$clang" ] || need+=(clang-19)
command -v ld.lld-19 >/dev/null 2>&1 || need+=(lld-19)
[ -f "$hdr" ] || need+=(libamdhip64-dev)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    log "missing ${need[*]} and not root: install them (apt-get install ${need[*]}) to compile HIP"
    exit 0
  fi
  log "installing ${need[*]}"
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}"; } >&2
fi
if [ ! -x "$clang" ] || [ ! -f "$hdr" ]; then
  log "installed, but $clang or $hdr is still missing"
  exit 1
fi
ver=$(awk '/#define HIP_VERSION_(MAJOR|MINOR|PATCH)/ { v = v (v == "" ? "" : ".") $3 } END { print v }' \
  /usr/include/hip/hip_version.h 2>/dev/null || true)
echo "HIP_CLANG=$clang"
echo "HIP_INCLUDE=/usr/include"
echo "HIP_VERSION=${ver:-unknown}"
