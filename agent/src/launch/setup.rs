//! What a freshly forked child does to itself before its work: die with the agent, take
//! its CPU placement and scheduling policy, lock its memory. Errors come back as text for
//! the child's slot; the agent reports them.

use crate::plan::{Placement, Sched};

fn os_err(what: &str) -> String {
    format!("{what}: {}", std::io::Error::last_os_error())
}

/// Die with the parent, so that no child outlives an agent killed by SIGKILL.
pub fn die_with_parent(parent: libc::pid_t) -> Result<(), String> {
    if unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0) } != 0 {
        return Err(os_err("prctl(PR_SET_PDEATHSIG)"));
    }
    // The parent may have died between fork and prctl.
    if unsafe { libc::getppid() } != parent {
        unsafe { libc::_exit(1) };
    }
    Ok(())
}

/// Name the process (15 bytes at most) so ps, top and kernel traces show its role.
pub fn set_name(name: &str) {
    let mut buf = [0u8; 16];
    let n = name.len().min(15);
    buf[..n].copy_from_slice(&name.as_bytes()[..n]);
    unsafe { libc::prctl(libc::PR_SET_NAME, buf.as_ptr() as libc::c_ulong, 0, 0, 0) };
}

pub fn apply_placement(p: &Placement) -> Result<(), String> {
    let Some(cpus) = &p.cpus else { return Ok(()) };
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cpus {
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    if unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) } != 0 {
        return Err(os_err("sched_setaffinity"));
    }
    Ok(())
}

pub fn apply_sched(s: &Sched) -> Result<(), String> {
    crate::sched::try_sched(s).map_err(|e| format!("sched_setattr({s:?}): {}", crate::preflight::refusal(s, &e, crate::observe::facts::current())))
}

/// The policy of a process that watches a command running under `s` (an external enemy):
/// one real-time priority above it, since a busy command at the same FIFO priority on the
/// same CPU would starve its watcher, and with it pacing, the output pipe and teardown; no
/// DEADLINE reservation of its own (the command holds the one planned), so SCHED_OTHER.
pub fn watcher_sched(s: &Sched) -> Sched {
    match *s {
        Sched::Fifo { priority } => Sched::Fifo { priority: (priority + 1).min(99) },
        Sched::Rr { priority } => Sched::Rr { priority: (priority + 1).min(99) },
        Sched::Deadline { .. } => Sched::Other { nice: 0 },
        Sched::Other { nice } => Sched::Other { nice },
    }
}

pub fn lock_memory() -> Result<(), String> {
    if unsafe { libc::mlockall(libc::MCL_CURRENT | libc::MCL_FUTURE) } != 0 {
        return Err(os_err("mlockall"));
    }
    Ok(())
}
