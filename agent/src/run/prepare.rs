//! Phase `prepare`: before any fork, everything the children share with the agent: the
//! record files (staged on tmpfs), the counter set, the trace instance, the shared control
//! block and the run's control groups. Each change is journalled as it is made.

use crate::launch::journal::Journal;
use crate::launch::shm::Shared;
use crate::launch::staging::Staging;
use crate::launch::cgroups;
use crate::observe::clock::mono_ns;
use crate::observe::perf::{self, EventSpec};
use crate::observe::{calibrate, trace};
use crate::outcome::ClockPair;
use crate::plan::{Body, Plan};
use crate::record::counters::CounterLog;
use crate::record::jobs::JobLog;
use crate::record::probes::ProbeBuffer;
use std::path::Path;

pub struct Prepared {
    pub staging: Staging,
    pub log: JobLog,
    /// The counters read around every job, and those this machine cannot count (and why).
    pub events: Vec<EventSpec>,
    pub skipped: Vec<(String, String)>,
    pub counter_log: Option<CounterLog>,
    pub tracer: Option<trace::Tracer>,
    pub probes: Option<ProbeBuffer>,
    /// Ticks against CLOCK_MONOTONIC at the start of the run: the probes' conversion.
    pub ref_start: ClockPair,
    pub shared: Shared,
    pub groups: cgroups::Groups,
}

/// Set up what the run's processes share; an error here is a set-up failure (nothing forked).
pub fn prepare(plan: &Plan, out: &Path, journal: &mut Journal) -> Result<Prepared, String> {
    let v = &plan.victim;
    let staging = Staging::new(out, journal);
    let mut log = JobLog::create(&staging.file("jobs.bin", journal)?, v.total_jobs(), v.period_ns, v.deadline()).map_err(|e| format!("jobs.bin: {e}"))?;
    log.set_out_dir(out);
    let (events, skipped) = perf::select(&v.counters, v.counters_exclude_kernel);
    let counter_log = if events.is_empty() {
        None
    } else {
        Some(CounterLog::create(&staging.file("counters.bin", journal)?, v.total_jobs(), events.len()).map_err(|e| format!("counters.bin: {e}"))?)
    };
    let tracer = match &plan.trace {
        Some(t) => Some(trace::Tracer::setup(&t.events, t.buffer_kb).map_err(|e| format!("trace: {e}"))?),
        None => None,
    };
    let probes = match &v.body {
        Body::Command { probe_capacity, .. } => {
            Some(ProbeBuffer::create(&staging.file("probes.bin", journal)?, *probe_capacity).map_err(|e| format!("probes.bin: {e}"))?)
        }
        _ => None,
    };
    let ref_start = ClockPair { ticks: calibrate::ticks(), mono_ns: mono_ns() };
    let shared = Shared::new(1 + plan.enemies.len() as u32).map_err(|e| format!("shared control block: {e}"))?;
    let groups = cgroups::Groups::create(&plan.groups, plan.pids_max, journal).map_err(|e| format!("groups: {e}"))?;
    Ok(Prepared { staging, log, events, skipped, counter_log, tracer, probes, ref_start, shared, groups })
}
