//! Enemies: workloads that load a shared resource until stopped and count the work they
//! achieved. One file per kind; `build` is the registry table, `unit` names each counter;
//! docs/enemies.md describes every kind. `pace.rs` holds the intensity / rate pacing that
//! every enemy shares.

mod branch;
mod cache;
mod chase;
mod copy;
mod external;
mod falseshare;
mod fileio;
mod fork;
mod icache;
mod loads;
mod net;
mod ntstore;
mod pace;
mod pagefault;
mod pair;
mod pi;
mod pingpong;
mod read;
mod syscall;
mod timer;
mod tlb;
mod write;
mod aocs;
pub use aocs::instance_main as aocs_instance;
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
use pace::Pacer;
use std::sync::atomic::{AtomicU32, Ordering};

/// One enemy's load. `chunk` does a slice of work (well under a millisecond) and returns
/// how much it did, in `unit`s.
pub trait EnemyLoad {
    fn chunk(&mut self) -> u64;
    /// Work done once before the barrier, so buffers are backed and caches warm before
    /// the victim's window.
    fn prepare(&mut self) {
        self.chunk();
    }
    /// The enemy ended on its own (an external command that exited): why.
    fn ended(&mut self) -> Option<String> {
        None
    }
    /// Called around the pacer's sleeps (an external command is stopped while paused).
    fn pause(&mut self) {}
    fn resume(&mut self) {}
    /// Work counted only at the end (an external command's declared total), if any.
    fn finish(&mut self) -> Option<u64> {
        None
    }
    /// Length of the intensity window, ns.
    fn window_ns(&self) -> i64 {
        pace::WINDOW_NS
    }
}

/// What a load needs besides its parameters: the run's stop flag (for helper threads and
/// external commands), pacing targets and placement.
pub struct Ctx {
    pub index: usize,
    pub stop: &'static AtomicU32,
    pub intensity: f64,
    pub rate: Option<f64>,
    pub cpus: Option<Vec<usize>>,
    /// The enemy's planned policy: what an external command takes between fork and exec.
    pub sched: crate::plan::Sched,
    pub huge_pages: bool,
    /// The run's private scratch directory for this enemy's files (fileio), made by the agent.
    pub scratch: Option<std::path::PathBuf>,
}

/// Registry of enemy kinds.
pub fn build(load: &Load, cx: &Ctx) -> Result<Box<dyn EnemyLoad>, String> {
    let huge = cx.huge_pages;
    Ok(match load {
        Load::Read { bytes } => Box::new(read::Read::new(*bytes, huge)),
        Load::Write { bytes } => Box::new(write::Write::new(*bytes, huge)),
        Load::Chase { elements, element_bytes, order, seed, chains } => {
            Box::new(chase::Chase::new(*elements, *element_bytes, *order, *seed, *chains, huge))
        }
        Load::Pi {} => Box::new(pi::Pi::new()),
        Load::L1d { bytes } | Load::L2 { bytes } | Load::Llc { bytes } => Box::new(cache::Thrash::new(*bytes, huge)),
        Load::Loads { lines, stride_bytes } => Box::new(loads::Loads::new(*lines, *stride_bytes, huge)),
        Load::Tlb { pages, page_bytes } => Box::new(tlb::Tlb::new(*pages, *page_bytes)),
        Load::Icache { functions } => Box::new(icache::Icache::new(*functions)),
        Load::Branch { seed } => Box::new(branch::Branch::new(*seed)),
        Load::Copy { bytes } => Box::new(copy::Copy::new(*bytes, huge)),
        Load::Ntstore { bytes } => Box::new(ntstore::NtStore::new(*bytes, huge)),
        Load::Pingpong {} => Box::new(pingpong::PingPong::new(cx)),
        Load::Falseshare {} => Box::new(falseshare::FalseShare::new(cx)),
        Load::Syscall {} => Box::new(syscall::Syscall),
        Load::Fileio { bytes, shared, .. } => Box::new(fileio::FileIo::new(*bytes, *shared, cx)?),
        Load::Fork { exec } => Box::new(fork::Fork::new(*exec)),
        Load::Pagefault { bytes } => Box::new(pagefault::PageFault::new(*bytes)),
        Load::Net { proto, message_bytes } => Box::new(net::Net::new(*proto, *message_bytes)?),
        Load::Timer { interval_ns } => Box::new(timer::Timer::new(*interval_ns)),
        Load::External { argv, rate_regex, .. } => Box::new(external::External::new(argv, rate_regex.as_deref(), cx)?),
        Load::Aocs { input, expected, first_step, steps, period_ns, duplicate_executable: false } => {
            Box::new(aocs::Aocs::new(input, expected, *first_step, *steps, *period_ns))
        }
        Load::Aocs { input, expected, first_step, steps, period_ns, duplicate_executable: true } => {
            Box::new(external::External::agent_copy(&aocs::instance_args(input, expected, *first_step, *steps, *period_ns), cx)?)
        }
        Load::Memhog { bytes } => Box::new(memhog::MemHog::new(*bytes)),
        Load::Fdexhaust { fds } => Box::new(fdexhaust::FdExhaust::new(*fds)),
        Load::Forkbomb { max_procs, hold_ns } => Box::new(forkbomb::ForkBomb::new(*max_procs, *hold_ns)),
        Load::Diskfill { dir, bytes } => Box::new(diskfill::DiskFill::new(dir, *bytes)),
        Load::Syscallstorm {} => Box::new(syscallstorm::SyscallStorm),
        Load::Crashloop {} => Box::new(crashloop::CrashLoop),
    })
}

