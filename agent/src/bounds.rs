//! Upper bounds of a plan, checked before anything else reads it: every count the agent
//! multiplies, indexes with or turns into a time stays inside what its arithmetic, its
//! control block and the kernel accept, and the record files fit in memory and on disk.
//! A plan that passes here never overflows, panics or fails at set-up because of its size.
//! The host mirrors these limits (src/xtalk/limits.py, from the catalog); docs/agent.md lists them.

use crate::launch::shm::MAX_ENEMIES;
use crate::observe::machine;
use crate::plan::{err, Plan, PlanError, Victim, MAX_APPLICATIONS};
use std::path::Path;

pub use crate::plan::{MAX_JOBS, MAX_PERIOD_NS, MAX_PIDS, MAX_RUN_ID, MAX_RUN_S, MAX_TIMEOUT_S};
/// Where the records are staged during the run (launch/staging.rs): tmpfs.
const STAGING: &str = "/dev/shm";
/// Bytes of a job record, and of the header of every record file.
const JOB_RECORD: u64 = 80;
const HEADER: u64 = 64;

/// Bytes of record files a run creates (job log, counter log, probe buffer), all staged on
/// tmpfs during the run and copied into the run directory at its end.
pub fn record_bytes(plan: &Plan) -> u64 {
    plan.measured().fold(0u64, |n, v| n.saturating_add(records_of(v)))
}

/// Bytes of one measured process's record files.
fn records_of(v: &Victim) -> u64 {
    let jobs = v.jobs.saturating_add(v.warmup_jobs);
    let mut n = HEADER.saturating_add(jobs.saturating_mul(JOB_RECORD));
    if !v.counters.is_empty() {
        let rec = 24 + 8 * v.counters.len() as u64;
        n = n.saturating_add(HEADER.saturating_add(jobs.saturating_mul(rec)));
    }
    if let Some(probe_capacity) = crate::victims::probe_capacity(&v.body) {
        n = n.saturating_add(HEADER.saturating_add(probe_capacity.saturating_mul(32)));
    }
    n
}

/// Free bytes of the file system holding `dir` (what an unprivileged user may use); None
/// when it cannot be asked.
pub fn free_bytes(dir: &Path) -> Option<u64> {
    let c = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()).ok()?;
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return None;
    }
    Some((st.f_bavail as u64).saturating_mul(st.f_frsize as u64))
}

fn mib(n: u64) -> u64 {
    n >> 20
}

/// The plan's sizes, counts and times against the limits above and this machine's memory.
pub fn check(plan: &Plan) -> Result<(), PlanError> {
    if plan.run_id.len() > MAX_RUN_ID || plan.run_id.contains('\0') {
        return err("run_id", format!("is {} bytes long; at most {MAX_RUN_ID}, without NUL (it names the run's directory)", plan.run_id.len()));
    }
    if plan.enemies.len() > MAX_ENEMIES {
        return err("enemies", format!("{} enemies; at most {MAX_ENEMIES} per run; split them over scenarios", plan.enemies.len()));
    }
    if plan.applications.len() > MAX_APPLICATIONS {
        return err("applications", format!("{} applications; at most {MAX_APPLICATIONS} per run", plan.applications.len()));
    }
    check_measured("victim", &plan.victim, plan.settle_ms)?;
    for (i, a) in plan.applications.iter().enumerate() {
        check_measured(&format!("applications[{i}]"), a, plan.settle_ms)?;
    }
    if !plan.timeout_s.is_finite() || plan.timeout_s > MAX_TIMEOUT_S {
        return err("timeout_s", format!("{} is not a time the watchdog can keep; give at most {MAX_TIMEOUT_S:.0} s (30 days)", plan.timeout_s));
    }
    if !plan.settle_ms.is_finite() {
        return err("settle_ms", "must be a finite number between 0 and 60000");
    }
    if let Some(p) = plan.pids_max {
        if p > MAX_PIDS {
            return err("pids_max", format!("{p} is above the kernel's PID limit ({MAX_PIDS}); lower it or leave pids_max out"));
        }
    }
    for (i, g) in plan.groups.iter().enumerate() {
        if g.pids_max.is_some_and(|p| p > MAX_PIDS) {
            return err(format!("groups[{i}].pids_max"), format!("is above the kernel's PID limit ({MAX_PIDS}); lower it"));
        }
    }
    // An AOCS enemy's period: its declared bound (enemies/aocs.rs).
    check_records(plan)
}

/// One measured process's counts and times (`at`: "victim" or "applications[i]").
fn check_measured(at: &str, v: &Victim, settle_ms: f64) -> Result<(), PlanError> {
    if v.jobs > MAX_JOBS {
        return err(format!("{at}.jobs"), format!("{} is above the limit of {MAX_JOBS} jobs per run; lower it or use more repetitions", v.jobs));
    }
    if v.warmup_jobs > MAX_JOBS {
        return err(format!("{at}.warmup_jobs"), format!("{} is above the limit of {MAX_JOBS}; lower it", v.warmup_jobs));
    }
    if v.period_ns > MAX_PERIOD_NS {
        return err(format!("{at}.period_ns"), format!("{} ns is above one hour ({MAX_PERIOD_NS} ns); lower it", v.period_ns));
    }
    if v.deadline_ns.is_some_and(|d| d > MAX_PERIOD_NS) {
        return err(format!("{at}.deadline_ns"), format!("is above one hour ({MAX_PERIOD_NS} ns); lower it"));
    }
    let run_s = settle_ms / 1e3 + crate::victims::run_periods(v) * v.period_ns as f64 / 1e9;
    if run_s > MAX_RUN_S {
        return err(format!("{at}.jobs"), format!("jobs x period make a run of {:.0} s, above the limit of {MAX_RUN_S:.0} s (7 days); lower jobs or the period", run_s));
    }
    Ok(())
}

/// The record files live on tmpfs during the run (memory) and are copied into the run
/// directory at its end: both must hold them.
fn check_records(plan: &Plan) -> Result<(), PlanError> {
    let need = record_bytes(plan);
    let probes = crate::victims::kind_of(&plan.victim.body).probes;
    let field = probes.map_or("victim.jobs".to_string(), |p| format!("victim.body.{p}"));
    let field = field.as_str();
    let avail = machine::mem_available_bytes();
    if avail > 0 && need > avail / 2 {
        return err(field, format!("the run's records need {} MiB of memory (80 bytes per job) but only {} MiB are available; lower it to fit in half of that",
            mib(need), mib(avail)));
    }
    if let Some(free) = free_bytes(Path::new(STAGING)) {
        if need > free {
            return err(field, format!("the run's records need {} MiB on {} but only {} MiB are free there; lower it or free space",
                mib(need), STAGING, mib(free)));
        }
    }
    Ok(())
}

/// The run directory's file system holds the records copied at the end of the run.
pub fn check_output(plan: &Plan, out: &Path) -> Result<(), PlanError> {
    let need = record_bytes(plan);
    if let Some(free) = free_bytes(out) {
        if need > free {
            return err("--out", format!("the run's records need {} MiB but {} has only {} MiB free; free space or choose another directory",
                mib(need), out.display(), mib(free)));
        }
    }
    Ok(())
}
