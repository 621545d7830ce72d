#!/usr/bin/env bash
# A real ggml history for tests/real_regression.rs, from what PyPI holds: every llama-cpp-python
# sdist vendors llama.cpp (vendor/llama.cpp, with ggml/) at a pinned commit, so consecutive
# versions are a real, coarse history. One commit per version, its tree the vendored ggml/,
# tagged with the version. The case it carries (bench/real/README.md, case 1): ggml_scale_bias's
# SIMD path was wrong from ggml 3ae98975 (2025-07-09) to its fix ecdd3836 (llama.cpp #16307,
# 2025-09-28); 0.3.14 (2025-07-18), 0.3.15 and 0.3.16 (2025-08-15) vendor the bug, 0.3.17
# (2026-03-23) is the first release after the fix (PyPI has none in between).
# Pinned, cached, idempotent (the sdists are kept under the cache, as 33-llama.sh keeps its own).
# Logs go to stderr; stdout carries SETROWS_REAL_GGML_HISTORY=<git repo>.
set -euo pipefail
log() { echo "34-real-history: $*" >&2; }

# version and its PyPI upload time (the commit date, so the history reads in release order)
releases=(0.3.14@2025-07-18T16:48:52Z 0.3.15@2025-08-07T13:56:54Z 0.3.16@2025-08-15T04:58:29Z 0.3.17@2026-03-23T06:35:43Z)
versions=("${releases[@]%@*}")
cache=${XDG_CACHE_HOME:-$HOME/.cache}/setrows-bisect
repo=$cache/real-history/llama-cpp-python-ggml
stamp="${versions[*]}"
if [ -f "$repo/.git/setrows-versions" ] && [ "$(cat "$repo/.git/setrows-versions")" = "$stamp" ]; then
  echo "SETROWS_REAL_GGML_HISTORY=$repo"
  exit 0
fi
command -v git >/dev/null || { log "git is needed"; exit 1; }
mkdir -p "$cache/sdist"
for v in "${versions[@]}"; do
  sdist=$cache/sdist/llama_cpp_python-$v.tar.gz
  [ -f "$sdist" ] && continue
  log "fetching llama-cpp-python==$v (sdist) from PyPI for its vendored ggml"
  tmp=$(mktemp -d "$cache/sdist/.dl-XXXXXX")
  python3 -m pip download -q --disable-pip-version-check --no-binary :all: --no-deps \
    "llama-cpp-python==$v" -d "$tmp" >&2
  mv "$tmp/llama_cpp_python-$v.tar.gz" "$sdist"
  rm -rf "$tmp"
done
rm -rf "$repo.tmp"
git init -q -b main "$repo.tmp"
for r in "${releases[@]}"; do
  v=${r%@*} date=${r#*@}
  find "$repo.tmp" -mindepth 1 -maxdepth 1 ! -name .git -exec rm -rf {} +
  tar -xzf "$cache/sdist/llama_cpp_python-$v.tar.gz" -C "$repo.tmp" --strip-components=4 \
    "llama_cpp_python-$v/vendor/llama.cpp/ggml"
  [ -f "$repo.tmp/include/ggml.h" ] || { log "no vendor/llama.cpp/ggml/include/ggml.h in the $v sdist"; exit 1; }
  git -C "$repo.tmp" add -A
  GIT_AUTHOR_NAME=llama-cpp-python GIT_AUTHOR_EMAIL=pypi@invalid GIT_COMMITTER_NAME=setrows-setup \
    GIT_COMMITTER_EMAIL=setup@invalid GIT_AUTHOR_DATE=$date GIT_COMMITTER_DATE=$date \
    git -C "$repo.tmp" commit -q -m "llama-cpp-python $v: vendored ggml" --allow-empty
  git -C "$repo.tmp" tag "v$v"
done
echo "$stamp" >"$repo.tmp/.git/setrows-versions"
rm -rf "$repo"
mkdir -p "$(dirname "$repo")"
mv "$repo.tmp" "$repo"
log "$(git -C "$repo" log --oneline | wc -l) versions in $repo"
echo "SETROWS_REAL_GGML_HISTORY=$repo"
