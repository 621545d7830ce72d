// setrows-loop: the plain cached-graph loop the replay's step rate is measured against
// (BENCHMARKS.md, "A replay as fast as a plain loop").
//
// What a person would write to test the pattern of Luce-Org/lucebox#516 by hand: one graph built
// and allocated once (ggml_gallocr), set_rows of one produced row into an f32 and an f16 ring of
// 256 x 512, then a sum of each ring and a get_rows of the written row, re-executed every step
// with ggml_backend_graph_compute; each step uploads the source row, the i64 row index and the
// i32 gather position with ggml_backend_tensor_set, reads the four outputs back with
// ggml_backend_tensor_get and checks them against a host model of both rings. Nothing else: no
// placement tricks, no buffer of its own, so its rate is what the pattern costs on a backend.
//
// Usage: setrows-loop [--backend NAME] [--steps N] [--ring-rows R] [--width W] [--cpu-threads N]
// Last line: SETROWS_LOOP {json} with loop_steps_per_s over the step loop alone. Exit 1 at the
// first difference (printed), 2 usage, 3 no device.

#include "ggml.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"

#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <strings.h>
#include <vector>

static double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

static uint64_t mix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

// A multiple of 1/16 in [-4, 4]: after *2+0.5 a multiple of 1/8 below 8.5 in magnitude, exact in
// f16, and a ring of 256 x 512 of them sums exactly in f32 (below 2^21 in units of 1/8).
static float value(int64_t tag, int64_t col) {
    return (float) ((int) (mix(mix((uint64_t) tag) ^ (uint64_t) col) % 129) - 64) / 16.0f;
}

