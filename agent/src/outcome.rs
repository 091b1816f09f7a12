//! The run's outcome (run.json): what the agent hands back, typed as the plan is. The host
//! reads it with its own model of the same format (docs/agent.md); `version` is the
//! outcome's format version, raised when a key changes meaning or goes away.
//!
//! run.json is written three times in a run's life: `running` (the plan and the machine,
//! before anything is touched), then either a set-up failure (reason, restore, end time) or
//! the whole outcome. Keys a state does not have are left out (`Option`, skipped when
//! `None`); keys of the whole outcome that may be null are written as null, never left out
//! (`Option<Option<T>>`: the outer `Some` says "present").

use crate::plan::Plan;
use serde::{Deserialize, Deserializer, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

pub const OUTCOME_VERSION: u32 = 1;

/// How the run ended (`running` while it runs).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Running,
    Completed,
    Failed,
    Timeout,
    Interrupted,
}

/// run.json.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunOutcome {
    /// Absent in run.json files written before the outcome had a version (read as 1).
    #[serde(default = "one")]
    pub version: u32,
    pub run_id: String,
    pub status: Status,
    pub plan: Plan,
    /// The machine the run ran on (observe/env.rs).
    pub environment: serde_json::Value,
    pub started_unix_ns: i64,
    /// Why the run did not complete (null when it did).
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub reason: Option<Option<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notes: Option<Vec<String>>,
    /// The victim's end as waitpid(2) told it ("exited with status 0"); null if never reaped.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub victim_exit: Option<Option<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pids: Option<Pids>,
    /// The run's process budget (null when the run has none).
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub process_budget: Option<Option<ProcessBudget>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jobs_recorded: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jobs_planned: Option<u64>,
    /// The victim's first release (CLOCK_MONOTONIC, ns); 0 if it never got there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub t0_ns: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enemies: Option<Vec<EnemyResult>>,
    /// One entry per application of the plan, in plan order (empty without applications;
    /// absent in files from before applications).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applications: Option<Vec<ApplicationResult>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub configuration: Option<Configuration>,
    /// Present when the plan has a regulator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regulator: Option<RegulatorReport>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counters: Option<CountersReport>,
    /// Present when the victim is a command (its probes.bin).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probes: Option<ProbesReport>,
    /// Present when the plan asks for a trace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<TraceReport>,
    /// Present when the victim is a process already running (body `attach`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attached: Option<Attached>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_unix_ns: Option<i64>,
}

/// The process an `attach` victim measured: its PID and its threads (id -> name) seen before
/// and after the window (the trace adds those it cloned meanwhile).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Attached {
    pub pid: i32,
    pub threads: std::collections::BTreeMap<String, String>,
}

fn one() -> u32 {
    OUTCOME_VERSION
}

/// For `Option<Option<T>>` fields: a key given as null is `Some(None)` (absent stays `None`
/// through `default`).
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(d).map(Some)
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Pids {
    pub agent: i32,
    pub victim: Option<i32>,
    /// Enemy name -> pid.
    pub enemies: BTreeMap<String, i32>,
}

/// The run's process budget at the end (launch/cgroups.rs: `budget_report`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ProcessBudget {
    /// pids.max as the kernel shows it ("max" or a number).
    pub pids_max: Option<String>,
    /// pids.peak, where the kernel keeps it.
    pub peak: Option<String>,
    pub refused_forks: Option<u64>,
    pub groups: Vec<GroupForks>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct GroupForks {
    pub group: String,
    pub refused_forks: Option<u64>,
}

/// What one enemy achieved: over its whole life and over the victim's measured window.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct EnemyResult {
    pub name: String,
    pub kind: String,
    /// Unit of `ops` (enemies::unit).
    pub unit: String,
    pub ops: u64,
    pub seconds: Option<f64>,
    pub rate: Option<f64>,
    pub window_ops: Option<u64>,
    pub window_rate: Option<f64>,
    /// Percent of its life the enemy was busy (paced enemies rest).
    pub intensity: Option<f64>,
    pub window_intensity: Option<f64>,
    pub target_intensity: f64,
    pub target_rate: Option<f64>,
    pub setup_error: Option<String>,
    pub ended_early: Option<String>,
}

