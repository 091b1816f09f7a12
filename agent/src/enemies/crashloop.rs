//! `crashloop`: forks a child that aborts at once (SIGABRT, no core dump: not dumpable),
//! reaps it and starts again, like a service manager restarting a crashing application.
//! Counts crashes.
use super::limits;
use super::kind::Kind;
use super::EnemyLoad;

pub struct CrashLoop;

impl EnemyLoad for CrashLoop {
    fn chunk(&mut self) -> u64 {
        let pid = limits::fork_child("xt-crashloop", || {
            unsafe {
                libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
                libc::abort()
            }
        });
        if pid <= 0 {
            return 0;
        }
        let mut st = 0;
        unsafe { libc::waitpid(pid, &mut st, 0) };
        (libc::WIFSIGNALED(st) && libc::WTERMSIG(st) == libc::SIGABRT) as u64
    }
}

/// The `crashloop` kind (registry: mod.rs).
pub const KIND: Kind = Kind::new("crashloop", "failure propagation: a child that aborts, restarted at once", "crashes", &[], |_, _| Ok(Box::new(CrashLoop)))
.channel("processes")
.fault();
