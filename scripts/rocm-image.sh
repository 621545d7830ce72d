#!/usr/bin/env bash
# Builds a ROCm/HIP build image from Debian's own packages, with nothing pulled from a registry:
#   scripts/rocm-image.sh sid      -> localhost/setrows-rocm:6.4.3-sid     (HIP 6.4, clang 21)
#   scripts/rocm-image.sh trixie   -> localhost/setrows-rocm:5.7.1-trixie  (HIP 5.7, LLVM 17)
# Steps: debootstrap a minbase root of the suite (once, cached), import it as
# localhost/setrows-base:<suite>, then containers/rocm-debian.Dockerfile on top. Idempotent: an
# existing image is kept (FORCE=1 rebuilds). Logs go to stderr; stdout carries one line,
# SETROWS_ROCM_IMAGE_<SUITE>=<ref>, for scripts and tests.
# Exit 2: bad input (unknown suite); 3: the machinery (tool missing, no space, debootstrap or
# podman failed), always with one line on stderr saying which.
set -euo pipefail
cd "$(dirname "$0")/.."
die() { echo "rocm-image: $2" >&2; exit "$1"; }
# debootstrap needs root; a hosted runner's user has sudo, and its rootless podman imports the tree.
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
log() { echo "rocm-image: $*" >&2; }

suite=${1:-}
case "$suite" in
  sid) rocm=6.4.3 llvm=21 ;;
  trixie) rocm=5.7.1 llvm=17 ;;
  *) die 2 "usage: scripts/rocm-image.sh sid|trixie (got '${suite}')" ;;
esac
tag="localhost/setrows-rocm:${rocm}-${suite}"
base="localhost/setrows-base:${suite}"
engine=${SETROWS_ENGINE:-podman}
command -v "$engine" >/dev/null || die 3 "$engine is not installed (scripts/setup.d/30-podman.sh installs podman)"
out_line() { echo "SETROWS_ROCM_IMAGE_${suite^^}=$tag"; }

if [ "${FORCE:-0}" != 1 ] && "$engine" image exists "$tag" 2>/dev/null; then
  log "$tag exists (FORCE=1 rebuilds)"
  out_line
  exit 0
fi

cache=${SETROWS_CONTAINER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/setrows-bisect/containers}
mkdir -p "$cache"
# About 0.5 GB downloaded and 5 GB unpacked, then committed as a layer: the rootfs cache and the
# engine's storage each need room. Checked first so a full disk is one clear line, not a
# half-written layer an hour later.
need_mb=${SETROWS_ROCM_IMAGE_MIN_FREE_MB:-12000}
store=$("$engine" info --format '{{.Store.GraphRoot}}' 2>/dev/null || echo /var/lib/containers)
for d in "$cache" "$store"; do
  mkdir -p "$d"
  free=$(df -Pm "$d" | awk 'NR == 2 { print $4 }')
  [ "$free" -ge "$need_mb" ] ||
    die 3 "only ${free} MB free under $d; a ROCm image needs about ${need_mb} MB (SETROWS_ROCM_IMAGE_MIN_FREE_MB)"
done

start=$(date +%s)
if ! "$engine" image exists "$base" 2>/dev/null; then
  command -v debootstrap >/dev/null || as_root apt-get install -y -qq debootstrap >&2 ||
    die 3 "debootstrap is not installed and could not be (apt-get install debootstrap)"
  root="$cache/${suite}-rootfs"
  if [ ! -x "$root/bin/sh" ]; then
    log "debootstrap minbase $suite into $root"
    as_root rm -rf "$root"
    as_root debootstrap --variant=minbase "$suite" "$root" "${DEBIAN_MIRROR:-http://deb.debian.org/debian}" >&2 ||
      die 3 "debootstrap $suite failed (network, mirror or disk; see above)"
  fi
  log "importing $root as $base ($(( $(date +%s) - start )) s so far)"
  as_root tar -C "$root" -c . | "$engine" import - "$base" >&2 || die 3 "$engine import of $root failed"
fi

log "building $tag from containers/rocm-debian.Dockerfile on $base"
blog=$(mktemp)
if ! "$engine" build --build-arg BASE_IMAGE="$base" --build-arg ROCM_VERSION="$rocm" \
     --build-arg SUITE="$suite" --build-arg HIP_CLANG_PATH="/usr/lib/llvm-$llvm/bin" \
     --build-arg HIP_DEVICE_LIB_PATH="/usr/lib/llvm-$llvm/lib/clang/$llvm/amdgcn/bitcode" -f containers/rocm-debian.Dockerfile -t "$tag" containers/ 2>&1 |
     tee "$blog" >&2; then
  if grep -qi 'no space left on device' "$blog"; then
    rm -f "$blog"
    die 3 "no space left on device while building $tag (free space under $store and retry)"
  fi
  why=$(grep -E '^(rocm-debian|E:|Error|error)' "$blog" | tail -n 1)
  rm -f "$blog"
  die 3 "building $tag failed: ${why:-see the log above}"
fi
rm -f "$blog"
log "built $tag in $(( $(date +%s) - start )) s, $("$engine" image inspect "$tag" --format '{{.Size}}') bytes"
out_line
