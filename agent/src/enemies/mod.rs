//! Enemies: workloads that load a shared resource until stopped and count the work they
//! achieved. One file per kind; `build` is the registry table.

mod chase;
mod pi;
mod read;
mod write;
mod aocs;
mod crashloop;
mod diskfill;
mod fdexhaust;
mod forkbomb;
mod limits;
mod memhog;
mod syscallstorm;

use crate::launch::setup;
use crate::launch::shm::Shared;
use crate::observe::clock::mono_ns;
use crate::plan::{Enemy, Load};
use std::sync::atomic::Ordering;

/// One enemy's load. `chunk` does a slice of work (well under a millisecond) and returns
/// how much it did, in `unit`s.
pub trait EnemyLoad {
    fn chunk(&mut self) -> u64;
}

/// Registry of enemy kinds.
pub fn build(load: &Load, huge_pages: bool) -> Box<dyn EnemyLoad> {
    match *load {
        Load::Read { bytes } => Box::new(read::Read::new(bytes, huge_pages)),
        Load::Write { bytes } => Box::new(write::Write::new(bytes, huge_pages)),
        Load::Chase { elements, element_bytes, order, seed } => Box::new(chase::Chase::new(elements, element_bytes, order, seed, huge_pages)),
        Load::Pi {} => Box::new(pi::Pi::new()),
        Load::Aocs { ref input, ref expected, first_step, steps, period_ns } => Box::new(aocs::Aocs::new(input, expected, first_step, steps, period_ns)),
        Load::Memhog { bytes } => Box::new(memhog::MemHog::new(bytes)),
        Load::Fdexhaust { fds } => Box::new(fdexhaust::FdExhaust::new(fds)),
        Load::Forkbomb { max_procs } => Box::new(forkbomb::ForkBomb::new(max_procs)),
        Load::Diskfill { ref dir, bytes } => Box::new(diskfill::DiskFill::new(dir, bytes)),
        Load::Syscallstorm {} => Box::new(syscallstorm::SyscallStorm),
        Load::Crashloop {} => Box::new(crashloop::CrashLoop),
    }
}

/// Unit of the work counter of each kind (for the results).
pub fn unit(load: &Load) -> &'static str {
    match load {
        Load::Read { .. } | Load::Write { .. } => "bytes",
        Load::Chase { .. } => "accesses",
        Load::Pi {} => "iterations",
        Load::Aocs { .. } => "steps",
        Load::Memhog { .. } | Load::Diskfill { .. } => "bytes",
        Load::Fdexhaust { .. } => "descriptors",
        Load::Forkbomb { .. } => "forks",
        Load::Syscallstorm {} => "syscalls",
        Load::Crashloop {} => "crashes",
    }
}

/// Entry point of a forked enemy process. Never returns.
pub fn enemy_main(index: usize, e: &Enemy, shared: &Shared, parent: libc::pid_t) -> ! {
    let slot = &shared.ctl().enemies[index];
    setup::set_name(&format!("xt-enemy-{index}"));
    let ready = setup::die_with_parent(parent)
        .and_then(|_| setup::apply_placement(&e.placement))
        .and_then(|_| setup::apply_sched(&e.sched))
        .and_then(|_| if e.lock_memory { setup::lock_memory() } else { Ok(()) });
    if let Err(msg) = ready {
        slot.fail(&format!("enemy {}: {msg}", e.name));
        unsafe { libc::_exit(3) };
    }
    let mut load = build(&e.load, e.huge_pages);
    load.chunk(); // first touch outside the measured window
    shared.barrier_wait();
    slot.started_ns.store(mono_ns(), Ordering::Relaxed);
    let mut ops = 0u64;
    while !shared.stopping() {
        ops += load.chunk();
        slot.ops.store(ops, Ordering::Relaxed);
    }
    slot.stopped_ns.store(mono_ns(), Ordering::Release);
    unsafe { libc::_exit(0) }
}
