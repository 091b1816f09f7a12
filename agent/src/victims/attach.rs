//! `attach` victim: a process that is already running (started by systemd, a container, a
//! launcher), measured for one window of `period_ns` while the enemies run. Nothing is forked
//! or exec'd for it and it is never signalled, moved or re-prioritised: the victim process of
//! the run is a watcher that, past the barrier, waits out the window on a pidfd of the target
//! (woken only if the target ends) and records the window as job 0 with the target's CPU time
//! in it. The jobs themselves come from the kernel trace of the target's threads (the host's
//! trace/activations.py). An end of the target during the window fails the run.

use crate::observe::clock::{current_cpu, mono_ns, read, sleep_until};
use super::body::{BodyKind, Run};
use crate::declare::{Param, Values};
use crate::launch::setup;
use crate::plan::{err, refused, JobsFrom, PlanError, Victim};
use crate::record::jobs::{JobRecord, FLAG_FAILED, FLAG_MISSED};
use std::collections::BTreeMap;

/// Whether `pid` is a live process (not a zombie): Err says why not, in one line.
pub fn check_target(pid: i32) -> Result<(), String> {
    if pid <= 1 {
        return Err(format!("{pid} is not a process xtalk may attach to; give the PID of a running program (ps -e)"));
    }
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).map_err(|_| format!("no process {pid} is running; give the PID of a running program (ps -e)"))?;
    // The fields follow the parenthesised name (which may itself hold ") "): state, ppid,
    // pgrp, session, tty_nr, tpgid, flags, ...
    let rest: Vec<&str> = stat.rfind(')').map(|i| stat[i + 1..].split_whitespace().collect()).unwrap_or_default();
    let state = rest.first().copied().unwrap_or("?");
    let flags: u64 = rest.get(6).and_then(|f| f.parse().ok()).unwrap_or(0);
    if state == "Z" || state == "X" {
        return Err(format!("process {pid} has exited (it is a zombie); give the PID of a running program"));
    }
    // A kernel thread (PF_KTHREAD) has no program to measure.
    const PF_KTHREAD: u64 = 0x0020_0000;
    if flags & PF_KTHREAD != 0 {
        let name = stat.split_once('(').and_then(|(_, r)| r.rsplit_once(')')).map(|(n, _)| n).unwrap_or("?");
        return Err(format!("process {pid} is a kernel thread ({name}); give the PID of a running program (ps -e)"));
    }
    if pid == std::process::id() as i32 {
        return Err(format!("{pid} is this agent"));
    }
    Ok(())
}

/// The target's threads now: thread id -> name (its `comm`), from /proc/PID/task.
pub fn threads(pid: i32) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    if let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for e in dir.flatten() {
            let tid = e.file_name().to_string_lossy().into_owned();
            let comm = std::fs::read_to_string(e.path().join("comm")).unwrap_or_default();
            out.insert(tid, comm.trim_end().to_string());
        }
    }
    out
}

/// CPU time the whole process has used (ns) on its CPU-time clock; 0 when it has none.
fn process_cpu_ns(clock: Option<libc::clockid_t>) -> i64 {
    clock.map(read).unwrap_or(0)
}

fn cpu_clock(pid: i32) -> Option<libc::clockid_t> {
    let mut id: libc::clockid_t = 0;
    (unsafe { libc::clock_getcpuclockid(pid, &mut id) } == 0).then_some(id)
}

/// A pidfd of `pid` (readable once it ends), or -1.
fn pidfd(pid: i32) -> i32 {
    unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) as i32 }
}

