//! The run plan: the only contract between host and agent (schema/run-plan.schema.json).
//!
//! Parsing is strict (unknown keys are errors) and validation names the offending field
//! and the fix, so bad input stops before anything is started.

use serde::{Deserialize, Serialize};
use std::fmt;

pub const PLAN_VERSION: u32 = 1;

// The plan's own bounds (bounds.rs checks them; the catalog exports them to the host).
/// Measured plus warm-up jobs of one run (a job log of 80 GB: far above any memory).
pub const MAX_JOBS: u64 = 1_000_000_000;
/// Longest victim period or deadline, and longest task or AOCS period: one hour.
pub const MAX_PERIOD_NS: u64 = 3_600_000_000_000;
/// Longest run (settle plus every job's period): seven days.
pub const MAX_RUN_S: f64 = 7.0 * 86_400.0;
/// Longest watchdog: thirty days.
pub const MAX_TIMEOUT_S: f64 = 30.0 * 86_400.0;
/// The kernel's PID_MAX_LIMIT (64-bit): pids.max refuses anything larger.
pub const MAX_PIDS: u64 = 4_194_304;
/// A run id becomes a directory name (NAME_MAX 255, with room for suffixes).
pub const MAX_RUN_ID: usize = 200;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Plan {
    pub version: u32,
    pub run_id: String,
    /// Whole-run watchdog, from the first fork to the victim's exit.
    pub timeout_s: f64,
    /// Time the enemies run alone after the barrier, before the victim's first release.
    #[serde(default = "default_settle_ms")]
    pub settle_ms: f64,
    pub victim: Victim,
    /// Further measured processes, each shaped like the victim with a required `name`
    /// (and `may_fail`): forked, released and recorded like it, in their own files under
    /// `<run dir>/applications/<name>/`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub applications: Vec<Victim>,
    #[serde(default)]
    pub enemies: Vec<Enemy>,
    /// Kernel trace of the measured window (tracefs, private instance).
    #[serde(default)]
    pub trace: Option<Trace>,
    /// Control groups (partitions) the victim and enemies may be placed in.
    #[serde(default)]
    pub groups: Vec<Group>,
    /// CPUs for the agent, the regulator and (with `steer_irqs`) device interrupts.
    #[serde(default)]
    pub housekeeping_cpus: Option<Vec<usize>>,
    /// Move every movable IRQ to the housekeeping CPUs for the run (journalled, restored).
    #[serde(default)]
    pub steer_irqs: bool,
    /// Memory-bandwidth regulator (seed 003 part 2; MemGuard in spirit).
    #[serde(default)]
    pub regulator: Option<Regulator>,
    /// The whole run's process budget (pids.max over every process the run starts, its
    /// groups included): the stand-in for the machine's PID table, so that a fault which
    /// exhausts it harms nothing outside the run.
    #[serde(default)]
    pub pids_max: Option<u64>,
    /// Free-form labels copied into run.json (experiment, scenario, repetition...).
    #[serde(default)]
    pub labels: std::collections::BTreeMap<String, String>,
}

/// A control group: a partition with its CPU, memory and process limits.
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Group {
    pub name: String,
    /// cpuset: CPUs (and memory nodes) of the partition.
    #[serde(default)]
    pub cpus: Option<Vec<usize>>,
    #[serde(default)]
    pub mems: Option<String>,
    /// cpuset exclusive (v1) / partition root (v2).
    #[serde(default)]
    pub exclusive: bool,
    /// An isolated partition (implies `exclusive`): v2 cpuset.cpus.partition = isolated (no
    /// load balancing into or out of its CPUs); v1 cpuset.sched_load_balance = 0.
    #[serde(default)]
    pub isolated: bool,
    /// CFS bandwidth: quota per period (v1 cpu.cfs_quota_us, v2 cpu.max).
    #[serde(default)]
    pub cpu_quota_us: Option<u64>,
    #[serde(default)]
    pub cpu_period_us: Option<u64>,
    /// v2 cpu.weight (1..10000; v1 cpu.shares scaled).
    #[serde(default)]
    pub cpu_weight: Option<u32>,
    /// RT group bandwidth per CPU (v1, CONFIG_RT_GROUP_SCHED).
    #[serde(default)]
    pub rt_runtime_us: Option<i64>,
    #[serde(default)]
    pub rt_period_us: Option<u64>,
    #[serde(default)]
    pub memory_max: Option<u64>,
    #[serde(default)]
    pub memory_high: Option<u64>,
    #[serde(default)]
    pub pids_max: Option<u64>,
    /// Give the group a freezer (the regulator's `freeze` throttle uses it).
    #[serde(default)]
    pub freezable: bool,
    /// I/O limits (v2 io.max, v1 blkio throttling) on block devices.
    #[serde(default)]
    pub io_max: Option<IoMax>,
    /// resctrl (Intel RDT, AMD PQoS, Arm MPAM): the L3 ways the group may fill (contiguous)
    /// and its memory-bandwidth share in percent, in every cache domain.
    #[serde(default)]
    pub cache_ways: Option<Vec<u32>>,
    #[serde(default)]
    pub mb_percent: Option<u32>,
}

