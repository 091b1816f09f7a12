//! Phase `spawn`: fork the enemies, then the victim and the applications, then the regulator; each starts
//! in its v2 group where the kernel can (clone_into.rs), attaches itself to the rest of its
//! groups and sets itself up, then meets the others at the barrier. Once
//! every child is forked, the agent (and, if asked, device interrupts) move to the
//! housekeeping CPUs; the children do not inherit that.

use super::children::{fork_child, slot_of, Child, Role};
use super::prepare::Prepared;
use super::Verdict;
use crate::launch::journal::Journal;
use crate::launch::{cgroups, clone_into, irq, setup};
use crate::outcome::Status;
use crate::plan::{Placement, Plan};
use crate::{enemies, regulate, victims};
use std::path::PathBuf;

pub struct Spawned {
    pub children: Vec<Child>,
    /// The agent's pid (the children's parent).
    pub me: libc::pid_t,
    /// IRQs moved to the housekeeping CPUs and refused, when the plan steers them.
    pub irqs: Option<(usize, usize)>,
}

/// Fork every child; a failed fork ends the run (`verdict`), the children forked so far are
/// torn down as usual. An error (scratch directories) is a set-up failure.
pub fn spawn(plan: &Plan, prep: &Prepared, journal: &mut Journal, verdict: &mut Verdict) -> Result<Spawned, String> {
    let me = unsafe { libc::getpid() };
    let direct = may_clone_into(plan);
    let mut children: Vec<Child> = Vec::new();
    let scratch = enemies::scratch_dirs(plan, journal)?;
    for (i, e) in plan.enemies.iter().enumerate() {
        let own = scratch.iter().find(|(j, _)| *j == i).map(|(_, d)| d.clone());
        match fork_in(prep, direct, &e.group, &format!("enemy {}", e.name), Role::Enemy(i), false, || enemies::enemy_main(i, e, &prep.shared, me, own)) {
            Ok(pid) => children.push(Child::new(pid, Role::Enemy(i))),
            Err(m) => {
                verdict.end(Status::Failed, m);
                break;
            }
        }
    }
    // The measured processes: the victim, then each application, forked alike (its own
    // group, placement, policy, records and slot).
    for (m, v) in plan.measured().enumerate() {
        if !verdict.open() {
            break;
        }
        let (role, slot, who) = match m {
            0 => (Role::Victim, &prep.shared.ctl().victim, "victim".to_string()),
            i => (Role::Application(i - 1), &prep.shared.ctl().applications[i - 1], format!("application {}", v.name())),
        };
        let rec = &prep.measured[m];
        let counters = rec.counter_log.as_ref().map(|log| victims::Counters { events: &rec.events, exclude_kernel: v.counters_exclude_kernel, log });
        let cx = victims::Ctx {
            victim: v,
            shared: &prep.shared,
            slot,
            who: who.clone(),
            primary: m == 0,
            log: &rec.log,
            counters: counters.as_ref(),
            probe_fd: rec.probes.as_ref().map_or(-1, |p| p.fd),
            parent: me,
            settle_ns: (plan.settle_ms * 1e6) as i64,
            enemies: plan.enemies.len(),
        };
        match fork_in(prep, direct, &v.group, &who, role, v.may_fail, || victims::victim_main(&cx)) {
            Ok(pid) => children.push(Child::new(pid, role)),
            Err(m) => verdict.end(Status::Failed, m),
        }
    }
    if let (Some(r), true) = (&plan.regulator, verdict.open()) {
        let targets: Vec<regulate::Target> = children
            .iter()
            .filter_map(|c| match c.role {
                Role::Enemy(i) if r.enemies.is_empty() || r.enemies.contains(&plan.enemies[i].name) => Some(regulate::Target {
                    slot: i,
                    pid: c.pid,
                    freezer: plan.enemies[i].group.as_ref().and_then(|g| prep.groups.freezer_of(g)),
                }),
                _ => None,
            })
            .collect();
        match fork_in(prep, direct, &None, "regulator", Role::Regulator, false, || regulate::regulator_main(r, &prep.shared, &targets, me, &plan.housekeeping_cpus)) {
            Ok(pid) => children.push(Child::new(pid, Role::Regulator)),
            Err(m) => verdict.end(Status::Failed, m),
        }
    }
    // The agent itself and device interrupts go to the housekeeping CPUs (children are
    // forked already, so they do not inherit this affinity).
    let mut irqs = None;
    if let Some(h) = &plan.housekeeping_cpus {
        let _ = setup::apply_placement(&Placement { cpus: Some(h.clone()) });
        if plan.steer_irqs {
            irqs = Some(irq::steer(h, journal));
        }
    }
    Ok(Spawned { children, me, irqs })
}

/// Whether children may be started in their v2 group (clone_into.rs) rather than moved
/// there: only while the agent is its only thread (the raw clone skips glibc's fork
/// handling), and not under a process budget: a clone the budget refuses counts in
/// `pids.events` as a refused fork in run.json's report, where a migration never did.
fn may_clone_into(plan: &Plan) -> bool {
    plan.pids_max.is_none() && !plan.groups.iter().any(|g| g.pids_max.is_some()) && clone_into::single_threaded()
}

/// Fork a child in `group`'s directories (the run's own group when None), then run
/// `body`: started in its v2 directory where `direct` and the kernel allow, it attaches
/// itself to the others (v1 hierarchies, resctrl), to all of them otherwise. A failed
/// attach is reported in the child's slot (its `role`'s: an enemy's, an application's, else
/// the victim's) and ends the child with 3 (a `may_fail` application meets the barrier
/// first: victims::give_up).
fn fork_in(prep: &Prepared, direct: bool, group: &Option<String>, who: &str, role: Role, may_fail: bool, body: impl FnOnce()) -> Result<libc::pid_t, String> {
    let dirs = prep.groups.dirs_for(group.as_deref());
    let v2 = if direct { dirs.iter().enumerate().find_map(|(i, d)| clone_into::open_v2(d).map(|fd| (i, fd))) } else { None };
    let placed_at = v2.as_ref().map(|(i, _)| *i);
    fork_child(v2.map(|(_, fd)| fd), |placed| {
        let rest: Vec<PathBuf> = dirs.iter().enumerate().filter(|(i, _)| !placed || Some(*i) != placed_at).map(|(_, d)| d.clone()).collect();
        if let Err(m) = cgroups::attach_self(&rest) {
            victims::give_up(&prep.shared, slot_of(&prep.shared, role), may_fail, &format!("{who}: {m}"), 3);
        }
        body()
    })
}
