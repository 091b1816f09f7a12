//! Phase `release`: block until every process is set up and past the barrier (the victim
//! says so with SIGUSR1), then switch the trace on. A child that ends first, the watchdog
//! or a termination signal ends the run instead.

use super::children::{describe, name_of, reap, Child, Role};
use super::prepare::Prepared;
use super::Verdict;
use crate::launch::signals;
use crate::outcome::Status;
use crate::plan::Plan;

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
                if let Some(c) = children.iter().find(|c| c.status.is_some()) {
                    let slot = match c.role {
                        Role::Victim | Role::Regulator => &prep.shared.ctl().victim,
                        Role::Enemy(i) => &prep.shared.ctl().enemies[i],
                    };
                    let why = slot.message().unwrap_or_else(|| format!("{} {} during set-up", name_of(plan, c.role), describe(c.status.unwrap())));
                    verdict.end(Status::Failed, why);
                }
            }
            Some(sig) => verdict.end(Status::Interrupted, format!("agent received signal {sig} during set-up")),
        }
    }
    false
}
