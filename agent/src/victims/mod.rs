//! The periodic victim: one process, one thread, absolute-time releases; every job is
//! recorded into the job log. Bodies (what a job computes) are one file each, registered
//! in `build`.

pub mod aocs;
pub mod attach;
mod chase;
pub mod command;
mod latency;
mod pi;
pub use pi::leibniz;
mod rundir;
mod spawn;
mod sum;
mod syscall;
pub mod taskset;

use crate::launch::setup;
use crate::launch::shm::{Shared, Slot};
use crate::observe::clock::{ctx_switches, current_cpu, mono_ns, sleep_until, thread_cpu_ns};
use crate::plan::{Body, Victim};
use crate::observe::perf::{EventSpec, Group, Reading};
use crate::record::counters::CounterLog;
use crate::record::jobs::{JobLog, JobRecord, FLAG_FAILED, FLAG_MIGRATED, FLAG_MISSED, FLAG_WARMUP};

/// Reads the counter group: rdpmc where every event allows it, else read(2).
pub struct CounterReader<'a> {
    group: &'a mut Group,
    rdpmc: Option<crate::observe::perf::Rdpmc>,
}

impl CounterReader<'_> {
    #[inline(always)]
    fn read(&mut self, out: &mut Reading) {
        match &self.rdpmc {
            Some(r) => r.read(out),
            None => self.group.read(out),
        }
    }
}

/// The counters the victim reads around each job, and where their deltas go.
pub struct Counters<'a> {
    pub events: &'a [EventSpec],
    pub exclude_kernel: bool,
    pub log: &'a CounterLog,
}
use std::sync::atomic::Ordering;

/// The work of one job. Returns a value derived from the work so it cannot be elided.
/// Bodies with I/O (aocs) use the hooks: `before_job` runs between the wake-up and start
/// timestamps (the input read of seed 000 Fig. 5.4), `after_job` once the job is recorded,
/// `finish` after the last job (its error fails the run).
pub trait JobBody {
    fn run_job(&mut self) -> u64;
    /// One job before the window, to warm caches and page tables.
    fn warm(&mut self) -> u64 {
        self.run_job()
    }
    /// Did the job just run fail to do its work? (Recorded as failed and missed.)
    fn job_failed(&mut self) -> bool {
        false
    }
    fn before_job(&mut self) {}
    fn after_job(&mut self) {}
    fn finish(&mut self) -> Result<(), String> {
        Ok(())
    }
}

/// Registry of victim bodies.
pub fn build(v: &Victim, log: &JobLog) -> Result<Box<dyn JobBody>, String> {
    let huge_pages = v.huge_pages;
    Ok(match &v.body {
        &Body::Chase { bytes, order, accesses, seed } => Box::new(chase::Chase::new(bytes, order, accesses, seed, huge_pages)),
        &Body::Sum { bytes } => Box::new(sum::Sum::new(bytes, huge_pages)),
        &Body::Spawn { bytes } => Box::new(spawn::Spawn::new(bytes, huge_pages)),
        &Body::Pi { iterations } => Box::new(pi::Pi::new(iterations)),
        Body::Aocs { input, expected, first_step, steps_per_job, repeat_step } => Box::new(aocs::body::Aocs::new(input.as_ref(), expected.as_ref(), *first_step, v.total_jobs(), *steps_per_job, *repeat_step, rundir::of(log))?),
        Body::Latency {} => Box::new(latency::Latency),
        Body::Command { .. } => unreachable!("a command victim execs its program (victims/command.rs)"),
        Body::Syscall { calls } => Box::new(syscall::Syscall::new(*calls)),
        Body::Taskset { .. } => unreachable!("a task set runs its own threads (victims/taskset.rs)"),
        Body::Attach { .. } => unreachable!("an attached process is watched (victims/attach.rs)"),
    })
}