/// Unit of the work counter of each kind (for the results).
pub fn unit(load: &Load) -> String {
    match load {
        Load::Read { .. } | Load::Write { .. } | Load::Ntstore { .. } | Load::Fileio { .. } | Load::Net { .. } => "bytes",
        // Copy counts bytes read plus bytes written, as STREAM does.
        Load::Copy { .. } => "bytes",
        Load::Chase { .. } => "accesses",
        Load::Pi {} => "iterations",
        Load::L1d { .. } | Load::L2 { .. } | Load::Llc { .. } => "lines",
        Load::Loads { .. } => "loads",
        Load::Tlb { .. } => "pages",
        Load::Icache { .. } => "calls",
        Load::Branch { .. } => "branches",
        Load::Pingpong {} => "atomics",
        Load::Falseshare {} => "stores",
        Load::Syscall {} => "syscalls",
        Load::Fork { .. } => "forks",
        Load::Pagefault { .. } => "faults",
        Load::Timer { .. } => "wakeups",
        Load::External { rate_regex: Some(_), unit, .. } => return unit.clone(),
        Load::External { rate_regex: None, .. } => "ms",
        Load::Aocs { .. } => "steps",
        Load::Memhog { .. } | Load::Diskfill { .. } => "bytes",
        Load::Fdexhaust { .. } => "descriptors",
        Load::Forkbomb { .. } => "forks",
        Load::Syscallstorm {} => "syscalls",
        Load::Crashloop {} => "crashes",
    }
    .to_string()
}

/// The shared stop flag with the lifetime of the process: the control block is mapped
/// before fork and never unmapped in a child, so helper threads may keep a reference.
fn stop_flag(shared: &Shared) -> &'static AtomicU32 {
    unsafe { &*(&shared.ctl().stop as *const AtomicU32) }
}

/// Before the fork: one private scratch directory (mode 0700, random name, journalled, so
/// removed with whatever is in it when the run ends or by recovery) per directory the
/// plan's `fileio` enemies name, shared by the enemies naming it. (enemy index, directory)
pub fn scratch_dirs(plan: &crate::plan::Plan, journal: &mut crate::launch::journal::Journal) -> Result<Vec<(usize, std::path::PathBuf)>, String> {
    let mut made: Vec<(std::path::PathBuf, std::path::PathBuf)> = Vec::new();
    let mut out = Vec::new();
    for (i, e) in plan.enemies.iter().enumerate() {
        let Load::Fileio { dir, .. } = &e.load else { continue };
        let base = dir.as_ref().map(std::path::PathBuf::from).unwrap_or_else(std::env::temp_dir);
        let d = match made.iter().find(|(b, _)| *b == base) {
            Some((_, d)) => d.clone(),
            None => {
                let d = journal.private(&base.join(crate::launch::safefs::random_name("xtalk-fileio-")))
                    .map_err(|m| format!("enemies[{i}] ({}): fileio: {m}", e.name))?.path;
                made.push((base, d.clone()));
                d
            }
        };
        out.push((i, d));
    }
    Ok(out)
}

