//! Hard limits the fault-injecting enemies put on themselves before misbehaving, so a test
//! never takes the machine down: resource limits apply to root too (RLIMIT_AS, NOFILE,
//! FSIZE), and a failure to set one ends the enemy before its load starts.

/// Set the soft and hard limit of `resource` to `value`, or end the enemy (status 3).
pub fn cap(resource: crate::observe::machine::RlimitResource, value: u64, what: &str) {
    let r = libc::rlimit { rlim_cur: value, rlim_max: value };
    if unsafe { libc::setrlimit(resource, &r) } != 0 {
        eprintln!("enemy: setrlimit({what}, {value}): {}", std::io::Error::last_os_error());
        unsafe { libc::_exit(3) };
    }
}

/// Fork a child of the enemy that dies with it and runs `f` (never returns into the loop).
pub fn fork_child(name: &str, f: impl FnOnce() -> i32) -> libc::pid_t {
    let parent = unsafe { libc::getpid() };
    match unsafe { libc::fork() } {
        0 => {
            crate::launch::setup::set_name(name);
            let _ = crate::launch::setup::die_with_parent(parent);
            unsafe { libc::_exit(f()) }
        }
        pid => pid, // −1 on failure: the caller counts it as a refused fork
    }
}
