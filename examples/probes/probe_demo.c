/*
 * An instrumented application: a control loop whose two phases are marked with xtalk
 * probes. Run alone it does its work; run by xtalk as a `command` victim, every section
 * lands in probes.bin. Build: cc -O2 -pthread -I include examples/probes/probe_demo.c
 *
 *     probe_demo [iterations] [threads]
 */
#include <xtalk/probe.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

enum { PROBE_COMPUTE = 1, PROBE_MEMORY = 2 };

static long iterations = 200;
static double sink;

static void *loop(void *arg) {
    (void)arg;
    size_t n = 1 << 18;
    double *buf = calloc(n, sizeof *buf);
    struct timespec next;
    clock_gettime(CLOCK_MONOTONIC, &next);
    for (long i = 0; i < iterations; i++) {
        xtalk_probe_begin(PROBE_COMPUTE);
        double acc = 0;
        for (int k = 1; k < 20000; k++) acc += 1.0 / ((double)k * k);
        xtalk_probe_end(PROBE_COMPUTE);

        xtalk_probe_begin(PROBE_MEMORY);
        for (size_t k = 0; k < n; k += 8) buf[k] += acc;
        xtalk_probe_end(PROBE_MEMORY);
        sink += buf[i % n];

        next.tv_nsec += 1000000; /* 1 ms period */
        if (next.tv_nsec >= 1000000000) { next.tv_sec++; next.tv_nsec -= 1000000000; }
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
    }
    free(buf);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc > 1) iterations = atol(argv[1]);
    int threads = argc > 2 ? atoi(argv[2]) : 1;
    pthread_t t[64];
    if (threads < 1 || threads > 64) { fprintf(stderr, "threads: 1..64\n"); return 2; }
    for (int i = 0; i < threads; i++) pthread_create(&t[i], NULL, loop, NULL);
    for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
    printf("done %ld iterations x %d threads, dropped %llu probes\n", iterations, threads,
           (unsigned long long)xtalk_probe_dropped());
    return 0;
}
