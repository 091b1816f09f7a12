//! Phase `prepare`: before any fork, everything the children share with the agent: the
//! record files of each measured process (staged on tmpfs), its counter set, the trace
//! instance, the shared control block and the run's control groups. Each change is
//! journalled as it is made.

use crate::launch::journal::Journal;
use crate::launch::shm::Shared;
use crate::launch::staging::Staging;
use crate::launch::cgroups;
use crate::observe::perf::{self, EventSpec};
use crate::observe::trace;
use crate::outcome::ClockPair;
use crate::plan::{Plan, Victim};
use crate::record::counters::CounterLog;
use crate::record::jobs::JobLog;
use crate::record::probes::ProbeBuffer;
use std::path::Path;

/// Where the applications' files go, below the run directory: `applications/<name>/`.
pub const APPLICATIONS_DIR: &str = "applications";

/// One measured process's own records: its job log, counter log and probe buffer (separate
/// files, so separate mappings: no page, let alone a cache line, shared with another's).
pub struct Records {
    pub log: JobLog,
    /// The counters read around every job, and those this machine cannot count (and why).
    pub events: Vec<EventSpec>,
    pub skipped: Vec<(String, String)>,
    pub counter_log: Option<CounterLog>,
    pub probes: Option<ProbeBuffer>,
}

pub struct Prepared {
    pub staging: Staging,
    /// The measured processes' records: the victim's first, then each application's.
    pub measured: Vec<Records>,
    pub tracer: Option<trace::Tracer>,
    /// Ticks against CLOCK_MONOTONIC at the start of the run: the probes' conversion.
    pub ref_start: ClockPair,
    pub shared: Shared,
    pub groups: cgroups::Groups,
    /// An attached victim's threads before the run (thread id -> name), for run.json.
    pub attached_before: std::collections::BTreeMap<String, String>,
}

impl Prepared {
    /// The victim's records.
    pub fn victim(&self) -> &Records {
        &self.measured[0]
    }
}

/// The record files of one measured process, in `sub` below the run directory ("" for the
/// victim, `applications/<name>` for an application).
fn records(v: &Victim, out: &Path, sub: &str, staging: &Staging, journal: &mut Journal) -> Result<Records, String> {
    let dir = out.join(sub);
    if !sub.is_empty() {
        crate::safefs::create_dirs(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let name = |f: &str| if sub.is_empty() { f.to_string() } else { format!("{sub}/{f}") };
    let mut log = JobLog::create(&staging.file(&name("jobs.bin"), journal)?, v.total_jobs(), v.period_ns, v.deadline())
        .map_err(|e| format!("{}: {e}", name("jobs.bin")))?;
    log.set_out_dir(&dir);
    let (events, skipped) = perf::select(&v.counters, v.counters_exclude_kernel);
    let counter_log = if events.is_empty() {
        None
    } else {
        Some(CounterLog::create(&staging.file(&name("counters.bin"), journal)?, v.total_jobs(), events.len()).map_err(|e| format!("{}: {e}", name("counters.bin")))?)
    };
    let probes = match crate::victims::probe_capacity(&v.body) {
        Some(capacity) => Some(ProbeBuffer::create(&staging.file(&name("probes.bin"), journal)?, capacity).map_err(|e| format!("{}: {e}", name("probes.bin")))?),
        None => None,
    };
    Ok(Records { log, events, skipped, counter_log, probes })
}

/// Set up what the run's processes share; an error here is a set-up failure (nothing forked).
pub fn prepare(plan: &Plan, out: &Path, journal: &mut Journal) -> Result<Prepared, String> {
    let staging = Staging::new(out, journal);
    let mut measured = vec![records(&plan.victim, out, "", &staging, journal)?];
    for a in &plan.applications {
        measured.push(records(a, out, &format!("{APPLICATIONS_DIR}/{}", a.name()), &staging, journal)?);
    }
    let tracer = match &plan.trace {
        Some(t) => Some(trace::Tracer::setup(&t.events, t.buffer_kb).map_err(|e| format!("trace: {e}"))?),
        None => None,
    };
    let ref_start = super::outcome::clock_pair();
    let parties = 1 + plan.applications.len() as u32 + plan.enemies.len() as u32;
    let shared = Shared::new(parties).map_err(|e| format!("shared control block: {e}"))?;
    let groups = cgroups::Groups::create(&plan.groups, plan.pids_max, journal).map_err(|e| format!("groups: {e}"))?;
    let attached_before = crate::victims::attach::pid_of(&plan.victim).map(crate::victims::attach::threads).unwrap_or_default();
    Ok(Prepared { staging, measured, tracer, ref_start, shared, groups, attached_before })
}
