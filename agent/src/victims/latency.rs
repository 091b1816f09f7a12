//! `latency` body: cyclictest's measurement (seed 001 §3.3) as a victim. The job does no
//! work: what matters is the periodic loop around it, which sleeps to an absolute release
//! (clock_nanosleep, TIMER_ABSTIME, CLOCK_MONOTONIC, as cyclictest) and records the
//! wake-up date of every sample; `wakeup − release` is the timer latency. Run it with
//! policy fifo and lock_memory; `xtalk latency RESULTS` gives the 1 µs histogram and
//! min / avg / max.
use super::body::{BodyKind, Run};
use super::JobBody;

pub struct Latency;

impl JobBody for Latency {
    fn run_job(&mut self) -> u64 {
        0
    }
}

/// The `latency` body (registry: mod.rs): its jobs' execution times say nothing (empty
/// jobs), so the report shows the wake-up latency view only.
pub const BODY: BodyKind = BodyKind::new("latency", "cyclictest-equivalent: an empty job; wake-up minus release is the timer latency", &[],
    Run::Jobs(|_, _| Ok(Box::new(Latency))))
.sections(&["wakeup", "latency"]);
