//! Enemies: workloads that load a shared resource until stopped and count the work they
//! achieved. One file per kind, each declaring its descriptor (kind.rs: parameters, bounds,
//! defaults, units, footprint, build); the registry below lists them, and the plan's loads
//! are checked and built from it. `xtalk-agent catalog --json` prints it (src/catalog.rs);
//! docs/enemies.md's parameter tables are made from that. `pace.rs` holds the intensity /
//! rate pacing that every enemy shares.

pub mod kind;
mod limits;
mod pace;
mod pair;
mod stores;

/// The registry: one line per enemy file, naming the descriptor(s) it declares. Adding an
/// enemy is its file plus one line here.
macro_rules! registry {
    ($($file:ident => $($kind:ident),+;)*) => {
        $(mod $file;)*
        /// Every enemy kind, in catalog order.
        pub static KINDS: &[&Kind] = &[$($(&$file::$kind),+),*];
    };
}

registry! {
    read => KIND;
    write => KIND;
    copy => KIND;
    ntstore => KIND;
    chase => KIND;
    cache => L1D, L2, LLC;
    loads => KIND;
    tlb => KIND;
    icache => KIND;
    branch => KIND;
    pingpong => KIND;
    falseshare => KIND;
    pi => KIND;
    syscall => KIND;
    fileio => KIND;
    fork => KIND;
    pagefault => KIND;
    net => KIND;
    timer => KIND;
    external => KIND;
    aocs => KIND;
    memhog => KIND;
    fdexhaust => KIND;
    forkbomb => KIND;
    diskfill => KIND;
    syscallstorm => KIND;
    crashloop => KIND;
    wbpressure => KIND;
    mshr => KIND;
    bank => KIND;
    llcsets => KIND;
    buslock => KIND;
}

pub use aocs::instance_main as aocs_instance;

use crate::launch::setup;
use crate::launch::shm::Shared;
use crate::observe::clock::mono_ns;
use crate::plan::{Enemy, Load, PlanError};
use kind::{Args, Kind, Param};
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
    /// What the load chose when it was built (a store method measured fastest, the lines
    /// found in one DRAM bank): one line for run.json's notes.
    fn note(&self) -> Option<String> {
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

/// A buffer of `bytes`, the parameter of every bandwidth and cache kind.
const BYTES: Param = Param::u64("bytes", "buffer size").min(4096).unit("bytes");
/// Most functions the icache enemy generates (icache.rs).
pub const MAX_FUNCTIONS: u64 = 4096;
pub use chase::MAX_CHAINS;

/// The descriptor of a kind, by name.
pub fn find(name: &str) -> Option<&'static Kind> {
    KINDS.iter().copied().find(|k| k.name == name)
}

/// `load` checked against its kind's declaration (parameters, bounds, extra checks); its
/// parameters seen through the kind. `at` is the load's field (`enemies[0].load`).
pub fn checked<'a>(load: &'a Load, at: &str) -> Result<Args<'a>, PlanError> {
    let Some(k) = find(&load.kind) else {
        let names: Vec<&str> = KINDS.iter().map(|k| k.name).collect();
        return crate::plan::err(format!("{at}.kind"), format!("'{}' is not an enemy kind of this agent; use one of {} (xtalk-agent catalog)", load.kind, names.join(", ")));
    };
    kind::check_params(k, load, at)?;
    let args = Args::new(k, load);
    (k.check)(&args, at)?;
    Ok(args)
}

/// The parameters of a load whose kind exists (the plan was checked).
fn args(load: &Load) -> Args<'_> {
    Args::new(find(&load.kind).unwrap_or_else(|| panic!("unchecked enemy kind '{}'", load.kind)), load)
}

/// Bytes of memory the enemy allocates (page cache included for files).
pub fn footprint(load: &Load) -> u64 {
    find(&load.kind).map_or(0, |k| Args::new(k, load).footprint())
}

/// Builds the load of a checked plan entry.
pub fn build(load: &Load, cx: &Ctx) -> Result<Box<dyn EnemyLoad>, String> {
    let a = args(load);
    (a.kind.build)(&a, cx)
}

/// Unit of the work counter of each kind (for the results).
pub fn unit(load: &Load) -> String {
    let a = args(load);
    match a.kind.unit_param {
        Some((param, when_set)) if a.opt_str(when_set).is_some() => a.str(param),
        _ => a.kind.unit.to_string(),
    }
}

/// The shared stop flag with the lifetime of the process: the control block is mapped
/// before fork and never unmapped in a child, so helper threads may keep a reference.
fn stop_flag(shared: &Shared) -> &'static AtomicU32 {
    unsafe { &*(&shared.ctl().stop as *const AtomicU32) }
}

/// Before the fork: one private scratch directory (mode 0700, random name, journalled, so
/// removed with whatever is in it when the run ends or by recovery) per directory the
/// plan's enemies with a `scratch_in` (fileio) name, shared by the enemies naming it. (enemy index, directory)
pub fn scratch_dirs(plan: &crate::plan::Plan, journal: &mut crate::launch::journal::Journal) -> Result<Vec<(usize, std::path::PathBuf)>, String> {
    let mut made: Vec<(std::path::PathBuf, std::path::PathBuf)> = Vec::new();
    let mut out = Vec::new();
    for (i, e) in plan.enemies.iter().enumerate() {
        let a = args(&e.load);
        let Some(param) = a.kind.scratch_in else { continue };
        let base = a.opt_str(param).map(std::path::PathBuf::from).unwrap_or_else(std::env::temp_dir);
        let d = match made.iter().find(|(b, _)| *b == base) {
            Some((_, d)) => d.clone(),
            None => {
                let d = journal.private(&base.join(crate::safefs::random_name("xtalk-fileio-")))
                    .map_err(|m| format!("enemies[{i}] ({}): {}: {m}", e.name, e.load.kind))?.path;
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
    if let Some(n) = load.note() {
        slot.set_note(&n);
    }
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
    if (args(&e.load).kind.runs_command)(&args(&e.load)) {
        setup::watcher_sched(&e.sched)
    } else {
        e.sched.clone()
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
