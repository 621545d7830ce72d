/* Replays the cached-graph pattern: one row written per step at an advancing position that
 * wraps the ring, the whole ring checked against a host-side model after every step. */
#include "ringbuf.h"

#include <stdio.h>

#define N_ROWS 24
#define WIDTH 4
#define STEPS 100

int main(void) {
    rb_t rb;
    float model[N_ROWS][WIDTH] = {{0}};
    int failed = 0;
    int64_t step;
    if (rb_init(&rb, N_ROWS, WIDTH) != 0) {
        fprintf(stderr, "cannot allocate the ring\n");
        return 125;
    }
    for (step = 0; step < STEPS && !failed; step++) {
        float row[WIDTH];
        int64_t pos = step * 5 + 3;
        int64_t r, w;
        for (w = 0; w < WIDTH; w++) row[w] = (float)(step * 10 + w);
        rb_set_rows(&rb, row, &pos, 1);
        for (w = 0; w < WIDTH; w++) model[pos % N_ROWS][w] = row[w];
        for (r = 0; r < N_ROWS && !failed; r++) {
            const float *got = rb_row(&rb, r);
            for (w = 0; w < WIDTH; w++) {
                if (got[w] != model[r][w]) {
                    printf("mismatch at step %lld row %lld col %lld: got %g expected %g\n",
                           (long long)step, (long long)r, (long long)w, got[w], model[r][w]);
                    failed = 1;
                    break;
                }
            }
        }
    }
    if (rb_writes(&rb) != (uint64_t)step) {
        printf("stats: write counter is %llu, expected %llu\n",
               (unsigned long long)rb_writes(&rb), (unsigned long long)step);
        failed = 1;
    }
    if (!failed) printf("ok: %d steps over a %d-row ring\n", STEPS, N_ROWS);
    rb_free(&rb);
    return failed;
}
