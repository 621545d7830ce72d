#!/usr/bin/env bash
# Generates the planted-fault history of issue 26.5b on top of ggml 0a8ab465's tree:
#   gen-planted.sh GGML_MIRROR OUT_REPO
# root = 0a8ab465's tree (same tree id), then 16 commits; commit 11 makes ggml-cuda's set_rows
# write each row >= 200 one row low, ONLY when cudaPointerGetAttributes says the destination is
# managed memory (cudaMemoryTypeManaged). The other commits append comment lines (to set-rows.cu,
# getrows.cu, cpy.cu, README.md) so every commit is a distinct tree that the probe rebuilds.
# Dates and authors are fixed, so the same mirror gives the same commit ids.
set -euo pipefail
G=$1; R=$2
rm -rf "$R.tmp" "$R"; mkdir -p "$R.tmp"; cd "$R.tmp"; git init -q -b master .
echo "$G/objects" > .git/objects/info/alternates
export GIT_AUTHOR_NAME="setrows-bisect helper G" GIT_AUTHOR_EMAIL=g@setrows.invalid
export GIT_COMMITTER_NAME="$GIT_AUTHOR_NAME" GIT_COMMITTER_EMAIL="$GIT_AUTHOR_EMAIL"
T=$(git -C "$G" rev-parse '0a8ab465^{tree}')
d() { export GIT_AUTHOR_DATE="2026-12-02T00:$1:00Z" GIT_COMMITTER_DATE="2026-12-02T00:$1:00Z"; }
d 10
C=$(git commit-tree "$T" -m "ggml 0a8ab465 (ggml-org/ggml 0a8ab4653da5562a3efce38d8edf7ece4fb58b08): its tree as the root of a generated history")
git update-ref refs/heads/master "$C"; git reset -q --hard
files=(src/ggml-cuda/set-rows.cu README.md src/ggml-cuda/getrows.cu src/ggml-cuda/cpy.cu)
for i in $(seq 1 16); do
  d $((10 + i))
  if [ "$i" = 11 ]; then
    python3 - src/ggml-cuda/set-rows.cu <<'PY'
import sys
p = sys.argv[1]; s = open(p).read()
def sub(old, new, count=1):
    global s
    assert s.count(old) >= count, old
    s = s.replace(old, new)
# the kernel: a new argument, rows from first_moved_row on are written one row low
sub("""                                  const uint3   ne11_fd,
                                  const uint3   ne12_fd) {
    const int64_t i = int64_t(blockDim.x) * blockIdx.x + threadIdx.x;

    if (i >= ne_total) {
        return;
    }

    uint32_t tmp = (uint32_t) i;""", """                                  const uint3   ne11_fd,
                                  const uint3   ne12_fd,
                                  const int64_t first_moved_row) {
    const int64_t i = int64_t(blockDim.x) * blockIdx.x + threadIdx.x;

    if (i >= ne_total) {
        return;
    }

    uint32_t tmp = (uint32_t) i;""")
sub("""    const int64_t dst_row = *(src1 + i10*s10 + i11*s11 + i12*s12);

    const src_t * src0_row = src0 + i01*s01 + i02*s02 + i03*s03;
    dst_t * dst_row_ptr    = dst + dst_row*s1 + i02*s2 + i03*s3;""", """    const int64_t dst_row_in = *(src1 + i10*s10 + i11*s11 + i12*s12);
    const int64_t dst_row    = dst_row_in >= first_moved_row ? dst_row_in - 1 : dst_row_in;

    const src_t * src0_row = src0 + i01*s01 + i02*s02 + i03*s03;
    dst_t * dst_row_ptr    = dst + dst_row*s1 + i02*s2 + i03*s3;""")
# the launcher: managed destinations get the moved rows
sub("""    if (ne_total > 0 && ne00 > 0 && ne01 > 0 && ne02 > 0 && ne11 > 0 && ne12 > 0) {
        const uint3 ne00_fd = init_fastdiv_values((uint32_t) ne00);
        const uint3 ne01_fd = init_fastdiv_values((uint32_t) ne01);
        const uint3 ne02_fd = init_fastdiv_values((uint32_t) ne02);
        const uint3 ne11_fd = init_fastdiv_values((uint32_t) ne11);
        const uint3 ne12_fd = init_fastdiv_values((uint32_t) ne12);

        k_set_rows<<<""", """    // managed (unified) destinations take a separate row mapping
    cudaPointerAttributes dst_attr;
    const bool dst_managed = cudaPointerGetAttributes(&dst_attr, dst_d) == cudaSuccess &&
                             dst_attr.type == cudaMemoryTypeManaged;
    const int64_t first_moved_row = dst_managed ? 200 : INT64_MAX;

    if (ne_total > 0 && ne00 > 0 && ne01 > 0 && ne02 > 0 && ne11 > 0 && ne12 > 0) {
        const uint3 ne00_fd = init_fastdiv_values((uint32_t) ne00);
        const uint3 ne01_fd = init_fastdiv_values((uint32_t) ne01);
        const uint3 ne02_fd = init_fastdiv_values((uint32_t) ne02);
        const uint3 ne11_fd = init_fastdiv_values((uint32_t) ne11);
        const uint3 ne12_fd = init_fastdiv_values((uint32_t) ne12);

        k_set_rows<<<""")
sub("""                                                         ne11_fd, ne12_fd);""",
    """                                                         ne11_fd, ne12_fd, first_moved_row);""")
open(p, "w").write(s)
PY
    git commit -qam "cuda : set_rows: separate row mapping for managed destinations (PLANTED FAULT: rows >= 200 of a managed destination are written one row low)"
  else
    f=${files[$(( (i - 1) % 4 ))]}
    case $f in *.md) echo "<!-- generated history, commit $i -->" >> "$f";; *) echo "// generated history, commit $i" >> "$f";; esac
    git commit -qam "generated history: commit $i (comment line in $f)"
  fi
done
cd /; git clone -q --no-local --bare "$R.tmp" "$R"; rm -rf "$R.tmp"
git -C "$R" log --format='%h %s' master
