//! One run: fork the enemies and the victim, release them through the barrier, block
//! until the victim ends (or the watchdog or a signal ends the run), then stop and reap
//! every child and write the run's outcome. Nothing in the agent polls while measuring.

pub mod blockdev;
pub mod cgroups;
pub mod contain;
pub mod irq;
pub mod journal;
pub mod resctrl;
pub mod safefs;
pub mod setup;
pub mod shm;
pub mod signals;

use crate::enemies;
use crate::observe::{clock::mono_ns, env};
use crate::plan::Plan;
use crate::observe::{perf, trace};
use crate::record::counters::CounterLog;
use crate::record::probes::ProbeBuffer;
use crate::record::jobs::JobLog;
use crate::victims;
use serde_json::{json, Value};
use shm::Shared;
use std::path::Path;
use std::sync::atomic::Ordering;

/// Exit codes of `xtalk-agent run` (documented in docs/agent.md).
pub const EXIT_COMPLETED: i32 = 0;
pub const EXIT_FAILED: i32 = 1;
pub const EXIT_BAD_INPUT: i32 = 2;
pub const EXIT_INTERNAL: i32 = 3;
pub const EXIT_INTERRUPTED: i32 = 130;

#[derive(Clone, Copy, PartialEq, Debug)]
enum Role {
    Victim,
    Enemy(usize),
    Regulator,
}

struct Child {
    pid: libc::pid_t,
    role: Role,
    status: Option<libc::c_int>,
    /// Resource use and the time it was reaped (for a command victim's job record).
    rusage: Option<(libc::rusage, i64)>,
}

fn describe(status: libc::c_int) -> String {
    if libc::WIFEXITED(status) {
        format!("exited with status {}", libc::WEXITSTATUS(status))
    } else if libc::WIFSIGNALED(status) {
        let s = libc::WTERMSIG(status);
        let name = unsafe { std::ffi::CStr::from_ptr(libc::strsignal(s)) }.to_string_lossy().into_owned();
        format!("killed by signal {s} ({name})")
    } else {
        format!("status {status}")
    }
}

/// Reap every child that has ended; returns how many were reaped.
fn reap(children: &mut [Child]) -> usize {
    let mut n = 0;
    loop {
        let mut st = 0;
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        let pid = unsafe { libc::wait4(-1, &mut st, libc::WNOHANG, &mut ru) };
        if pid <= 0 {
            return n;
        }
        if let Some(c) = children.iter_mut().find(|c| c.pid == pid) {
            c.status = Some(st);
            c.rusage = Some((ru, mono_ns()));
            n += 1;
        }
    }
}

fn alive(children: &[Child]) -> impl Iterator<Item = &Child> {
    children.iter().filter(|c| c.status.is_none())
}

/// Signal the live children matching `pred`, then wait up to `grace_ns` for them to end.
fn end_children(children: &mut [Child], pred: impl Fn(&Child) -> bool, sig: libc::c_int, grace_ns: i64) {
    for c in alive(children).filter(|c| pred(c)) {
        unsafe { libc::kill(c.pid, sig) };
    }
    let until = mono_ns() + grace_ns;
    while alive(children).any(|c| pred(c)) {
        reap(children);
        if !alive(children).any(|c| pred(c)) || signals::wait_until(until).is_none() && mono_ns() >= until {
            break;
        }
    }
    reap(children);
}

/// Write JSON to `path` atomically (a fresh temporary file, O_EXCL|O_NOFOLLOW: the run
/// directory may belong to someone else; fsync, rename).
pub fn write_json_atomic(path: &Path, v: &Value) -> std::io::Result<()> {
    use std::io::Write;
    let tmp = path.with_extension("json.tmp");
    let mut f = safefs::create_new(&tmp, 0o644)?;
    f.write_all(serde_json::to_string_pretty(v).unwrap().as_bytes())?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)
}

fn unix_ns() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as i64).unwrap_or(0)
}

