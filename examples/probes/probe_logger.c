/*
 * A housekeeping logger, the low-criticality application of examples/cohabitation.toml:
 * every period it formats a record (a timestamp and a few housekeeping values) and appends
 * it to its log, synced every `sync_every` records. Formatting and writing are xtalk probes,
 * so a `command` application records each section. The log is an unnamed file (O_TMPFILE in
 * the directory given, /tmp by default): it vanishes with the process, nothing stays behind.
 * Build: cc -O2 -I include examples/probes/probe_logger.c
 *
 *     probe_logger [records] [period_us] [sync_every] [dir]
 */
#define _GNU_SOURCE
#include <xtalk/probe.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

enum { PROBE_FORMAT = 1, PROBE_WRITE = 2, PROBE_SYNC = 3 };

int main(int argc, char **argv) {
    long records = argc > 1 ? atol(argv[1]) : 1000;
    long period_us = argc > 2 ? atol(argv[2]) : 1000;
    long sync_every = argc > 3 ? atol(argv[3]) : 100;
    const char *dir = argc > 4 ? argv[4] : "/tmp";
    if (records < 1 || period_us < 10 || sync_every < 1) {
        fprintf(stderr, "usage: probe_logger [records >= 1] [period_us >= 10] [sync_every >= 1] [dir]\n");
        return 2;
    }
    int fd = open(dir, O_TMPFILE | O_WRONLY | O_APPEND, 0600);
    if (fd < 0) {
        perror("probe_logger: O_TMPFILE");
        return 1;
    }
    char line[256];
    double temperature = 20.0, voltage = 28.0;
    struct timespec next, now;
    clock_gettime(CLOCK_MONOTONIC, &next);
    for (long i = 0; i < records; i++) {
        xtalk_probe_begin(PROBE_FORMAT);
        clock_gettime(CLOCK_REALTIME, &now);
        temperature += ((i * 7919) % 13 - 6) * 0.01;
        voltage += ((i * 104729) % 11 - 5) * 0.001;
        int n = snprintf(line, sizeof line, "%lld.%09ld seq=%ld temp=%.2f bus=%.3f mode=NOMINAL\n",
                         (long long)now.tv_sec, now.tv_nsec, i, temperature, voltage);
        xtalk_probe_end(PROBE_FORMAT);

        xtalk_probe_begin(PROBE_WRITE);
        if (write(fd, line, (size_t)n) != n) {
            perror("probe_logger: write");
            return 1;
        }
        xtalk_probe_end(PROBE_WRITE);
        if ((i + 1) % sync_every == 0) {
            xtalk_probe_begin(PROBE_SYNC);
            fdatasync(fd);
            xtalk_probe_end(PROBE_SYNC);
        }

        next.tv_nsec += period_us * 1000;
        while (next.tv_nsec >= 1000000000) { next.tv_sec++; next.tv_nsec -= 1000000000; }
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
    }
    close(fd);
    return 0;
}
