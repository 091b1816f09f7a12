//! The agent waits for its children by blocking on signals (sigtimedwait): no polling
//! while the victim measures. Children get the default dispositions back.

use std::mem::MaybeUninit;

pub const WATCHED: &[libc::c_int] = &[libc::SIGCHLD, libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGUSR1];

extern "C" fn noop(_: libc::c_int) {}

fn set_of(sigs: &[libc::c_int]) -> libc::sigset_t {
    let mut set = MaybeUninit::<libc::sigset_t>::uninit();
    unsafe {
        libc::sigemptyset(set.as_mut_ptr());
        for &s in sigs {
            libc::sigaddset(set.as_mut_ptr(), s);
        }
        set.assume_init()
    }
}

/// Block the watched signals in the agent (before any fork). SIGCHLD gets a no-op handler
/// so that it is queued rather than discarded.
pub fn block_watched() {
    unsafe {
        libc::signal(libc::SIGCHLD, noop as *const () as libc::sighandler_t);
        let set = set_of(WATCHED);
        libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
}

/// In a child: unblock, restore defaults, and ignore the terminal's SIGINT (the agent
/// decides how its children end).
pub fn reset_in_child() {
    unsafe {
        libc::signal(libc::SIGCHLD, libc::SIG_DFL);
        libc::signal(libc::SIGINT, libc::SIG_IGN);
        let set = set_of(WATCHED);
        libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
    }
}

/// Wait for one watched signal until `deadline_ns` (CLOCK_MONOTONIC). None on time-out.
pub fn wait_until(deadline_ns: i64) -> Option<libc::c_int> {
    let set = set_of(WATCHED);
    loop {
        let left = deadline_ns - crate::observe::clock::mono_ns();
        if left <= 0 {
            return None;
        }
        let ts = libc::timespec { tv_sec: left / 1_000_000_000, tv_nsec: left % 1_000_000_000 };
        let rc = unsafe { libc::sigtimedwait(&set, std::ptr::null_mut(), &ts) };
        if rc > 0 {
            return Some(rc);
        }
        let e = std::io::Error::last_os_error().raw_os_error();
        if e == Some(libc::EAGAIN) {
            return None;
        }
    }
}

/// Restore the agent's mask when it is done with its children.
pub fn unblock_watched() {
    unsafe {
        let set = set_of(WATCHED);
        libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
    }
}
