// A CPU test through ggml's public API for bench/ggml_vs_git.sh: ggml_set_rows from an f16
// source into an f16 destination. Before ggml-org/ggml 6e945e87 ("ggml : add support for CPU
// f16->f16 GGML_OP_SET_ROWS") ggml aborts on the source type; from it on this prints "ok"
// (a fix search: --regress success).
#include "ggml.h"
#include "ggml-cpu.h"
#include <stdio.h>

int main(void) {
    struct ggml_init_params p = {16 * 1024 * 1024, NULL, false};
    struct ggml_context *ctx = ggml_init(p);
    struct ggml_tensor *dst = ggml_new_tensor_2d(ctx, GGML_TYPE_F16, 4, 8);
    struct ggml_tensor *src = ggml_new_tensor_2d(ctx, GGML_TYPE_F16, 4, 2);
    struct ggml_tensor *idx = ggml_new_tensor_1d(ctx, GGML_TYPE_I64, 2);
    ggml_fp16_t *d = (ggml_fp16_t *)dst->data, *s = (ggml_fp16_t *)src->data;
    int64_t *ix = (int64_t *)idx->data;
    for (int i = 0; i < 32; i++) d[i] = ggml_fp32_to_fp16(-1.0f);
    for (int i = 0; i < 8; i++) s[i] = ggml_fp32_to_fp16((float)i);
    ix[0] = 5;
    ix[1] = 2;
    struct ggml_tensor *out = ggml_set_rows(ctx, dst, src, idx);
    struct ggml_cgraph *gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, out);
    ggml_graph_compute_with_ctx(ctx, gf, 1);
    for (int r = 0; r < 8; r++)
        for (int c = 0; c < 4; c++) {
            float want = r == 5 ? (float)c : r == 2 ? (float)(4 + c) : -1.0f;
            float got = ggml_fp16_to_fp32(d[r * 4 + c]);
            if (got != want) {
                printf("wrong at row %d col %d: %f\n", r, c, got);
                return 1;
            }
        }
    printf("ok\n");
    ggml_free(ctx);
    return 0;
}
