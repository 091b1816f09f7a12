//! `taskset` victim: several periodic tasks as threads of the victim process (seed 001
//! §4.6), each a calibrated busy loop of `wcet_ns` CPU time per job, scheduled by fixed
//! priorities (SCHED_FIFO, rate-monotonic unless a task names its priority) or by one
//! SCHED_DEADLINE reservation per task. Every job of every task is a record of the job log:
//! `job` is the record's index, `reserved` holds the task index (read as `task` by the
//! host), so the host derives per-task deadline-miss ratio, response time and release delay.
//!
//! The run lasts `(warmup_jobs + jobs) / R` hyperperiods (R records per hyperperiod). A task
//! still behind one hyperperiod after the end (starved, or throttled by its reservation)
//! gives up: its remaining jobs are recorded as skipped (CPU −1, no CPU time, missed).

use super::rundir;
use crate::launch::setup;
use crate::observe::clock::{ctx_switches, current_cpu, mono_ns, sleep_until, thread_cpu_ns};
use super::body::{BodyKind, Run};
use crate::declare::{Dflt, Param, Values};
use crate::observe::facts;
use crate::plan::{err, PlanError, Sched, Task, TaskPolicy, Victim};
use crate::record::jobs::{JobLog, JobRecord, FLAG_MIGRATED, FLAG_MISSED, FLAG_WARMUP};
use serde_json::json;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Barrier, Mutex};

/// Most tasks of a task set.
pub const MAX_TASKS: usize = 64;
/// Smallest SCHED_DEADLINE runtime the kernel accepts (2^10 ns, sched/deadline.c).
pub const DL_MIN_RUNTIME_NS: u64 = 1 << 10;

/// Priority of the highest rate-monotonic task when the victim's own policy is not fifo.
const RM_TOP_PRIORITY: i32 = 80;

/// The busy loop: a dependent integer recurrence the compiler cannot shorten.
#[inline(never)]
fn spin(iterations: u64) -> u64 {
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    for _ in 0..std::hint::black_box(iterations) {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    }
    x
}

/// Loop iterations per ns of CPU time: best of several 10 ms trials, timed on the thread's
/// CPU clock so a preemption during calibration does not inflate the result.
pub fn calibrate() -> f64 {
    let mut n = 100_000u64;
    let mut best = 0.0f64;
    for _ in 0..8 {
        let c0 = thread_cpu_ns();
        std::hint::black_box(spin(n));
        let dt = (thread_cpu_ns() - c0).max(1) as f64;
        let rate = n as f64 / dt;
        if dt > 5e6 {
            best = best.max(rate);
        }
        n = (rate * 10e6) as u64; // aim at 10 ms
    }
    best
}

/// Rate-monotonic priorities: shorter period, higher priority (ties by order), starting
/// from `top`; a task's explicit priority wins.
pub fn priorities(tasks: &[Task], top: i32) -> Vec<i32> {
    let mut order: Vec<usize> = (0..tasks.len()).filter(|&i| tasks[i].priority.is_none()).collect();
    order.sort_by_key(|&i| (tasks[i].period_ns, i));
    let mut p: Vec<i32> = tasks.iter().map(|t| t.priority.unwrap_or(0)).collect();
    for (rank, &i) in order.iter().enumerate() {
        p[i] = (top - rank as i32).max(1);
    }
    p
}

/// The SCHED_DEADLINE budget of a task: its runtime, or the busy time plus 5 % and 50 µs
/// for the loop's own recording, capped at the deadline.
pub fn runtime(t: &Task) -> u64 {
    t.runtime_ns.unwrap_or_else(|| (t.wcet_ns + t.wcet_ns / 20 + 50_000).min(t.deadline()))
}

/// Policy of each task's thread.
fn sched_of(v: &Victim, tasks: &[Task], policy: TaskPolicy) -> Vec<Sched> {
    match policy {
        TaskPolicy::Rm => {
            let top = if let Sched::Fifo { priority } = v.sched { priority } else { RM_TOP_PRIORITY };
            priorities(tasks, top).into_iter().map(|priority| Sched::Fifo { priority }).collect()
        }
        TaskPolicy::Deadline => tasks.iter().map(|t| Sched::Deadline { runtime_ns: runtime(t), deadline_ns: t.deadline(), period_ns: t.period_ns }).collect(),
    }
}

/// The job log shared by the task threads: records are claimed and published under a
/// priority-inheritance mutex, so a low-priority task holding it cannot block a high one
/// for longer than one record's write (no unbounded inversion).
struct Recorder<'a> {
    log: &'a JobLog,
    lock: *mut libc::pthread_mutex_t,
}

