/*
 * xtalk probes: instrument your own C or C++ application.
 *
 *     #include <xtalk/probe.h>
 *     xtalk_probe_begin(7);  work();  xtalk_probe_end(7);
 *
 *     xtalk_probe_name(7, "step");     (once: the name xtalk shows and an experiment may use)
 *     xtalk_probe_mark(8);              (a point in time, e.g. a periodic loop's wake-up)
 *
 * Each probe writes {timestamp, probe id, begin/end, CPU, thread id} into a buffer the xtalk
 * agent maps (a file in the run directory, handed over as the descriptor XTALK_PROBE_FD).
 * The probe path makes no system call and takes no lock: each thread claims slots in chunks
 * of XTALK_PROBE_CHUNK with one atomic add, fills them with plain stores and publishes each
 * record with a release store (a chunk's unused tail stays unpublished and is skipped by the
 * reader). When the buffer is full the probe counts a drop and returns: it never stalls. Run outside xtalk (no XTALK_PROBE_FD),
 * every probe is a no-op after one check.
 *
 * Timestamps are the processor's counter (x86-64: rdtsc with rdpid for the CPU, or rdtscp
 * where rdpid is missing; arm64: the generic timer's CNTVCT_EL0, at CNTFRQ_EL0 Hz, see
 * xtalk_probe_counter_hz); the agent records the counter's rate and a reference pair
 * with CLOCK_MONOTONIC, so the host puts probes on the same time base as the job records.
 * Layout: docs/observe.md. Header-only; C11 or C++11.
 */
#ifndef XTALK_PROBE_H
#define XTALK_PROBE_H

#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <sched.h>
#include <time.h>

