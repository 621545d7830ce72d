#!/usr/bin/env bash
# A prebuilt ggml for the reproducer tests (tests/repro_*.rs): PyPI's libggml-python wheel, pinned,
# in a private virtual environment so no system Python is changed. Idempotent. Logs go to stderr;
# stdout carries only SETROWS_GGML_DIR=<dir holding ggmlConfig.cmake>.
set -euo pipefail
version=0.20.2.post1
venv=${SETROWS_GGML_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/setrows-bisect/libggml-venv}
py=$venv/bin/python3
find_dir() {
  "$py" -c "import libggml, os; print(os.path.join(os.path.dirname(libggml.__file__), 'lib64', 'cmake', 'ggml'))" 2>/dev/null
}
dir=$( [ -x "$py" ] && find_dir || true )
# The reproducer tests also compile C++ against it: a fresh Debian 12 has neither g++ nor venv.
need=()
command -v g++ >/dev/null 2>&1 || need+=(g++)
command -v python3 >/dev/null 2>&1 || need+=(python3)
python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || need+=(python3-venv)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}"; } >&2
  else
    echo "20-ggml.sh: missing ${need[*]}; install them (apt-get install ${need[*]})" >&2
    exit 1
  fi
fi
if [ -z "$dir" ] || [ ! -f "$dir/ggmlConfig.cmake" ]; then
  echo "20-ggml.sh: installing libggml-python==$version into $venv" >&2
  python3 -m venv "$venv" >&2
  "$py" -m pip install -q --disable-pip-version-check "libggml-python==$version" >&2
  dir=$(find_dir)
fi
if [ ! -f "$dir/ggmlConfig.cmake" ]; then
  echo "20-ggml.sh: libggml-python installed but no ggmlConfig.cmake under $dir" >&2
  exit 1
fi
echo "SETROWS_GGML_DIR=$dir"