fn fork_child(f: impl FnOnce()) -> Result<libc::pid_t, String> {
    match unsafe { libc::fork() } {
        -1 => Err(format!("fork: {}", std::io::Error::last_os_error())),
        0 => {
            signals::reset_in_child();
            f();
            unsafe { libc::_exit(0) }
        }
        pid => Ok(pid),
    }
}

/// Undo whatever dead agents left (their journals: cgroups and the processes in them, IRQ
/// affinities, staging directories; their trace instances): one line per change restored.
pub fn recover() -> Vec<String> {
    let mut lines = journal::recover();
    lines.extend(trace::recover());
    lines
}

/// Execute `plan`, writing `run.json` and `jobs.bin` under `out`. Returns the exit code.
/// From the first line on, the termination signals are blocked (they end the run through
/// `sigtimedwait`, never the agent): whatever arrives, SIGKILL aside, the machine is
/// restored and run.json is left with the run's outcome, never `running`.
pub fn execute(plan: &Plan, out: &Path, exit_with_parent: bool) -> Result<i32, String> {
    signals::block_watched();
    let run_json = out.join("run.json");
    // What a dead run left (cgroups, IRQ affinity, ...) is undone before anything else.
    let recovered = recover();
    let mut journal = journal::Journal::open()?;
    let mut doc = json!({
        "run_id": plan.run_id,
        "status": "running",
        "plan": plan,
        "environment": env::collect(),
        "started_unix_ns": unix_ns(),
    });
    write_json_atomic(&run_json, &doc).map_err(|e| format!("{}: {e}", run_json.display()))?;
    journal.run_json(&run_json)?;
    match run(plan, out, exit_with_parent, &mut journal, &mut doc, recovered) {
        Ok(code) => Ok(code),
        Err(e) => {
            // Set-up failed before any child was forked: restore, and say so in run.json.
            let undo_errors = journal.undo();
            doc["status"] = json!("failed");
            doc["reason"] = json!(e);
            doc["configuration"]["restored"] = json!(undo_errors.is_empty());
            doc["configuration"]["restore_errors"] = json!(undo_errors);
            doc["ended_unix_ns"] = json!(unix_ns());
            let _ = write_json_atomic(&run_json, &doc);
            Err(e)
        }
    }
}

