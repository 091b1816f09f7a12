/*
 * libxtalk_preload.so: the METRICS syscall layer. LD_PRELOADed into a command victim, it
 * wraps a set of libc calls with xtalk probes, so the time a program spends in the OS
 * interface shows per call (probe ids 1000+, names in src/xtalk/store/probes.py), split from
 * its own work. The wrappers find the real functions with dlsym(RTLD_NEXT).
 *
 * Build: cc -O2 -shared -fPIC -Iinclude preload/xtalk_preload.c -o build/libxtalk_preload.so -ldl
 */
#define _GNU_SOURCE
#include <xtalk/probe.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdarg.h>
#include <sys/ioctl.h>

#define REAL(name) static __typeof__(name) *real_##name; \
    if (__builtin_expect(!real_##name, 0)) real_##name = (__typeof__(name) *)dlsym(RTLD_NEXT, #name)

#define PROBED(id, call) do { xtalk_probe_begin(id); __typeof__(call) r_ = call; xtalk_probe_end(id); return r_; } while (0)

ssize_t read(int fd, void *buf, size_t n) { REAL(read); PROBED(1000, real_read(fd, buf, n)); }
ssize_t write(int fd, const void *buf, size_t n) { REAL(write); PROBED(1001, real_write(fd, buf, n)); }
ssize_t pread(int fd, void *buf, size_t n, off_t off) { REAL(pread); PROBED(1002, real_pread(fd, buf, n, off)); }
ssize_t pwrite(int fd, const void *buf, size_t n, off_t off) { REAL(pwrite); PROBED(1003, real_pwrite(fd, buf, n, off)); }

int open(const char *path, int flags, ...) {
    REAL(open);
    mode_t mode = 0;
    if (flags & (O_CREAT | O_TMPFILE)) { va_list ap; va_start(ap, flags); mode = va_arg(ap, mode_t); va_end(ap); }
    PROBED(1004, real_open(path, flags, mode));
}

int openat(int dirfd, const char *path, int flags, ...) {
    REAL(openat);
    mode_t mode = 0;
    if (flags & (O_CREAT | O_TMPFILE)) { va_list ap; va_start(ap, flags); mode = va_arg(ap, mode_t); va_end(ap); }
    PROBED(1005, real_openat(dirfd, path, flags, mode));
}

int close(int fd) { REAL(close); PROBED(1006, real_close(fd)); }

int ioctl(int fd, unsigned long req, ...) {
    REAL(ioctl);
    va_list ap; va_start(ap, req); void *arg = va_arg(ap, void *); va_end(ap);
    PROBED(1007, real_ioctl(fd, req, arg));
}

int nanosleep(const struct timespec *req, struct timespec *rem) { REAL(nanosleep); PROBED(1008, real_nanosleep(req, rem)); }
int clock_nanosleep(clockid_t c, int flags, const struct timespec *req, struct timespec *rem) {
    REAL(clock_nanosleep); PROBED(1009, real_clock_nanosleep(c, flags, req, rem));
}
int usleep(useconds_t us) { REAL(usleep); PROBED(1010, real_usleep(us)); }
int poll(struct pollfd *fds, nfds_t n, int timeout) { REAL(poll); PROBED(1011, real_poll(fds, n, timeout)); }
/* futex-based waits */
int pthread_mutex_lock(pthread_mutex_t *m) { REAL(pthread_mutex_lock); PROBED(1012, real_pthread_mutex_lock(m)); }
int pthread_cond_wait(pthread_cond_t *c, pthread_mutex_t *m) { REAL(pthread_cond_wait); PROBED(1013, real_pthread_cond_wait(c, m)); }
int sem_wait(sem_t *s) { REAL(sem_wait); PROBED(1014, real_sem_wait(s)); }
