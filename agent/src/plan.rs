//! The run plan: the only contract between host and agent (schema/run-plan.schema.json).
//!
//! Parsing is strict (unknown keys are errors) and validation names the offending field
//! and the fix, so bad input stops before anything is started.

use serde::{Deserialize, Serialize};
use std::fmt;

pub const PLAN_VERSION: u32 = 1;

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
    #[serde(default)]
    pub enemies: Vec<Enemy>,
    /// Kernel trace of the measured window (tracefs, private instance).
    #[serde(default)]
    pub trace: Option<Trace>,
    /// Free-form labels copied into run.json (experiment, scenario, repetition...).
    #[serde(default)]
    pub labels: std::collections::BTreeMap<String, String>,
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
}

fn default_trace_events() -> Vec<String> {
    crate::observe::trace::DEFAULT_EVENTS.iter().map(|s| s.to_string()).collect()
}

fn default_buffer_kb() -> u32 {
    8192
}

fn default_settle_ms() -> f64 {
    200.0
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Victim {
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

impl Victim {
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

/// The work one victim job does (victims/ has one file per body).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum Body {
    /// Dependent loads, one per cache line, over `bytes`; `accesses` per job (default: one pass).
    Chase {
        bytes: u64,
        #[serde(default)]
        order: Order,
        #[serde(default)]
        accesses: Option<u64>,
        #[serde(default)]
        seed: u64,
    },
    /// Sum of a u64 array of `bytes`.
    Sum { bytes: u64 },
    /// pi/4 series in registers only (seed 000 §6.4.2).
    Pi { iterations: u64 },
    /// Any program (argv, no shell), run once per run as job 0; per-section timing comes
    /// from its probes (include/xtalk/probe.h) in probes.bin.
    Command {
        argv: Vec<String>,
        #[serde(default)]
        env: std::collections::BTreeMap<String, String>,
        /// A shared library to LD_PRELOAD (e.g. the syscall probes, libxtalk_preload.so).
        #[serde(default)]
        preload: Option<String>,
        #[serde(default = "default_probe_capacity")]
        probe_capacity: u64,
    },
    /// Attitude and orbit control loop (victims/aocs/): one step per job, inputs from the
    /// input pipe, outputs compared with `expected` bit for bit by a child process. Files
    /// from `xtalk-agent aocs-generate`; the window starts at scenario step `first_step`.
    Aocs {
        input: String,
        expected: String,
        #[serde(default)]
        first_step: u64,
    },
    /// cyclictest-equivalent: an empty job; the record's wake-up minus release is the timer
    /// latency of every sample (victims/latency.rs).
    Latency {},
    /// Periodic tasks as threads of the victim (victims/taskset.rs, seed 001 §4.6). The
    /// victim's `period_ns` is the hyperperiod; `jobs` and `warmup_jobs` count job records
    /// of all tasks together (whole hyperperiods).
    Taskset {
        tasks: Vec<Task>,
        #[serde(default)]
        policy: TaskPolicy,
    },
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

fn default_probe_capacity() -> u64 {
    1 << 18
}

/// The load one enemy generates until stopped (enemies/ has one file per kind).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum Load {
    Read { bytes: u64 },
    Write { bytes: u64 },
    /// Linked list of `elements` nodes of `element_bytes` (seed 003: 900 000 nodes, ~200 MB).
    Chase {
        elements: u64,
        #[serde(default = "default_element_bytes")]
        element_bytes: u64,
        #[serde(default)]
        order: Order,
        #[serde(default)]
        seed: u64,
    },
    Pi {},
    /// Another instance of the AOCS loop (victims/aocs/) with its reader and comparer, at
    /// its own period, steps first_step..first_step + steps over and over (seed 000 §5.3.1:
    /// instances sharing or duplicating their files).
    Aocs { input: String, expected: String, #[serde(default)] first_step: u64, steps: u64, period_ns: u64 },
    /// Failure propagation: faults held under hard limits (enemies/{memhog,...}.rs).
    /// Memory touched up to RLIMIT_AS = `bytes` over its own, freed, again.
    Memhog { bytes: u64 },
    /// Descriptors opened up to RLIMIT_NOFILE = `fds`, closed, again.
    Fdexhaust { fds: u64 },
    /// `max_procs` short-lived children kept alive, each replaced when it ends.
    Forkbomb { max_procs: u64 },
    /// An unnamed file in `dir` written up to `bytes` (RLIMIT_FSIZE), synced, emptied, again.
    Diskfill {
        #[serde(default = "default_fill_dir")]
        dir: String,
        bytes: u64,
    },
    /// Cheap system calls in a tight loop.
    Syscallstorm {},
    /// A child that aborts, restarted at once.
    Crashloop {},
}

fn default_fill_dir() -> String {
    "/tmp".into()
}

fn default_element_bytes() -> u64 {
    64
}

impl Load {
    pub fn kind(&self) -> &'static str {
        match self {
            Load::Read { .. } => "read",
            Load::Write { .. } => "write",
            Load::Chase { .. } => "chase",
            Load::Pi {} => "pi",
            Load::Aocs { .. } => "aocs",
            Load::Memhog { .. } => "memhog",
            Load::Fdexhaust { .. } => "fdexhaust",
            Load::Forkbomb { .. } => "forkbomb",
            Load::Diskfill { .. } => "diskfill",
            Load::Syscallstorm {} => "syscallstorm",
            Load::Crashloop {} => "crashloop",
        }
    }
    /// Bytes of memory the enemy allocates.
    pub fn footprint(&self) -> u64 {
        match self {
            Load::Read { bytes } | Load::Write { bytes } => *bytes,
            Load::Chase { elements, element_bytes, .. } => elements * element_bytes,
            Load::Memhog { bytes } => *bytes,
            Load::Pi {} | Load::Aocs { .. } | Load::Fdexhaust { .. } | Load::Forkbomb { .. } | Load::Diskfill { .. } | Load::Syscallstorm {} | Load::Crashloop {} => 0,
        }
    }
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

/// A validation failure: the field (dotted path) and what to do about it.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanError {
    pub field: String,
    pub message: String,
}

impl fmt::Display for PlanError {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

pub fn err<T>(field: impl Into<String>, message: impl Into<String>) -> Result<T, PlanError> {
    Err(PlanError { field: field.into(), message: message.into() })
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
        }
    })
}
