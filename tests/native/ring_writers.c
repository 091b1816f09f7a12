/* Test helper: THREADS threads each write PAIRS begin/end probe pairs (id = thread index)
 * as fast as they can, then print how many probes were dropped. */
#include <xtalk/probe.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static long pairs;

static void *writer(void *arg) {
    uint32_t id = (uint32_t)(uintptr_t)arg;
    for (long i = 0; i < pairs; i++) {
        xtalk_probe_begin(id);
        xtalk_probe_end(id);
    }
    return NULL;
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 4;
    pairs = argc > 2 ? atol(argv[2]) : 10000;
    pthread_t t[64];
    for (int i = 0; i < threads && i < 64; i++) pthread_create(&t[i], NULL, writer, (void *)(uintptr_t)(i + 1));
    for (int i = 0; i < threads && i < 64; i++) pthread_join(t[i], NULL);
    printf("%llu\n", (unsigned long long)xtalk_probe_dropped());
    return 0;
}
