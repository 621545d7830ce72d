#!/usr/bin/env bash
# Real case 17 (bench/real/README.md): llama.cpp #16812 ("memory : remove KV cache size padding")
# stopped padding the KV cache to 32 cells (256 with flash attention), so a context size the
# user gives is the cache size; without flash attention the V cache is stored transposed, its
# row stride is the cache size, and CUDA's f16 vector/tensor-core matmuls (mmvf, mmf) picked by
# shape alone assert `GGML_ASSERT(stride_row % 2 == 0)` on an odd stride (#16976: "-fa off" with
# -c 2050, 1058, 1591; First Bad Commit 85a7d8677). Fixed by #16988 (aa374175c), which selects
# those kernels by stride too. The window is the thread's last good, a8ca18b4b (the first-parent
# parent of 85a7d8677) .. 961660b8c (#16903), 46 first-parent commits, all bad after the first
# bad: cut before the first rebuilt web UI bundle (tools/server/public/index.html.gz, about
# 1 MB each, 8 of them before the fix), so the bundle stays under the device carry.
#
#   bench/real/kvpad_cuda.sh prepare [LLAMA_CPP_GIT_DIR]
#       here: writes .work/real/kvpad.bundle (15.6 MB, bench/real/window.sh) and copies ccache
#       into .work/real/bin; then strip -o .work/real/setrows-bisect target/release/setrows-bisect
#   bench/real/kvpad_cuda.sh run [SECONDS]
#       on the H200, carrying `.work/real`: the user's command, then `git bisect run` with the
#       same build and run lines, within SECONDS (default 560). GIT_SIDE=0 leaves git out,
#       TOOL_SIDE=0 the tool (git's step then has the tool write the probe's sources and model).
#       State under .work/real-state-kvpad: a second call on the still-warm machine resumes the
#       tool's bisect and git's (its clone and bisect state; a git step starts only with
#       GIT_STEP_NEED, default 190 s, left). GIT_FRESH=1 restarts git's side.
# Both steps are bench/real/cuda_case.sh's (shared with fwht_pdl_cuda.sh); this file names the case.
#
# Example device calls: run(command="GIT_SIDE=0 bash bench/real/kvpad_cuda.sh run 560",
#   carry=[".work/real"], kind="nvidia-h200"); git's side alone, cut over two calls made back to
#   back: run(command="TOOL_SIDE=0 bash bench/real/kvpad_cuda.sh run 585", timeout_s=600,
#   carry=[".work/real/kvpad.bundle", ".work/real/setrows-bisect", ".work/real/bin",
#   ".work/real/lib"]), twice (the carry names the files: .work/real as a whole, with other
#   cases' bundles in it, can pass the 64 MiB limit).
set -uo pipefail
CASE=kvpad
STATE=.work/real-state-kvpad
GOOD_UP=a8ca18b4b815a2abdbecb958ee5f4c542d69aac7   # parent of #16812 (b6867)
BAD_UP=961660b8c395afb8903f61ace69396a158ea0cb4    # #16903, 44 commits after #16812, still bad
FIRST_BAD_UP=85a7d8677                             # #16812, the #16976 report's First Bad Commit
END_UP=$BAD_UP                                     # the window's last commit
GOOD_NAME=a8ca18b4b BAD_NAME=961660b8c FIRST_BAD_NAME='#16812'
# The settings the #16976 thread names: flash attention off, a context size it lists as
# crashing. Of its three (2050, 1058, 1591) only 1591 is odd: with the probe's one token per
# ubatch the V-times-KQ product goes to mmvf (sm_90: ne11 == 1), which asserts on an odd stride
# in halves; 2050 and 1058 only trip mmf's half2 stride (stride/2 odd), taken for 2..16 tokens.
SETTINGS=(--flash-attn off --ctx-size 1591)
# The bug is an abort (SIGABRT, status 134 from sh): the tool's default --regress error counts a
# crash as the bug, so git's step does too (1 or killed by a signal); otherwise git would skip
# every bad commit.
GIT_BAD_RCS='1|129|13[0-9]'
# shellcheck source=bench/real/cuda_case.sh
source "$(dirname "$0")/cuda_case.sh"
cuda_case_main "$@"
