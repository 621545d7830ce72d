#!/usr/bin/env bash
# Real case 3 (bench/real/README.md): CUDA's fast Walsh-Hadamard transform (llama.cpp #23615) ran
# without its Programmatic Dependent Launch sync until #23690: with a quantized KV cache (which
# llama.cpp rotates with that transform) and flash attention, garbage on Hopper and newer.
# The window is the range the #23693 reporter gave, b9174 (59778f019, good) .. b9333 (35c9b1f39,
# the last commit before the fix, bad), 160 first-parent commits; #23615's bisect names c1f1e28d2.
#
#   bench/real/fwht_pdl_cuda.sh prepare [LLAMA_CPP_GIT_DIR]
#       here: writes .work/real/fwht.bundle (17 MB, bench/real/window.sh) and copies ccache into
#       .work/real/bin; then strip -o .work/real/setrows-bisect target/release/setrows-bisect
#   bench/real/fwht_pdl_cuda.sh run [SECONDS]
#       on the H200, carrying `.work/real`: the user's command, then `git bisect run` with the
#       same build and run lines (GIT_SIDE=0 leaves it out), within SECONDS (default 560).
#       State under .work/real-state: a second call resumes the tool's bisect.
# Both steps are bench/real/cuda_case.sh's (shared with kvpad_cuda.sh); this file names the case.
#
# Example device call: run(command="GIT_SIDE=0 bash bench/real/fwht_pdl_cuda.sh run 560",
#   carry=[".work/real"], kind="nvidia-h200").
set -uo pipefail
CASE=fwht
STATE=.work/real-state
GOOD_UP=59778f0196a82db32580bb649d5d839355d6d7bf   # b9174
BAD_UP=35c9b1f39                                   # b9333, the #23693 report
FIRST_BAD_UP=c1f1e28d2                             # #23615, per its thread's bisect
END_UP=192d8ae8b8826642f15836570b944ecd68cf175c    # #23690, the fix (the window's last commit)
GOOD_NAME=b9174 BAD_NAME=b9333 FIRST_BAD_NAME='#23615'
# The settings the #23615 thread names: quantized K and V cache, flash attention on.
SETTINGS=(--cache-type-k q8_0 --cache-type-v q8_0 --flash-attn on)
# shellcheck source=bench/real/cuda_case.sh
source "$(dirname "$0")/cuda_case.sh"
cuda_case_main "$@"
