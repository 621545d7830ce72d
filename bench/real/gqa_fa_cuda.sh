#!/usr/bin/env bash
# Real case 18 (bench/real/README.md): llama.cpp #19092 ("CUDA: faster FA for GQA > 1 but not
# power of 2") pads the query heads a CUDA block of the MMA flash-attention kernel takes to the
# next power of 2 above the GQA ratio; its tiles run over the query heads of all K/V heads as
# one row, so a tile that straddles two groups pairs the second group's first query heads with
# the first group's K/V head. #19115 (the fix of #19112): "the wrong Q and K/V heads will be
# associated and the result will be wrong (if there is only a single K/V head this doesn't
# matter so it was not detected in testing)". The window is the parent of #19092 (0440bfd16,
# good) .. the parent of the fix (8f80d1b25, bad), ending on the fix (b0311c16d): 6 first-parent
# commits, 0c21677e4 (#19092) the second.
#
# Why these settings (evidence at llama.cpp 0c21677e4; bench/real/README.md case 18 has it all):
# * --flash-attn on: the kernel is flash attention's.
# * --gqa 3 --n-head-kv 2: a ratio that is not a power of 2 (Granite 3.0's 3, named by #19092)
#   over the fewest K/V heads that tell them apart (the thread: one K/V head hides it). sm_90
#   pads 3 to ncols2 = 4 (ggml/src/ggml-cuda/fattn.cu:92-95; the parent took ncols2 = 1 for an
#   odd ratio, fattn.cu:63-78 at 0440bfd16); the 6 query heads make 2 tiles of 4
#   (fattn-mma-f16.cuh:1526), and the first, heads 0..3, reads K/V head 0/3 = 0 for all four
#   (fattn-mma-f16.cuh:1545-1553): head 3 belongs to K/V head 1. Head size 128, the default.
# * --batch-size 2 (the probe's ubatch is the batch): needed because a one-token decode never
#   reaches that kernel on sm_90: with an f16 cache, one token (Q->ne[1] == 1), one sequence
#   and fewer than 8192 cells the selector returns the vector kernel (fattn.cu:363-364), which
#   #19092 did not change; two tokens per ubatch make it the MMA kernel (fattn.cu:381), its GQA
#   path on (a mask, an f16 cache, 256 cells: fattn.cu:284, 50) and its stream-k decomposition
#   always on from Ada (fattn-common.cuh:924). 2 is the least batch that leaves the vector
#   kernel; nothing else is set (default context 256, f16 cache, f16 weights).
# The probe's reference on a GPU is the CPU backend with the same settings, which has no such
# kernel; the `same` reference (the same kernel, graph reuse off) shares the fault.
#
#   REAL=.work/c18 bench/real/gqa_fa_cuda.sh prepare [LLAMA_CPP_GIT_DIR]
#       here: writes .work/c18/gqa.bundle (bench/real/window.sh) and copies ccache into
#       .work/c18/bin; then strip -o .work/c18/setrows-bisect target/release/setrows-bisect
#   REAL=.work/c18 bench/real/gqa_fa_cuda.sh run [SECONDS]
#       on the H200, carrying `.work/c18`: the user's command, then `git bisect run` with the
#       same build and run lines, within SECONDS (default 560). GIT_SIDE=0 leaves git out,
#       TOOL_SIDE=0 the tool. State under .work/real-state-gqa: a second call on the still-warm
#       machine resumes both sides. REPRO_ARGS="--cpu-nmse 1e-3" gives both sides that
#       decode-probe tolerance (the tool as --repro-arg=--cpu-nmse --repro-arg=1e-3, its endpoint
#       advice after the good end drifted to 1.42e-4; cuda_case.sh), unset none.
# Both steps are bench/real/cuda_case.sh's (shared with fwht_pdl_cuda.sh, kvpad_cuda.sh).
#
# Example device call: run(command="REAL=.work/c18 bash bench/real/gqa_fa_cuda.sh run 585",
#   timeout_s=600, carry=[".work/c18"], kind="nvidia-h200"); if git's side has no answer yet,
#   the same call again on the warm machine resumes it.
set -uo pipefail
CASE=gqa
STATE=.work/real-state-gqa
GOOD_UP=0440bfd1605333726ea0fb7a836942660bf2f9a6   # parent of #19092
BAD_UP=8f80d1b254aef70a0959e314be368d05debe7294    # parent of #19115 (#19105), still bad
FIRST_BAD_UP=0c21677e4                             # #19092, named by #19115
END_UP=b0311c16d2f650a8bd5af652549075b458bd713a    # #19115, the fix (the window's last commit)
GOOD_NAME=0440bfd16 BAD_NAME=8f80d1b25 FIRST_BAD_NAME='#19092'
# The settings the threads name (flash attention on; a GQA ratio that is not a power of 2 over
# several K/V heads) and the batch the kernel's selection needs (above).
SETTINGS=(--flash-attn on --gqa 3 --n-head-kv 2 --batch-size 2)
# shellcheck source=bench/real/cuda_case.sh
source "$(dirname "$0")/cuda_case.sh"
cuda_case_main "$@"