/// What a forked measured process (the victim or an application) needs besides its plan
/// entry: the run's control block and its own slot there, its own records and the run's
/// timing (the enemies have the same: `enemies::Ctx`).
pub struct Ctx<'a> {
    pub victim: &'a Victim,
    pub shared: &'a Shared,
    /// Its own slot in the control block (a set-up failure's message).
    pub slot: &'a Slot,
    /// How it is named in messages and in the process table: "victim", or the application's name.
    pub who: String,
    /// The victim (not an application): it snapshots the enemies' work around its window
    /// and publishes its last job time for the regulator.
    pub primary: bool,
    pub log: &'a JobLog,
    /// Counters read around every job, if the plan asks for any.
    pub counters: Option<&'a Counters<'a>>,
    /// probes.bin, handed to a command victim (-1: none).
    pub probe_fd: i32,
    /// The agent: told of the barrier with SIGUSR1; the victim dies with it.
    pub parent: libc::pid_t,
    /// Time between the barrier and the first release (the enemies' settling).
    pub settle_ns: i64,
    /// Enemies in the run (their work counters are snapshotted around the window).
    pub enemies: usize,
}

/// A measured process's set-up failure: the message in its slot, then exit with `code`.
/// A `may_fail` application first meets the barrier (which counts on it) and notes that it
/// passed, so the others start and the run goes on without it.
pub fn give_up(shared: &Shared, slot: &Slot, may_fail: bool, msg: &str, code: i32) -> ! {
    slot.fail(msg);
    if may_fail {
        shared.barrier_wait();
        slot.started_ns.store(mono_ns(), Ordering::Release);
    }
    unsafe { libc::_exit(code) }
}

impl Ctx<'_> {
    /// Set-up failed (see `give_up`).
    pub(crate) fn give_up(&self, msg: &str, code: i32) -> ! {
        give_up(self.shared, self.slot, self.victim.may_fail, msg, code)
    }

    /// Past the barrier: noted in its slot (the agent then treats a `may_fail` application's
    /// end as recorded, not as a set-up failure), and the agent told the window may begin.
    pub(crate) fn passed_barrier(&self) {
        self.slot.started_ns.store(mono_ns(), Ordering::Release);
        unsafe { libc::kill(self.parent, libc::SIGUSR1) };
    }
}

/// Entry point of a forked measured process (the victim or an application). Never returns.
pub fn victim_main(cx: &Ctx) -> ! {
    let (v, shared, log, counters, parent, settle_ns) = (cx.victim, cx.shared, cx.log, cx.counters, cx.parent, cx.settle_ns);
    let (slot, who) = (cx.slot, cx.who.as_str());
    let enemies = if cx.primary { cx.enemies } else { 0 };
    setup::set_name(if cx.primary { "xt-victim".to_string() } else { format!("xt-app-{}", v.name()) }.as_str());
    if let Body::Attach { .. } = v.body {
        // The watcher takes no placement or policy: the measured process is not this one.
        if let Err(msg) = setup::die_with_parent(parent) {
            cx.give_up(&format!("{who}: {msg}"), 3);
        }
        log.prefault();
        shared.barrier_wait();
        cx.passed_barrier();
        attach::watch(cx);
    }
    let ready = setup::die_with_parent(parent)
        .and_then(|_| setup::apply_placement(&v.placement))
        .and_then(|_| setup::apply_sched(&v.sched))
        .and_then(|_| if v.lock_memory { setup::lock_memory() } else { Ok(()) });
    if let Err(msg) = ready {
        cx.give_up(&format!("{who}: {msg}"), 3);
    }
    if let Body::Command { .. } = v.body {
        log.prefault();
        shared.barrier_wait();
        cx.passed_barrier();
        command::exec(cx);
    }
    if let Body::Taskset { .. } = v.body {
        taskset::main(cx);
    }
    // Counters are opened by the victim thread itself: they count this thread only.
    let mut group = match counters.map(|c| Group::open(c.events, c.exclude_kernel)).transpose() {
        Ok(g) => g,
        Err(msg) => {
            cx.give_up(&format!("{who} counters: {msg}"), 3);
        }
    };
    let mut body = match build(v, log) {
        Ok(b) => b,
        Err(msg) => {
            cx.give_up(&format!("{who}: {msg}"), 3);
        }
    };
    body.warm(); // warm caches and page tables before the window, outside the record
    log.prefault();
    if let Some(c) = counters {
        c.log.prefault();
    }
    shared.barrier_wait();
    cx.passed_barrier();
    let rdpmc = group.as_ref().and_then(|g| g.rdpmc());
    slot.counters_rdpmc.store(rdpmc.is_some() as u32, Ordering::Relaxed);
    if cx.primary {
        shared.ctl().counters_rdpmc.store(rdpmc.is_some() as u32, Ordering::Relaxed);
    }
    let probe = group.as_mut().zip(counters.map(|c| c.log)).map(|(g, l)| (CounterReader { group: g, rdpmc }, l));
    periodic(v, body.as_mut(), log, probe, shared, settle_ns, enemies, cx.primary);
    if let Err(msg) = body.finish() {
        slot.fail(&msg);
        unsafe { libc::_exit(1) };
    }
    unsafe { libc::_exit(0) }
}

