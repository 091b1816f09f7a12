/*
 * A periodic control loop, the program of docs/your-application.md: every period it wakes at
 * an absolute time (clock_nanosleep, TIMER_ABSTIME), then does one step: a pointer chase
 * through a buffer (memory-bound work, about 1 ms here), like a controller walking its state.
 *
 * Instrumented with named xtalk probes: "wake" marks each wake-up (the release), "step" spans
 * each step. Built with -DXTALK_NO_PROBES the probes vanish: the same program uninstrumented.
 * With -o FILE it writes its own clock of every step (CLOCK_MONOTONIC ns, one line each:
 * `step release wake begin end`) when it ends, so xtalk's jobs can be checked against it; a
 * FILE ending in '/' is a directory, the file in it periodic-<pid>.txt (one per run).
 *
 *     periodic [-n steps] [-p period_us] [-b bytes] [-a accesses] [-o timing-file]
 *
 * Build: make build/periodic build/periodic-plain (cc -O2 -I include examples/apps/periodic.c).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef XTALK_NO_PROBES
#define xtalk_probe_begin(id) ((void)0)
#define xtalk_probe_end(id) ((void)0)
#define xtalk_probe_mark(id) ((void)0)
#define XTALK_PROBE_NAME(id, name) ((void)0)
#else
#include <xtalk/probe.h>
#endif

enum { PROBE_STEP = 1, PROBE_WAKE = 2 };

typedef struct { int64_t release, wake, begin, end; } step_time;

static int64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* A random cyclic permutation of `n` slots (Sattolo), so a chase visits every slot once per
 * lap and the hardware cannot predict the next address. */
static size_t *make_chase(size_t n, uint64_t seed) {
    size_t *next = malloc(n * sizeof *next);
    if (!next) return NULL;
    for (size_t i = 0; i < n; i++) next[i] = i;
    for (size_t i = n - 1; i > 0; i--) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        size_t j = (size_t)(seed >> 33) % i;
        size_t t = next[i]; next[i] = next[j]; next[j] = t;
    }
    return next;
}

static int usage(void) {
    fprintf(stderr, "usage: periodic [-n steps >= 1] [-p period_us >= 100] [-b bytes >= 4096] "
                    "[-a accesses >= 1] [-o timing-file]\n");
    return 2;
}

int main(int argc, char **argv) {
    long steps = 200, period_us = 5000, accesses = 20000;
    long long bytes = 2 << 20;
    const char *timing = NULL;
    int opt;
    while ((opt = getopt(argc, argv, "n:p:b:a:o:")) != -1) {
        switch (opt) {
        case 'n': steps = atol(optarg); break;
        case 'p': period_us = atol(optarg); break;
        case 'b': bytes = atoll(optarg); break;
        case 'a': accesses = atol(optarg); break;
        case 'o': timing = optarg; break;
        default: return usage();
        }
    }
    if (steps < 1 || period_us < 100 || bytes < 4096 || accesses < 1 || optind != argc) return usage();

    XTALK_PROBE_NAME(PROBE_STEP, "step");
    XTALK_PROBE_NAME(PROBE_WAKE, "wake");
    size_t n = (size_t)bytes / sizeof(size_t);
    size_t *next = make_chase(n, 42);
    step_time *log = calloc((size_t)steps, sizeof *log);
    if (!next || !log) {
        fprintf(stderr, "periodic: out of memory\n");
        return 1;
    }
    size_t at = 0;
    for (size_t i = 0; i < n; i++) at = next[at]; /* touch the buffer once before the loop */

    const int64_t period = (int64_t)period_us * 1000;
    int64_t release = now_ns() + period;
    for (long k = 0; k < steps; k++, release += period) {
        struct timespec t = {.tv_sec = release / 1000000000, .tv_nsec = release % 1000000000};
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, NULL) == EINTR) {
        }
        log[k].release = release;
        log[k].wake = now_ns();
        xtalk_probe_mark(PROBE_WAKE);

        xtalk_probe_begin(PROBE_STEP);
        log[k].begin = now_ns();
        for (long a = 0; a < accesses; a++) at = next[at];
        log[k].end = now_ns();
        xtalk_probe_end(PROBE_STEP);
    }

    if (timing) {
        char path[4096];
        size_t len = strlen(timing);
        if (len && timing[len - 1] == '/')
            snprintf(path, sizeof path, "%speriodic-%ld.txt", timing, (long)getpid());
        else
            snprintf(path, sizeof path, "%s", timing);
        /* never through a link another user could have planted */
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
        FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
        if (!f) {
            fprintf(stderr, "periodic: %s: %s\n", path, strerror(errno));
            return 1;
        }
        fprintf(f, "step release wake begin end\n");
        for (long k = 0; k < steps; k++)
            fprintf(f, "%ld %lld %lld %lld %lld\n", k, (long long)log[k].release, (long long)log[k].wake,
                    (long long)log[k].begin, (long long)log[k].end);
        if (fclose(f) != 0) return 1;
    }
    printf("periodic: %ld steps of %ld accesses every %ld us (%zu)\n", steps, accesses, period_us, at % 10);
    free(next);
    free(log);
    return 0;
}
