/* A ring of fixed-width rows written by index, the access pattern of ggml_set_rows into a
 * KV ring buffer: callers pass absolute positions and the ring wraps them. */
#ifndef RINGBUF_H
#define RINGBUF_H
#include <stdint.h>

typedef struct {
    float *data;
    int64_t n_rows;
    int64_t width;
    uint64_t writes;
} rb_t;

int rb_init(rb_t *rb, int64_t n_rows, int64_t width);
void rb_free(rb_t *rb);
/* Copies n rows of src (each `width` floats) to absolute positions idx[0..n). */
void rb_set_rows(rb_t *rb, const float *src, const int64_t *idx, int64_t n);
/* Row `row` (0 <= row < n_rows) of the ring. */
const float *rb_row(const rb_t *rb, int64_t row);
uint64_t rb_writes(const rb_t *rb);

#endif