/// I/O limits of a group, per block device: the devices given as "MAJ:MIN" and the disks
/// holding `paths` (a path on a file system with no block device, tmpfs say, has none to
/// limit: its files are memory, which memory_max bounds). Limits per second.
#[derive(Debug, Clone, Serialize, Deserialize, Default, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct IoMax {
    #[serde(default)]
    pub paths: Vec<String>,
    #[serde(default)]
    pub devices: Vec<String>,
    #[serde(default)]
    pub rbps: Option<u64>,
    #[serde(default)]
    pub wbps: Option<u64>,
    #[serde(default)]
    pub riops: Option<u64>,
    #[serde(default)]
    pub wiops: Option<u64>,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Default)]
#[serde(rename_all = "lowercase")]
pub enum Throttle {
    /// SIGSTOP / SIGCONT each regulated enemy.
    #[default]
    Signal,
    /// Freeze / thaw each regulated enemy's group.
    Freeze,
}

/// Memory-bandwidth regulator: every `period_us`, each regulated enemy may touch `budget`
/// bytes (cooperative accounting: the enemies' own counters); past it, it is throttled
/// until the period ends. With `target_exec_ns`, feedback mode: enemies are throttled while
/// the victim's last job took longer than the target.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Regulator {
    pub period_us: u64,
    /// Bytes per period per regulated enemy (budget mode).
    #[serde(default)]
    pub budget_bytes: Option<u64>,
    /// Feedback mode: the victim's job-time target (an ε).
    #[serde(default)]
    pub target_exec_ns: Option<u64>,
    /// Names of the regulated enemies (all when empty).
    #[serde(default)]
    pub enemies: Vec<String>,
    #[serde(default)]
    pub throttle: Throttle,
    /// SCHED_FIFO priority of the regulator on the housekeeping CPU.
    #[serde(default = "default_regulator_priority")]
    pub priority: i32,
    /// Where the bytes come from: the enemies' own counters, or a hardware event per enemy.
    #[serde(default)]
    pub source: Source,
    /// Hardware source: the event counted (bytes = count × `bytes_per_event`).
    #[serde(default = "default_hw_event")]
    pub event: String,
    #[serde(default = "default_bytes_per_event")]
    pub bytes_per_event: u64,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Default)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    /// xtalk's enemies publish the bytes they touch.
    #[default]
    Cooperative,
    /// A perf event attached to each regulated enemy (LLC misses: memory traffic).
    Hardware,
}

fn default_hw_event() -> String {
    "LLC-load-misses".into()
}

fn default_bytes_per_event() -> u64 {
    64
}

fn default_regulator_priority() -> i32 {
    95
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Trace {
    /// "subsystem:event" names; the default set feeds the culprit analysis.
    #[serde(default = "default_trace_events")]
    pub events: Vec<String>,
    /// Ring buffer per CPU, KiB.
    #[serde(default = "default_buffer_kb")]
    pub buffer_kb: u32,
    /// User-defined segments between two traced events, per job: the host computes them
    /// from the trace (src/xtalk/trace/segments.py); the agent checks their names and carries them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub segments: Vec<Segment>,
}

/// The time from an event `start` to an event `end` (each `end` with the latest `start`
/// before it), per job of the victim.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Segment {
    pub name: String,
    pub start: SegmentEnd,
    pub end: SegmentEnd,
    /// "first" or "last": which pair of the job counts.
    #[serde(default = "default_occurrence")]
    pub occurrence: String,
}

