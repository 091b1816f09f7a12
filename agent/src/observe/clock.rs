//! Clock and per-thread readings used around each job. All vDSO or one syscall each.

/// Any clock in ns (vDSO for the MONOTONIC family).
#[inline(always)]
pub fn read(clock: libc::clockid_t) -> i64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as i64 * 1_000_000_000 + ts.tv_nsec as i64
}

/// CLOCK_MONOTONIC in ns: the one time base of every job timestamp.
#[inline(always)]
pub fn mono_ns() -> i64 {
    read(libc::CLOCK_MONOTONIC)
}

/// CPU time consumed by the calling thread, ns.
#[inline(always)]
pub fn thread_cpu_ns() -> i64 {
    read(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// CPU the calling thread runs on now (rseq/vDSO backed in glibc, no syscall on recent kernels).
#[inline(always)]
pub fn current_cpu() -> i32 {
    unsafe { libc::sched_getcpu() }
}

/// Voluntary and involuntary context switches of the calling thread so far.
#[inline(always)]
pub fn ctx_switches() -> (i64, i64) {
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
    (ru.ru_nvcsw as i64, ru.ru_nivcsw as i64)
}

/// Sleep until an absolute CLOCK_MONOTONIC date; returns at once if it has passed.
#[inline(always)]
pub fn sleep_until(t_ns: i64) {
    let ts = libc::timespec { tv_sec: t_ns / 1_000_000_000, tv_nsec: t_ns % 1_000_000_000 };
    loop {
        let rc = unsafe { libc::clock_nanosleep(libc::CLOCK_MONOTONIC, libc::TIMER_ABSTIME, &ts, std::ptr::null_mut()) };
        if rc != libc::EINTR {
            break;
        }
    }
}
