//! Pre-flight: the scheduling a plan asks for, tried for real in a throwaway child before
//! anything starts, and a refusal explained by its true cause. Capability bits do not tell:
//! root in a container whose cgroup has no RT runtime holds CAP_SYS_NICE, yet SCHED_FIFO
//! fails with EPERM in every run after the start; a DEADLINE reservation passes every static
//! check and then fails the kernel's admission test. With a machine fixture the outcome and
//! the facts that explain it are the recorded ones (observe/facts.rs).
//!
//! The same holds for the rest of what a run uses, each tried for real on a live machine:
//! memory locking of the planned size (mlock in a throwaway child, then munlock), the perf
//! events a victim counts opened as the one group the run opens, the tracefs files the
//! run writes opened for writing, and the cgroup hierarchies the plan's groups need
//! (mounted, writable, the controller available where the groups go). Each refusal is one
//! line with the true cause and the fix.

use crate::observe::facts::Machine;
use crate::plan::Sched;

/// Run `f` in a forked child that exits at once; its Err text comes back through a pipe.
/// For probes whose effect must not touch the agent (locked memory, limits).
pub fn in_child(f: impl FnOnce() -> Result<(), String>) -> Result<(), String> {
    let mut fds = [0; 2];
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(format!("pipe: {}", std::io::Error::last_os_error()));
    }
    // The agent is single-threaded here (check runs before any thread or child exists).
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(format!("fork: {}", std::io::Error::last_os_error()));
    }
    if pid == 0 {
        unsafe { libc::close(fds[0]) };
        let code = match f() {
            Ok(()) => 0,
            Err(msg) => {
                unsafe { libc::write(fds[1], msg.as_ptr() as *const libc::c_void, msg.len()) };
                1
            }
        };
        unsafe { libc::_exit(code) };
    }
    unsafe { libc::close(fds[1]) };
    let mut file = unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(fds[0]) };
    let mut msg = String::new();
    let _ = std::io::Read::read_to_string(&mut file, &mut msg);
    let mut status = 0;
    while unsafe { libc::waitpid(pid, &mut status, 0) } < 0 {
        if std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return Err(format!("waitpid: {}", std::io::Error::last_os_error()));
        }
    }
    match (libc::WIFEXITED(status), libc::WEXITSTATUS(status)) {
        (true, 0) => Ok(()),
        (true, _) if !msg.is_empty() => Err(msg),
        _ => Err(format!("the pre-flight child ended with status {status}")),
    }
}

/// Lock `bytes` of fresh memory besides everything the process maps now (a run's child is a
/// fork of the agent, so it maps the same), as `mlockall(MCL_CURRENT | MCL_FUTURE)` and the
/// first touch of the buffers will; all of it unlocked and unmapped again.
pub fn lock(bytes: u64) -> Result<(), String> {
    in_child(|| {
        let err = |what: &str, e: std::io::Error| {
            let lim = {
                let mut r = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
                unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut r) };
                r.rlim_cur
            };
            let limit = if lim == libc::RLIM_INFINITY { "unlimited".to_string() } else { format!("{} KiB", lim >> 10) };
            match e.raw_os_error() {
                Some(libc::EPERM) | Some(libc::EAGAIN) | Some(libc::ENOMEM) if !crate::observe::facts::current().cap_ipc_lock => format!(
                    "locking {} MiB of memory was refused ({what}: {e}): this process lacks CAP_IPC_LOCK and RLIMIT_MEMLOCK is {limit}; \
                     raise the limit (ulimit -l, or LimitMEMLOCK= of the service) to at least {} MiB, grant CAP_IPC_LOCK (root with full capabilities has it), or set lock_memory = false",
                    bytes >> 20, (bytes >> 20) + 64),
                _ => format!("locking {} MiB of memory was refused ({what}: {e}) although RLIMIT_MEMLOCK is {limit}: the machine has too little \
                     free memory to pin it; use smaller buffers or set lock_memory = false", bytes >> 20),
            }
        };
        if unsafe { libc::mlockall(libc::MCL_CURRENT) } != 0 {
            return Err(err("mlockall", std::io::Error::last_os_error()));
        }
        if bytes > 0 {
            let len = bytes as usize;
            let p = unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0) };
            if p == libc::MAP_FAILED {
                return Err(err("mmap", std::io::Error::last_os_error()));
            }
            let r = unsafe { libc::mlock(p, len) };
            let e = std::io::Error::last_os_error();
            unsafe {
                libc::munlock(p, len);
                libc::munmap(p, len);
            }
            if r != 0 {
                return Err(err("mlock", e));
            }
        }
        unsafe { libc::munlockall() };
        Ok(())
    })
}

