// A CPU test through ggml's public API for bench/ggml_vs_git.sh: a 2-D transposed convolution
// with an f32 kernel, checked against a direct computation. Before ggml-org/ggml 83d1f963
// ("CUDA & CPU: support F32 kernel type for CONV_TRANSPOSE_2D") the CPU backend aborts on the
// kernel type; from it on this prints "ok" (a fix search: --regress success).
#include "ggml.h"
#include "ggml-cpu.h"
#include <math.h>
#include <stdio.h>

enum { KW = 2, KH = 3, CIN = 2, W = 3, H = 2, S = 2 };

int main(void) {
    struct ggml_init_params p = {16 * 1024 * 1024, NULL, false};
    struct ggml_context *ctx = ggml_init(p);
    // kernel [KW, KH, Cout = 1, Cin], input [W, H, Cin, N = 1]
    struct ggml_tensor *k = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, KW, KH, 1, CIN);
    struct ggml_tensor *in = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, W, H, CIN, 1);
    float *kd = (float *)k->data, *id = (float *)in->data;
    for (int i = 0; i < KW * KH * CIN; i++) kd[i] = (float)(i % 5) - 1.0f;
    for (int i = 0; i < W * H * CIN; i++) id[i] = (float)(i % 7) * 0.5f;
    struct ggml_tensor *out = ggml_conv_transpose_2d_p0(ctx, k, in, S);
    struct ggml_cgraph *gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, out);
    ggml_graph_compute_with_ctx(ctx, gf, 1);
    const int ow = (W - 1) * S + KW, oh = (H - 1) * S + KH;
    if (out->ne[0] != ow || out->ne[1] != oh) {
        printf("wrong shape %lld x %lld\n", (long long)out->ne[0], (long long)out->ne[1]);
        return 1;
    }
    for (int y = 0; y < oh; y++)
        for (int x = 0; x < ow; x++) {
            float want = 0.0f;
            for (int c = 0; c < CIN; c++)
                for (int iy = 0; iy < H; iy++)
                    for (int ix = 0; ix < W; ix++) {
                        int kx = x - ix * S, ky = y - iy * S;
                        if (kx >= 0 && kx < KW && ky >= 0 && ky < KH)
                            want += id[(c * H + iy) * W + ix] * kd[(c * KH + ky) * KW + kx];
                    }
            float got = ((float *)out->data)[y * ow + x];
            if (fabsf(got - want) > 1e-3f) {
                printf("wrong at %d,%d: %f, want %f\n", x, y, got, want);
                return 1;
            }
        }
    printf("ok\n");
    ggml_free(ctx);
    return 0;
}
