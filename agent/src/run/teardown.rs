//! Phase `teardown`: trace off, stop flag; the regulator ends and thaws what it froze, the
//! measured processes still running (the window was cut short) get SIGTERM (their jobs are
//! already in their logs), the enemies are continued and
//! given a grace period, SIGKILL ends any rest, every child is reaped; then whatever is
//! left in the run's own group is killed and the records are flushed.

use super::children::{alive, end_children, reap, Child, Role};
use super::prepare::Prepared;
use crate::launch::cgroups;
use crate::plan::Plan;
use crate::victims;
use std::sync::atomic::Ordering;

/// Every child ended and reaped. Returns the processes killed in the run's group
/// ("pid (name)") or why it could not be emptied.
pub fn teardown(plan: &Plan, prep: &Prepared, children: &mut Vec<Child>) -> Result<Vec<String>, String> {
    if let Some(t) = &prep.tracer {
        t.off();
    }
    prep.shared.ctl().stop.store(1, Ordering::SeqCst);
    end_children(children, |c| c.role == Role::Regulator, 0, 1_000_000_000);
    for g in &plan.groups {
        if let Some((dir, ver)) = prep.groups.freezer_of(&g.name) {
            let _ = cgroups::set_frozen(&dir, &ver, false);
        }
    }
    for c in children.iter_mut().filter(|c| c.role.measured() && c.status.is_none()) {
        c.cut_short = true;
    }
    end_children(children, |c| c.role.measured(), libc::SIGTERM, 1_000_000_000);
    for c in alive(children) {
        unsafe { libc::kill(c.pid, libc::SIGCONT) };
    }
    end_children(children, |c| !c.role.measured(), 0, 2_000_000_000);
    end_children(children, |_| true, libc::SIGKILL, 5_000_000_000);
    // Whatever the children started and left (a command's background child, a helper that
    // called setsid, a runaway real-time task) is still in the run's group: kill it.
    let runaways = prep.groups.kill_runaways();
    reap(children);
    for (m, v) in plan.measured().enumerate() {
        let rec = &prep.measured[m];
        let role = if m == 0 { Role::Victim } else { Role::Application(m - 1) };
        if let (Some(finish), Some(c)) = (victims::kind_of(&v.body).finish, children.iter().find(|c| c.role == role)) {
            if let Some((ru, end)) = &c.rusage {
                finish(v, &rec.log, *end, ru);
            }
        }
        rec.log.flush();
        if let Some(c) = &rec.counter_log {
            c.flush();
        }
    }
    runaways
}