/// Open for writing (nothing written) every tracefs file a run with `events` writes:
/// instances/ (where its private instance goes), and per instance tracing_on,
/// buffer_size_kb, trace_clock and each event's enable (an instance has the files of the
/// root). Err: the file, the cause, the fix.
pub fn tracefs_writable(root: &std::path::Path, events: &[String]) -> Result<(), String> {
    let mut files = vec![root.join("tracing_on"), root.join("buffer_size_kb"), root.join("trace_clock")];
    for ev in events {
        files.push(crate::observe::trace::event_dir(root, ev)?.join("enable"));
    }
    let why = |path: &std::path::Path, e: std::io::Error| match e.raw_os_error() {
        Some(libc::EROFS) => format!("tracefs at {} is mounted read-only ({}: {e}); mount it read-write (mount -o remount,rw {}) or leave trace out",
            root.display(), path.display(), root.display()),
        _ => format!("{} cannot be written ({e}); kernel tracing needs write access to tracefs: run as root outside a restricted container, or leave trace out",
            path.display()),
    };
    let instances = root.join("instances");
    let c = std::ffi::CString::new(instances.as_os_str().as_encoded_bytes()).map_err(|_| "tracefs path holds a NUL byte".to_string())?;
    if unsafe { libc::access(c.as_ptr(), libc::W_OK) } != 0 {
        return Err(why(&instances, std::io::Error::last_os_error()));
    }
    for f in files {
        std::fs::OpenOptions::new().write(true).open(&f).map_err(|e| why(&f, e))?;
    }
    Ok(())
}

/// Can groups using `controller` be made where the run makes them (`xtalk-<pid>` at the
/// root of the controller's hierarchy)? The hierarchy must be writable and, for cgroup v2,
/// offer the controller there, and let it be enabled below (a non-root v2 group that holds
/// processes refuses: no internal processes). Err: the cgroup, the cause, the fix.
pub fn cgroup_usable(ctl: &crate::observe::cgroupfs::Controller) -> Result<(), String> {
    use crate::observe::cgroupfs::Version;
    let dir = &ctl.mount;
    let name = ctl.name;
    let c = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()).map_err(|_| "cgroup path holds a NUL byte".to_string())?;
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } == 0 && st.f_flag & libc::ST_RDONLY != 0 {
        return Err(format!("the {name} controller's hierarchy {} is mounted read-only (as in many containers): the run cannot make its groups there; \
            remount it read-write, run on the host, or leave out the group settings that need {name}", dir.display()));
    }
    if unsafe { libc::access(c.as_ptr(), libc::W_OK) } != 0 {
        return Err(format!("cannot create groups in {} for the {name} controller ({}); run as root, or leave out the group settings that need {name}",
            dir.display(), std::io::Error::last_os_error()));
    }
    if ctl.version == Version::V2 {
        let read = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap_or_default();
        let has = |text: String| text.split_whitespace().any(|c| c == name);
        if !has(read("cgroup.controllers")) {
            return Err(format!("the {name} controller is not available in cgroup {} (not in its cgroup.controllers): enable it in the parent's \
                cgroup.subtree_control, or leave out the group settings that need {name}", dir.display()));
        }
        let is_root = !dir.join("cgroup.type").exists();
        if !is_root && !has(read("cgroup.subtree_control")) && !read("cgroup.procs").trim().is_empty() {
            return Err(format!("cgroup {} holds processes, so cgroup v2 will not enable the {name} controller for groups below it (no internal \
                processes); move those processes into a leaf group (e.g. {}/init) first, or leave out the group settings that need {name}",
                dir.display(), dir.display()));
        }
    }
    Ok(())
}