#ifdef __cplusplus
#include <atomic>
#define XTALK_ATOMIC(T) std::atomic<T>
#define XTALK_FETCH_ADD(p, v) (p)->fetch_add((v), std::memory_order_relaxed)
#define XTALK_STORE_REL(p, v) (p)->store((v), std::memory_order_release)
#define XTALK_LOAD_ACQ(p) (p)->load(std::memory_order_acquire)
extern "C" {
#else
#include <stdatomic.h>
#define XTALK_ATOMIC(T) _Atomic T
#define XTALK_FETCH_ADD(p, v) atomic_fetch_add_explicit((p), (v), memory_order_relaxed)
#define XTALK_STORE_REL(p, v) atomic_store_explicit((p), (v), memory_order_release)
#define XTALK_LOAD_ACQ(p) atomic_load_explicit((p), memory_order_acquire)
#endif

#include <pthread.h>

#define XTALK_PROBE_CHUNK 64
#define XTALK_PROBE_MAGIC 0x3145424f52505458ull /* "XTPROBE1" as little-endian bytes */
#define XTALK_PROBE_BEGIN 0u
#define XTALK_PROBE_END 1u
#define XTALK_PROBE_MARK 2u /* a point in time: e.g. the wake-up of a periodic loop */
#define XTALK_PROBE_NAME_KIND 3u /* a name record: 8 bytes of the name in `ticks`, at byte offset `cpu` */
#define XTALK_PROBE_NAME_MAX 32 /* bytes of a probe name kept */

typedef struct {
    uint64_t magic;
    uint32_t version;     /* 1 */
    uint32_t record_size; /* 32 */
    uint64_t capacity;    /* records */
    XTALK_ATOMIC(uint64_t) next;    /* slots handed out in chunks so far (may exceed capacity) */
    XTALK_ATOMIC(uint64_t) dropped; /* probes that found the buffer full */
    uint64_t reserved[3];
} xtalk_probe_header;

typedef struct {
    XTALK_ATOMIC(uint64_t) seq; /* slot index + 1 once the record is complete */
    uint64_t ticks;
    uint32_t id;
    uint32_t kind; /* XTALK_PROBE_BEGIN, _END, _MARK or _NAME_KIND */
    uint32_t cpu;
    uint32_t tid;
} xtalk_probe_record;

/* One mapping per process; -1 = not attached, 0 = no xtalk (probes are no-ops). */
static xtalk_probe_header *xtalk_probe_buffer_;
static int xtalk_probe_state_ = -1;
static __thread uint32_t xtalk_probe_tid_;
static __thread uint64_t xtalk_probe_cursor_, xtalk_probe_limit_; /* this thread's claimed slots */

/* A forked child has its own threads but shares the buffer: it must claim slots anew. */
static void xtalk_probe_forked_(void) {
    xtalk_probe_cursor_ = xtalk_probe_limit_ = 0;
    xtalk_probe_tid_ = 0;
}

#if !defined(__x86_64__) && !defined(__cplusplus) && !defined(_GNU_SOURCE)
/* arm64 and the fallback read the CPU with sched_getcpu (vDSO or rseq, no system call), which
 * glibc and musl declare under _GNU_SOURCE only; the function is always there. (C++ compilers
 * define _GNU_SOURCE.) */
int sched_getcpu(void);
#endif

#if defined(__x86_64__)
#include <cpuid.h>
static int xtalk_probe_rdpid_; /* 1: rdtsc + rdpid; 0: rdtscp */
#endif

static inline uint64_t xtalk_probe_ticks_(uint32_t *cpu) {
#if defined(__x86_64__)
    uint32_t lo, hi, aux;
    if (__builtin_expect(xtalk_probe_rdpid_, 1)) {
        /* rdtsc does not wait for earlier instructions as rdtscp does; rdpid reads TSC_AUX. */
        uint64_t id;
        __asm__ __volatile__("rdtsc" : "=a"(lo), "=d"(hi));
        __asm__ __volatile__(".byte 0xf3, 0x0f, 0xc7, 0xf8" : "=a"(id)); /* rdpid %rax */
        aux = (uint32_t)id;
    } else {
        __asm__ __volatile__("rdtscp" : "=a"(lo), "=d"(hi), "=c"(aux));
    }
    *cpu = aux & 0xfff; /* Linux keeps the CPU number in TSC_AUX */
    return ((uint64_t)hi << 32) | lo;
#elif defined(__aarch64__)
    uint64_t v;
    __asm__ __volatile__("isb; mrs %0, cntvct_el0" : "=r"(v));
    *cpu = (uint32_t)sched_getcpu();
    return v;
#else
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    *cpu = (uint32_t)sched_getcpu();
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
#endif
}

/* The probe counter's frequency in Hz where the architecture states it: arm64's generic
 * timer runs at CNTFRQ_EL0 (set by the firmware, readable from user space). 0 on x86-64, whose
 * TSC rate is not architectural: the agent's reference pairs give it. 1e9 for the fallback's
 * nanoseconds. */
static inline uint64_t xtalk_probe_counter_hz(void) {
#if defined(__x86_64__)
    return 0;
#elif defined(__aarch64__)
    uint64_t hz;
    __asm__ __volatile__("mrs %0, cntfrq_el0" : "=r"(hz));
    return hz;
#else
    return 1000000000ull;
#endif
}

/* Map the buffer handed over by the agent. Called once: when the program is loaded (below),
 * else by the first probe. */
static inline int xtalk_probe_attach(void) {
    if (xtalk_probe_state_ >= 0) return xtalk_probe_state_;
    const char *fd_text = getenv("XTALK_PROBE_FD");
    struct stat st;
    int fd = fd_text ? atoi(fd_text) : -1;
    if (fd < 0 || fstat(fd, &st) != 0 || st.st_size < (off_t)sizeof(xtalk_probe_header)) {
        xtalk_probe_state_ = 0;
        return 0;
    }
    void *p = mmap(0, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED || ((xtalk_probe_header *)p)->magic != XTALK_PROBE_MAGIC) {
        xtalk_probe_state_ = 0;
        return 0;
    }
    xtalk_probe_buffer_ = (xtalk_probe_header *)p;
    /* Map every page writable now (Linux 5.14+; older kernels fault as the probes go): else
     * the first probe on each page of this mapping takes a page fault (~1 µs every 64 pairs). */
    madvise(p, (size_t)st.st_size, 23 /* MADV_POPULATE_WRITE */);
#if defined(__x86_64__)
    unsigned a, b, c, d;
    xtalk_probe_rdpid_ = __get_cpuid_count(7, 0, &a, &b, &c, &d) && (c & (1u << 22));
#endif
    pthread_atfork(0, 0, xtalk_probe_forked_);
    xtalk_probe_state_ = 1;
    return 1;
}

/* Attach before main, so that mapping and populating the buffer (milliseconds for megabytes on
 * a virtual machine) happens neither in a measured section nor in the program's first period. */
__attribute__((constructor)) static void xtalk_probe_load_(void) { xtalk_probe_attach(); }

/* Claim a slot of this thread's chunk and publish one record (the buffer is attached). */
static inline void xtalk_probe_put_(uint32_t id, uint32_t kind, uint64_t ticks, uint32_t cpu) {
    xtalk_probe_header *h = xtalk_probe_buffer_;
    if (__builtin_expect(xtalk_probe_cursor_ == xtalk_probe_limit_, 0)) {
        uint64_t chunk = h->capacity;
        if (XTALK_LOAD_ACQ(&h->next) < h->capacity) chunk = XTALK_FETCH_ADD(&h->next, XTALK_PROBE_CHUNK);
        if (chunk >= h->capacity) {
            XTALK_FETCH_ADD(&h->dropped, 1);
            return;
        }
        xtalk_probe_cursor_ = chunk;
        xtalk_probe_limit_ = chunk + XTALK_PROBE_CHUNK < h->capacity ? chunk + XTALK_PROBE_CHUNK : h->capacity;
    }
    uint64_t slot = xtalk_probe_cursor_++;
    xtalk_probe_record *r = (xtalk_probe_record *)(h + 1) + slot;
    r->ticks = ticks;
    r->id = id;
    r->kind = kind;
    r->cpu = cpu;
    r->tid = xtalk_probe_tid_;
    XTALK_STORE_REL(&r->seq, slot + 1);
}

static inline void xtalk_probe_(uint32_t id, uint32_t kind) {
    if (__builtin_expect(xtalk_probe_state_ != 1, 0) && !xtalk_probe_attach()) return;
    if (__builtin_expect(xtalk_probe_tid_ == 0, 0)) xtalk_probe_tid_ = (uint32_t)syscall(SYS_gettid);
    uint32_t cpu;
    uint64_t ticks = xtalk_probe_ticks_(&cpu);
    xtalk_probe_put_(id, kind, ticks, cpu);
}

/* Mark the beginning and the end of a measured section `id` (any number you choose). */
static inline void xtalk_probe_begin(uint32_t id) { xtalk_probe_(id, XTALK_PROBE_BEGIN); }
static inline void xtalk_probe_end(uint32_t id) { xtalk_probe_(id, XTALK_PROBE_END); }

/* Mark a point in time of probe `id` (e.g. the wake-up of a periodic loop: its release). */
static inline void xtalk_probe_mark(uint32_t id) { xtalk_probe_(id, XTALK_PROBE_MARK); }

/* Name probe `id` (its first XTALK_PROBE_NAME_MAX bytes are kept): xtalk shows the name and
 * an experiment file may use it (jobs_from = { probe = "step" }). Writes name records into the
 * buffer, so call it once, at start-up, not on the measured path. */
static inline void xtalk_probe_name(uint32_t id, const char *name) {
    if (xtalk_probe_state_ != 1 && !xtalk_probe_attach()) return;
    if (xtalk_probe_tid_ == 0) xtalk_probe_tid_ = (uint32_t)syscall(SYS_gettid);
    size_t n = 0;
    while (name[n] && n < XTALK_PROBE_NAME_MAX) n++;
    for (size_t off = 0; off < n; off += 8) {
        uint64_t chunk = 0;
        for (size_t k = 0; k < 8 && off + k < n; k++) chunk |= (uint64_t)(unsigned char)name[off + k] << (8 * k);
        xtalk_probe_put_(id, XTALK_PROBE_NAME_KIND, chunk, (uint32_t)off);
    }
}
#define XTALK_PROBE_NAME(id, name) xtalk_probe_name((id), (name))

/* Probes written and dropped so far in this run (for tests and self-checks). */
static inline uint64_t xtalk_probe_dropped(void) {
    return xtalk_probe_attach() ? XTALK_LOAD_ACQ(&xtalk_probe_buffer_->dropped) : 0;
}

#ifdef __cplusplus
}
#endif
#endif /* XTALK_PROBE_H */