/// One end of a segment: an event of the trace with its filters.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SegmentEnd {
    pub event: String,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub victim: bool,
    /// field -> value (an integer or a string; "$victim": the victim's pid).
    #[serde(default, rename = "where", skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub filter: std::collections::BTreeMap<String, serde_json::Value>,
}

fn default_occurrence() -> String {
    "first".into()
}

/// The default trace event set: what the per-job culprit analysis uses.
pub const DEFAULT_TRACE_EVENTS: &[&str] = &[
    "sched:sched_switch", "sched:sched_waking", "sched:sched_wakeup", "sched:sched_migrate_task", "irq:irq_handler_entry",
    "irq:irq_handler_exit", "irq:softirq_entry", "irq:softirq_exit", "timer:hrtimer_expire_entry",
    "timer:hrtimer_expire_exit",
];

fn default_trace_events() -> Vec<String> {
    DEFAULT_TRACE_EVENTS.iter().map(|s| s.to_string()).collect()
}

fn default_buffer_kb() -> u32 {
    8192
}

fn default_settle_ms() -> f64 {
    200.0
}

/// A measured process: the victim, or one of the plan's `applications` (the same shape,
/// with a required `name` and `may_fail`; check.rs refuses `may_fail` on the victim).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Victim {
    /// Its name in the results (the `application` column); "victim" when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// An application whose death is recorded while the run goes on (a failure-propagation
    /// experiment's faulty application); otherwise its failure ends the run.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub may_fail: bool,
    pub body: Body,
    pub period_ns: u64,
    /// Relative deadline; the period when absent (implicit deadline).
    #[serde(default)]
    pub deadline_ns: Option<u64>,
    pub jobs: u64,
    #[serde(default)]
    pub warmup_jobs: u64,
    #[serde(default)]
    pub placement: Placement,
    #[serde(default)]
    pub sched: Sched,
    #[serde(default)]
    pub lock_memory: bool,
    /// Back buffers with transparent huge pages (MADV_HUGEPAGE) instead of 4 KiB pages.
    #[serde(default)]
    pub huge_pages: bool,
    /// Control group (a `groups` name) the victim runs in.
    #[serde(default)]
    pub group: Option<String>,
    /// Counters read around every job, in one group (observe/perf.rs).
    #[serde(default)]
    pub counters: Vec<Counter>,
    /// Count user space only (needed with perf_event_paranoid >= 2 when not root).
    #[serde(default)]
    pub counters_exclude_kernel: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Counter {
    pub event: String,
    /// Skip (with a note in run.json) rather than refuse the plan when the machine lacks it.
    #[serde(default)]
    pub optional: bool,
}

/// The victim's name when the plan gives none.
pub const DEFAULT_VICTIM_NAME: &str = "victim";

/// Most applications of one plan (each has a slot in the control block, launch/shm.rs).
pub const MAX_APPLICATIONS: usize = 64;

impl Victim {
    /// Its name in the results: `name`, or "victim".
    pub fn name(&self) -> &str {
        self.name.as_deref().unwrap_or(DEFAULT_VICTIM_NAME)
    }
    pub fn deadline(&self) -> u64 {
        self.deadline_ns.unwrap_or(self.period_ns)
    }
    pub fn total_jobs(&self) -> u64 {
        self.warmup_jobs + self.jobs
    }
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum Order {
    #[default]
    Random,
    Linear,
}

/// The work one victim job does: a body and its parameters, checked against the body's
/// declaration (victims/<body>.rs, registered in victims/mod.rs), as an enemy's load is.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Body {
    pub kind: String,
    #[serde(flatten)]
    pub params: serde_json::Map<String, serde_json::Value>,
}

/// One periodic task of a task set: a calibrated busy loop of `wcet_ns` CPU time per job.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Task {
    pub name: String,
    pub period_ns: u64,
    pub wcet_ns: u64,
    /// Relative deadline; the period when absent.
    #[serde(default)]
    pub deadline_ns: Option<u64>,
    /// SCHED_FIFO priority for policy `rm`; absent: rate-monotonic order.
    #[serde(default)]
    pub priority: Option<i32>,
    /// SCHED_DEADLINE budget for policy `deadline`; absent: `wcet_ns`.
    #[serde(default)]
    pub runtime_ns: Option<u64>,
}

impl Task {
    pub fn deadline(&self) -> u64 {
        self.deadline_ns.unwrap_or(self.period_ns)
    }
}

