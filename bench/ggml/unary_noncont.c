// A CPU test through ggml's public API for bench/ggml_vs_git.sh: a unary op (ggml_neg) on a
// permuted view whose rows are contiguous but whose higher dimensions are not. Before
// ggml-org/ggml ee3d3993 ("ggml : unary ops support non-cont src0 ...") ggml aborts on the
// layout; from it on this prints "ok" (a fix search: --regress success).
#include "ggml.h"
#include "ggml-cpu.h"
#include <stdio.h>

int main(void) {
    struct ggml_init_params p = {16 * 1024 * 1024, NULL, false};
    struct ggml_context *ctx = ggml_init(p);
    struct ggml_tensor *a = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 4, 3, 2);
    float *ad = (float *)a->data;
    for (int i = 0; i < 24; i++) ad[i] = (float)i + 0.25f;
    // [4, 3, 2] -> [4, 2, 3]: dims 1 and 2 swapped, rows still contiguous.
    struct ggml_tensor *v = ggml_permute(ctx, a, 0, 2, 1, 3);
    struct ggml_tensor *out = ggml_neg(ctx, v);
    struct ggml_cgraph *gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, out);
    ggml_graph_compute_with_ctx(ctx, gf, 1);
    for (int i2 = 0; i2 < 3; i2++)
        for (int i1 = 0; i1 < 2; i1++)
            for (int i0 = 0; i0 < 4; i0++) {
                float got = *(float *)((char *)out->data + i0 * out->nb[0] + i1 * out->nb[1] + i2 * out->nb[2]);
                float want = -ad[(i1 * 3 + i2) * 4 + i0];
                if (got != want) {
                    printf("wrong at %d,%d,%d: %f, want %f\n", i0, i1, i2, got, want);
                    return 1;
                }
            }
    printf("ok\n");
    ggml_free(ctx);
    return 0;
}