/// In the victim process, after the barrier: wait out the window, record it, exit. Never returns.
fn watch(cx: &super::Ctx) -> ! {
    let (v, shared, log) = (cx.victim, cx.shared, cx.log);
    if let Err(msg) = setup::die_with_parent(cx.parent) {
        cx.give_up(&format!("{}: {msg}", cx.who), 3);
    }
    log.prefault();
    shared.barrier_wait();
    cx.passed_barrier();
    let pid = BODY.values(&v.body).u64("pid") as i32;
    let fd = pidfd(pid);
    let clock = cpu_clock(pid);
    let t0 = shared.first_release(cx.settle_ns);
    log.set_t0(t0);
    sleep_until(t0);
    let (start, cpu0) = (mono_ns(), process_cpu_ns(clock));
    let end_at = t0 + v.period_ns as i64;
    let mut ended = check_target(pid).is_err();
    while !ended {
        let left = end_at - mono_ns();
        if left <= 0 {
            break;
        }
        if fd < 0 {
            // No pidfd on this kernel: sleep the window out, then look.
            sleep_until(end_at);
            ended = check_target(pid).is_err();
            break;
        }
        let mut p = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
        let ms = ((left + 999_999) / 1_000_000).min(i32::MAX as i64) as i32;
        if unsafe { libc::poll(&mut p, 1, ms) } > 0 {
            ended = true;
        }
    }
    let end = mono_ns();
    let mut r = JobRecord { job: 0, release_ns: t0, wakeup_ns: start, start_ns: start, end_ns: end, cpu_time_ns: process_cpu_ns(clock) - cpu0, cpu_start: current_cpu(), cpu_end: current_cpu(), ..Default::default() };
    if ended {
        r.flags |= FLAG_FAILED | FLAG_MISSED;
    }
    log.push(0, &r);
    if ended {
        cx.slot.fail(&format!("{}: attached process {pid} ended during the window", cx.who));
        unsafe { libc::_exit(1) }
    }
    unsafe { libc::_exit(0) }
}

/// The target's threads for run.json: those at `before` and those now, together.
pub fn attached_threads(v: &Victim, before: &BTreeMap<String, String>) -> Option<(i32, BTreeMap<String, String>)> {
    let pid = pid_of(v)?;
    let mut all = before.clone();
    all.extend(threads(pid));
    Some((pid, all))
}

/// The process an `attach` body watches (None for any other body): the run's prepare and
/// outcome phases list its threads.
pub fn pid_of(v: &Victim) -> Option<i32> {
    (v.body.kind == BODY.name).then(|| BODY.values(&v.body).u64("pid") as i32)
}

/// The `attach` body (registry: mod.rs): the process only watches the target for one window
/// (the victim's `period_ns`), before any set-up of its own; the jobs come from the trace.
pub const BODY: BodyKind = BodyKind::new("attach", "a process already running, watched for one window; never forked, signalled, moved or re-prioritised", &[
    Param::u64("pid", "the process to watch").range(2, i32::MAX as u64),
    Param::json("jobs_from", "jobs_from", "where the host takes its jobs from (the trace)"),
], Run::Watch(watch))
.check(check);

fn check(a: &Values, v: &Victim, at: &str, _: &[usize]) -> Result<(), PlanError> {
    check_target(a.u64("pid") as i32).or_else(|e| refused(format!("{at}.body.pid"), e))?;
    if let Err(e) = a.json::<JobsFrom>("jobs_from") {
        return err(format!("{at}.body.jobs_from"), format!("{e}; fix it"));
    }
    if v.jobs != 1 || v.warmup_jobs != 0 {
        return err(format!("{at}.jobs"), "an attached process is watched for one window (period_ns): jobs = 1, warmup_jobs = 0");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_running_program_is_a_target() {
        assert!(check_target(1).unwrap_err().contains("not a process xtalk may attach to"));
        assert!(check_target(0).is_err() && check_target(-5).is_err());
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id() as i32;
        child.wait().unwrap();
        assert!(check_target(pid).unwrap_err().contains(&format!("no process {pid} is running")));
        if std::fs::read_to_string("/proc/2/comm").is_ok_and(|c| c.trim() == "kthreadd") {
            assert!(check_target(2).unwrap_err().contains("kernel thread (kthreadd)"));
        }
        assert!(check_target(std::process::id() as i32).unwrap_err().contains("this agent"));
        let mut sleeper = std::process::Command::new("sleep").arg("5").spawn().unwrap();
        assert_eq!(check_target(sleeper.id() as i32), Ok(()));
        let named = (0..200).any(|_| {
            std::thread::sleep(std::time::Duration::from_millis(5));
            threads(sleeper.id() as i32).values().any(|n| n == "sleep")
        });
        assert!(named, "{:?}", threads(sleeper.id() as i32));
        sleeper.kill().unwrap();
        sleeper.wait().unwrap();
    }
}
