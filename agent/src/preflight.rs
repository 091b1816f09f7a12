//! Pre-flight: the scheduling a plan asks for, tried for real in a throwaway child before
//! anything starts, and a refusal explained by its true cause. Capability bits do not tell:
//! root in a container whose cgroup has no RT runtime holds CAP_SYS_NICE, yet SCHED_FIFO
//! fails with EPERM in every run after the start; a DEADLINE reservation passes every static
//! check and then fails the kernel's admission test.

use crate::launch::cgroups;
use crate::plan::Sched;
use std::path::PathBuf;

/// Try `s` in a forked child that exits at once; Ok when the kernel accepted it.
pub fn try_in_child(s: &Sched) -> Result<(), std::io::Error> {
    // The agent is single-threaded here (check runs before any thread or child exists).
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(std::io::Error::last_os_error());
    }
    if pid == 0 {
        let code = match crate::launch::setup::try_sched(s) {
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

/// The cpu-controller group this process sits in and its RT runtime, when RT group
/// scheduling is there to read (cgroup v1 cpu controller with cpu.rt_runtime_us).
fn rt_group() -> Option<(PathBuf, Option<i64>)> {
    let ctl = cgroups::controller("cpu")?;
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let rel = own.lines().find_map(|l| {
        let mut f = l.splitn(3, ':');
        let (_, names, path) = (f.next()?, f.next()?, f.next()?);
        let v1 = names.split(',').any(|n| n == "cpu");
        ((ctl.version == cgroups::Version::V1 && v1) || (ctl.version == cgroups::Version::V2 && names.is_empty())).then(|| path.to_string())
    })?;
    let dir = ctl.mount.join(rel.trim_start_matches('/'));
    let runtime = std::fs::read_to_string(dir.join("cpu.rt_runtime_us")).ok().and_then(|t| t.trim().parse().ok());
    Some((dir, runtime))
}

/// One line saying why the kernel refused `s` with `e`, and what to do.
pub fn refusal(s: &Sched, e: &std::io::Error) -> String {
    let policy = match s {
        Sched::Fifo { .. } => "SCHED_FIFO",
        Sched::Rr { .. } => "SCHED_RR",
        Sched::Deadline { .. } => "SCHED_DEADLINE",
        Sched::Other { .. } => "a negative nice",
    };
    let global = std::fs::read_to_string("/proc/sys/kernel/sched_rt_runtime_us").unwrap_or_default();
    match (e.raw_os_error(), s) {
        (Some(libc::EBUSY), Sched::Deadline { runtime_ns, period_ns, .. }) => format!(
            "{policy} admission refused: {runtime_ns} ns every {period_ns} ns does not fit in the bandwidth left for deadline tasks \
             (kernel.sched_rt_runtime_us = {}); shorten the runtime, lengthen the period, or stop other deadline tasks", global.trim()),
        (Some(libc::EPERM), Sched::Fifo { .. } | Sched::Rr { .. }) if crate::observe::machine::has_cap_sys_nice() => {
            match rt_group() {
                Some((dir, Some(0))) => format!(
                    "{policy} refused although this process has CAP_SYS_NICE: its cgroup {} has cpu.rt_runtime_us = 0 (RT group scheduling gives \
                     its tasks no real-time time); run xtalk from the root cgroup, give that group RT runtime (write e.g. 950000 to {}, \
                     parents first), or use policy 'deadline'", dir.display(), dir.join("cpu.rt_runtime_us").display()),
                Some((dir, None)) if dir != cgroups::controller("cpu").map(|c| c.mount).unwrap_or_default() => format!(
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
    fn other_policy_is_always_accepted() {
        assert!(try_in_child(&Sched::Other { nice: 0 }).is_ok());
    }

    #[test]
    fn admission_refusal_names_the_numbers() {
        let e = std::io::Error::from_raw_os_error(libc::EBUSY);
        let s = Sched::Deadline { runtime_ns: 9_000_000, deadline_ns: 10_000_000, period_ns: 10_000_000 };
        let line = refusal(&s, &e);
        assert!(line.contains("9000000 ns every 10000000 ns") && !line.contains('\n'), "{line}");
    }
}
