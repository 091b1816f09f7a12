//! Pre-flight: the scheduling a plan asks for, tried for real in a throwaway child before
//! anything starts, and a refusal explained by its true cause. Capability bits do not tell:
//! root in a container whose cgroup has no RT runtime holds CAP_SYS_NICE, yet SCHED_FIFO
//! fails with EPERM in every run after the start; a DEADLINE reservation passes every static
//! check and then fails the kernel's admission test. With a machine fixture the outcome and
//! the facts that explain it are the recorded ones (observe/facts.rs).

use crate::observe::facts::Machine;
use crate::plan::Sched;

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
            if let Some(dir) = crate::launch::cgroups::own_v2_cpu_group() {
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
    fn other_policy_is_always_accepted() {
        assert!(try_in_child(&Sched::Other { nice: 0 }).is_ok());
    }

    #[test]
    fn fifo_refusal_names_the_group_without_rt_runtime() {
        // The facts of a root process in a v1 group with no RT runtime, as a fixture records them.
        let m = Machine { cap_sys_nice: true, cpu_group: Some(("/sys/fs/cgroup/cpu/ci/job7".into(), Some(0))), ..Machine::live() };
        let line = refusal(&Sched::Fifo { priority: 90 }, &std::io::Error::from_raw_os_error(libc::EPERM), &m);
        assert!(line.contains("/sys/fs/cgroup/cpu/ci/job7 has cpu.rt_runtime_us = 0") && line.contains("'deadline'") && !line.contains('\n'), "{line}");
    }

    #[test]
    fn admission_refusal_names_the_numbers() {
        let e = std::io::Error::from_raw_os_error(libc::EBUSY);
        let s = Sched::Deadline { runtime_ns: 9_000_000, deadline_ns: 10_000_000, period_ns: 10_000_000 };
        let line = refusal(&s, &e, &Machine::live());
        assert!(line.contains("9000000 ns every 10000000 ns") && !line.contains('\n'), "{line}");
    }
}
