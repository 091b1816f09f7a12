//! `fork`: fork (and exec) storm. Each step forks a child that exits at once (or execs
//! /bin/true when `exec`) and waits for it: page-table copies, copy-on-write faults, the
//! scheduler's run queues and, with exec, the loader and the page cache of the binary:
//! kernel work that other CPUs feel through shared locks, TLB shoot-downs and caches.
//! The counter is children created.
use super::EnemyLoad;
use super::kind::{Kind, Param};

const TRUE: &[u8] = b"/bin/true\0";

pub struct Fork {
    exec: bool,
}

impl Fork {
    pub fn new(exec: bool) -> Fork {
        Fork { exec }
    }
}

impl EnemyLoad for Fork {
    fn chunk(&mut self) -> u64 {
        let pid = unsafe { libc::fork() };
        match pid {
            -1 => 0,
            0 => unsafe {
                if self.exec {
                    let argv = [TRUE.as_ptr() as *const libc::c_char, std::ptr::null()];
                    libc::execv(argv[0], argv.as_ptr());
                }
                libc::_exit(0)
            },
            pid => {
                let mut st = 0;
                unsafe { libc::waitpid(pid, &mut st, 0) };
                1
            }
        }
    }
}

/// The `fork` kind (registry: mod.rs).
pub const KIND: Kind = Kind::new("fork", "fork (and exec): page-table copies, COW faults, run queues, the loader", "forks",
    &[Param::bool("exec", "each child execs /bin/true")], |a, _| Ok(Box::new(Fork::new(a.bool("exec")))))
.channel("kernel");
