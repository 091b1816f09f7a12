//! Start a child directly in a cgroup v2 directory: `clone3` with `CLONE_INTO_CGROUP`
//! (Linux 5.7). A child forked and then moved (its pid written to `cgroup.procs`) waits in
//! the kernel for an RCU grace period, since a migration takes `cgroup_threadgroup_rwsem`
//! for writing (percpu_down_write): 2–18 ms per run on the 2-vCPU guest (strace), beside a
//! plan's settle of 10 ms. A clone into the group takes that lock for reading only.
//!
//! The raw system call skips what glibc's fork() does around it, so it is kept to what
//! holds without that: glibc's fork handlers (nothing linked into the agent registers one)
//! and the reset of glibc's internal locks in the child (malloc, stdio, the loader: no one
//! holds them when the caller is the process's only thread, hence `single_threaded`). The
//! two things the kernel gives a fork's child differently are done here as glibc does: the
//! thread descriptor's TID (CLONE_CHILD_SETTID / CLEARTID on the address glibc gave the
//! kernel at start-up) and the robust-futex list (registered again in the child).

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

/// From <linux/sched.h> (the kernel's ABI; the libc crate has it for glibc targets only).
const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;
/// From <linux/magic.h>: what statfs says of a cgroup2 file system.
const CGROUP2_SUPER_MAGIC: i64 = 0x6367_7270;

/// `struct clone_args` up to `cgroup` (CLONE_ARGS_SIZE_VER2, 88 bytes).
#[repr(C)]
#[derive(Default)]
struct CloneArgs {
    flags: u64,
    pidfd: u64,
    child_tid: u64,
    parent_tid: u64,
    exit_signal: u64,
    stack: u64,
    stack_size: u64,
    tls: u64,
    set_tid: u64,
    set_tid_size: u64,
    cgroup: u64,
}

/// Set once the kernel said it cannot (no clone3 before 5.3, no CLONE_INTO_CGROUP before
/// 5.7, a seccomp filter refusing clone3): later children are forked without asking again.
static UNAVAILABLE: AtomicBool = AtomicBool::new(false);

/// `dir` opened for `clone_into` when it is a directory of a cgroup v2 file system (None: a
/// v1 hierarchy, resctrl, or not there).
pub fn open_v2(dir: &Path) -> Option<OwnedFd> {
    let c = CString::new(dir.as_os_str().as_bytes()).ok()?;
    let raw = unsafe { libc::open(c.as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC) };
    if raw < 0 {
        return None;
    }
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    let v2 = unsafe { libc::fstatfs(fd.as_raw_fd(), &mut st) } == 0 && st.f_type as i64 == CGROUP2_SUPER_MAGIC;
    v2.then_some(fd)
}

/// Is the caller the process's only thread (the `Threads:` line of /proc/self/status)?
pub fn single_threaded() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find_map(|l| l.strip_prefix("Threads:").map(|n| n.trim() == "1")))
        .unwrap_or(false)
}

/// fork(), with the child starting in the cgroup v2 directory `cgroup` (from `open_v2`):
/// the child's pid in the parent, 0 in the child, or the kernel's errno when it refused (no
/// child; the caller forks instead).
///
/// # Safety
/// As fork(), and the caller must be the process's only thread (`single_threaded`).
pub unsafe fn clone_into(cgroup: &OwnedFd) -> Result<libc::pid_t, i32> {
    if UNAVAILABLE.load(Ordering::Relaxed) {
        return Err(libc::ENOSYS);
    }
    // The robust list and the TID address are per thread: the caller's are the child's.
    let mut head: *mut libc::c_void = std::ptr::null_mut();
    let mut len: libc::size_t = 0;
    let robust = libc::syscall(libc::SYS_get_robust_list, 0, &mut head, &mut len) == 0 && !head.is_null();
    // PR_GET_TID_ADDRESS needs CONFIG_CHECKPOINT_RESTORE; without it the child's descriptor
    // keeps the parent's TID, which only priority-inheriting or robust pthread mutexes read
    // (the agent uses neither).
    let mut tid: *mut libc::c_int = std::ptr::null_mut();
    let settid = libc::prctl(libc::PR_GET_TID_ADDRESS, &mut tid as *mut *mut libc::c_int) == 0 && !tid.is_null();
    let mut args = CloneArgs { flags: CLONE_INTO_CGROUP, exit_signal: libc::SIGCHLD as u64, cgroup: cgroup.as_raw_fd() as u64, ..Default::default() };
    if settid {
        args.flags |= (libc::CLONE_CHILD_SETTID | libc::CLONE_CHILD_CLEARTID) as u64;
        args.child_tid = tid as u64;
    }
    match libc::syscall(libc::SYS_clone3, &args as *const CloneArgs, std::mem::size_of::<CloneArgs>()) {
        0 => {
            if robust {
                libc::syscall(libc::SYS_set_robust_list, head, len);
            }
            Ok(0)
        }
        pid if pid > 0 => Ok(pid as libc::pid_t),
        _ => {
            let e = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
            if matches!(e, libc::ENOSYS | libc::EINVAL | libc::E2BIG | libc::EPERM) {
                UNAVAILABLE.store(true, Ordering::Relaxed);
            }
            Err(e)
        }
    }
}

#[cfg(test)]
#[path = "clone_into_tests.rs"]
mod tests;
