//! Phase `release`: block until every process is set up and past the barrier (the first
//! measured process past it says so with SIGUSR1), then switch the trace on. A child that
//! ends first, the watchdog or a termination signal ends the run instead; a `may_fail`
//! application that ends after the barrier is left to the outcome (the run goes on).

use super::children::{describe, name_of, reap, slot_of, Child, Role};
use super::prepare::Prepared;
use super::Verdict;
use crate::launch::signals;
use crate::outcome::Status;
use crate::plan::Plan;
use std::sync::atomic::Ordering;

/// A `may_fail` application past the barrier: its end does not end the run.
pub fn may_end(plan: &Plan, prep: &Prepared, role: Role) -> bool {
    match role {
        Role::Application(i) => plan.applications[i].may_fail && prep.shared.ctl().applications[i].started_ns.load(Ordering::Acquire) != 0,
        _ => false,
    }
}

/// True when the measured window has begun.
pub fn release(plan: &Plan, prep: &Prepared, children: &mut [Child], deadline: i64, verdict: &mut Verdict) -> bool {
    while verdict.open() {
        match signals::wait_until(deadline) {
            None => verdict.end(Status::Timeout, format!("set-up did not finish within timeout_s = {}", plan.timeout_s)),
            Some(libc::SIGUSR1) => {
                if let Some(t) = &prep.tracer {
                    t.on();
                }
                return true;
            }
            Some(libc::SIGCHLD) => {
                reap(children);
                if let Some(c) = children.iter().find(|c| c.status.is_some() && !may_end(plan, prep, c.role)) {
                    let slot = slot_of(&prep.shared, c.role);
                    let why = slot.message().unwrap_or_else(|| format!("{} {} during set-up", name_of(plan, c.role), describe(c.status.unwrap())));
                    verdict.end(Status::Failed, why);
                }
            }
            Some(sig) => verdict.end(Status::Interrupted, format!("agent received signal {sig} during set-up")),
        }
    }
    false
}
