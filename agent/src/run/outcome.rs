//! Phase `outcome`: what the run achieved, into run.json (crate::outcome), then every
//! change undone and the staged records moved into the run directory; last, run.json
//! written with whether the machine was restored.

use super::children::{describe, exited_ok, Child, Role};
use super::prepare::{Prepared, Records, APPLICATIONS_DIR};
use super::spawn::Spawned;
use super::{unix_ns, Verdict, EXIT_COMPLETED, EXIT_FAILED, EXIT_INTERRUPTED};
use crate::launch::cgroups;
use crate::launch::journal::Journal;
use crate::launch::shm::{Shared, Slot};
use crate::observe::{calibrate, perf};
use crate::outcome::{ApplicationResult, ApplicationStatus, ClockPair, Configuration, CountersReport, EnemyResult, GroupDirs, Irqs, Pids, ProbesReport, RunGroup, RunOutcome, SkippedCounter, Status, TraceReport};
use crate::plan::{Plan, Victim};
use crate::launch::jsonfile::write_atomic;
use crate::{enemies, regulate};
use std::path::Path;
use std::sync::atomic::Ordering;

/// Groups whose io_max cannot limit a path (no block device under it).
pub fn io_notes(plan: &Plan) -> Vec<String> {
    let mut notes = Vec::new();
    for g in &plan.groups {
        for path in g.io_max.as_ref().map(cgroups::io_unlimited).unwrap_or_default() {
            notes.push(format!("group {}: io_max does not limit {path}: its file system has no block device (its files are memory, which memory_max bounds)", g.name));
        }
    }
    notes
}

/// Fill `doc` with the run's outcome, restore the machine, write run.json; the exit code.
#[allow(clippy::too_many_arguments)]
pub fn write(plan: &Plan, out: &Path, mut prep: Prepared, spawned: Spawned, measuring: bool, verdict: Verdict, runaways: Result<Vec<String>, String>,
             notes: &mut Vec<String>, recovered: Vec<String>, journal: &mut Journal, doc: &mut RunOutcome) -> Result<i32, String> {
    let run_json = out.join("run.json");
    let tracer = prep.tracer.take();
    let (v, shared, children) = (&plan.victim, &prep.shared, &spawned.children);
    notes.extend(ended_early(plan, shared, children, measuring));
    // What enemies chose by measurement (a store method, a bank's lines), in their own words.
    notes.extend(plan.enemies.iter().enumerate().filter_map(|(i, e)| shared.ctl().enemies[i].note().map(|n| format!("enemy {}: {n}", e.name))));
    let victim = children.iter().find(|c| c.role == Role::Victim);
    doc.status = verdict.status;
    doc.reason = Some(verdict.reason);
    doc.victim_exit = Some(victim.and_then(|c| c.status).map(describe));
    doc.pids = Some(Pids {
        agent: spawned.me,
        victim: victim.map(|c| c.pid),
        enemies: children.iter().filter_map(|c| match c.role {
            Role::Enemy(i) => Some((plan.enemies[i].name.clone(), c.pid)),
            _ => None,
        }).collect(),
    });
    doc.process_budget = Some(prep.groups.budget_report());
    let rec = prep.victim();
    doc.jobs_recorded = Some(rec.log.count());
    doc.jobs_planned = Some(v.total_jobs());
    doc.t0_ns = Some(rec.log.header().t0_ns);
    doc.enemies = Some(enemy_results(plan, shared));
    doc.applications = Some(plan.applications.iter().enumerate().map(|(i, a)| application_result(i, a, &prep, children)).collect());
    let mut configuration = Configuration {
        groups: Some(plan.groups.iter().map(|g| GroupDirs { name: g.name.clone(), dirs: prep.groups.dirs_of(&g.name) }).collect()),
        housekeeping_cpus: Some(plan.housekeeping_cpus.clone()),
        irqs: Some(spawned.irqs.map(|(moved, refused)| Irqs { moved, refused })),
        recovered: Some(recovered),
        records_staged_on_tmpfs: Some(prep.staging.on_tmpfs()),
        ..Configuration::default()
    };
    doc.regulator = plan.regulator.as_ref().map(|r| regulate::report(r, shared));
    doc.counters = Some(counters_report(rec, v, &shared.ctl().victim));
    doc.probes = probes_report(rec, "probes.bin", prep.ref_start);
    doc.attached = crate::victims::attach::attached_threads(v, &prep.attached_before).map(|(pid, threads)| crate::outcome::Attached { pid, threads });
    if let Some(t) = tracer {
        doc.trace = Some(match t.save(out) {
            Ok(s) => TraceReport { events: t.events.clone(), file: Some(s.file), lost_events: Some(s.lost), clock: Some("mono".into()), capture: Some(s.capture), raw_error: s.raw_error, error: None },
            Err(e) => TraceReport { events: t.events.clone(), file: None, lost_events: None, clock: None, capture: None, raw_error: None, error: Some(e) },
        });
        drop(t); // instance removed, tracefs unmounted if this run mounted it
    }
    match &runaways {
        Ok(k) if !k.is_empty() => notes.push(format!("{} process(es) outlived their parents and were killed at the end of the run: {}", k.len(), k.join(", "))),
        Ok(_) => {}
        Err(e) => notes.push(format!("the run's group could not be emptied: {e}")),
    }
    configuration.run_group = Some(match prep.groups.run_group() {
        Ok(dir) => RunGroup { dir: Some(dir.to_path_buf()), killed: Some(runaways.ok()), why: None },
        Err(why) => {
            if unsafe { libc::geteuid() } == 0 {
                notes.push(format!("processes the run started could outlive it: {why}"));
            }
            RunGroup { dir: None, killed: None, why: Some(why.to_string()) }
        }
    });
    if !rec.skipped.is_empty() {
        let names: Vec<&str> = rec.skipped.iter().map(|(n, _)| n.as_str()).collect();
        notes.push(format!("counters not read on this machine: {} ({})", names.join(", "), rec.skipped[0].1));
    }
    for (i, a) in doc.applications.iter().flatten().enumerate() {
        if a.status == ApplicationStatus::Failed && plan.applications[i].may_fail {
            notes.push(format!("application {} failed and the run went on (may_fail): {}", a.name,
                a.error.clone().or(a.exit.clone()).unwrap_or_default()));
        }
    }
    doc.notes = Some(notes.clone());
    doc.configuration = Some(configuration);
    // Last: undo every change and move the staged records into the run directory.
    let undo_errors = journal.undo();
    doc.set_restored(undo_errors);
    doc.ended_unix_ns = Some(unix_ns());
    write_atomic(&run_json, doc).map_err(|e| format!("{}: {e}", run_json.display()))?;
    Ok(match verdict.status {
        Status::Completed => EXIT_COMPLETED,
        Status::Interrupted => EXIT_INTERRUPTED,
        _ => EXIT_FAILED,
    })
}

