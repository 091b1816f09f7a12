/* Cost of a probe pair (xtalk_probe_begin + xtalk_probe_end) against its own floors, interleaved
 * sample by sample in one process run by the agent with its real probe buffer:
 *   clock        the clock reads the probe makes, twice (probe.h's own reader: rdtsc + rdpid on
 *                x86-64, rdtscp where rdpid is missing; CNTVCT_EL0 + sched_getcpu on arm64);
 *   clock+store  the same reads plus two 32-byte records stored (seq published with a release
 *                store, as the probe does) into a pre-faulted buffer: the floor of any probe that
 *                keeps its records;
 *   clock_gettime  a pair of CLOCK_MONOTONIC reads (the vDSO), for scale.
 * A sample times a batch of BATCH pairs with the counter and divides, so the counter's
 * granularity and the cost of timing vanish. Also counts the minor page faults taken during
 * the probe batches (the probe buffer is a file the program maps; probe.h populates its pages
 * when it attaches, before main) and times that populating. Prints one JSON line, medians in ns.
 * Usage: probe_overhead SAMPLES TICKS_PER_NS   (TICKS_PER_NS 0: the counter's stated rate) */
#define _GNU_SOURCE
#include <xtalk/probe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#define BATCH 100

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, long n) { qsort(v, n, sizeof *v, cmp); return v[n / 2]; }

/* The batch's own time stamps: ordered with the work around them. */
static inline uint64_t stamp(void) {
#if defined(__x86_64__)
    unsigned aux;
    return __builtin_ia32_rdtscp(&aux);
#else
    uint64_t v;
    __asm__ __volatile__("isb; mrs %0, cntvct_el0" : "=r"(v) :: "memory");
    return v;
#endif
}

static long minflt(void) {
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return u.ru_minflt;
}

int main(int argc, char **argv) {
    long rounds = argc > 1 ? atol(argv[1]) : 10000;
    double tpn = argc > 2 ? atof(argv[2]) : 0;
    if (tpn <= 0) tpn = (double)xtalk_probe_counter_hz() / 1e9;
    if (tpn <= 0) { fprintf(stderr, "probe_overhead: give the counter's ticks per ns\n"); return 2; }
    double *probe = malloc(rounds * sizeof(double)), *clk = malloc(rounds * sizeof(double)),
           *store = malloc(rounds * sizeof(double)), *vdso = malloc(rounds * sizeof(double));
    /* As many records as the probes write, touched now: no page fault in the floor. */
    size_t nrec = (size_t)rounds * BATCH * 2;
    xtalk_probe_record *rec = aligned_alloc(64, nrec * sizeof *rec);
    memset(rec, 0, nrec * sizeof *rec);
    uint32_t tid = (uint32_t)syscall(SYS_gettid), cpu;
    struct timespec ts;
    volatile uint64_t sink = 0;
    size_t j = 0;
    long faults = 0;
    /* What attaching cost (done before main by probe.h): populating a second mapping of the
     * same buffer, timed. */
    struct timespec t0, t1;
    const char *fd_text = getenv("XTALK_PROBE_FD");
    struct stat st;
    if (!fd_text || fstat(atoi(fd_text), &st) != 0) { fprintf(stderr, "probe_overhead: run it under xtalk\n"); return 2; }
    void *second = mmap(0, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, atoi(fd_text), 0);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    madvise(second, (size_t)st.st_size, 23 /* MADV_POPULATE_WRITE */);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    munmap(second, (size_t)st.st_size);
    for (long i = 0; i < rounds; i++) {
        uint64_t a, b;
        long f0 = minflt();
        a = stamp();
        for (int k = 0; k < BATCH; k++) { xtalk_probe_begin(1); xtalk_probe_end(1); }
        b = stamp();
        faults += minflt() - f0;
        probe[i] = (double)(b - a) / BATCH;
        a = stamp();
        for (int k = 0; k < BATCH; k++) { sink += xtalk_probe_ticks_(&cpu) + cpu; sink += xtalk_probe_ticks_(&cpu) + cpu; }
        b = stamp();
        clk[i] = (double)(b - a) / BATCH;
        a = stamp();
        for (int k = 0; k < BATCH; k++) {
            for (int e = 0; e < 2; e++, j++) {
                uint64_t t = xtalk_probe_ticks_(&cpu);
                xtalk_probe_record *r = rec + j;
                r->ticks = t;
                r->id = 1;
                r->kind = (uint32_t)e;
                r->cpu = cpu;
                r->tid = tid;
                XTALK_STORE_REL(&r->seq, j + 1);
            }
        }
        b = stamp();
        store[i] = (double)(b - a) / BATCH;
        a = stamp();
        for (int k = 0; k < BATCH; k++) {
            clock_gettime(CLOCK_MONOTONIC, &ts); sink += ts.tv_nsec; clock_gettime(CLOCK_MONOTONIC, &ts); sink += ts.tv_nsec;
        }
        b = stamp();
        vdso[i] = (double)(b - a) / BATCH;
    }
    printf("{\"samples\": %ld, \"batch\": %d, \"attached\": %d, \"dropped\": %llu, \"probe_minor_faults\": %ld, "
           "\"populate_us\": %.1f, \"probe_ns\": %.2f, \"clock_ns\": %.2f, \"clock_store_ns\": %.2f, \"clock_gettime_ns\": %.2f}\n",
           rounds, BATCH, xtalk_probe_state_, (unsigned long long)xtalk_probe_dropped(), faults,
           ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / 1e3,
           median(probe, rounds) / tpn, median(clk, rounds) / tpn, median(store, rounds) / tpn, median(vdso, rounds) / tpn);
    return 0;
}