/// How a task set is scheduled: fixed priorities (SCHED_FIFO, rate-monotonic unless given)
/// or one SCHED_DEADLINE reservation per task.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum TaskPolicy {
    #[default]
    Rm,
    Deadline,
}

/// The load one enemy generates until stopped: `{"kind": ..., <parameters>}`. Each kind's
/// file in enemies/ declares its parameters (types, bounds, defaults); the registry in
/// enemies/mod.rs checks and builds a load from them (docs/enemies.md).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Load {
    pub kind: String,
    #[serde(flatten)]
    pub params: serde_json::Map<String, serde_json::Value>,
}

impl Load {
    /// The kind's name (enemies/<kind>.rs).
    pub fn kind(&self) -> &str {
        &self.kind
    }
}

fn default_intensity() -> f64 {
    100.0
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Enemy {
    pub name: String,
    pub load: Load,
    #[serde(default)]
    pub placement: Placement,
    #[serde(default)]
    pub sched: Sched,
    #[serde(default)]
    pub lock_memory: bool,
    #[serde(default)]
    pub huge_pages: bool,
    /// Control group (a `groups` name) the enemy runs in.
    #[serde(default)]
    pub group: Option<String>,
    /// Duty cycle, percent of each window (1 ms) spent working; 100 never sleeps.
    #[serde(default = "default_intensity")]
    pub intensity: f64,
    /// Target rate in the kind's unit per second (chunks paced against the clock).
    #[serde(default)]
    pub rate: Option<f64>,
}

/// CPU placement: a pinned CPU list, or unpinned (`cpus` null or absent).
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Placement {
    #[serde(default)]
    pub cpus: Option<Vec<usize>>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "policy", rename_all = "lowercase", deny_unknown_fields)]
pub enum Sched {
    Other {
        #[serde(default)]
        nice: i32,
    },
    Fifo { priority: i32 },
    Rr { priority: i32 },
    Deadline { runtime_ns: u64, deadline_ns: u64, period_ns: u64 },
}

impl Default for Sched {
    fn default() -> Self {
        Sched::Other { nice: 0 }
    }
}

/// A validation failure: the field (dotted path) and what to do about it. `machine`: the
/// plan is well formed but this machine refuses what the field asks (a scheduling policy
/// tried for real, the cgroups the run makes): another machine or configuration may run it.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanError {
    pub field: String,
    pub message: String,
    pub machine: bool,
}

impl fmt::Display for PlanError {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

pub fn err<T>(field: impl Into<String>, message: impl Into<String>) -> Result<T, PlanError> {
    Err(PlanError { field: field.into(), message: message.into(), machine: false })
}

/// `err` for what this machine refuses of a valid plan (`PlanError::machine`).
pub fn refused<T>(field: impl Into<String>, message: impl Into<String>) -> Result<T, PlanError> {
    Err(PlanError { field: field.into(), message: message.into(), machine: true })
}

impl Plan {
    /// Every measured process: the victim first, then the applications in plan order.
    pub fn measured(&self) -> impl Iterator<Item = &Victim> {
        std::iter::once(&self.victim).chain(self.applications.iter())
    }
}

/// Parse a plan strictly; the error names the JSON path.
pub fn parse(text: &str) -> Result<Plan, PlanError> {
    let de = &mut serde_json::Deserializer::from_str(text);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner().to_string();
        PlanError {
            field: if path == "." { "plan".into() } else { path },
            message: format!("{inner}; see `xtalk plan --schema`"),
            machine: false,
        }
    })
}

/// The most AOCS steps a job may take (the data files hold 16000 steps by default).
pub const MAX_STEPS_PER_JOB: u64 = 100_000;
/// The most times a step may be computed (1 µs × this: seconds a job).
pub const MAX_REPEAT_STEP: u64 = 1_000_000;
/// A command's job source, for the host (src/xtalk/plan.py `JobsFrom`); carried into run.json.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobsFrom {
    #[serde(default)]
    pub probe: Option<String>,
    #[serde(default)]
    pub end: Option<String>,
    #[serde(default)]
    pub release: Option<String>,
    #[serde(default)]
    pub trace: Option<String>,
    #[serde(default)]
    pub period_ns: Option<u64>,
    #[serde(default)]
    pub warmup_jobs: u64,
}
