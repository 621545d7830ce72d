// A CPU test through ggml's public API for bench/ggml_vs_git.sh: a matrix multiplication by a
// Hadamard matrix with the hint that says so, which the CPU backend answers with a fast
// Walsh-Hadamard transform. ggml_mul_mat_set_hint and that path appear in ggml-org/ggml
// 9d48a123 ("ggml : implement fast walsh-hadamard transform for kv rotation"); the program
// looks the function up as a weak symbol, so it builds on both sides and prints "ok" from that
// commit on (a fix search: --regress success).
#include "ggml.h"
#include "ggml-cpu.h"
#include <math.h>
#include <stdio.h>

extern void bench_set_hint(struct ggml_tensor *a, int hint) __asm__("ggml_mul_mat_set_hint")
    __attribute__((weak));

enum { N = 8 };

int main(void) {
    if (!bench_set_hint) {
        printf("ggml_mul_mat_set_hint: not in this ggml\n");
        return 1;
    }
    struct ggml_init_params p = {16 * 1024 * 1024, NULL, false};
    struct ggml_context *ctx = ggml_init(p);
    struct ggml_tensor *h = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, N, N);
    struct ggml_tensor *x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, N, 2);
    float *hd = (float *)h->data, *xd = (float *)x->data;
    const float s = 1.0f / sqrtf((float)N);
    // Sylvester's Hadamard matrix, normalised: H[i][j] = (-1)^popcount(i & j) / sqrt(N).
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++) hd[i * N + j] = (__builtin_popcount(i & j) % 2 ? -s : s);
    for (int i = 0; i < 2 * N; i++) xd[i] = (float)(i % 5) - 1.5f;
    struct ggml_tensor *y = ggml_mul_mat(ctx, h, x);
    bench_set_hint(y, 1); // GGML_HINT_SRC0_IS_HADAMARD
    struct ggml_cgraph *gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, y);
    ggml_graph_compute_with_ctx(ctx, gf, 1);
    for (int r = 0; r < 2; r++)
        for (int i = 0; i < N; i++) {
            float want = 0.0f;
            for (int j = 0; j < N; j++) want += hd[i * N + j] * xd[r * N + j];
            float got = ((float *)y->data)[r * N + i];
            if (fabsf(got - want) > 1e-4f) {
                printf("wrong at %d,%d: %f, want %f\n", r, i, got, want);
                return 1;
            }
        }
    printf("ok\n");
    ggml_free(ctx);
    return 0;
}
