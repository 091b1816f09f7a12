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

/// struct sched_attr of sched_setattr(2), version 0 layout (48 bytes).
#[repr(C)]
#[derive(Default)]
struct SchedAttr {
    size: u32,
    sched_policy: u32,
    sched_flags: u64,
    sched_nice: i32,
    sched_priority: u32,
    sched_runtime: u64,
    sched_deadline: u64,
    sched_period: u64,
}

const SCHED_DEADLINE: u32 = 6;
/// Children of a real-time task start as SCHED_OTHER, so helpers never inherit the policy.
const SCHED_FLAG_RESET_ON_FORK: u64 = 1;

pub fn apply_sched(s: &Sched) -> Result<(), String> {
    try_sched(s).map_err(|e| format!("sched_setattr({s:?}): {}", crate::preflight::refusal(s, &e, crate::observe::facts::current())))
}

fn set_attr(a: &SchedAttr) -> std::io::Result<()> {
    match unsafe { libc::syscall(libc::SYS_sched_setattr, 0, a as *const SchedAttr, 0u32) } {
        0 => Ok(()),
        _ => Err(std::io::Error::last_os_error()),
    }
}

/// sched_setattr for the calling process, the raw error kept (pre-flight diagnoses it).
pub fn try_sched(s: &Sched) -> std::io::Result<()> {
    let mut a = SchedAttr { size: std::mem::size_of::<SchedAttr>() as u32, sched_flags: SCHED_FLAG_RESET_ON_FORK, ..Default::default() };
    fill_attr(&mut a, s);
    set_attr(&a)
}

/// Policy `s` prepared before a fork, to be taken between fork and exec by a command the
/// plan asks to run under it (an external enemy's command): the attribute is built here,
/// so the child makes one system call and allocates nothing. Unlike the agent's own
/// children, the command's children inherit it (as under `chrt`), except under DEADLINE,
/// where the kernel lets a task fork only with SCHED_FLAG_RESET_ON_FORK.
pub struct ExecSched(SchedAttr);

impl ExecSched {
    pub fn new(s: &Sched) -> ExecSched {
        let mut a = SchedAttr { size: std::mem::size_of::<SchedAttr>() as u32, ..Default::default() };
        fill_attr(&mut a, s);
        if matches!(s, Sched::Deadline { .. }) {
            a.sched_flags = SCHED_FLAG_RESET_ON_FORK;
        }
        ExecSched(a)
    }

    /// Take the policy (async-signal-safe: one system call). Err: the errno.
    pub fn apply(&self) -> Result<(), i32> {
        match unsafe { libc::syscall(libc::SYS_sched_setattr, 0, &self.0 as *const SchedAttr, 0u32) } {
            0 => Ok(()),
            _ => Err(unsafe { *libc::__errno_location() }),
        }
    }
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

fn fill_attr(a: &mut SchedAttr, s: &Sched) {
    match *s {
        Sched::Other { nice } => {
            a.sched_policy = libc::SCHED_OTHER as u32;
            a.sched_nice = nice;
        }
        Sched::Fifo { priority } => {
            a.sched_policy = libc::SCHED_FIFO as u32;
            a.sched_priority = priority as u32;
        }
        Sched::Rr { priority } => {
            a.sched_policy = libc::SCHED_RR as u32;
            a.sched_priority = priority as u32;
        }
        Sched::Deadline { runtime_ns, deadline_ns, period_ns } => {
            a.sched_policy = SCHED_DEADLINE;
            a.sched_runtime = runtime_ns;
            a.sched_deadline = deadline_ns;
            a.sched_period = period_ns;
        }
    }
}

pub fn lock_memory() -> Result<(), String> {
    if unsafe { libc::mlockall(libc::MCL_CURRENT | libc::MCL_FUTURE) } != 0 {
        return Err(os_err("mlockall"));
    }
    Ok(())
}
