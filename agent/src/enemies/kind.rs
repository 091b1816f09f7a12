//! What an enemy kind declares about itself: its parameters (type, bounds, default, unit,
//! one-line doc), its memory footprint, its counter's unit, its extra checks and its build
//! function. The registry in mod.rs lists every kind's descriptor; the plan's loads are
//! checked and built from it, and `xtalk-agent catalog --json` prints it for the host
//! (docs/enemies.md, docs/agent.md).

use super::{Ctx, EnemyLoad};
pub use crate::declare::{check_values, param_json, Dflt, Footprint, Param, Values};
use crate::plan::{Load, PlanError};
use serde_json::{json, Value};

/// Builds the load of a checked plan entry.
pub type Build = fn(&Args, &Ctx) -> Result<Box<dyn EnemyLoad>, String>;
/// Checks beyond each parameter's bounds (several parameters together, the machine): the
/// field prefix (`enemies[0].load`) names the offending field.
pub type Check = fn(&Args, &str) -> Result<(), PlanError>;

/// One enemy kind, as its file declares it.
pub struct Kind {
    pub name: &'static str,
    pub doc: &'static str,
    /// Unit of the work counter.
    pub unit: &'static str,
    /// A parameter that, when set, names the counter's unit instead (external's `unit`,
    /// counted only with a `rate_regex`).
    pub unit_param: Option<(&'static str, &'static str)>,
    pub params: &'static [Param],
    pub footprint: Footprint,
    pub build: Build,
    pub check: Check,
    /// Needs 4 KiB pages: huge_pages is refused.
    pub small_pages: bool,
    /// Its process only watches a command that takes the planned policy (setup::watcher_sched).
    pub runs_command: fn(&Args) -> bool,
    /// Its files go in a private scratch directory the agent makes (journalled) in the
    /// directory this parameter names ($TMPDIR when unset): mod.rs scratch_dirs.
    pub scratch_in: Option<&'static str>,
    /// The machine resource its work loads ("read", "write", "copy", "latency", "l2", ...;
    /// "" when none is named): the host sets its achieved rate against the measured peak of
    /// that channel (src/xtalk/peaks.py, docs/enemies.md "What an enemy loads").
    pub channel: &'static str,
    /// What the enemy does to the victim: slows it (timing) or breaks something it needs
    /// (fault: memory, descriptors, the process table, a file system, its own crashes). The
    /// host reads it from the catalog: fault enemies' counters are not rates, they stay out
    /// of the worst-case search, and containment and the evidence bundle look for them.
    pub class: Class,
}

/// An enemy's class (the catalog's `class`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    Timing,
    Fault,
}

impl Class {
    pub fn word(self) -> &'static str {
        match self {
            Class::Timing => "timing",
            Class::Fault => "fault",
        }
    }
}

fn no_check(_: &Args, _: &str) -> Result<(), PlanError> {
    Ok(())
}
fn never(_: &Args) -> bool {
    false
}

impl Kind {
    /// A kind with no footprint, no extra check, 4 KiB or huge pages alike.
    pub const fn new(name: &'static str, doc: &'static str, unit: &'static str, params: &'static [Param], build: Build) -> Kind {
        Kind { name, doc, unit, unit_param: None, params, footprint: Footprint { factor: 0, params: &[] }, build, check: no_check, small_pages: false, runs_command: never, scratch_in: None, channel: "", class: Class::Timing }
    }
    pub const fn footprint(self, factor: u64, params: &'static [&'static str]) -> Kind {
        Kind { footprint: Footprint { factor, params }, ..self }
    }
    pub const fn check(self, check: Check) -> Kind {
        Kind { check, ..self }
    }
    pub const fn small_pages(self) -> Kind {
        Kind { small_pages: true, ..self }
    }
    pub const fn runs_command(self, f: fn(&Args) -> bool) -> Kind {
        Kind { runs_command: f, ..self }
    }
    pub const fn scratch_in(self, param: &'static str) -> Kind {
        Kind { scratch_in: Some(param), ..self }
    }
    pub const fn channel(self, channel: &'static str) -> Kind {
        Kind { channel, ..self }
    }
    /// A fault enemy (class `fault`).
    pub const fn fault(self) -> Kind {
        Kind { class: Class::Fault, ..self }
    }
    pub const fn unit_param(self, param: &'static str, when_set: &'static str) -> Kind {
        Kind { unit_param: Some((param, when_set)), ..self }
    }

    #[cfg_attr(not(test), allow(dead_code))] // read by the catalog's tests
    pub fn param(&self, name: &str) -> Option<&'static Param> {
        self.params.iter().find(|p| p.name == name)
    }

    /// The kind's entry in the catalog.
    pub fn to_json(&self) -> Value {
        json!({
            "kind": self.name,
            "doc": self.doc,
            "unit": self.unit,
            "unit_param": self.unit_param.map(|(p, w)| json!({"param": p, "when_set": w})),
            "footprint": {"factor": self.footprint.factor, "params": self.footprint.params},
            "small_pages": self.small_pages,
            "scratch_in": self.scratch_in,
            "channel": if self.channel.is_empty() { Value::Null } else { json!(self.channel) },
            "class": self.class.word(),
            "params": self.params.iter().map(param_json).collect::<Vec<_>>(),
        })
    }
}

/// A load's parameters seen through its kind.
pub struct Args<'a> {
    pub kind: &'static Kind,
    values: Values<'a>,
}

impl<'a> std::ops::Deref for Args<'a> {
    type Target = Values<'a>;
    fn deref(&self) -> &Values<'a> {
        &self.values
    }
}

impl<'a> Args<'a> {
    pub fn new(kind: &'static Kind, load: &'a Load) -> Args<'a> {
        Args { kind, values: Values::new(kind.name, kind.params, &load.params) }
    }
    /// Bytes the enemy allocates, from its declared footprint.
    pub fn footprint(&self) -> u64 {
        self.values.footprint(self.kind.footprint)
    }
}

/// Every parameter of `load` is declared by `kind`, has its type and lies in its bounds;
/// every required one is there. `at` is the load's field (`enemies[0].load`).
pub fn check_params(kind: &'static Kind, load: &Load, at: &str) -> Result<(), PlanError> {
    check_values("enemy", kind.name, kind.params, &load.params, at)
}
