//! What a victim body declares about itself, as an enemy kind does (enemies/kind.rs): its
//! parameters (type, bounds, default, unit, one-line doc), the parameter that sets one job's
//! work (what `utilization` calibrates), its memory footprint, the report sections that say
//! something true about it, how its process runs, and its extra checks. The registry in
//! mod.rs lists every body's descriptor; the plan's bodies are checked and built from it,
//! and `xtalk-agent catalog --json` prints it for the host (docs/victims.md, docs/agent.md).

use super::{Ctx, JobBody};
use crate::declare::{check_values, param_json, Footprint, Param, Values};
use crate::plan::{Body, PlanError, Victim};
use crate::record::jobs::JobLog;
use serde_json::{json, Value};

/// What building a periodic body's job needs besides its parameters.
pub struct Build<'a> {
    pub victim: &'a Victim,
    pub log: &'a JobLog,
}

/// How the body's process runs once forked.
pub enum Run {
    /// Periodic jobs, released, timed and recorded by mod.rs `periodic`: the job is built here.
    Jobs(fn(&Values, &Build) -> Result<Box<dyn JobBody>, String>),
    /// The body takes the process over after its placement, policy and memory locking (a
    /// command's exec, a task set's threads): it meets the barrier and records its jobs itself.
    Own(fn(&Ctx) -> !),
    /// The body takes the process over before any set-up: it watches a process that keeps
    /// its own placement and policy (attach).
    Watch(fn(&Ctx) -> !),
}

impl Run {
    fn word(&self) -> &'static str {
        match self {
            Run::Jobs(_) => "jobs",
            Run::Own(_) => "own",
            Run::Watch(_) => "watch",
        }
    }
}

/// Checks beyond each parameter's bounds (parameters together, the victim's other fields,
/// the machine): `at` is the measured process's field (`victim`, `applications[0]`);
/// `online` the machine's online CPUs.
pub type Check = fn(&Values, &Victim, &str, &[usize]) -> Result<(), PlanError>;

/// The report sections of a periodic body's execution times (docs/victims.md): every
/// body whose jobs are computations it times declares them.
pub const EXECUTION: &[&str] = &["slowdown", "distributions", "series", "spikes", "pwcet", "wakeup"];

/// One victim body, as its file declares it.
pub struct BodyKind {
    pub name: &'static str,
    pub doc: &'static str,
    pub params: &'static [Param],
    /// The parameter that sets one job's work, which the host calibrates to a target
    /// utilization (None: the body's work is not calibrated).
    pub work: Option<&'static str>,
    pub footprint: Footprint,
    /// The report sections that apply to it: EXECUTION's, and its own view ("latency",
    /// "tasks", "aocs", "probes"); the host hides the others.
    pub sections: &'static [&'static str],
    pub run: Run,
    pub check: Check,
    /// The parameter giving the capacity of the probes.bin its program writes (records).
    pub probes: Option<&'static str>,
    /// Periods the run lasts, when not one per job (a task set: one per hyperperiod).
    pub periods: Option<fn(&Values, &Victim) -> f64>,
    /// Completes job 0's record from wait4's rusage when a process the body exec'd ends.
    pub finish: Option<fn(&Victim, &JobLog, i64, &libc::rusage)>,
}

fn no_check(_: &Values, _: &Victim, _: &str, _: &[usize]) -> Result<(), PlanError> {
    Ok(())
}

impl BodyKind {
    /// A body with no footprint, no work knob, no extra check, the execution sections.
    pub const fn new(name: &'static str, doc: &'static str, params: &'static [Param], run: Run) -> BodyKind {
        BodyKind { name, doc, params, work: None, footprint: Footprint { factor: 0, params: &[] }, sections: EXECUTION, run, check: no_check, probes: None, periods: None, finish: None }
    }
    pub const fn work(self, param: &'static str) -> BodyKind {
        BodyKind { work: Some(param), ..self }
    }
    pub const fn footprint(self, factor: u64, params: &'static [&'static str]) -> BodyKind {
        BodyKind { footprint: Footprint { factor, params }, ..self }
    }
    pub const fn sections(self, sections: &'static [&'static str]) -> BodyKind {
        BodyKind { sections, ..self }
    }
    pub const fn check(self, check: Check) -> BodyKind {
        BodyKind { check, ..self }
    }
    pub const fn probes(self, param: &'static str) -> BodyKind {
        BodyKind { probes: Some(param), ..self }
    }
    pub const fn periods(self, f: fn(&Values, &Victim) -> f64) -> BodyKind {
        BodyKind { periods: Some(f), ..self }
    }
    pub const fn finish(self, f: fn(&Victim, &JobLog, i64, &libc::rusage)) -> BodyKind {
        BodyKind { finish: Some(f), ..self }
    }

    #[cfg_attr(not(test), allow(dead_code))] // read by the catalog's tests
    pub fn param(&self, name: &str) -> Option<&'static Param> {
        self.params.iter().find(|p| p.name == name)
    }

    /// A plan body's parameters seen through this declaration.
    pub fn values<'a>(&'static self, body: &'a Body) -> Values<'a> {
        Values::new(self.name, self.params, &body.params)
    }

    /// The body's entry in the catalog.
    pub fn to_json(&self) -> Value {
        json!({
            "body": self.name,
            "doc": self.doc,
            "work": self.work,
            "footprint": {"factor": self.footprint.factor, "params": self.footprint.params},
            "sections": self.sections,
            "run": self.run.word(),
            "probes": self.probes,
            "params": self.params.iter().map(param_json).collect::<Vec<_>>(),
        })
    }
}

/// `body` checked against its declaration (parameters, bounds, extra checks). `at` is the
/// measured process's field (`victim`).
pub fn check(kind: &'static BodyKind, v: &Victim, at: &str, online: &[usize]) -> Result<(), PlanError> {
    let field = format!("{at}.body");
    check_values("body", kind.name, kind.params, &v.body.params, &field)?;
    (kind.check)(&kind.values(&v.body), v, at, online)
}
