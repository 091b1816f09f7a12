//! `forkbomb`: keeps up to `max_procs` children alive, each spinning `hold` then exiting, and
//! replaces every one that ends: a fork storm at a ceiling. The ceiling is the enemy's own
//! count (RLIMIT_NPROC does not bind root) and the plan check bounds it; a pids limit (the
//! run's `pids_max` or its group's) may stop it earlier, and then it keeps trying, as a real
//! bomb does: that is what exhausts the PIDs of whatever shares the limit. Children die with
//! the enemy. Counts successful forks.
use super::limits;
use super::kind::{Dflt, Kind, Param};
use super::EnemyLoad;
use crate::observe::clock::mono_ns;

pub struct ForkBomb {
    max: u64,
    hold_ns: i64,
    live: u64,
}

impl ForkBomb {
    pub fn new(max_procs: u64, hold_ns: u64) -> ForkBomb {
        ForkBomb { max: max_procs, hold_ns: hold_ns as i64, live: 0 }
    }
}

impl EnemyLoad for ForkBomb {
    fn chunk(&mut self) -> u64 {
        // Reap what has ended, waiting for one when at the ceiling.
        loop {
            let flags = if self.live >= self.max { 0 } else { libc::WNOHANG };
            let pid = unsafe { libc::waitpid(-1, std::ptr::null_mut(), flags) };
            if pid <= 0 {
                break;
            }
            self.live -= 1;
        }
        let hold = self.hold_ns;
        let pid = limits::fork_child("xt-forkbomb", || {
            let end = mono_ns() + hold;
            while mono_ns() < end {
                std::hint::spin_loop();
            }
            0
        });
        if pid > 0 {
            self.live += 1;
            1
        } else {
            0
        }
    }
}

/// The `forkbomb` kind (registry: mod.rs).
pub const KIND: Kind = Kind::new("forkbomb", "failure propagation: up to max_procs children alive, each spinning hold_ns then replaced", "forks", &[
    Param::u64("max_procs", "live children (the ceiling that keeps the machine up)").range(1, 256).file_default("64"),
    Param::u64("hold_ns", "each child's life, spinning").range(1_000, 60_000_000_000).default(Dflt::U64(2_000_000)).unit("ns"),
], |a, _| Ok(Box::new(ForkBomb::new(a.u64("max_procs"), a.u64("hold_ns")))))
.channel("processes")
.fault();
