//! Phase `wait`: the measured window. The agent blocks (sigtimedwait) until the victim
//! ends, the watchdog fires or a termination signal arrives; it never polls.

use super::children::{describe, reap, Child, Role};
use super::prepare::Prepared;
use super::Verdict;
use crate::launch::signals;
use crate::outcome::Status;
use crate::plan::Plan;

/// Block until the victim ends (a non-zero end fails the run) or something ends the run.
pub fn wait(plan: &Plan, prep: &Prepared, children: &mut [Child], deadline: i64, verdict: &mut Verdict) {
    while verdict.open() {
        match signals::wait_until(deadline) {
            None => verdict.end(Status::Timeout, format!("victim still running after timeout_s = {}", plan.timeout_s)),
            Some(libc::SIGCHLD) => {
                reap(children);
                if let Some(c) = children.iter().find(|c| c.role == Role::Victim && c.status.is_some()) {
                    let st = c.status.unwrap();
                    if !(libc::WIFEXITED(st) && libc::WEXITSTATUS(st) == 0) {
                        verdict.end(Status::Failed, prep.shared.ctl().victim.message().unwrap_or_else(|| format!("victim {}", describe(st))));
                    }
                    return;
                }
            }
            Some(libc::SIGUSR1) => {}
            Some(sig) => verdict.end(Status::Interrupted, format!("agent received signal {sig}")),
        }
    }
}