int main(int argc, char ** argv) {
    std::string backend_name;
    int64_t steps = 100000, R = 256, W = 512, threads = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string a = argv[i];
        if (a == "--backend") backend_name = argv[i + 1];
        else if (a == "--steps") steps = atoll(argv[i + 1]);
        else if (a == "--ring-rows") R = atoll(argv[i + 1]);
        else if (a == "--width") W = atoll(argv[i + 1]);
        else if (a == "--cpu-threads") threads = atoll(argv[i + 1]);  // as the replay's flag
        else { fprintf(stderr, "setrows-loop: unknown flag %s\n", a.c_str()); return 2; }
    }
    if (argc % 2 == 0 || steps < 1 || R < 1 || W < 1) { fprintf(stderr, "setrows-loop: bad arguments\n"); return 2; }
    ggml_backend_load_all();
    ggml_backend_dev_t dev = nullptr;
    for (size_t i = 0; i < ggml_backend_dev_count() && !dev; i++) {
        ggml_backend_dev_t d = ggml_backend_dev_get(i);
        if (backend_name.empty() ? ggml_backend_dev_type(d) == GGML_BACKEND_DEVICE_TYPE_GPU
                                 : strcasecmp(ggml_backend_dev_name(d), backend_name.c_str()) == 0) dev = d;
    }
    if (!dev && backend_name.empty()) dev = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
    if (!dev) { fprintf(stderr, "setrows-loop: no device %s\n", backend_name.c_str()); return 3; }
    ggml_backend_t backend = ggml_backend_dev_init(dev, nullptr);
    if (threads > 0) {
        typedef void (*set_threads_t)(ggml_backend_t, int);
        auto fn = (set_threads_t) ggml_backend_reg_get_proc_address(ggml_backend_dev_backend_reg(dev), "ggml_backend_set_n_threads");
        if (!fn) { fprintf(stderr, "setrows-loop: --cpu-threads: backend has no thread count\n"); return 2; }
        fn(backend, (int) threads);
    }

    // the two persistent rings
    ggml_init_params pp = {ggml_tensor_overhead() * 2, nullptr, true};
    ggml_context * pctx = ggml_init(pp);
    ggml_tensor * ring32 = ggml_new_tensor_2d(pctx, GGML_TYPE_F32, W, R);
    ggml_tensor * ring16 = ggml_new_tensor_2d(pctx, GGML_TYPE_F16, W, R);
    ggml_backend_buffer_t pbuf = ggml_backend_alloc_ctx_tensors(pctx, backend);
    std::vector<float> m32(R * W), m16(R * W);  // host model of both rings
    std::vector<double> rowsum(R);
    for (int64_t r = 0; r < R; r++)
        for (int64_t c = 0; c < W; c++) m32[r * W + c] = m16[r * W + c] = value(-1 - r, c) * 2.0f + 0.5f;
    std::vector<ggml_fp16_t> h16(R * W);
    ggml_fp32_to_fp16_row(m16.data(), h16.data(), R * W);
    ggml_backend_tensor_set(ring32, m32.data(), 0, m32.size() * sizeof(float));
    ggml_backend_tensor_set(ring16, h16.data(), 0, h16.size() * sizeof(ggml_fp16_t));
    double total = 0;
    for (int64_t r = 0; r < R; r++) {
        rowsum[r] = 0;
        for (int64_t c = 0; c < W; c++) rowsum[r] += m32[r * W + c];
        total += rowsum[r];
    }

    // the graph, built and allocated once
    ggml_init_params gp = {ggml_tensor_overhead() * 32 + ggml_graph_overhead(), nullptr, true};
    ggml_context * ctx = ggml_init(gp);
    ggml_cgraph * gf = ggml_new_graph(ctx);
    ggml_tensor * x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, W, 1);
    ggml_tensor * idx = ggml_new_tensor_1d(ctx, GGML_TYPE_I64, 1);
    ggml_tensor * gidx = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 1);
    ggml_set_input(x);
    ggml_set_input(idx);
    ggml_set_input(gidx);
    ggml_tensor * src = ggml_scale_bias(ctx, x, 2.0f, 0.5f);
    ggml_build_forward_expand(gf, ggml_set_rows(ctx, ring32, src, idx));
    ggml_build_forward_expand(gf, ggml_set_rows(ctx, ring16, src, idx));
    ggml_tensor * sum32 = ggml_sum(ctx, ring32);
    ggml_tensor * sum16 = ggml_sum(ctx, ggml_cast(ctx, ring16, GGML_TYPE_F32));
    ggml_tensor * row32 = ggml_get_rows(ctx, ring32, gidx);
    ggml_tensor * row16 = ggml_get_rows(ctx, ring16, gidx);
    for (ggml_tensor * t : {sum32, sum16, row32, row16}) {
        ggml_set_output(t);
        ggml_build_forward_expand(gf, t);
    }
    ggml_gallocr_t galloc = ggml_gallocr_new(ggml_backend_get_default_buffer_type(backend));
    if (!ggml_gallocr_alloc_graph(galloc, gf)) { fprintf(stderr, "setrows-loop: graph allocation failed\n"); return 3; }

    std::vector<float> xin(W), got32(W), got16(W);
    const double t0 = now_s();
    for (int64_t step = 0; step < steps; step++) {
        const int64_t row = step % R;
        for (int64_t c = 0; c < W; c++) xin[c] = value(step, c);
        const int32_t g = (int32_t) row;
        ggml_backend_tensor_set(x, xin.data(), 0, W * sizeof(float));
        ggml_backend_tensor_set(idx, &row, 0, sizeof row);
        ggml_backend_tensor_set(gidx, &g, 0, sizeof g);
        if (ggml_backend_graph_compute(backend, gf) != GGML_STATUS_SUCCESS) { printf("compute failed\n"); return 1; }
        // host model: both rings' written row, the sum
        total -= rowsum[row];
        rowsum[row] = 0;
        for (int64_t c = 0; c < W; c++) {
            m32[row * W + c] = xin[c] * 2.0f + 0.5f;
            rowsum[row] += m32[row * W + c];
        }
        total += rowsum[row];
        float s32 = 0, s16 = 0;
        ggml_backend_tensor_get(sum32, &s32, 0, sizeof s32);
        ggml_backend_tensor_get(sum16, &s16, 0, sizeof s16);
        ggml_backend_tensor_get(row32, got32.data(), 0, W * sizeof(float));
        ggml_backend_tensor_get(row16, got16.data(), 0, W * sizeof(float));
        bool ok = s32 == (float) total && s16 == (float) total;
        for (int64_t c = 0; c < W && ok; c++) ok = got32[c] == m32[row * W + c] && got16[c] == m32[row * W + c];
        if (!ok) {
            printf("SETROWS_LOOP_MISMATCH step=%" PRId64 " sum32=%g sum16=%g expected=%g\n", step, s32, s16, total);
            return 1;
        }
    }
    const double loop_s = now_s() - t0;
    printf("SETROWS_LOOP {\"tool\":\"setrows-loop\",\"status\":\"pass\",\"backend\":\"%s\",\"steps\":%" PRId64
           ",\"ring_rows\":%" PRId64 ",\"width\":%" PRId64 ",\"uploads_per_step\":3,\"reads_per_step\":4,"
           "\"loop_s\":%.6f,\"loop_steps_per_s\":%.2f}\n",
           ggml_backend_name(backend), steps, R, W, loop_s, steps / loop_s);
    ggml_gallocr_free(galloc);
    ggml_free(ctx);
    ggml_backend_buffer_free(pbuf);
    ggml_free(pctx);
    ggml_backend_free(backend);
    return 0;
}
