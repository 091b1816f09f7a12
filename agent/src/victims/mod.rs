//! The periodic victim: one process, one thread, absolute-time releases; every job is
//! recorded into the job log. Bodies (what a job computes) are one file each, registered
//! in `build`.

pub mod aocs;
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
use crate::launch::shm::Shared;
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
        Body::Aocs { input, expected, first_step } => Box::new(aocs::body::Aocs::new(input.as_ref(), expected.as_ref(), *first_step, v.total_jobs(), rundir::of(log))?),
        Body::Latency {} => Box::new(latency::Latency),
        Body::Command { .. } => unreachable!("a command victim execs its program (victims/command.rs)"),
        Body::Syscall { calls } => Box::new(syscall::Syscall::new(*calls)),
        Body::Taskset { .. } => unreachable!("a task set runs its own threads (victims/taskset.rs)"),
    })
}

/// What the forked victim needs besides its plan: the run's control block, its records and
/// the run's timing (the enemies have the same: `enemies::Ctx`).
pub struct Ctx<'a> {
    pub victim: &'a Victim,
    pub shared: &'a Shared,
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

/// Entry point of the forked victim process. Never returns.
pub fn victim_main(cx: &Ctx) -> ! {
    let (v, shared, log, counters, parent, settle_ns, enemies) = (cx.victim, cx.shared, cx.log, cx.counters, cx.parent, cx.settle_ns, cx.enemies);
    let slot = &shared.ctl().victim;
    setup::set_name("xt-victim");
    let ready = setup::die_with_parent(parent)
        .and_then(|_| setup::apply_placement(&v.placement))
        .and_then(|_| setup::apply_sched(&v.sched))
        .and_then(|_| if v.lock_memory { setup::lock_memory() } else { Ok(()) });
    if let Err(msg) = ready {
        slot.fail(&format!("victim: {msg}"));
        unsafe { libc::_exit(3) };
    }
    if let Body::Command { .. } = v.body {
        log.prefault();
        shared.barrier_wait();
        unsafe { libc::kill(parent, libc::SIGUSR1) };
        command::exec(cx);
    }
    if let Body::Taskset { .. } = v.body {
        taskset::main(cx);
    }
    // Counters are opened by the victim thread itself: they count this thread only.
    let mut group = match counters.map(|c| Group::open(c.events, c.exclude_kernel)).transpose() {
        Ok(g) => g,
        Err(msg) => {
            slot.fail(&format!("victim counters: {msg}"));
            unsafe { libc::_exit(3) };
        }
    };
    let mut body = match build(v, log) {
        Ok(b) => b,
        Err(msg) => {
            slot.fail(&format!("victim: {msg}"));
            unsafe { libc::_exit(3) };
        }
    };
    body.warm(); // warm caches and page tables before the window, outside the record
    log.prefault();
    if let Some(c) = counters {
        c.log.prefault();
    }
    shared.barrier_wait();
    unsafe { libc::kill(parent, libc::SIGUSR1) };
    let rdpmc = group.as_ref().and_then(|g| g.rdpmc());
    shared.ctl().counters_rdpmc.store(rdpmc.is_some() as u32, Ordering::Relaxed);
    let probe = group.as_mut().zip(counters.map(|c| c.log)).map(|(g, l)| (CounterReader { group: g, rdpmc }, l));
    periodic(v, body.as_mut(), log, probe, shared, settle_ns, enemies);
    if let Err(msg) = body.finish() {
        slot.fail(&msg);
        unsafe { libc::_exit(1) };
    }
    unsafe { libc::_exit(0) }
}

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
fn periodic(v: &Victim, body: &mut dyn JobBody, log: &JobLog, mut counters: Option<(CounterReader, &CounterLog)>, shared: &Shared, settle_ns: i64, enemies: usize) {
    let (mut before, mut after) = (Reading::default(), Reading::default());
    let period = v.period_ns as i64;
    let deadline = v.deadline() as i64;
    let t0 = mono_ns() + settle_ns;
    log.set_t0(t0);
    let mut sink = 0u64;
    let mut last_end = t0;
    for k in 0..v.total_jobs() {
        let release = t0 + k as i64 * period;
        if k == v.warmup_jobs {
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
        shared.ctl().victim_last_exec_ns.store(end - start, Ordering::Relaxed);
        body.after_job();
        last_end = end;
    }
    snapshot(shared, enemies, false, last_end);
    std::hint::black_box(sink);
}
