/* Cost of a probe pair (xtalk_probe_begin + xtalk_probe_end) against a bare rdtscp pair and
 * a clock_gettime pair, interleaved sample by sample in one process. A sample times a batch
 * of BATCH pairs with the TSC and divides, so the counter's granularity (coarse on some
 * virtual machines) and the cost of timing vanish. Prints medians (ns) and the ratios.
 * Usage: probe_overhead SAMPLES TICKS_PER_NS */
#include <xtalk/probe.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <x86intrin.h>

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

#define BATCH 100

static double median(double *v, long n) { qsort(v, n, sizeof *v, cmp); return v[n / 2]; }

int main(int argc, char **argv) {
    long rounds = argc > 1 ? atol(argv[1]) : 100000;
    double tpn = argc > 2 ? atof(argv[2]) : 1.0;
    double *probe = malloc(rounds * sizeof(double)), *bare = malloc(rounds * sizeof(double)),
           *vdso = malloc(rounds * sizeof(double));
    unsigned aux;
    struct timespec ts;
    volatile unsigned long long sink = 0;
    xtalk_probe_attach();
    for (long i = 0; i < rounds; i++) {
        unsigned long long a, b;
        a = __rdtscp(&aux);
        for (int k = 0; k < BATCH; k++) { xtalk_probe_begin(1); xtalk_probe_end(1); }
        b = __rdtscp(&aux);
        probe[i] = (double)(b - a) / BATCH;
        a = __rdtscp(&aux);
        for (int k = 0; k < BATCH; k++) { sink += __rdtscp(&aux); sink += __rdtscp(&aux); }
        b = __rdtscp(&aux);
        bare[i] = (double)(b - a) / BATCH;
        a = __rdtscp(&aux);
        for (int k = 0; k < BATCH; k++) {
            clock_gettime(CLOCK_MONOTONIC, &ts); sink += ts.tv_nsec; clock_gettime(CLOCK_MONOTONIC, &ts); sink += ts.tv_nsec;
        }
        b = __rdtscp(&aux);
        vdso[i] = (double)(b - a) / BATCH;
    }
    double p = median(probe, rounds) / tpn, r = median(bare, rounds) / tpn, c = median(vdso, rounds) / tpn;
    printf("samples %ld x %d pairs (interleaved), attached=%d, dropped=%llu\n", rounds, BATCH, xtalk_probe_state_, (unsigned long long)xtalk_probe_dropped());
    printf("median pair cost: probe %.1f ns, bare rdtscp %.1f ns, clock_gettime %.1f ns\n", p, r, c);
    printf("ratio probe / rdtscp pair = %.2f (goal <= 1.2); probe / clock_gettime pair = %.2f\n", p / r, p / c);
    return 0;
}
