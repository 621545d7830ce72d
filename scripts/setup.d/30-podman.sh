#!/usr/bin/env bash
# Container engine for the container tests: podman (+ runc, the runtime that works as root here),
# a local Debian base image made with debootstrap (so no registry pull is needed), the CPU build
# image from containers/cpu.Dockerfile on top of it, and a second image derived from it (a matrix
# over two images). Idempotent: images that exist are reused, and podman's layer cache makes the
# rebuild a no-op. Logs go to stderr; stdout carries only KEY=VALUE lines for the tests.
set -euo pipefail
cd "$(dirname "$0")/../.."
log() { echo "30-podman: $*" >&2; }

need=()
for t in podman runc debootstrap; do command -v "$t" >/dev/null || need+=("$t"); done
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    log "missing ${need[*]} and not root: container tests will fail under CI=true"
    exit 0
  fi
  log "installing podman runc debootstrap"
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman runc debootstrap; } >&2
fi

cache=${SETROWS_CONTAINER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/setrows-bisect/containers}
mkdir -p "$cache"
conf="$cache/containers.conf"
cat >"$conf" <<'CONF'
# Written by scripts/setup.d/30-podman.sh. As root on this kind of host, podman needs runc
# (crun is missing or unusable) and ulimits the host's hard limits can satisfy.
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]

[engine]
runtime = "runc"
CONF
export CONTAINERS_CONF="$conf"
echo "CONTAINERS_CONF=$conf"

base=localhost/setrows-base:bookworm
if ! podman image exists "$base"; then
  root="$cache/bookworm-rootfs"
  if [ ! -x "$root/bin/sh" ]; then
    log "debootstrap minbase bookworm into $root (a few minutes, once)"
    rm -rf "$root"
    debootstrap --variant=minbase bookworm "$root" http://deb.debian.org/debian >&2
  fi
  log "importing $root as $base"
  tar -C "$root" -c . | podman import - "$base" >&2
fi
echo "SETROWS_BASE_IMAGE=$base"

cpu=localhost/setrows-cpu:bookworm
log "building $cpu from containers/cpu.Dockerfile on $base"
podman build -q --build-arg BASE_IMAGE="$base" -f containers/cpu.Dockerfile -t "$cpu" containers/ >&2
echo "SETROWS_TEST_IMAGE=$cpu"

# A second, distinct image (own digest) for matrix tests: the CPU image plus a marker file that
# test scripts can read, standing in for "a different ROCm version".
variant=localhost/setrows-cpu-variant:bookworm
printf 'FROM %s\nRUN echo variant > /etc/setrows-variant\n' "$cpu" |
  podman build -q -t "$variant" -f - containers/ >&2
echo "SETROWS_TEST_IMAGE_B=$variant"
