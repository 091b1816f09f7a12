//! `aocs` body: an open attitude and orbit control loop (an open substitute for the
//! proprietary AOCS of seeds 000 and 002): rigid-body dynamics with reaction wheels, gyro /
//! star-tracker / sun-sensor models with seeded noise, a complementary-filter estimator,
//! quaternion-feedback control with momentum management, and a flyby scenario. Split by
//! concern; `generate` writes the data files, `body` is the periodic victim with its two
//! I/O children.

pub mod body;
mod control;
mod dynamics;
mod estimator;
mod fsw;
pub mod generate;
pub mod io;
mod quat;
pub mod scenario;
mod sensors;

use super::body::{BodyKind, Run};
use crate::declare::{Dflt, Param};
use crate::plan::{MAX_REPEAT_STEP, MAX_STEPS_PER_JOB};

/// The `aocs` body (registry: victims/mod.rs): its jobs are timed computations (the
/// execution sections apply) and the comparer's verdict has its own section.
pub const BODY: BodyKind = BodyKind::new("aocs", "attitude and orbit control loop: scenario steps per job from `input`, outputs compared with `expected` bit for bit", &[
    Param::str("input", "input file (xtalk-agent aocs-generate)"),
    Param::str("expected", "expected outputs file (xtalk-agent aocs-generate)"),
    Param::u64("first_step", "scenario step of the window's first job").default(Dflt::U64(0)),
    Param::u64("steps_per_job", "consecutive scenario steps per job").range(1, MAX_STEPS_PER_JOB).default(Dflt::U64(1)),
    Param::u64("repeat_step", "each step computed this many times (all but the last on a scratch copy)").range(1, MAX_REPEAT_STEP).default(Dflt::U64(1)),
], Run::Jobs(|a, b| {
    let (input, expected) = (a.str("input"), a.str("expected"));
    Ok(Box::new(body::Aocs::new(input.as_ref(), expected.as_ref(), a.u64("first_step"), b.victim.total_jobs(), a.u64("steps_per_job"), a.u64("repeat_step"), super::rundir::of(b.log))?))
}))
.work("repeat_step")
.sections(&["slowdown", "distributions", "series", "spikes", "pwcet", "wakeup", "aocs"])
.check(|a, v, at, _| {
    let steps = v.total_jobs().saturating_mul(a.u64("steps_per_job"));
    io::check_window(&format!("{at}.body"), &a.str("input"), &a.str("expected"), a.u64("first_step"), steps, &format!("{at}.jobs"), "first_step + (warmup_jobs + jobs) × steps_per_job")
});
