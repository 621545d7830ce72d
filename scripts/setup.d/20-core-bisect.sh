#!/usr/bin/env bash
# What the core bisect tests need beyond 00-base (cmake, ninja, ccache): the git CLI, which the
# tests use to inspect the repositories they generate and which `git bisect run` comparisons use.
# Idempotent; logs to stderr; prints nothing on stdout (no environment to add).
set -euo pipefail
if ! command -v git >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq git; } >&2
  else
    echo "20-core-bisect.sh: git is missing and cannot be installed without root; install git" >&2
    exit 1
  fi
fi