/// How one application ended.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ApplicationStatus {
    /// Ran every job and exited with status 0.
    Completed,
    /// Ended by itself otherwise (a crash, a non-zero exit, a set-up failure).
    Failed,
    /// Still running when the run ended (watchdog, signal, another's failure): stopped.
    Stopped,
    /// Never forked (the run ended before).
    NotStarted,
}

/// What one application (a measured process beside the victim) did: the facts run.json
/// keeps for the victim, for it. Its files are in `dir`, below the run directory.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ApplicationResult {
    pub name: String,
    pub may_fail: bool,
    pub status: ApplicationStatus,
    /// Its end as waitpid(2) told it; null if never reaped.
    pub exit: Option<String>,
    /// What it reported before it ended (a refused policy, a failed exec...).
    pub error: Option<String>,
    pub pid: Option<i32>,
    /// "applications/<name>": its jobs.bin (and counters.bin, probes.bin).
    pub dir: String,
    pub jobs_recorded: u64,
    pub jobs_planned: u64,
    /// Its first release (CLOCK_MONOTONIC, ns; the victim's too); 0 if it never got there.
    pub t0_ns: i64,
    pub counters: CountersReport,
    /// Present when its body is a command (its probes.bin).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probes: Option<ProbesReport>,
}

/// What the run changed on the machine and whether it was put back. After a set-up failure
/// only `restored` and `restore_errors` are there.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(deny_unknown_fields)]
pub struct Configuration {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub groups: Option<Vec<GroupDirs>>,
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub housekeeping_cpus: Option<Option<Vec<usize>>>,
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub irqs: Option<Option<Irqs>>,
    /// What dead runs had left, undone before this one (one line per change).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovered: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub records_staged_on_tmpfs: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_group: Option<RunGroup>,
    pub restored: bool,
    pub restore_errors: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct GroupDirs {
    pub name: String,
    pub dirs: Vec<PathBuf>,
}

/// Device interrupts moved to the housekeeping CPUs, and those the kernel kept.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Irqs {
    pub moved: usize,
    pub refused: usize,
}

/// The run's own cgroup: its directory and the processes killed in it at the end, or why
/// the run had none (`dir` null, `why`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RunGroup {
    pub dir: Option<PathBuf>,
    /// With a group: the processes killed ("pid (name)"), null when it could not be emptied.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub killed: Option<Option<Vec<String>>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

