#!/usr/bin/env bash
# Real CUDA (sm_90) case for --probe-kind backend-ops (issue 46): llama.cpp #23615 ("CUDA: add
# fast walsh-hadamard transform", c1f1e28d2, its thread's bisect names it) ran its transform
# without the Programmatic Dependent Launch sync until #23690 (192d8ae8b, "CUDA: missing PDL sync
# for FWHT, better fallback"): garbage on Hopper and newer (the #23693 report: b9174 good, b9333
# bad). Real case 3 of bench/real/README.md found it with the decode probe; here the same window
# with ggml's own test: #23615 routes the op test-backend-ops names MUL_MAT_HADAMARD (a mul_mat
# with GGML_HINT_SRC0_IS_HADAMARD, a case since #22631, before the window) through the new
# kernel. Not seen: in test-backend-ops the kernel's input is a leaf set by a synchronous copy, so
# no kernel runs before it in the stream for a missing PDL wait to race with; one probe of b9333
# on an H100 passed 5/5 cases (BENCHMARKS.md). The REPEAT case (backend_ops_repeat_cuda.sh) is
# the CUDA case found.
#
#   bench/real/backend_ops_fwht_cuda.sh prepare|run [...]   (bench/real/backend_ops_cuda.sh)
CASE=fwht
GOOD_UP=59778f0196a82db32580bb649d5d839355d6d7bf   # b9174, the #23693 report's good
BAD_UP=35c9b1f39                                   # b9333, the report's bad (the fix's parent)
FIRST_BAD_UP=c1f1e28d2                             # #23615, per its thread's bisect
END_UP=192d8ae8b8826642f15836570b944ecd68cf175c    # #23690, the fix (the window's last commit)
GOOD_NAME=b9174 BAD_NAME=b9333 FIRST_BAD_NAME='#23615'
OP=MUL_MAT_HADAMARD
CMAKE_EXTRA=(-DGGML_CUDA_FA=OFF)
source "$(dirname "$0")/backend_ops_cuda.sh"
backend_ops_cuda_main "$@"
