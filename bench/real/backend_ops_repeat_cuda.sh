#!/usr/bin/env bash
# Real CUDA (sm_90) case for --probe-kind backend-ops (issue 46): llama.cpp #15631 ("CUDA: fuse
# adds, fuse add with rms norm", 009b709d6, 2025-08-29) made every binary-broadcast op pass
# `dst->src[I + 1]->data` for its fused operands; REPEAT has one source, so it read a null
# src[1]. #15660 (81017865e, the same day, "CUDA: fix bug in rms_norm fusion"): "Fix bugs pointed
# out by @ORippler and @CISC in #15631 ... Fixed seg fault in op REPEAT because it was trying to
# access invalid `dst->src[I+1]`". REPEAT's cases are years older than the window, so every tree
# in it has them. The window: b6301 (da54f9f1a, the last release tag before #15631) .. the fix,
# 17 first-parent commits; --bad is the fix's parent. The user's command:
#
#   setrows-bisect --repo <llama.cpp> --good b6301 --bad 81017865e^ --probe-kind backend-ops \
#     --op REPEAT --backend cuda --gpu-target 90 --cmake-arg=-DGGML_CUDA_FA=OFF
#
# (FA kernels off on both sides: REPEAT does not use them, and they triple a cold build.)
#
#   bench/real/backend_ops_repeat_cuda.sh prepare|run [...]   (bench/real/backend_ops_cuda.sh)
CASE=repeat
GOOD_UP=da54f9f1a                                  # b6301
BAD_UP=60e5eee31                                   # the fix's first parent
FIRST_BAD_UP=009b709d6                             # #15631, named by #15660
END_UP=81017865ee444cf49ce0136f2be1e41a0270ff91    # #15660, the fix (the window's last commit)
GOOD_NAME=b6301 BAD_NAME=81017865e^ FIRST_BAD_NAME='#15631'
OP=REPEAT
CMAKE_EXTRA=(-DGGML_CUDA_FA=OFF)
source "$(dirname "$0")/backend_ops_cuda.sh"
backend_ops_cuda_main "$@"
