//! `syscall` body: `calls` raw getppid(2) system calls per job. Its execution time is
//! system-call latency (entry, exit, mitigations): the probe `xtalk characterize` uses for
//! the kernel channel, sensitive to enemies that load the kernel's paths and state.
use super::JobBody;

pub struct Syscall {
    calls: u64,
}

impl Syscall {
    pub fn new(calls: u64) -> Syscall {
        Syscall { calls }
    }
}

impl JobBody for Syscall {
    fn run_job(&mut self) -> u64 {
        let mut acc = 0u64;
        for _ in 0..self.calls {
            acc = acc.wrapping_add(unsafe { libc::syscall(libc::SYS_getppid) } as u64);
        }
        acc
    }
}