/// The memory-bandwidth regulator's account (regulate/).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RegulatorReport {
    /// "budget" or "feedback".
    pub mode: String,
    /// "cooperative" or "hardware: EVENT × N bytes".
    pub accounting: String,
    pub period_us: u64,
    pub budget_bytes: Option<u64>,
    pub wakeups: u64,
    pub periods: u64,
    pub throttles: u64,
    pub overshoot_bytes_mean: f64,
    pub overshoot_bytes_max: u64,
    pub cpu_ns: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CountersReport {
    /// The events read around every job, in counters.bin's column order.
    pub events: Vec<String>,
    pub skipped: Vec<SkippedCounter>,
    pub exclude_kernel: bool,
    /// "rdpmc" or "read(2)"; null without events.
    pub read_with: Option<String>,
    pub core_pmu: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SkippedCounter {
    pub event: String,
    pub reason: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ProbesReport {
    pub file: String,
    pub records: u64,
    pub dropped: u64,
    pub reference_start: ClockPair,
    pub reference_end: ClockPair,
}

/// One reading of the tick counter and CLOCK_MONOTONIC: with the other end of the run, the
/// probes' conversion from ticks to nanoseconds.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ClockPair {
    pub ticks: u64,
    pub mono_ns: i64,
}

/// The kernel trace: its file and lost events, or the error that kept it from being saved.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TraceReport {
    pub events: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lost_events: Option<u64>,
    /// The trace's clock ("mono": CLOCK_MONOTONIC, as jobs.bin).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock: Option<String>,
    /// How it was read: "raw" (the ring buffers' pages, trace.dat, ns stamps) or "text" (the
    /// rendering, trace.txt, µs stamps: the fallback where raw buffers cannot be read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capture: Option<String>,
    /// Why the raw buffers could not be read, for a text capture.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl RunOutcome {
    /// The first run.json of a run: the plan and the machine, before anything is touched.
    pub fn running(plan: &Plan, environment: serde_json::Value, started_unix_ns: i64) -> Self {
        RunOutcome {
            version: OUTCOME_VERSION,
            run_id: plan.run_id.clone(),
            status: Status::Running,
            plan: plan.clone(),
            environment,
            started_unix_ns,
            reason: None,
            notes: None,
            victim_exit: None,
            pids: None,
            process_budget: None,
            jobs_recorded: None,
            jobs_planned: None,
            t0_ns: None,
            enemies: None,
            applications: None,
            configuration: None,
            regulator: None,
            counters: None,
            probes: None,
            trace: None,
            attached: None,
            ended_unix_ns: None,
        }
    }

    /// Set-up failed (or run.json could not be written at the end): why, and the restore.
    pub fn set_up_failed(&mut self, reason: String, restore_errors: Vec<String>, ended_unix_ns: i64) {
        self.status = Status::Failed;
        self.reason = Some(Some(reason));
        self.set_restored(restore_errors);
        self.ended_unix_ns = Some(ended_unix_ns);
    }

    /// Record the journal's undo: restored when no change failed to be undone.
    pub fn set_restored(&mut self, restore_errors: Vec<String>) {
        let c = self.configuration.get_or_insert_with(Configuration::default);
        c.restored = restore_errors.is_empty();
        c.restore_errors = restore_errors;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> Plan {
        crate::plan::parse(r#"{"version":1,"run_id":"r","timeout_s":10,"victim":{"body":{"kind":"pi","iterations":10},"period_ns":1000000,"jobs":5},
            "enemies":[{"name":"e","load":{"kind":"pi"}}]}"#).unwrap()
    }

    fn whole() -> RunOutcome {
        let mut o = RunOutcome::running(&plan(), serde_json::json!({"kernel": {"release": "6.1"}}), 5);
        o.status = Status::Completed;
        o.reason = Some(None);
        o.notes = Some(vec!["a note".into()]);
        o.victim_exit = Some(Some("exited with status 0".into()));
        o.pids = Some(Pids { agent: 1, victim: Some(2), enemies: [("e".to_string(), 3)].into() });
        o.process_budget = Some(Some(ProcessBudget { pids_max: Some("max".into()), peak: None, refused_forks: Some(0), groups: vec![GroupForks { group: "_run".into(), refused_forks: None }] }));
        o.jobs_recorded = Some(5);
        o.jobs_planned = Some(5);
        o.t0_ns = Some(7);
        o.enemies = Some(vec![EnemyResult {
            name: "e".into(), kind: "pi".into(), unit: "iterations".into(), ops: 9, seconds: Some(1.5), rate: Some(6.0), window_ops: None,
            window_rate: None, intensity: Some(100.0), window_intensity: None, target_intensity: 100.0, target_rate: None,
            setup_error: None, ended_early: Some("gone".into()),
        }]);
        o.applications = Some(vec![ApplicationResult {
            name: "b".into(), may_fail: true, status: ApplicationStatus::Failed, exit: Some("killed by signal 11 (Segmentation fault)".into()),
            error: None, pid: Some(4), dir: "applications/b".into(), jobs_recorded: 2, jobs_planned: 5, t0_ns: 7,
            counters: CountersReport { events: vec![], skipped: vec![], exclude_kernel: false, read_with: None, core_pmu: None }, probes: None,
        }]);
        o.configuration = Some(Configuration {
            groups: Some(vec![GroupDirs { name: "g".into(), dirs: vec!["/sys/fs/cgroup/x".into()] }]),
            housekeeping_cpus: Some(None),
            irqs: Some(Some(Irqs { moved: 3, refused: 1 })),
            recovered: Some(vec![]),
            records_staged_on_tmpfs: Some(true),
            run_group: Some(RunGroup { dir: None, killed: None, why: Some("no cgroup".into()) }),
            restored: true,
            restore_errors: vec![],
        });
        o.regulator = Some(RegulatorReport { mode: "budget".into(), accounting: "cooperative".into(), period_us: 1000, budget_bytes: Some(5), wakeups: 1, periods: 2, throttles: 0, overshoot_bytes_mean: 0.0, overshoot_bytes_max: 0, cpu_ns: 4 });
        o.counters = Some(CountersReport { events: vec![], skipped: vec![SkippedCounter { event: "cycles".into(), reason: "no PMU".into() }], exclude_kernel: false, read_with: None, core_pmu: None });
        o.probes = Some(ProbesReport { file: "probes.bin".into(), records: 1, dropped: 0, reference_start: ClockPair { ticks: 1, mono_ns: 2 }, reference_end: ClockPair { ticks: 3, mono_ns: 4 } });
        o.trace = Some(TraceReport { events: vec!["sched:sched_switch".into()], file: None, lost_events: None, clock: None, capture: None, raw_error: None, error: Some("tracefs".into()) });
        o.ended_unix_ns = Some(9);
        o
    }

    fn round_trip(o: &RunOutcome) -> serde_json::Value {
        let text = serde_json::to_string_pretty(o).unwrap();
        let back: RunOutcome = serde_json::from_str(&text).unwrap();
        let (a, b) = (serde_json::to_value(o).unwrap(), serde_json::to_value(&back).unwrap());
        assert_eq!(a, b, "serialize -> deserialize -> serialize changed the outcome");
        a
    }

    #[test]
    fn whole_outcome_round_trips_and_writes_null_keys() {
        let v = round_trip(&whole());
        assert_eq!(v["version"], 1);
        assert_eq!(v["status"], "completed");
        // Present as null, not left out: readers rely on these keys.
        assert!(v.as_object().unwrap().contains_key("reason") && v["reason"].is_null());
        assert!(v["configuration"].as_object().unwrap().contains_key("housekeeping_cpus"));
        assert_eq!(v["configuration"]["run_group"], serde_json::json!({"dir": null, "why": "no cgroup"}));
        assert_eq!(v["enemies"][0]["window_ops"], serde_json::Value::Null);
        assert_eq!(v["pids"]["enemies"]["e"], 3);
        assert_eq!(v["applications"][0]["status"], "failed");
        assert!(v["applications"][0]["error"].is_null() && v["applications"][0].get("probes").is_none());
    }

    #[test]
    fn running_and_set_up_failure_have_only_their_keys() {
        let mut o = RunOutcome::running(&plan(), serde_json::json!({}), 5);
        let v = round_trip(&o);
        let keys: Vec<&str> = v.as_object().unwrap().keys().map(|k| k.as_str()).collect();
        assert_eq!(keys, ["environment", "plan", "run_id", "started_unix_ns", "status", "version"]);
        o.set_up_failed("groups: no".into(), vec!["x: busy".into()], 6);
        let v = round_trip(&o);
        assert_eq!(v["status"], "failed");
        assert_eq!(v["configuration"], serde_json::json!({"restored": false, "restore_errors": ["x: busy"]}));
        assert!(v.get("notes").is_none() && v.get("pids").is_none());
    }

    #[test]
    fn unknown_keys_and_versionless_files() {
        let mut v = serde_json::to_value(whole()).unwrap();
        v.as_object_mut().unwrap().remove("version");
        let o: RunOutcome = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(o.version, 1, "a run.json from before the version is version 1");
        v["surprise"] = serde_json::json!(1);
        let e = serde_json::from_value::<RunOutcome>(v).unwrap_err().to_string();
        assert!(e.contains("surprise"), "{e}");
    }

    /// run.json files of real runs (agent/fixtures/outcome/: a solo run, an enemy scenario,
    /// a failed, a timed-out, an interrupted and a killed-then-recovered run, a command victim
    /// with probes, counters and trace, a regulator, groups with a process budget, a task set;
    /// two from before `version`): each parses into RunOutcome and writes back the same
    /// keys, nesting and values.
    #[test]
    fn real_run_json_files_parse_and_write_back_unchanged() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/outcome");
        let mut seen = 0;
        for e in std::fs::read_dir(&dir).unwrap() {
            let path = e.unwrap().path();
            let text = std::fs::read_to_string(&path).unwrap();
            let mut file: serde_json::Value = serde_json::from_str(&text).unwrap();
            let o: RunOutcome = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            if file.get("version").is_none() {
                file["version"] = serde_json::json!(1);
            }
            assert_eq!(serde_json::to_value(&o).unwrap(), file, "{}", path.display());
            seen += 1;
        }
        assert!(seen >= 10, "{seen} fixtures in {}", dir.display());
    }
}
