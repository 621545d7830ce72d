#!/usr/bin/env bash
# A real history, portable: the first-parent commits GOOD..BAD of a fetched mirror (GOOD itself
# the root), recommitted in order into a new repository with their own trees, authors, dates and
# messages, so a machine without network (the H200) gets the window as one git bundle.
#
#   bench/real/window.sh MIRROR_GIT_DIR GOOD BAD OUT_DIR
#
# Writes OUT_DIR/repo (a normal repository, branch `window`) and OUT_DIR/window.bundle, and prints
# KEY=VALUE lines: WINDOW_REPO, WINDOW_BUNDLE, WINDOW_COMMITS, WINDOW_GOOD, WINDOW_BAD (the new
# ids of GOOD and BAD), WINDOW_DROPPED (paths left out, see below).
#
# Why recommit instead of `git bundle create BAD ^GOOD`: such a bundle needs GOOD's whole history
# on the other side, and a full llama.cpp history is over the 64 MiB a device run carries. Why
# trees may differ from upstream: a `fetch` snapshot lacks blobs of 4 MiB and more (llama.cpp's
# tokenizer test vocabularies under models/, read by no build); those paths are dropped, and
# every dropped path is printed. Each commit's message gains a trailer `Upstream-commit: <sha>`
# so an answer maps back to the real commit (bench/real/*.sh print both).
set -euo pipefail
[ $# -eq 4 ] || { echo "usage: $0 MIRROR_GIT_DIR GOOD BAD OUT_DIR" >&2; exit 2; }
mirror=$(cd "$1" && pwd) good=$2 bad=$3 out=$4
git -C "$mirror" merge-base --is-ancestor "$good" "$bad" || { echo "$good is not an ancestor of $bad" >&2; exit 2; }
mkdir -p "$out"
repo=$out/repo
rm -rf "$repo"
git init -q -b window "$repo"
# The mirror's objects are read in place; the bundle copies what the new commits reach.
echo "$mirror/objects" >"$repo/.git/objects/info/alternates"
export GIT_DIR=$repo/.git GIT_INDEX_FILE=$out/index
dropped=$out/dropped.txt
: >"$dropped"
parent=
new_good="" new_bad=""
good_full=$(git -C "$mirror" rev-parse --verify "$good^{commit}")
# GOOD must be on BAD's first-parent chain: the window is that chain from GOOD to BAD.
mapfile -t commits < <(git -C "$mirror" rev-list --first-parent --reverse "$bad" | sed -n "/^$good_full\$/,\$p")
[ "${#commits[@]}" -gt 0 ] || { echo "$good is not on the first-parent chain of $bad" >&2; exit 2; }
for c in "${commits[@]}"; do
  git read-tree "$c"
  # Blobs the snapshot lacks: drop their paths from this commit's tree.
  missing=$(git ls-files -s | awk '{print $2}' | sort -u \
    | git cat-file --batch-check='%(objectname) %(objecttype)' 2>/dev/null | awk '$2=="missing"{print $1}' || true)
  if [ -n "$missing" ]; then
    while read -r oid; do
      git ls-files -s | awk -v o="$oid" '$2==o{print $4}'
    done <<<"$missing" | sort -u | tee -a "$dropped" | xargs -r git rm -q --cached --
  fi
  tree=$(git write-tree)
  msg=$(git -C "$mirror" log -1 --format=%B "$c")
  GIT_AUTHOR_NAME=$(git -C "$mirror" log -1 --format=%an "$c")
  GIT_AUTHOR_EMAIL=$(git -C "$mirror" log -1 --format=%ae "$c")
  GIT_AUTHOR_DATE=$(git -C "$mirror" log -1 --format=%aI "$c")
  GIT_COMMITTER_NAME=$(git -C "$mirror" log -1 --format=%cn "$c")
  GIT_COMMITTER_EMAIL=$(git -C "$mirror" log -1 --format=%ce "$c")
  GIT_COMMITTER_DATE=$(git -C "$mirror" log -1 --format=%cI "$c")
  export GIT_AUTHOR_NAME GIT_AUTHOR_EMAIL GIT_AUTHOR_DATE GIT_COMMITTER_NAME GIT_COMMITTER_EMAIL GIT_COMMITTER_DATE
  new=$(printf '%s\n\nUpstream-commit: %s\n' "$msg" "$c" | git commit-tree "$tree" ${parent:+-p "$parent"})
  parent=$new
  [ -n "$new_good" ] || new_good=$new
  new_bad=$new
done
git update-ref refs/heads/window "$new_bad"
git bundle create -q "$out/window.bundle" window
unset GIT_DIR GIT_INDEX_FILE
echo "WINDOW_REPO=$repo"
echo "WINDOW_BUNDLE=$out/window.bundle"
echo "WINDOW_COMMITS=${#commits[@]}"
echo "WINDOW_GOOD=$new_good"
echo "WINDOW_BAD=$new_bad"
echo "WINDOW_DROPPED=$(sort -u "$dropped" | tr '\n' ' ')"