/// One line saying why the kernel refused `s` with `e` on machine `m`, and what to do.
pub fn refusal(s: &Sched, e: &std::io::Error, m: &Machine) -> String {
    let policy = match s {
        Sched::Fifo { .. } => "SCHED_FIFO",
        Sched::Rr { .. } => "SCHED_RR",
        Sched::Deadline { .. } => "SCHED_DEADLINE",
        Sched::Other { .. } => "a negative nice",
    };
    let global = m.rt_runtime_us.map(|v| v.to_string()).unwrap_or_default();
    match (e.raw_os_error(), s) {
        (Some(libc::EBUSY), Sched::Deadline { runtime_ns, period_ns, .. }) => format!(
            "{policy} admission refused: {runtime_ns} ns every {period_ns} ns does not fit in the bandwidth left for deadline tasks \
             (kernel.sched_rt_runtime_us = {}); shorten the runtime, lengthen the period, or stop other deadline tasks", global.trim()),
        (Some(libc::EPERM), Sched::Fifo { .. } | Sched::Rr { .. }) if m.cap_sys_nice => {
            if let Some(dir) = crate::observe::cgroupfs::own_v2_cpu_group() {
                return format!(
                    "{policy} refused although this process has CAP_SYS_NICE: its group {} has the cgroup v2 cpu controller, and the kernel's RT \
                     group scheduling gives tasks below such a group no real-time runtime; leave cpu_max and cpu_weight off the groups of \
                     real-time tasks and their siblings (a cpuset bounds their CPUs), or use policy 'deadline'", dir.display());
            }
            match m.cpu_group.clone() {
                Some((dir, Some(0))) => format!(
                    "{policy} refused although this process has CAP_SYS_NICE: its cgroup {} has cpu.rt_runtime_us = 0 (RT group scheduling gives \
                     its tasks no real-time time); run xtalk from the root cgroup, give that group RT runtime (write e.g. 950000 to {}, \
                     parents first), or use policy 'deadline'", dir.display(), dir.join("cpu.rt_runtime_us").display()),
                Some((dir, None)) if dir != m.controller("cpu").map(|c| c.mount).unwrap_or_default() => format!(
                    "{policy} refused although this process has CAP_SYS_NICE: it sits in cgroup {} and the kernel's RT group scheduling \
                     gives tasks of non-root cgroup v2 groups no real-time runtime; run xtalk from the root cgroup, or use policy 'deadline'",
                    dir.display()),
                _ if global.trim() == "0" => format!("{policy} refused: kernel.sched_rt_runtime_us is 0; set it (e.g. 950000) or use policy 'deadline'"),
                _ => format!("{policy} refused although this process has CAP_SYS_NICE ({e}); a security module or container policy forbids it: use policy 'deadline' or 'other'"),
            }
        }
        (Some(libc::EPERM), _) => format!("{policy} not permitted ({e}): needs CAP_SYS_NICE; run as root or use policy 'other'"),
        _ => format!("{policy} refused: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifo_refusal_names_the_group_without_rt_runtime() {
        // The facts of a root process in a v1 group with no RT runtime, as a fixture records them.
        let m = Machine { cap_sys_nice: true, cpu_group: Some(("/sys/fs/cgroup/cpu/ci/job7".into(), Some(0))), ..Machine::live() };
        let line = refusal(&Sched::Fifo { priority: 90 }, &std::io::Error::from_raw_os_error(libc::EPERM), &m);
        assert!(line.contains("/sys/fs/cgroup/cpu/ci/job7 has cpu.rt_runtime_us = 0") && line.contains("'deadline'") && !line.contains('\n'), "{line}");
    }

    #[test]
    fn a_child_says_why_it_failed() {
        assert_eq!(in_child(|| Err("no luck".into())), Err("no luck".to_string()));
        assert!(in_child(|| Ok(())).is_ok());
        assert!(lock(1 << 20).is_ok() || !crate::observe::facts::current().cap_ipc_lock);
    }

    /// A cgroup v2 directory as the kernel shows one (the files the probe reads), made in a
    /// temporary directory: the v2 refusals cannot be made live on a v1 machine.
    fn v2_dir(controllers: &str, subtree: &str, procs: &str, root: bool) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("xtalk-preflight-test-{}-{controllers}-{subtree}-{}-{root}", std::process::id(), procs.len()));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("cgroup.controllers"), controllers).unwrap();
        std::fs::write(d.join("cgroup.subtree_control"), subtree).unwrap();
        std::fs::write(d.join("cgroup.procs"), procs).unwrap();
        if !root {
            std::fs::write(d.join("cgroup.type"), "domain\n").unwrap();
        }
        d
    }

    #[test]
    fn v2_controllers_missing_or_blocked_by_processes_are_named() {
        use crate::observe::cgroupfs::{Controller, Version};
        let probe = |d: &std::path::Path| cgroup_usable(&Controller { name: "cpuset", version: Version::V2, mount: d.to_path_buf() });
        let cases = [
            (v2_dir("cpu memory pids", "", "", false), Some("not available in cgroup")),
            (v2_dir("cpuset cpu", "", "1234\n", false), Some("holds processes")),
            (v2_dir("cpuset cpu", "cpuset", "1234\n", false), None),
            (v2_dir("cpuset cpu", "", "1234\n", true), None),
        ];
        for (d, want) in &cases {
            let got = probe(d);
            let _ = std::fs::remove_dir_all(d);
            match (want, got) {
                (Some(w), Err(line)) => assert!(line.contains(w) && line.contains(d.to_str().unwrap()) && !line.contains('\n'), "{line}"),
                (None, Ok(())) => {}
                (w, g) => panic!("{}: wanted {w:?}, got {g:?}", d.display()),
            }
        }
    }

    #[test]
    fn admission_refusal_names_the_numbers() {
        let e = std::io::Error::from_raw_os_error(libc::EBUSY);
        let s = Sched::Deadline { runtime_ns: 9_000_000, deadline_ns: 10_000_000, period_ns: 10_000_000 };
        let line = refusal(&s, &e, &Machine::live());
        assert!(line.contains("9000000 ns every 10000000 ns") && !line.contains('\n'), "{line}");
    }
}