/// Entry point of a forked enemy process. Never returns.
pub fn enemy_main(index: usize, e: &Enemy, shared: &Shared, parent: libc::pid_t, scratch: Option<std::path::PathBuf>) -> ! {
    let slot = &shared.ctl().enemies[index];
    setup::set_name(&format!("xt-enemy-{index}"));
    let ready = setup::die_with_parent(parent)
        .and_then(|_| setup::apply_placement(&e.placement))
        .and_then(|_| setup::apply_sched(&own_sched(e)))
        .and_then(|_| if e.lock_memory { setup::lock_memory() } else { Ok(()) });
    if let Err(msg) = ready {
        slot.fail(&format!("enemy {}: {msg}", e.name));
        unsafe { libc::_exit(3) };
    }
    let stop = stop_flag(shared);
    let cx = Ctx { index, stop, intensity: e.intensity, rate: e.rate, cpus: e.placement.cpus.clone(), sched: e.sched.clone(), huge_pages: e.huge_pages, scratch };
    let mut load = match build(&e.load, &cx) {
        Ok(l) => l,
        Err(msg) => {
            slot.fail(&format!("enemy {}: {msg}", e.name));
            unsafe { libc::_exit(3) };
        }
    };
    load.prepare(); // first touch outside the measured window
    shared.barrier_wait();
    let started = mono_ns();
    slot.started_ns.store(started, Ordering::Relaxed);
    let mut ops = 0u64;
    let mut pacer = Pacer::new(e.intensity, e.rate, load.window_ns(), started);
    if pacer.unpaced() {
        // Intensity 100 and no rate: the tight loop, nothing but work between stop checks.
        while !shared.stopping() {
            ops += load.chunk();
            slot.ops.store(ops, Ordering::Relaxed);
            regulate(slot, ops);
            if let Some(why) = load.ended() {
                ended_early(shared, slot, &why);
            }
        }
        // Never slept: busy for its whole life (the same clock reading ends both).
        slot.busy_ns.store(u64::MAX, Ordering::Relaxed);
    } else {
        let mut busy = 0i64;
        while !shared.stopping() {
            let t0 = mono_ns();
            ops += load.chunk();
            let t1 = mono_ns();
            busy += t1 - t0;
            slot.ops.store(ops, Ordering::Relaxed);
            slot.busy_ns.store(busy as u64, Ordering::Relaxed);
            regulate(slot, ops);
            if let Some(why) = load.ended() {
                ended_early(shared, slot, &why);
            }
            pacer.pace(t0, t1, ops, load.as_mut(), stop);
        }
    }
    // The enemy's life ends here; stopping an external command (finish) is teardown.
    let stopped = mono_ns();
    if let Some(total) = load.finish() {
        slot.ops.store(total, Ordering::Relaxed);
    }
    slot.stopped_ns.store(stopped, Ordering::Release);
    unsafe { libc::_exit(0) }
}

/// The policy of the enemy process itself: the planned one, except for a load that runs a
/// command (external, a duplicated AOCS instance), whose command takes the planned policy
/// and whose own process only watches it (setup::watcher_sched).
fn own_sched(e: &Enemy) -> crate::plan::Sched {
    match e.load {
        Load::External { .. } | Load::Aocs { duplicate_executable: true, .. } => setup::watcher_sched(&e.sched),
        _ => e.sched.clone(),
    }
}

/// Over the regulator's budget: stop here, at once (the cooperative counterpart of a
/// counter-overflow interrupt); the regulator resumes us when its period ends.
#[inline(always)]
fn regulate(slot: &crate::launch::shm::Slot, ops: u64) {
    if ops >= slot.allowance.load(Ordering::Relaxed) {
        slot.stopped_self.store(1, Ordering::Release);
        unsafe { libc::raise(libc::SIGSTOP) };
        slot.stopped_self.store(0, Ordering::Release);
    }
}

/// The load ended by itself: say why in the slot and end this process without marking it
/// stopped, so the agent notes that the enemy ended before it was stopped. It waits for the
/// victim's window to open first: an enemy that dies during set-up fails the whole run.
fn ended_early(shared: &Shared, slot: &crate::launch::shm::Slot, why: &str) -> ! {
    slot.fail(why);
    while shared.ctl().window_start_ns.load(Ordering::Acquire) == 0 && !shared.stopping() {
        crate::observe::clock::sleep_until(mono_ns() + 1_000_000);
    }
    if shared.stopping() {
        slot.stopped_ns.store(mono_ns(), Ordering::Release);
    }
    unsafe { libc::_exit(0) }
}