/// The enemies' work counters and the window's bound at one end of the victim's window
/// (an application, `enemies` 0 and `primary` false, leaves them to the victim).
pub(crate) fn snapshot(shared: &Shared, enemies: usize, at_start: bool, t: i64) {
    let ctl = shared.ctl();
    for i in 0..enemies {
        let ops = ctl.enemies[i].ops.load(Ordering::Relaxed);
        let dst = if at_start { &ctl.ops_at_start[i] } else { &ctl.ops_at_end[i] };
        dst.store(ops, Ordering::Relaxed);
        let busy = ctl.enemies[i].busy_ns.load(Ordering::Relaxed);
        let dst = if at_start { &ctl.busy_at_start[i] } else { &ctl.busy_at_end[i] };
        dst.store(busy, Ordering::Relaxed);
    }
    let w = if at_start { &ctl.window_start_ns } else { &ctl.window_end_ns };
    w.store(t, Ordering::Release);
}

/// The measured loop: sleep to the absolute release, time the body, record the job.
#[allow(clippy::too_many_arguments)]
fn periodic(v: &Victim, body: &mut dyn JobBody, log: &JobLog, mut counters: Option<(CounterReader, &CounterLog)>, shared: &Shared, settle_ns: i64, enemies: usize, primary: bool) {
    let (mut before, mut after) = (Reading::default(), Reading::default());
    let period = v.period_ns as i64;
    let deadline = v.deadline() as i64;
    let t0 = shared.first_release(settle_ns);
    log.set_t0(t0);
    let mut sink = 0u64;
    let mut last_end = t0;
    for k in 0..v.total_jobs() {
        let release = t0 + k as i64 * period;
        if k == v.warmup_jobs && primary {
            snapshot(shared, enemies, true, release);
        }
        sleep_until(release);
        let wakeup = mono_ns();
        body.before_job();
        let (vcs0, ivcs0) = ctx_switches();
        let cpu0 = current_cpu();
        let c0 = thread_cpu_ns();
        if let Some((g, _)) = counters.as_mut() {
            g.read(&mut before);
        }
        let start = mono_ns();
        sink ^= body.run_job();
        let end = mono_ns();
        if let Some((g, _)) = counters.as_mut() {
            g.read(&mut after);
        }
        let c1 = thread_cpu_ns();
        let cpu1 = current_cpu();
        let (vcs1, ivcs1) = ctx_switches();
        let mut flags = 0;
        if k < v.warmup_jobs {
            flags |= FLAG_WARMUP;
        }
        if end > release + deadline {
            flags |= FLAG_MISSED;
        }
        if body.job_failed() {
            flags |= FLAG_FAILED | FLAG_MISSED;
        }
        if cpu0 != cpu1 {
            flags |= FLAG_MIGRATED;
        }
        log.push(k, &JobRecord {
            job: k,
            release_ns: release,
            wakeup_ns: wakeup,
            start_ns: start,
            end_ns: end,
            cpu_time_ns: c1 - c0,
            nvcsw: vcs1 - vcs0,
            nivcsw: ivcs1 - ivcs0,
            cpu_start: cpu0,
            cpu_end: cpu1,
            flags,
            reserved: 0,
        });
        if let Some((_, clog)) = counters.as_ref() {
            clog.push(k, k, &before, &after);
        }
        if primary {
            shared.ctl().victim_last_exec_ns.store(end - start, Ordering::Relaxed);
        }
        body.after_job();
        last_end = end;
    }
    if primary {
        snapshot(shared, enemies, false, last_end);
    }
    std::hint::black_box(sink);
}
