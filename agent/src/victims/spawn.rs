//! `spawn` body: each job forks a child that sums the buffer (the `sum` body) and exits, and
//! waits for it — an application that starts a process per cycle (a helper, a logger). It is
//! the victim a PID-exhausting fault reaches: when the fork is refused (EAGAIN under a pids
//! limit) the job fails. The child inherits the victim's CPU and policy; its CPU time is not
//! in the job's `cpu_time_ns` (that counts the victim's thread).
use super::sum::Sum;
use super::body::{BodyKind, Run};
use super::JobBody;
use crate::declare::Param;

pub struct Spawn {
    work: Sum,
    failed: bool,
}

impl Spawn {
    pub fn new(bytes: u64, huge_pages: bool) -> Spawn {
        Spawn { work: Sum::new(bytes, huge_pages), failed: false }
    }
}

impl JobBody for Spawn {
    fn run_job(&mut self) -> u64 {
        self.failed = false;
        match unsafe { libc::fork() } {
            -1 => {
                self.failed = true;
                0
            }
            0 => {
                // The child: no destructors, no buffered output; the sum is its exit status.
                let v = self.work.run_job();
                unsafe { libc::_exit((v & 0x7f) as i32) }
            }
            pid => {
                let mut status = 0;
                while unsafe { libc::waitpid(pid, &mut status, 0) } < 0 {
                    if std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                        self.failed = true;
                        return 0;
                    }
                }
                self.failed = !libc::WIFEXITED(status);
                status as u64
            }
        }
    }

    /// Warm the buffer in this process (the children share its pages).
    fn warm(&mut self) -> u64 {
        self.work.run_job()
    }

    fn job_failed(&mut self) -> bool {
        self.failed
    }
}

/// The `spawn` body (registry: mod.rs).
pub const BODY: BodyKind = BodyKind::new("spawn", "each job forks a child that sums `bytes` and exits; a refused fork fails the job", &[
    Param::u64("bytes", "array size the child sums").min(8).unit("bytes"),
], Run::Jobs(|a, b| Ok(Box::new(Spawn::new(a.u64("bytes"), b.victim.huge_pages)))))
.footprint(1, &["bytes"]);
