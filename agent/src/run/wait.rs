//! Phase `wait`: the measured window. The agent blocks (sigtimedwait) until every measured
//! process (the victim and the applications) has ended, the watchdog fires or a termination
//! signal arrives; it never polls.

use super::children::{describe, exited_ok, name_of, reap, slot_of, Child};
use super::prepare::Prepared;
use super::release::may_end;
use super::Verdict;
use crate::launch::signals;
use crate::outcome::Status;
use crate::plan::Plan;

/// Block until every measured process has ended (a failed one ends the run, unless it is a
/// `may_fail` application: then its end is only recorded) or something ends the run.
pub fn wait(plan: &Plan, prep: &Prepared, children: &mut [Child], deadline: i64, verdict: &mut Verdict) {
    while verdict.open() {
        match signals::wait_until(deadline) {
            None => verdict.end(Status::Timeout, format!("{} still running after timeout_s = {}", running(plan, children), plan.timeout_s)),
            Some(libc::SIGCHLD) => {
                reap(children);
                let failed = children.iter().find(|c| c.role.measured() && c.status.is_some_and(|st| !exited_ok(st)) && !may_end(plan, prep, c.role));
                if let Some(c) = failed {
                    let why = slot_of(&prep.shared, c.role).message().unwrap_or_else(|| format!("{} {}", name_of(plan, c.role), describe(c.status.unwrap())));
                    verdict.end(Status::Failed, why);
                    return;
                }
                if children.iter().filter(|c| c.role.measured()).all(|c| c.status.is_some()) {
                    return;
                }
            }
            Some(libc::SIGUSR1) => {}
            Some(sig) => verdict.end(Status::Interrupted, format!("agent received signal {sig}")),
        }
    }
}

/// The measured processes still running, named ("victim", "victim, application b").
fn running(plan: &Plan, children: &[Child]) -> String {
    let names: Vec<String> = children.iter().filter(|c| c.role.measured() && c.status.is_none()).map(|c| name_of(plan, c.role)).collect();
    if names.is_empty() { "victim".into() } else { names.join(", ") }
}