/// The counters a measured process read (or could not), and how.
fn counters_report(rec: &Records, v: &Victim, slot: &Slot) -> CountersReport {
    CountersReport {
        events: rec.events.iter().map(|e| e.name.clone()).collect(),
        skipped: rec.skipped.iter().map(|(n, why)| SkippedCounter { event: n.clone(), reason: why.clone() }).collect(),
        exclude_kernel: v.counters_exclude_kernel,
        read_with: if rec.events.is_empty() {
            None
        } else if slot.counters_rdpmc.load(Ordering::Relaxed) == 1 {
            Some("rdpmc".into())
        } else {
            Some("read(2)".into())
        },
        core_pmu: perf::core_pmu(),
    }
}

/// The probe counter and CLOCK_MONOTONIC now (calibrate::ticks_and_mono), as run.json keeps them.
pub fn clock_pair() -> ClockPair {
    let (ticks, mono_ns) = calibrate::ticks_and_mono();
    ClockPair { ticks, mono_ns }
}

/// A command body's probe records, flushed, with the run's clock references (`file`: its
/// path in the run directory).
fn probes_report(rec: &Records, file: &str, ref_start: ClockPair) -> Option<ProbesReport> {
    let p = rec.probes.as_ref()?;
    p.flush();
    let (records, dropped) = p.counts();
    Some(ProbesReport { file: file.into(), records, dropped, reference_start: ref_start, reference_end: clock_pair() })
}

/// What application `i` did: how it ended, its records, counters and probes.
fn application_result(i: usize, a: &Victim, prep: &Prepared, children: &[Child]) -> ApplicationResult {
    let rec = &prep.measured[i + 1];
    let child = children.iter().find(|c| c.role == Role::Application(i));
    let dir = format!("{APPLICATIONS_DIR}/{}", a.name());
    let status = match child {
        None => ApplicationStatus::NotStarted,
        Some(c) if c.cut_short => ApplicationStatus::Stopped,
        Some(c) if c.status.is_some_and(exited_ok) => ApplicationStatus::Completed,
        Some(_) => ApplicationStatus::Failed,
    };
    ApplicationResult {
        name: a.name().to_string(),
        may_fail: a.may_fail,
        status,
        exit: child.and_then(|c| c.status).map(describe),
        error: prep.shared.ctl().applications[i].message(),
        pid: child.map(|c| c.pid),
        jobs_recorded: rec.log.count(),
        jobs_planned: a.total_jobs(),
        t0_ns: rec.log.header().t0_ns,
        counters: counters_report(rec, a, &prep.shared.ctl().applications[i]),
        probes: probes_report(rec, &format!("{dir}/probes.bin"), prep.ref_start),
        dir,
    }
}

/// Enemies that ended by themselves during the measured window, before the stop flag.
fn ended_early(plan: &Plan, shared: &Shared, children: &[Child], measuring: bool) -> Vec<String> {
    let mut notes = Vec::new();
    for c in children {
        if let (Role::Enemy(i), Some(st)) = (c.role, c.status) {
            let stopped = shared.ctl().enemies[i].stopped_ns.load(Ordering::Acquire) != 0;
            if measuring && !stopped {
                let why = shared.ctl().enemies[i].message().map(|m| format!(" ({m})")).unwrap_or_default();
                notes.push(format!("enemy {} ended before it was stopped: {}{why}", plan.enemies[i].name, describe(st)));
            }
        }
    }
    notes
}

/// What each enemy achieved: over its whole life and over the victim's measured window.
fn enemy_results(plan: &Plan, shared: &Shared) -> Vec<EnemyResult> {
    let ctl = shared.ctl();
    let w0 = ctl.window_start_ns.load(Ordering::Acquire);
    let w1 = ctl.window_end_ns.load(Ordering::Acquire);
    let window_s = if w0 > 0 && w1 > w0 { Some((w1 - w0) as f64 / 1e9) } else { None };
    plan.enemies
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
            EnemyResult {
                name: e.name.clone(),
                kind: e.load.kind().to_string(),
                unit: enemies::unit(&e.load),
                ops,
                seconds,
                rate: seconds.map(|s| ops as f64 / s),
                window_ops,
                window_rate: window_s.zip(window_ops).map(|(s, o)| o as f64 / s),
                intensity: seconds.map(|t| (100.0 * busy / t).min(100.0)),
                window_intensity,
                target_intensity: e.intensity,
                target_rate: e.rate,
                setup_error: if a == 0 { s.message() } else { None },
                ended_early: if a > 0 { s.message() } else { None },
            }
        })
        .collect()
}
