//! The agent waits for its children by blocking on signals (sigtimedwait): no polling
//! while the victim measures. Children get the default dispositions back.

use std::mem::MaybeUninit;

pub const WATCHED: &[libc::c_int] = &[libc::SIGCHLD, libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGUSR1];

/// Signals whose default action would end the agent: blocked too, though not waited for,
/// so that none can end it between its first change to the machine and the last undo.
const ALSO_BLOCKED: &[libc::c_int] = &[libc::SIGQUIT, libc::SIGUSR2, libc::SIGALRM, libc::SIGVTALRM, libc::SIGPROF, libc::SIGPIPE,
    libc::SIGXCPU, libc::SIGXFSZ, libc::SIGPWR, libc::SIGSTKFLT, libc::SIGIO];

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

/// Block the watched signals in the agent, for the whole run: a termination signal then
/// ends the run through `wait_until`, never the agent, and one that arrives during teardown
/// is consumed there and changes nothing (SIGKILL aside, the agent always restores the
/// machine). SIGCHLD gets a no-op handler so that it is queued rather than discarded.
pub fn block_watched() {
    unsafe {
        libc::signal(libc::SIGCHLD, noop as *const () as libc::sighandler_t);
        let set = set_of(&[WATCHED, ALSO_BLOCKED].concat());
        libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
}

/// In a child: unblock everything, restore defaults, and ignore the terminal's SIGINT (the
/// agent decides how its children end).
pub fn reset_in_child() {
    unsafe {
        libc::signal(libc::SIGCHLD, libc::SIG_DFL);
        libc::signal(libc::SIGINT, libc::SIG_IGN);
        let set = set_of(&[]);
        libc::sigprocmask(libc::SIG_SETMASK, &set, std::ptr::null_mut());
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
