/* A preemptor the project's tests plant beside a victim: every PERIOD ns (absolute, on
 * CLOCK_MONOTONIC) it burns BURN ns on CPU at SCHED_FIFO 98, named "planted-fifo", memory
 * locked (no page fault between bursts), and logs each burst's [start, end) ns. SIGTERM ends
 * it: the log is written then, one "start end" line per burst.
 * argv: period_ns burn_ns cpu log */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <time.h>

#define MAX_BURSTS 100000

static volatile sig_atomic_t stop;
static long long bursts[MAX_BURSTS][2];

static void on_term(int sig) { (void)sig; stop = 1; }

static long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: preemptor period_ns burn_ns cpu log\n");
        return 2;
    }
    long long period = atoll(argv[1]), burn = atoll(argv[2]);
    int cpu = atoi(argv[3]);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_term;
    sigaction(SIGTERM, &sa, NULL);
    prctl(PR_SET_NAME, "planted-fifo");
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    struct sched_param sp = {.sched_priority = 98};
    memset(bursts, 0, sizeof bursts);  /* touched before mlockall's pages are needed */
    if (sched_setaffinity(0, sizeof set, &set) || sched_setscheduler(0, SCHED_FIFO, &sp) ||
        mlockall(MCL_CURRENT | MCL_FUTURE)) {
        perror("preemptor");
        return 1;
    }
    long long t = now_ns() + 50000000LL;
    int n = 0;
    while (!stop && n < MAX_BURSTS) {
        struct timespec ts = {.tv_sec = t / 1000000000LL, .tv_nsec = t % 1000000000LL};
        if (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
            continue;
        long long a = now_ns(), b = a;
        while (b < t + burn)
            b = now_ns();
        bursts[n][0] = a;
        bursts[n][1] = b;
        n++;
        t += period;
    }
    FILE *f = fopen(argv[4], "w");
    if (!f) {
        perror(argv[4]);
        return 1;
    }
    for (int i = 0; i < n; i++)
        fprintf(f, "%lld %lld\n", bursts[i][0], bursts[i][1]);
    return fclose(f) ? 1 : 0;
}