fn run(plan: &Plan, out: &Path, exit_with_parent: bool, journal: &mut journal::Journal, doc: &mut Value, recovered: Vec<String>) -> Result<i32, String> {
    let run_json = out.join("run.json");
    let v = &plan.victim;
    let staging = crate::record::staging::Staging::new(out, journal);
    let mut log = JobLog::create(&staging.file("jobs.bin", journal)?, v.total_jobs(), v.period_ns, v.deadline()).map_err(|e| format!("jobs.bin: {e}"))?;
    log.set_out_dir(out);
    let (events, skipped) = perf::select(&v.counters, v.counters_exclude_kernel);
    let counter_log = if events.is_empty() {
        None
    } else {
        Some(CounterLog::create(&staging.file("counters.bin", journal)?, v.total_jobs(), events.len()).map_err(|e| format!("counters.bin: {e}"))?)
    };
    let counters = counter_log.as_ref().map(|log| victims::Counters { events: &events, exclude_kernel: v.counters_exclude_kernel, log });
    let tracer = match &plan.trace {
        Some(t) => Some(trace::Tracer::setup(&t.events, t.buffer_kb).map_err(|e| format!("trace: {e}"))?),
        None => None,
    };
    let probes = match &v.body {
        crate::plan::Body::Command { probe_capacity, .. } => {
            Some(ProbeBuffer::create(&staging.file("probes.bin", journal)?, *probe_capacity).map_err(|e| format!("probes.bin: {e}"))?)
        }
        _ => None,
    };
    let probe_fd = probes.as_ref().map_or(-1, |p| p.fd);
    // Ticks against CLOCK_MONOTONIC at both ends of the run: the probes' conversion.
    let ref_start = (crate::observe::calibrate::ticks(), mono_ns());
    let shared = Shared::new(1 + plan.enemies.len() as u32).map_err(|e| format!("shared control block: {e}"))?;
    let groups = cgroups::Groups::create(&plan.groups, plan.pids_max, journal).map_err(|e| format!("groups: {e}"))?;
    let dirs_of = |g: &Option<String>| groups.dirs_for(g.as_deref());
    if exit_with_parent {
        // The host may die (even by SIGKILL): tear the run down rather than outlive it.
        unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM as libc::c_ulong, 0, 0, 0) };
    }
    let me = unsafe { libc::getpid() };
    let begin = mono_ns();
    let deadline = begin + (plan.timeout_s * 1e9) as i64;
    let settle_ns = (plan.settle_ms * 1e6) as i64;
    let mut children: Vec<Child> = Vec::new();
    let mut status = "completed";
    let mut reason: Option<String> = None;

    let scratch = enemies::scratch_dirs(plan, journal)?;
    for (i, e) in plan.enemies.iter().enumerate() {
        let dirs = dirs_of(&e.group);
        let own = scratch.iter().find(|(j, _)| *j == i).map(|(_, d)| d.clone());
        match fork_child(|| {
            if let Err(m) = cgroups::attach_self(&dirs) {
                shared.ctl().enemies[i].fail(&format!("enemy {}: {m}", e.name));
                unsafe { libc::_exit(3) };
            }
            enemies::enemy_main(i, e, &shared, me, own)
        }) {
            Ok(pid) => children.push(Child { pid, role: Role::Enemy(i), status: None, rusage: None }),
            Err(m) => {
                status = "failed";
                reason = Some(m);
                break;
            }
        }
    }
    if reason.is_none() {
        let dirs = dirs_of(&v.group);
        match fork_child(|| {
            if let Err(m) = cgroups::attach_self(&dirs) {
                shared.ctl().victim.fail(&format!("victim: {m}"));
                unsafe { libc::_exit(3) };
            }
            victims::victim_main(v, &shared, &log, counters.as_ref(), probe_fd, me, settle_ns, plan.enemies.len())
        }) {
            Ok(pid) => children.push(Child { pid, role: Role::Victim, status: None, rusage: None }),
            Err(m) => {
                status = "failed";
                reason = Some(m);
            }
        }
    }

    if let (Some(r), None) = (&plan.regulator, &reason) {
        let targets: Vec<crate::regulate::Target> = children
            .iter()
            .filter_map(|c| match c.role {
                Role::Enemy(i) if r.enemies.is_empty() || r.enemies.contains(&plan.enemies[i].name) => Some(crate::regulate::Target {
                    slot: i,
                    pid: c.pid,
                    freezer: plan.enemies[i].group.as_ref().and_then(|g| groups.freezer_of(g)),
                }),
                _ => None,
            })
            .collect();
        let dirs = groups.dirs_for(None);
        match fork_child(|| {
            if let Err(m) = cgroups::attach_self(&dirs) {
                shared.ctl().victim.fail(&format!("regulator: {m}"));
                unsafe { libc::_exit(3) };
            }
            crate::regulate::regulator_main(r, &shared, &targets, me, &plan.housekeeping_cpus)
        }) {
            Ok(pid) => children.push(Child { pid, role: Role::Regulator, status: None, rusage: None }),
            Err(m) => {
                status = "failed";
                reason = Some(m);
            }
        }
    }
    // The agent itself and device interrupts go to the housekeeping CPUs (children are
    // forked already, so they do not inherit this affinity).
    let mut irqs = None;
    if let Some(h) = &plan.housekeeping_cpus {
        let _ = setup::apply_placement(&crate::plan::Placement { cpus: Some(h.clone()) });
        if plan.steer_irqs {
            irqs = Some(irq::steer(h, journal));
        }
    }

    // Phase 1: every process set up and past the barrier (the victim says so with SIGUSR1).
    let mut measuring = false;
    while reason.is_none() {
        match signals::wait_until(deadline) {
            None => {
                status = "timeout";
                reason = Some(format!("set-up did not finish within timeout_s = {}", plan.timeout_s));
            }
            Some(libc::SIGUSR1) => {
                measuring = true;
                if let Some(t) = &tracer {
                    t.on();
                }
                break;
            }
            Some(libc::SIGCHLD) => {
                reap(&mut children);
                if let Some(c) = children.iter().find(|c| c.status.is_some()) {
                    let slot = match c.role {
                        Role::Victim | Role::Regulator => &shared.ctl().victim,
                        Role::Enemy(i) => &shared.ctl().enemies[i],
                    };
                    status = "failed";
                    reason = Some(slot.message().unwrap_or_else(|| format!("{} {} during set-up", name_of(plan, c.role), describe(c.status.unwrap()))));
                }
            }
            Some(sig) => {
                status = "interrupted";
                reason = Some(format!("agent received signal {sig} during set-up"));
            }
        }
    }

    // Phase 2: block until the victim ends, the watchdog fires or we are told to stop.
    let mut notes: Vec<String> = Vec::new();
    for g in &plan.groups {
        for path in g.io_max.as_ref().map(cgroups::io_unlimited).unwrap_or_default() {
            notes.push(format!("group {}: io_max does not limit {path}: its file system has no block device (its files are memory, which memory_max bounds)", g.name));
        }
    }
    while measuring && reason.is_none() {
        match signals::wait_until(deadline) {
            None => {
                status = "timeout";
                reason = Some(format!("victim still running after timeout_s = {}", plan.timeout_s));
            }
            Some(libc::SIGCHLD) => {
                reap(&mut children);
                if let Some(c) = children.iter().find(|c| c.role == Role::Victim && c.status.is_some()) {
                    let st = c.status.unwrap();
                    if !(libc::WIFEXITED(st) && libc::WEXITSTATUS(st) == 0) {
                        status = "failed";
                        reason = Some(shared.ctl().victim.message().unwrap_or_else(|| format!("victim {}", describe(st))));
                    }
                    break;
                }
            }
            Some(libc::SIGUSR1) => {}
            Some(sig) => {
                status = "interrupted";
                reason = Some(format!("agent received signal {sig}"));
            }
        }
    }

    if let Some(t) = &tracer {
        t.off();
    }
    // Teardown: victim first (its jobs are already in the log), then the enemies.
    shared.ctl().stop.store(1, Ordering::SeqCst);
    end_children(&mut children, |c| c.role == Role::Regulator, 0, 1_000_000_000);
    for g in &plan.groups {
        if let Some((dir, ver)) = groups.freezer_of(&g.name) {
            let _ = cgroups::set_frozen(&dir, &ver, false);
        }
    }
    end_children(&mut children, |c| c.role == Role::Victim, libc::SIGTERM, 1_000_000_000);
    for c in alive(&children) {
        unsafe { libc::kill(c.pid, libc::SIGCONT) };
    }
    end_children(&mut children, |c| c.role != Role::Victim, 0, 2_000_000_000);
    end_children(&mut children, |_| true, libc::SIGKILL, 5_000_000_000);
    // Whatever the children started and left (a command's background child, a helper that
    // called setsid, a runaway real-time task) is still in the run's group: kill it.
    let runaways = groups.kill_runaways();
    reap(&mut children);
    if let (crate::plan::Body::Command { .. }, Some(c)) = (&v.body, children.iter().find(|c| c.role == Role::Victim)) {
        if let Some((ru, end)) = &c.rusage {
            victims::command::finish(v, &log, *end, ru);
        }
    }
    log.flush();
    if let Some(c) = &counter_log {
        c.flush();
    }

    for c in &children {
        if let (Role::Enemy(i), Some(st)) = (c.role, c.status) {
            let stopped = shared.ctl().enemies[i].stopped_ns.load(Ordering::Acquire) != 0;
            if measuring && !stopped {
                let why = shared.ctl().enemies[i].message().map(|m| format!(" ({m})")).unwrap_or_default();
                notes.push(format!("enemy {} ended before it was stopped: {}{why}", plan.enemies[i].name, describe(st)));
            }
        }
    }
    let victim_status = children.iter().find(|c| c.role == Role::Victim).and_then(|c| c.status).map(describe);
    doc["status"] = json!(status);
    doc["reason"] = json!(reason);
    doc["notes"] = json!(notes);
    doc["victim_exit"] = json!(victim_status);
    doc["pids"] = json!({
        "agent": me,
        "victim": children.iter().find(|c| c.role == Role::Victim).map(|c| c.pid),
        "enemies": children.iter().filter_map(|c| match c.role {
            Role::Enemy(i) => Some((plan.enemies[i].name.clone(), json!(c.pid))),
            _ => None,
        }).collect::<serde_json::Map<String, Value>>(),
    });
    doc["process_budget"] = json!(groups.budget_report());
    doc["jobs_recorded"] = json!(log.count());
    doc["jobs_planned"] = json!(v.total_jobs());
    doc["t0_ns"] = json!(log.header().t0_ns);
    doc["enemies"] = enemy_results(plan, &shared);
    doc["configuration"] = json!({
        "groups": plan.groups.iter().map(|g| json!({"name": g.name, "dirs": groups.dirs_of(&g.name)})).collect::<Vec<_>>(),
        "housekeeping_cpus": plan.housekeeping_cpus,
        "irqs": irqs.map(|(moved, refused)| json!({"moved": moved, "refused": refused})),
        "recovered": recovered,
        "records_staged_on_tmpfs": staging.on_tmpfs(),
    });
    if let Some(r) = &plan.regulator {
        doc["regulator"] = crate::regulate::report(r, &shared);
    }
    doc["counters"] = json!({
        "events": events.iter().map(|e| e.name.clone()).collect::<Vec<_>>(),
        "skipped": skipped.iter().map(|(n, why)| json!({"event": n, "reason": why})).collect::<Vec<_>>(),
        "exclude_kernel": v.counters_exclude_kernel,
        "read_with": if events.is_empty() { None } else if shared.ctl().counters_rdpmc.load(Ordering::Relaxed) == 1 { Some("rdpmc") } else { Some("read(2)") },
        "core_pmu": perf::core_pmu(),
    });
    if let Some(p) = &probes {
        p.flush();
        let (records, dropped) = p.counts();
        doc["probes"] = json!({
            "file": "probes.bin",
            "records": records,
            "dropped": dropped,
            "reference_start": {"ticks": ref_start.0, "mono_ns": ref_start.1},
            "reference_end": {"ticks": crate::observe::calibrate::ticks(), "mono_ns": mono_ns()},
        });
    }
    if let Some(t) = tracer {
        doc["trace"] = match t.save(&out.join("trace.txt")) {
            Ok(lost) => json!({"events": t.events, "file": "trace.txt", "lost_events": lost, "clock": "mono"}),
            Err(e) => json!({"events": t.events, "error": e}),
        };
        drop(t); // instance removed, tracefs unmounted if this run mounted it
    }
    match &runaways {
        Ok(k) if !k.is_empty() => notes.push(format!("{} process(es) outlived their parents and were killed at the end of the run: {}", k.len(), k.join(", "))),
        Ok(_) => {}
        Err(e) => notes.push(format!("the run's group could not be emptied: {e}")),
    }
    doc["configuration"]["run_group"] = match groups.run_group() {
        Ok(dir) => json!({"dir": dir, "killed": runaways.as_ref().ok()}),
        Err(why) => {
            if unsafe { libc::geteuid() } == 0 {
                notes.push(format!("processes the run started could outlive it: {why}"));
            }
            json!({"dir": null, "why": why})
        }
    };
    doc["notes"] = json!(notes);
    if !skipped.is_empty() {
        notes.push(format!("counters not read on this machine: {} ({})", skipped.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>().join(", "), skipped[0].1));
        doc["notes"] = json!(notes);
    }
    // Last: undo every change and move the staged records into the run directory.
    let undo_errors = journal.undo();
    doc["configuration"]["restored"] = json!(undo_errors.is_empty());
    doc["configuration"]["restore_errors"] = json!(undo_errors);
    doc["ended_unix_ns"] = json!(unix_ns());
    write_json_atomic(&run_json, doc).map_err(|e| format!("{}: {e}", run_json.display()))?;
    Ok(match status {
        "completed" => EXIT_COMPLETED,
        "interrupted" => EXIT_INTERRUPTED,
        _ => EXIT_FAILED,
    })
}

