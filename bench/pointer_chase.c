/* A plain pointer chase, the classic latency kernel (as in lmbench's lat_mem_rd): a random
 * cyclic permutation of N cache-line-sized cells, walked M times. It knows nothing of xtalk:
 * no probes, no headers of the project; the bench runs it as a `command` victim, timed by
 * its life.
 *
 *   cc -O2 -o pointer_chase pointer_chase.c
 *   ./pointer_chase BYTES STEPS      e.g. ./pointer_chase 8388608 2000000
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

struct cell {
    struct cell *next;
    char pad[64 - sizeof(struct cell *)];
};

static uint64_t rng_state = 88172645463325252ULL;

static uint64_t xorshift(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s BYTES STEPS\n", argv[0]);
        return 2;
    }
    size_t n = strtoull(argv[1], NULL, 10) / sizeof(struct cell);
    long steps = strtol(argv[2], NULL, 10);
    if (n < 2 || steps < 1) {
        fprintf(stderr, "%s: BYTES must hold two 64-byte cells and STEPS be positive\n", argv[0]);
        return 2;
    }
    struct cell *cells = aligned_alloc(64, n * sizeof(struct cell));
    size_t *order = malloc(n * sizeof(size_t));
    if (!cells || !order) {
        perror("malloc");
        return 1;
    }
    for (size_t i = 0; i < n; i++)
        order[i] = i;
    for (size_t i = n - 1; i > 0; i--) { /* Fisher-Yates: one cycle through every cell */
        size_t j = xorshift() % (i + 1);
        size_t t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    for (size_t i = 0; i < n; i++)
        cells[order[i]].next = &cells[order[(i + 1) % n]];
    free(order);
    struct cell *p = &cells[0];
    for (long s = 0; s < steps; s++)
        p = p->next;
    /* The walk's end printed, so the compiler cannot drop it. */
    printf("%p\n", (void *)p);
    free(cells);
    return 0;
}
