//! `forkbomb`: keeps `max_procs` children alive, each spinning ~2 ms then exiting, and
//! replaces every one that ends: a fork storm at a fixed ceiling. The ceiling is the enemy's
//! own count (RLIMIT_NPROC does not bind root; a pids cgroup is the configuration's job)
//! and the plan check bounds it; children die with the enemy. Counts forks.
use super::limits;
use super::EnemyLoad;
use crate::observe::clock::mono_ns;

pub struct ForkBomb {
    max: u64,
    live: u64,
}

impl ForkBomb {
    pub fn new(max_procs: u64) -> ForkBomb {
        ForkBomb { max: max_procs, live: 0 }
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
        let pid = limits::fork_child("xt-forkbomb", || {
            let end = mono_ns() + 2_000_000;
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
