#!/usr/bin/env bash
# Real CUDA (sm_90) case for `--apply`: the fix's own test, followed back over the window.
# llama.cpp #16841 ("improve CUDA cpy memory bandwidth when copying transposed tensor",
# 230d1169e, 2025-11-05) added a transposed fast path to ggml_cuda_cpy whose guard
# (`can_be_transposed`) ignored nb02. #17332 (6fd4f9536, 2025-11-19, "Fix too relaxed check on
# CUDA 'fast copy' (can_be_transposed) condition") tightens the guard and adds CONT cases that
# show the bug (view slices, {1,4,4,1}, {1,8,17,1}); its thread prints them failing on master.
# The trees before the fix lack those cases, so without the fix's test every tree passes.
#
# The window, as a user of a fork that syncs with upstream would type it: b6910 (5d8bb900b, the
# release tag of the fork's last sync that worked) .. b6962 (230d1169e, the release tag of the
# next sync, where CONT broke). The expected answer is --bad itself: no commit between the two
# tags breaks CONT. The user's command:
#
#   setrows-bisect --repo <llama.cpp> --good b6910 --bad b6962 --probe-kind backend-ops \
#     --op CONT --apply 6fd4f9536:tests/test-backend-ops.cpp --backend cuda --gpu-target 90 \
#     --cmake-arg=-DGGML_CUDA_FA=OFF
#
# git's step applies the same diff (`git diff 6fd4f9536^ 6fd4f9536 -- tests/test-backend-ops.cpp
# | git apply -3`), builds the same target, runs the same line, restores the tree.
#
#   bench/real/backend_ops_cont_apply.sh prepare|run [...]   (bench/real/backend_ops_cuda.sh)
# shellcheck disable=SC2034  # read by backend_ops_cuda.sh
CASE=cont
GOOD_UP=5d8bb900b                                  # b6910
BAD_UP=230d1169e                                   # b6962
FIRST_BAD_UP=230d1169e                             # #16841, named by #17332's thread
END_UP=6fd4f953673e6a91041b827c45cdfd1d85e9bb64    # #17332, the fix (the window's last commit)
GOOD_NAME=b6910 BAD_NAME=b6962 FIRST_BAD_NAME='#16841'
OP=CONT
APPLY_UP=6fd4f9536 APPLY_PATH=tests/test-backend-ops.cpp
CMAKE_EXTRA=(-DGGML_CUDA_FA=OFF)
source "$(dirname "$0")/backend_ops_cuda.sh"
backend_ops_cuda_main "$@"
