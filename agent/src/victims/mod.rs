//! The periodic victim: one process, one thread, absolute-time releases; every job is
//! recorded into the job log. Bodies (what a job computes, or how a process that is not a
//! periodic loop is run) are one file each, declaring their descriptor (body.rs:
//! parameters, bounds, defaults, work knob, footprint, report sections, how it runs); the
//! registry below lists them, and the plan's bodies are checked and built from it.

pub mod body;
mod rundir;

/// The registry: one line per body file, naming the descriptor it declares. Adding a body
/// is its file plus one line here (`pub` where other modules use the file's functions).
macro_rules! registry {
    ($($vis:vis $file:ident => $body:ident;)*) => {
        $($vis mod $file;)*
        /// Every victim body, in catalog order.
        pub static BODIES: &[&BodyKind] = &[$(&$file::$body),*];
    };
}

registry! {
    chase => BODY;
    sum => BODY;
    spawn => BODY;
    pi => BODY;
    syscall => BODY;
    latency => BODY;
    pub aocs => BODY;
    pub command => BODY;
    pub taskset => BODY;
    pub attach => BODY;
}

pub use pi::leibniz;
use body::{BodyKind, Run};

use crate::launch::setup;
use crate::launch::shm::{Shared, Slot};
use crate::observe::clock::{ctx_switches, current_cpu, mono_ns, sleep_until, thread_cpu_ns};
use crate::plan::{Body, PlanError, Victim};
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

/// The descriptor of a body, by name.
pub fn find(name: &str) -> Option<&'static BodyKind> {
    BODIES.iter().copied().find(|b| b.name == name)
}

/// The descriptor of a checked plan's body.
pub fn kind_of(b: &Body) -> &'static BodyKind {
    find(&b.kind).unwrap_or_else(|| panic!("unchecked victim body '{}'", b.kind))
}

/// A measured process's body checked against its declaration; `at` is its field (`victim`).
pub fn checked(v: &Victim, at: &str, online: &[usize]) -> Result<(), PlanError> {
    let Some(k) = find(&v.body.kind) else {
        let names: Vec<&str> = BODIES.iter().map(|b| b.name).collect();
        return crate::plan::err(format!("{at}.body.kind"), format!("'{}' is not a victim body of this agent; use one of {} (xtalk-agent catalog)", v.body.kind, names.join(", ")));
    };
    body::check(k, v, at, online)
}

/// Bytes of memory the body allocates, from its declared footprint.
pub fn footprint(b: &Body) -> u64 {
    find(&b.kind).map_or(0, |k| k.values(b).footprint(k.footprint))
}

/// Periods a measured process runs: one per job, or what its body declares (a task set: one
/// per hyperperiod, plus the hyperperiod a late task may use before it gives up).
/// The host's one copy of this rule is src/xtalk/plan.py `victim_seconds`;
/// tests/test_catalog.py checks that both put a run's end at the same place.
pub fn run_periods(v: &Victim) -> f64 {
    match find(&v.body.kind).and_then(|k| k.periods.map(|f| (k, f))) {
        Some((k, periods)) => periods(&k.values(&v.body), v),
        None => v.total_jobs() as f64,
    }
}

/// The measured run: settle plus the longest measured process's periods, in seconds.
pub fn run_seconds(plan: &crate::plan::Plan) -> f64 {
    plan.settle_ms / 1e3 + plan.measured().map(|v| run_periods(v) * v.period_ns as f64 / 1e9).fold(0.0, f64::max)
}

/// The capacity of probes.bin (records) for a body whose program writes probes.
pub fn probe_capacity(b: &Body) -> Option<u64> {
    let k = kind_of(b);
    k.probes.map(|p| k.values(b).u64(p))
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
    let kind = kind_of(&v.body);
    if let Run::Watch(watch) = kind.run {
        // The watcher takes no placement or policy: the measured process is not this one.
        watch(cx);
    }
    let ready = setup::die_with_parent(parent)
        .and_then(|_| setup::apply_placement(&v.placement))
        .and_then(|_| setup::apply_sched(&v.sched))
        .and_then(|_| if v.lock_memory { setup::lock_memory() } else { Ok(()) });
    if let Err(msg) = ready {
        cx.give_up(&format!("{who}: {msg}"), 3);
    }
    let build = match kind.run {
        Run::Jobs(build) => build,
        // (A watcher never came here: it returned above.)
        Run::Own(own) | Run::Watch(own) => own(cx),
    };
    // Counters are opened by the victim thread itself: they count this thread only.
    let mut group = match counters.map(|c| Group::open(c.events, c.exclude_kernel)).transpose() {
        Ok(g) => g,
        Err(msg) => {
            cx.give_up(&format!("{who} counters: {msg}"), 3);
        }
    };
    let mut body = match build(&kind.values(&v.body), &body::Build { victim: v, log }) {
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
