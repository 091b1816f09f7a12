//! The run's children (enemies, victim, applications, regulator): forking (into their group
//! where the kernel can), reaping, ending them.

use crate::launch::{clone_into, signals};
use crate::observe::clock::mono_ns;
use crate::plan::Plan;
use std::os::fd::OwnedFd;

#[derive(Clone, Copy, PartialEq, Debug)]
pub enum Role {
    Victim,
    /// The plan's `applications[i]`.
    Application(usize),
    Enemy(usize),
    Regulator,
}

impl Role {
    /// A measured process (the victim or an application).
    pub fn measured(self) -> bool {
        matches!(self, Role::Victim | Role::Application(_))
    }
}

pub struct Child {
    pub pid: libc::pid_t,
    pub role: Role,
    pub status: Option<libc::c_int>,
    /// Resource use and the time it was reaped (for a command victim's job record).
    pub rusage: Option<(libc::rusage, i64)>,
    /// A measured process still running when the window ended (watchdog, signal, another's
    /// failure): the run ended it.
    pub cut_short: bool,
}

impl Child {
    pub fn new(pid: libc::pid_t, role: Role) -> Child {
        Child { pid, role, status: None, rusage: None, cut_short: false }
    }
}

/// A wait status in words ("exited with status 1", "killed by signal 9 (Killed)").
pub fn describe(status: libc::c_int) -> String {
    if libc::WIFEXITED(status) {
        format!("exited with status {}", libc::WEXITSTATUS(status))
    } else if libc::WIFSIGNALED(status) {
        let s = libc::WTERMSIG(status);
        let name = unsafe { std::ffi::CStr::from_ptr(libc::strsignal(s)) }.to_string_lossy().into_owned();
        format!("killed by signal {s} ({name})")
    } else {
        format!("status {status}")
    }
}

/// How a child is named in a reason ("enemy read@0").
pub fn name_of(plan: &Plan, r: Role) -> String {
    match r {
        Role::Victim => "victim".into(),
        Role::Application(i) => format!("application {}", plan.applications[i].name()),
        Role::Enemy(i) => format!("enemy {}", plan.enemies[i].name),
        Role::Regulator => "regulator".into(),
    }
}

/// A measured process's control-block slot (the regulator reports into the victim's).
pub fn slot_of(shared: &crate::launch::shm::Shared, r: Role) -> &crate::launch::shm::Slot {
    match r {
        Role::Victim | Role::Regulator => &shared.ctl().victim,
        Role::Application(i) => &shared.ctl().applications[i],
        Role::Enemy(i) => &shared.ctl().enemies[i],
    }
}

/// Did the child exit with status 0?
pub fn exited_ok(status: libc::c_int) -> bool {
    libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0
}

/// Reap every child that has ended; returns how many were reaped.
pub fn reap(children: &mut [Child]) -> usize {
    let mut n = 0;
    loop {
        let mut st = 0;
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        let pid = unsafe { libc::wait4(-1, &mut st, libc::WNOHANG, &mut ru) };
        if pid <= 0 {
            return n;
        }
        if let Some(c) = children.iter_mut().find(|c| c.pid == pid) {
            c.status = Some(st);
            c.rusage = Some((ru, mono_ns()));
            n += 1;
        }
    }
}

pub fn alive(children: &[Child]) -> impl Iterator<Item = &Child> {
    children.iter().filter(|c| c.status.is_none())
}

/// Signal the live children matching `pred`, then wait up to `grace_ns` for them to end.
pub fn end_children(children: &mut [Child], pred: impl Fn(&Child) -> bool, sig: libc::c_int, grace_ns: i64) {
    for c in alive(children).filter(|c| pred(c)) {
        unsafe { libc::kill(c.pid, sig) };
    }
    let until = mono_ns() + grace_ns;
    while alive(children).any(|c| pred(c)) {
        reap(children);
        if !alive(children).any(|c| pred(c)) || signals::wait_until(until).is_none() && mono_ns() >= until {
            break;
        }
    }
    reap(children);
}

/// Fork a child that runs `f` (which does not return, or returns to `_exit(0)`), with the
/// agent's signal mask undone. `into`: a cgroup v2 directory (clone_into::open_v2) to start
/// the child in, where the kernel can (only while the agent is single-threaded); `f` is told
/// whether it started there (if not, it must join that group itself). The directory is
/// closed in both processes before `f` runs.
pub fn fork_child(into: Option<OwnedFd>, f: impl FnOnce(bool)) -> Result<libc::pid_t, String> {
    let cloned = into.as_ref().and_then(|fd| unsafe { clone_into::clone_into(fd) }.ok());
    let pid = match cloned {
        Some(pid) => pid,
        None => unsafe { libc::fork() },
    };
    if pid == -1 {
        return Err(format!("fork: {}", std::io::Error::last_os_error()));
    }
    drop(into);
    match pid {
        0 => {
            signals::reset_in_child();
            f(cloned.is_some());
            unsafe { libc::_exit(0) }
        }
        pid => Ok(pid),
    }
}