unsafe impl Sync for Recorder<'_> {}

impl<'a> Recorder<'a> {
    fn new(log: &'a JobLog) -> Recorder<'a> {
        let lock = Box::into_raw(Box::new(unsafe { std::mem::zeroed::<libc::pthread_mutex_t>() }));
        unsafe {
            let mut attr: libc::pthread_mutexattr_t = std::mem::zeroed();
            libc::pthread_mutexattr_init(&mut attr);
            libc::pthread_mutexattr_setprotocol(&mut attr, libc::PTHREAD_PRIO_INHERIT);
            libc::pthread_mutex_init(lock, &attr);
            libc::pthread_mutexattr_destroy(&mut attr);
        }
        Recorder { log, lock }
    }

    fn push(&self, mut rec: JobRecord) {
        unsafe { libc::pthread_mutex_lock(self.lock) };
        let k = self.log.count();
        rec.job = k;
        self.log.push(k, &rec);
        unsafe { libc::pthread_mutex_unlock(self.lock) };
    }
}

/// Entry point from victim_main (after placement, policy and locking). Never returns.
pub fn main(cx: &super::Ctx) -> ! {
    let (v, shared, log, settle_ns) = (cx.victim, cx.shared, cx.log, cx.settle_ns);
    let enemies = if cx.primary { cx.enemies } else { 0 };
    let a = BODY.values(&v.body);
    let tasks: &[Task] = &a.json::<Vec<Task>>("tasks").ok().flatten().unwrap_or_default();
    let policy = &policy_of(&a);
    let per_ns = calibrate();
    let scheds = sched_of(v, tasks, *policy);
    let hyper = v.period_ns as i64;
    let per_hyper: u64 = tasks.iter().map(|t| v.period_ns / t.period_ns).sum();
    let (warm_h, total_h) = ((v.warmup_jobs / per_hyper) as i64, (v.total_jobs() / per_hyper) as i64);
    let t0 = AtomicI64::new(0);
    let ready = Barrier::new(tasks.len() + 1);
    let go = Barrier::new(tasks.len() + 1);
    let errors: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let rec = Recorder::new(log);
    let skipped: Vec<AtomicI64> = tasks.iter().map(|_| AtomicI64::new(0)).collect();
    log.prefault();
    std::thread::scope(|s| {
        for (i, t) in tasks.iter().enumerate() {
            let (sched, ready, go, t0, errors, rec, skipped) = (&scheds[i], &ready, &go, &t0, &errors, &rec, &skipped[i]);
            let iterations = (t.wcet_ns as f64 * per_ns) as u64;
            s.spawn(move || {
                setup::set_name(&format!("xt-task-{i}"));
                let ok = setup::apply_sched(sched).map_err(|m| errors.lock().unwrap().push(format!("task {}: {m}", t.name))).is_ok();
                spin(iterations.min(1 << 20)); // first touch of the code path
                ready.wait();
                go.wait();
                if ok {
                    run_task(i as u32, t, iterations, t0.load(Ordering::Acquire), hyper, warm_h, total_h, rec, skipped);
                }
            });
        }
        ready.wait();
        if let Some(m) = errors.lock().unwrap().first() {
            cx.give_up(&format!("{}: {m}", cx.who), 3);
        }
        shared.barrier_wait();
        cx.passed_barrier();
        let start = shared.first_release(settle_ns);
        t0.store(start, Ordering::Release);
        log.set_t0(start);
        if cx.primary {
            super::snapshot(shared, enemies, true, start + warm_h * hyper);
        }
        go.wait();
    });
    if cx.primary {
        super::snapshot(shared, enemies, false, mono_ns());
    }
    if let Some(dir) = rundir::of(log) {
        let doc = json!({
            "iterations_per_us": per_ns * 1e3,
            "policy": policy,
            "hyperperiod_ns": v.period_ns,
            "hyperperiods": total_h, "warmup_hyperperiods": warm_h,
            "tasks": tasks.iter().enumerate().map(|(i, t)| json!({
                "task": i, "name": t.name, "period_ns": t.period_ns, "deadline_ns": t.deadline(), "wcet_ns": t.wcet_ns,
                "iterations": (t.wcet_ns as f64 * per_ns) as u64, "sched": scheds[i], "jobs": total_h * (v.period_ns / t.period_ns) as i64,
                "skipped": skipped[i].load(Ordering::Relaxed),
            })).collect::<Vec<_>>(),
        });
        let _ = crate::launch::jsonfile::write_atomic(&dir.join("taskset.json"), &doc);
    }
    unsafe { libc::_exit(0) }
}

/// One task's periodic loop: absolute releases on its own grid from t0.
#[allow(clippy::too_many_arguments)]
fn run_task(task: u32, t: &Task, iterations: u64, t0: i64, hyper: i64, warm_h: i64, total_h: i64, rec: &Recorder, skipped: &AtomicI64) {
    let period = t.period_ns as i64;
    let jobs = total_h * hyper / period;
    let give_up = t0 + (total_h + 1) * hyper;
    let warm_until = t0 + warm_h * hyper;
    let mut sink = 0u64;
    for j in 0..jobs {
        let release = t0 + j * period;
        let flags_base = if release < warm_until { FLAG_WARMUP } else { 0 };
        let now = mono_ns();
        if now > give_up {
            rec.push(JobRecord { release_ns: release, wakeup_ns: now, start_ns: now, end_ns: now, cpu_start: -1, cpu_end: -1, flags: flags_base | FLAG_MISSED, reserved: task, ..Default::default() });
            skipped.fetch_add(1, Ordering::Relaxed);
            continue;
        }
        sleep_until(release);
        let wakeup = mono_ns();
        let (vcs0, ivcs0) = ctx_switches();
        let cpu0 = current_cpu();
        let c0 = thread_cpu_ns();
        let start = mono_ns();
        sink ^= spin(iterations);
        let end = mono_ns();
        let c1 = thread_cpu_ns();
        let cpu1 = current_cpu();
        let (vcs1, ivcs1) = ctx_switches();
        let mut flags = flags_base;
        if end > release + t.deadline() as i64 {
            flags |= FLAG_MISSED;
        }
        if cpu0 != cpu1 {
            flags |= FLAG_MIGRATED;
        }
        rec.push(JobRecord {
            job: 0, release_ns: release, wakeup_ns: wakeup, start_ns: start, end_ns: end, cpu_time_ns: c1 - c0,
            nvcsw: vcs1 - vcs0, nivcsw: ivcs1 - ivcs0, cpu_start: cpu0, cpu_end: cpu1, flags, reserved: task,
        });
    }
    std::hint::black_box(sink);
}

/// The `taskset` body (registry: mod.rs): the process runs its tasks as threads after its
/// set-up; the report shows per-task tables, never pooled execution times.
pub const BODY: BodyKind = BodyKind::new("taskset", "periodic tasks as threads (RM priorities or SCHED_DEADLINE reservations); the victim's period is the hyperperiod", &[
    Param::json("tasks", "tasks", "the tasks: name, period_ns, wcet_ns, deadline_ns, priority (rm), runtime_ns (deadline)").default(Dflt::Required),
    Param::choice("policy", &["rm", "deadline"], "fixed priorities (rate-monotonic unless given) or one SCHED_DEADLINE reservation per task").default(Dflt::Str("rm")),
], Run::Own(main))
.sections(&["tasks"])
.periods(periods)
.check(check);

fn policy_of(a: &Values) -> TaskPolicy {
    if a.str("policy") == "deadline" { TaskPolicy::Deadline } else { TaskPolicy::Rm }
}

/// One period per hyperperiod, plus the hyperperiod a late task may use before it gives up.
/// The host's one copy of this rule is src/xtalk/plan.py `victim_seconds`.
fn periods(a: &Values, v: &Victim) -> f64 {
    let tasks: Vec<Task> = a.json("tasks").ok().flatten().unwrap_or_default();
    if tasks.is_empty() {
        return v.total_jobs() as f64;
    }
    let per: u64 = tasks.iter().map(|t| v.period_ns / t.period_ns.max(1)).sum();
    (v.total_jobs() / per.max(1)) as f64 + 1.0
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 { a } else { gcd(b, a % b) }
}

fn check(a: &Values, v: &Victim, at: &str, online: &[usize]) -> Result<(), PlanError> {
    let tasks: Vec<Task> = match a.json("tasks") {
        Ok(t) => t.unwrap_or_default(),
        Err(e) => return err(format!("{at}.body.tasks"), format!("{e}; give a list of tasks (name, period_ns, wcet_ns, ...)")),
    };
    let policy = policy_of(a);
    if tasks.is_empty() || tasks.len() > MAX_TASKS {
        return err(format!("{at}.body.tasks"), format!("give between 1 and {MAX_TASKS} tasks"));
    }
    let mut hyper = 1u64;
    for (i, t) in tasks.iter().enumerate() {
        let f = |k: &str| format!("{at}.body.tasks[{i}].{k}");
        if t.name.is_empty() || tasks[..i].iter().any(|o| o.name == t.name) {
            return err(f("name"), "must be non-empty and unique in the task set");
        }
        if t.period_ns < 100_000 {
            return err(f("period_ns"), "must be at least 100000 (100 us)");
        }
        if t.wcet_ns < 1_000 {
            return err(f("wcet_ns"), "must be at least 1000 (1 us of busy loop)");
        }
        if t.deadline_ns == Some(0) || t.deadline() > t.period_ns {
            return err(f("deadline_ns"), "must be positive and at most the period (constrained deadlines)");
        }
        match policy {
            TaskPolicy::Rm => {
                if t.runtime_ns.is_some() {
                    return err(f("runtime_ns"), "is for policy 'deadline'; remove it or set policy = \"deadline\"");
                }
                if let Some(p) = t.priority {
                    if !(1..=99).contains(&p) {
                        return err(f("priority"), format!("{p} is out of range; use 1..99"));
                    }
                }
            }
            TaskPolicy::Deadline => {
                if t.priority.is_some() {
                    return err(f("priority"), "is for policy 'rm'; remove it or set policy = \"rm\"");
                }
                let r = runtime(t);
                if r < DL_MIN_RUNTIME_NS || r > t.deadline() {
                    return err(f("runtime_ns"), format!("{r} ns is outside [{DL_MIN_RUNTIME_NS}, deadline {}]; SCHED_DEADLINE needs runtime <= deadline <= period", t.deadline()));
                }
            }
        }
        hyper = (hyper / gcd(hyper, t.period_ns)).checked_mul(t.period_ns).unwrap_or(u64::MAX);
        if hyper > 3_600_000_000_000 {
            return err(format!("{at}.body.tasks"), "the hyperperiod exceeds one hour; use harmonic periods");
        }
    }
    if v.period_ns != hyper {
        return err(format!("{at}.period_ns"), format!("{} is not the task set's hyperperiod; set it to {hyper}", v.period_ns));
    }
    let per: u64 = tasks.iter().map(|t| hyper / t.period_ns).sum();
    if v.jobs % per != 0 || v.warmup_jobs % per != 0 {
        return err(format!("{at}.jobs"), format!("jobs and warmup_jobs count job records of whole hyperperiods: multiples of {per}"));
    }
    if !v.counters.is_empty() {
        return err(format!("{at}.counters"), "counters are not read for a task set; remove them");
    }
    if policy == TaskPolicy::Deadline {
        if v.placement.cpus.as_ref().is_some_and(|c| online.iter().any(|o| !c.contains(o))) {
            return err(format!("{at}.placement.cpus"), "SCHED_DEADLINE tasks may not be pinned to a subset of the root domain; leave placement unpinned");
        }
        let bw: f64 = tasks.iter().map(|t| runtime(t) as f64 / t.period_ns as f64).sum();
        let limit = facts::current().dl_bandwidth_limit() * online.len() as f64;
        if bw > limit {
            return err(format!("{at}.body.tasks"), format!("SCHED_DEADLINE admission would fail: the reservations add up to {bw:.3} CPUs, over the limit of {limit:.3} ({} CPUs x sched_rt_runtime/sched_rt_period); lower runtimes or drop tasks", online.len()));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    fn task(period_ms: u64, priority: Option<i32>) -> Task {
        Task { name: format!("t{period_ms}"), period_ns: period_ms * 1_000_000, wcet_ns: 1_000_000, deadline_ns: None, priority, runtime_ns: None }
    }
    #[test]
    fn rate_monotonic_order_with_overrides() {
        let ts = [task(40, None), task(10, None), task(20, None), task(20, Some(5))];
        assert_eq!(priorities(&ts, 80), vec![78, 80, 79, 5]);
    }
    #[test]
    fn calibration_predicts_the_busy_time() {
        if let Some(how) = crate::observe::env::user_emulation() {
            return eprintln!("skipped: under user-mode emulation ({how}) a busy loop's CPU time is the translator's, not a prediction");
        }
        let per_ns = calibrate();
        assert!(per_ns > 0.0);
        let n = (2e6 * per_ns) as u64; // 2 ms
        // The calibration is a best of several trials, so the prediction is compared with the
        // best of several: one trial beside a busy neighbour (a shared host) runs slower on the
        // same CPU time, which says nothing about the calibration.
        let took = (0..7)
            .map(|_| {
                let c0 = thread_cpu_ns();
                std::hint::black_box(spin(n));
                (thread_cpu_ns() - c0) as f64
            })
            .fold(f64::INFINITY, f64::min);
        assert!((took - 2e6).abs() < 0.5e6, "2 ms of busy loop took {took} ns at best of 7");
    }
}
