//! A scheduling policy from the plan as the kernel takes it (sched_setattr(2)): taken by
//! the calling process, prepared before a fork for a command to take after it, or tried in
//! a throwaway child to learn whether the kernel accepts it. Below the machine facts, the
//! pre-flight and process set-up, which all ask it; it asks only the plan.

use crate::plan::Sched;

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

/// Try `s` in a forked child that exits at once; Ok when the kernel accepted it. A
/// SCHED_DEADLINE admission refused for bandwidth (EBUSY) is tried again for up to 0.2 s:
/// the bandwidth of a deadline task that is ending (another run's teardown, a pre-flight
/// child) is the kernel's until the task is gone, and a refusal is the answer only when it
/// lasts.
pub fn try_in_child(s: &Sched) -> Result<(), std::io::Error> {
    let mut tries = 0;
    loop {
        match try_once_in_child(s) {
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) && matches!(s, Sched::Deadline { .. }) && tries < ADMISSION_RETRIES => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            r => return r,
        }
    }
}

/// Further tries of a DEADLINE admission refused for bandwidth, 50 ms apart.
const ADMISSION_RETRIES: u32 = 4;

fn try_once_in_child(s: &Sched) -> Result<(), std::io::Error> {
    // The agent is single-threaded here (check runs before any thread or child exists).
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(std::io::Error::last_os_error());
    }
    if pid == 0 {
        let code = match try_sched(s) {
            Ok(()) => 0,
            Err(e) => e.raw_os_error().unwrap_or(255).clamp(1, 255),
        };
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    while unsafe { libc::waitpid(pid, &mut status, 0) } < 0 {
        if std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return Err(std::io::Error::last_os_error());
        }
    }
    match (libc::WIFEXITED(status), libc::WEXITSTATUS(status)) {
        (true, 0) => Ok(()),
        (true, code) => Err(std::io::Error::from_raw_os_error(code)),
        _ => Err(std::io::Error::other("the pre-flight child did not exit")),
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn other_policy_is_always_accepted() {
        assert!(try_in_child(&Sched::Other { nice: 0 }).is_ok());
    }
}
