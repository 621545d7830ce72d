// A CPU test through ggml's public API for bench/ggml_vs_git.sh: ggml_set_rows with int32
// row indices. Before ggml-org/ggml f24cca7c ("ggml : implement set_rows with i32 index")
// ggml aborts on the index type; from it on this prints "ok" (a fix search: --regress success).
#include "ggml.h"
#include "ggml-cpu.h"
#include <stdio.h>

int main(void) {
    struct ggml_init_params p = {16 * 1024 * 1024, NULL, false};
    struct ggml_context *ctx = ggml_init(p);
    struct ggml_tensor *dst = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 4, 8);
    struct ggml_tensor *src = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 4, 2);
    struct ggml_tensor *idx = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 2);
    float *d = (float *)dst->data, *s = (float *)src->data;
    int32_t *ix = (int32_t *)idx->data;
    for (int i = 0; i < 32; i++) d[i] = -1.0f;
    for (int i = 0; i < 8; i++) s[i] = (float)i;
    ix[0] = 5;
    ix[1] = 2;
    struct ggml_tensor *out = ggml_set_rows(ctx, dst, src, idx);
    struct ggml_cgraph *gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, out);
    ggml_graph_compute_with_ctx(ctx, gf, 1);
    for (int r = 0; r < 8; r++)
        for (int c = 0; c < 4; c++) {
            float want = r == 5 ? (float)c : r == 2 ? (float)(4 + c) : -1.0f;
            if (d[r * 4 + c] != want) {
                printf("wrong at row %d col %d: %f\n", r, c, d[r * 4 + c]);
                return 1;
            }
        }
    printf("ok\n");
    ggml_free(ctx);
    return 0;
}
