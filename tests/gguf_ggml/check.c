// The real ggml against the tool's GGUF writer and quantizers (tests/gguf_ggml.rs).
//   check quant TYPE IN.f32 OURS.bin OUT.f32: ggml_quantize_chunk of IN (rows of 32) must be
//     OURS byte for byte; OUT gets ggml's to_float of OURS.
//   check gguf MODEL OUT.txt OUT.f32: ggml's own GGUF reader loads MODEL with its data; OUT.txt
//     gets "name type ne0 ne1 nbytes" per tensor, OUT.f32 its values through to_float.
#include "ggml.h"
#include "gguf.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void * slurp(const char * path, size_t * n) {
    FILE * f = fopen(path, "rb");
    if (!f) { perror(path); exit(2); }
    fseek(f, 0, SEEK_END); *n = (size_t) ftell(f); fseek(f, 0, SEEK_SET);
    void * b = malloc(*n ? *n : 1);
    if (fread(b, 1, *n, f) != *n) { perror(path); exit(2); }
    fclose(f);
    return b;
}

static void to_f32(enum ggml_type t, const void * src, float * dst, int64_t n) {
    if (t == GGML_TYPE_F32) { memcpy(dst, src, (size_t) n * 4); return; }
    ggml_get_type_traits(t)->to_float(src, dst, n);
}

int main(int argc, char ** argv) {
    if (argc == 6 && !strcmp(argv[1], "quant")) {
        enum ggml_type t = (enum ggml_type) atoi(argv[2]);
        size_t nin, nours;
        float * in = slurp(argv[3], &nin);
        void * ours = slurp(argv[4], &nours);
        int64_t n = (int64_t) (nin / 4);
        size_t want = ggml_row_size(t, n);
        if (want != nours) { fprintf(stderr, "size: ggml %zu, ours %zu\n", want, nours); return 1; }
        void * theirs = malloc(want);
        size_t wrote = ggml_quantize_chunk(t, in, theirs, 0, n / 32, 32, NULL);
        if (wrote != want) { fprintf(stderr, "ggml wrote %zu of %zu\n", wrote, want); return 1; }
        size_t block = ggml_type_size(t);
        for (size_t i = 0; i < want; i++) {
            if (((unsigned char *) theirs)[i] != ((unsigned char *) ours)[i]) {
                size_t b = i / block;
                fprintf(stderr, "byte %zu (block %zu, values %g..): ggml %02x, ours %02x\n", i, b,
                        in[b * 32], ((unsigned char *) theirs)[i], ((unsigned char *) ours)[i]);
                return 1;
            }
        }
        float * out = malloc((size_t) n * 4);
        to_f32(t, ours, out, n);
        FILE * f = fopen(argv[5], "wb");
        fwrite(out, 4, (size_t) n, f);
        fclose(f);
        return 0;
    }
    if (argc == 5 && !strcmp(argv[1], "gguf")) {
        struct ggml_context * ctx = NULL;
        struct gguf_init_params p = { /*no_alloc =*/ false, /*ctx =*/ &ctx };
        struct gguf_context * g = gguf_init_from_file(argv[2], p);
        if (!g) { fprintf(stderr, "gguf_init_from_file failed on %s\n", argv[2]); return 1; }
        FILE * f = fopen(argv[3], "w");
        FILE * fv = fopen(argv[4], "wb");
        for (int64_t i = 0; i < gguf_get_n_tensors(g); i++) {
            const char * name = gguf_get_tensor_name(g, i);
            struct ggml_tensor * t = ggml_get_tensor(ctx, name);
            int64_t n = ggml_nelements(t);
            fprintf(f, "%s %s %lld %lld %zu\n", name, ggml_type_name(t->type), (long long) t->ne[0],
                    (long long) t->ne[1], ggml_nbytes(t));
            float * v = malloc((size_t) n * 4);
            to_f32(t->type, t->data, v, n);
            fwrite(v, 4, (size_t) n, fv);
            free(v);
        }
        fclose(f);
        fclose(fv);
        gguf_free(g);
        ggml_free(ctx);
        return 0;
    }
    fprintf(stderr, "usage: check quant TYPE IN OURS OUT | check gguf MODEL OUT.txt OUT.f32\n");
    return 2;
}
