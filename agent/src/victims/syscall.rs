//! `syscall` body: `calls` raw getppid(2) system calls per job. Its execution time is
//! system-call latency (entry, exit, mitigations): the probe `xtalk characterize` uses for
//! the kernel channel, sensitive to enemies that load the kernel's paths and state.
use super::body::{BodyKind, Run};
use super::JobBody;
use crate::declare::Param;

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

/// The `syscall` body (registry: mod.rs).
pub const BODY: BodyKind = BodyKind::new("syscall", "getppid(2) system calls: system-call latency, the kernel channel's probe", &[
    Param::u64("calls", "system calls per job").min(1),
], Run::Jobs(|a, _| Ok(Box::new(Syscall::new(a.u64("calls"))))))
.work("calls");
