#!/usr/bin/env bash
# Generates the llama.cpp history of issue 27 item 4 (H200 decode commit bisect):
#   gen-history.sh LLAMA_SRC PLANT_PY OUT_BUNDLE
# LLAMA_SRC = the llama.cpp that the llama-cpp-python 0.3.36 sdist vendors (never written);
# PLANT_PY  = repro-kernels/evidence/h200-decode-probe/plant.py (the planted reuse fault);
# root = what building llama + ggml-cpu + ggml-cuda reads (the other ggml backends left out),
# then 10 commits: 9 add one comment line to a file the CUDA build compiles (every probe rebuilds
# something), commit 6 plants the fault in src/llama-context.cpp (a reused graph writes K one cell
# ahead once the KV ring has wrapped). Fixed authors and dates: the same tree gives the same ids.
set -euo pipefail
SRC=$1; PLANT=$2; OUT=$3
R=$(mktemp -d); cd "$R"; git init -q -b master .
export GIT_AUTHOR_NAME="setrows-bisect helper H" GIT_AUTHOR_EMAIL=h@setrows.invalid
export GIT_COMMITTER_NAME="$GIT_AUTHOR_NAME" GIT_COMMITTER_EMAIL="$GIT_AUTHOR_EMAIL"
d() { export GIT_AUTHOR_DATE="2026-12-02T05:$1:00Z" GIT_COMMITTER_DATE="2026-12-02T05:$1:00Z"; }
ex=(); for b in "$SRC"/ggml/src/ggml-*/; do n=$(basename "$b"); case $n in ggml-cpu|ggml-cuda) ;; *) ex+=(":(exclude)ggml/src/$n");; esac; done
git --work-tree="$SRC" add -f -- CMakeLists.txt LICENSE cmake ggml include licenses src vendor "${ex[@]}"
d 00; git commit -q -m "llama.cpp as vendored by llama-cpp-python 0.3.36 (llama + ggml-cpu + ggml-cuda sources)"
# stage FILE TEXTFILE: FILE's blob becomes TEXTFILE's content (the vendored tree is never written)
stage() { git update-index --add --cacheinfo "100644,$(git hash-object -w "$2"),$1"; }
files=(src/llama-graph.cpp ggml/src/ggml.c src/llama-kv-cache.cpp ggml/src/ggml-cuda/set-rows.cu src/llama-context.cpp
       PLANT src/llama-graph.cpp ggml/src/ggml-cuda/getrows.cu src/llama-kv-cache.cpp ggml/src/ggml-backend.cpp)
for i in $(seq 1 10); do
  f=${files[$((i-1))]}; d $(printf %02d $i)
  if [ "$f" = PLANT ]; then
    git show HEAD:src/llama-context.cpp > .git/t; python3 "$PLANT" .git/t; stage src/llama-context.cpp .git/t
    git commit -q -m "commit $i: llama-context: PLANTED FAULT: a reused decode graph writes K one cell ahead once the KV ring has wrapped"
  else
    git show HEAD:$f > .git/t; printf '\n// setrows-bisect history commit %d: a comment, nothing else\n' $i >> .git/t; stage $f .git/t
    git commit -q -m "commit $i: a comment in $f"
  fi
done
git log --oneline --format='%h %s'
git bundle create "$OUT" master
rm -rf "$R"