fn name_of(plan: &Plan, r: Role) -> String {
    match r {
        Role::Victim => "victim".into(),
        Role::Enemy(i) => format!("enemy {}", plan.enemies[i].name),
        Role::Regulator => "regulator".into(),
    }
}

/// What each enemy achieved: over its whole life and over the victim's measured window.
fn enemy_results(plan: &Plan, shared: &Shared) -> Value {
    let ctl = shared.ctl();
    let w0 = ctl.window_start_ns.load(Ordering::Acquire);
    let w1 = ctl.window_end_ns.load(Ordering::Acquire);
    let window_s = if w0 > 0 && w1 > w0 { Some((w1 - w0) as f64 / 1e9) } else { None };
    let list: Vec<Value> = plan
        .enemies
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let s = &ctl.enemies[i];
            let ops = s.ops.load(Ordering::Acquire);
            let (a, b) = (s.started_ns.load(Ordering::Acquire), s.stopped_ns.load(Ordering::Acquire));
            let seconds = if a > 0 && b > a { Some((b - a) as f64 / 1e9) } else { None };
            let window_ops = window_s.map(|_| ctl.ops_at_end[i].load(Ordering::Relaxed).saturating_sub(ctl.ops_at_start[i].load(Ordering::Relaxed)));
            // u64::MAX: an unpaced enemy, busy from start to stop.
            let busy = match s.busy_ns.load(Ordering::Relaxed) {
                u64::MAX => seconds.unwrap_or(0.0),
                ns => ns as f64 / 1e9,
            };
            // Over the victim's window: a paced enemy's busy time between the snapshots; an
            // unpaced one is busy whenever it lives, so its share of the window it overlaps.
            let window_intensity = window_s.map(|ws| {
                let busy_s = if s.busy_ns.load(Ordering::Relaxed) == u64::MAX {
                    let end = if b > 0 { b.min(w1) } else { w1 };
                    (end - a.max(w0)).max(0) as f64 / 1e9
                } else {
                    ctl.busy_at_end[i].load(Ordering::Relaxed).saturating_sub(ctl.busy_at_start[i].load(Ordering::Relaxed)) as f64 / 1e9
                };
                (100.0 * busy_s / ws).min(100.0)
            }).filter(|_| a > 0);
            json!({
                "name": e.name,
                "kind": e.load.kind(),
                "unit": enemies::unit(&e.load),
                "ops": ops,
                "seconds": seconds,
                "rate": seconds.map(|s| ops as f64 / s),
                "window_ops": window_ops,
                "window_rate": window_s.zip(window_ops).map(|(s, o)| o as f64 / s),
                "intensity": seconds.map(|t| (100.0 * busy / t).min(100.0)),
                "window_intensity": window_intensity,
                "target_intensity": e.intensity,
                "target_rate": e.rate,
                "setup_error": if a == 0 { s.message() } else { None },
                "ended_early": if a > 0 { s.message() } else { None },
            })
        })
        .collect();
    json!(list)
}
