//! Memory-bandwidth regulator (seed 003 part 2; MemGuard in spirit), a process of its own
//! (`xt-regulator`) on the housekeeping CPU at SCHED_FIFO priority.
//!
//! Budget mode: each regulated enemy may touch `budget` bytes per period. Accounting is
//! cooperative: xtalk's enemies publish the bytes they touched in their shared slot (labelled
//! "cooperative" in the results).
//! - `signal` throttle: at each period start the regulator publishes the enemy's allowance
//!   (bytes so far + budget); the enemy stops itself (SIGSTOP) the moment it crosses it, which
//!   plays the part of MemGuard's counter-overflow interrupt (overshoot: one chunk), and the
//!   regulator resumes it (SIGCONT) when the period ends.
//! - `freeze` throttle, or `hardware` source: the regulator polls, sleeping until the earliest
//!   predicted exhaustion (remaining budget / last observed rate), and stops the enemy or
//!   freezes its group. The hardware source counts a perf event attached to each enemy (LLC
//!   misses by default, × 64 bytes), so any program can be regulated, as MemGuard does.
//!
//! Feedback mode: enemies are throttled while the victim's last job took longer than its
//! target (an ε).

use crate::launch::cgroups::set_frozen;
use crate::launch::shm::Shared;
use crate::observe::cgroupfs::Version;
use crate::observe::clock::{mono_ns, sleep_until};
use crate::plan::{Regulator, Throttle};
use std::path::PathBuf;
use std::sync::atomic::Ordering;

/// A regulated enemy: its slot index, pid and (freeze mode) its group's freezer.
pub struct Target {
    pub slot: usize,
    pub pid: libc::pid_t,
    pub freezer: Option<(PathBuf, Version)>,
}

fn throttle(t: &Target, how: Throttle, on: bool) {
    match (how, &t.freezer) {
        (Throttle::Freeze, Some((dir, v))) => {
            let _ = set_frozen(dir, v, on);
        }
        _ => unsafe {
            libc::kill(t.pid, if on { libc::SIGSTOP } else { libc::SIGCONT });
        },
    }
}

/// Entry point of the forked regulator process: the housekeeping CPUs, SCHED_FIFO at the
/// plan's priority, then the loop until the run stops.
pub fn regulator_main(r: &Regulator, shared: &Shared, targets: &[Target], parent: libc::pid_t, housekeeping: &Option<Vec<usize>>) {
    use crate::launch::setup;
    setup::set_name("xt-regulator");
    let placement = crate::plan::Placement { cpus: housekeeping.clone() };
    let ready = setup::die_with_parent(parent)
        .and_then(|_| setup::apply_placement(&placement))
        .and_then(|_| setup::apply_sched(&crate::plan::Sched::Fifo { priority: r.priority }));
    if ready.is_ok() {
        run(r, shared, targets);
    }
}

/// What the regulator did, for run.json.
pub fn report(r: &Regulator, shared: &Shared) -> crate::outcome::RegulatorReport {
    let s = &shared.ctl().regulator;
    let throttles = s.throttles.load(Ordering::Acquire);
    crate::outcome::RegulatorReport {
        mode: if r.budget_bytes.is_some() { "budget" } else { "feedback" }.into(),
        accounting: match r.source {
            crate::plan::Source::Cooperative => "cooperative".to_string(),
            crate::plan::Source::Hardware => format!("hardware: {} × {} bytes", r.event, r.bytes_per_event),
        },
        period_us: r.period_us,
        budget_bytes: r.budget_bytes,
        wakeups: s.wakeups.load(Ordering::Acquire),
        periods: s.periods.load(Ordering::Acquire),
        throttles,
        overshoot_bytes_mean: s.overshoot_bytes.load(Ordering::Acquire) as f64 / throttles.max(1) as f64,
        overshoot_bytes_max: s.overshoot_max.load(Ordering::Acquire),
        cpu_ns: s.cpu_ns.load(Ordering::Acquire),
    }
}

/// Smallest sleep between checks: below this the regulator's own cost dominates.
const MIN_SLEEP_NS: i64 = 20_000;

/// The regulator's loop. Runs until the stop flag; leaves every target running.
fn run(r: &Regulator, shared: &Shared, targets: &[Target]) {
    let ctl = shared.ctl();
    let stats = &ctl.regulator;
    let period = r.period_us as i64 * 1000;
    let n = targets.len();
    // Bytes so far: the enemy's own counter, or a hardware event attached to it.
    let hw: Vec<crate::observe::perf::ProcessCounter> = if r.source == crate::plan::Source::Hardware {
        let Ok(spec) = crate::observe::perf::resolve(&r.event) else { return };
        match targets.iter().map(|t| crate::observe::perf::ProcessCounter::open(&spec, t.pid)).collect() {
            Ok(v) => v,
            Err(_) => return, // checked before the run; the enemies simply run unregulated
        }
    } else {
        Vec::new()
    };
    let ops = |i: usize| match hw.get(i) {
        Some(c) => c.read() * r.bytes_per_event,
        None => ctl.enemies[targets[i].slot].ops.load(Ordering::Relaxed),
    };
    let mut base: Vec<u64> = (0..n).map(ops).collect();
    let mut throttled = vec![false; n];
    let mut rate = vec![0f64; n]; // bytes per ns, last observation
    let mut last: Vec<(i64, u64)> = (0..n).map(|i| (mono_ns(), ops(i))).collect();
    let mut period_start = mono_ns();
    let self_stop = r.throttle == Throttle::Signal && r.budget_bytes.is_some() && r.source == crate::plan::Source::Cooperative;
    if self_stop {
        return run_self_stop(r, shared, targets);
    }
    while !shared.stopping() {
        let now = mono_ns();
        stats.wakeups.fetch_add(1, Ordering::Relaxed);
        if now >= period_start + period {
            for (i, t) in targets.iter().enumerate() {
                if throttled[i] {
                    throttle(t, r.throttle, false);
                    throttled[i] = false;
                }
                base[i] = ops(i);
            }
            period_start += ((now - period_start) / period) * period;
            stats.periods.fetch_add(1, Ordering::Relaxed);
        }
        let mut next = period_start + period;
        match (r.budget_bytes, r.target_exec_ns) {
            (Some(budget), _) => {
                for i in 0..n {
                    let o = ops(i);
                    let (t0, o0) = last[i];
                    if now > t0 && o > o0 {
                        rate[i] = (o - o0) as f64 / (now - t0) as f64;
                    }
                    last[i] = (now, o);
                    let used = o - base[i];
                    if throttled[i] {
                        continue;
                    }
                    if used >= budget {
                        throttle(&targets[i], r.throttle, true);
                        throttled[i] = true;
                        stats.throttles.fetch_add(1, Ordering::Relaxed);
                        stats.overshoot_bytes.fetch_add(used - budget, Ordering::Relaxed);
                        stats.overshoot_max.fetch_max(used - budget, Ordering::Relaxed);
                    } else if rate[i] > 0.0 {
                        let eta = ((budget - used) as f64 / rate[i]) as i64;
                        next = next.min(now + eta.max(MIN_SLEEP_NS));
                    } else {
                        next = next.min(now + period / 10);
                    }
                }
            }
            (None, Some(target)) => {
                let slow = ctl.victim_last_exec_ns.load(Ordering::Relaxed) > target as i64;
                for i in 0..n {
                    if slow != throttled[i] {
                        throttle(&targets[i], r.throttle, slow);
                        throttled[i] = slow;
                        if slow {
                            stats.throttles.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
                next = now + period;
            }
            _ => return,
        }
        sleep_until(next);
    }
    for (i, t) in targets.iter().enumerate() {
        if throttled[i] {
            throttle(t, r.throttle, false);
        }
    }
    record_cpu(shared);
}

/// Signal mode: publish allowances each period; resume the enemies that stopped themselves.
fn run_self_stop(r: &Regulator, shared: &Shared, targets: &[Target]) {
    let ctl = shared.ctl();
    let stats = &ctl.regulator;
    let budget = r.budget_bytes.unwrap();
    let period = r.period_us as i64 * 1000;
    let mut period_start = mono_ns();
    let mut allowance: Vec<u64> = vec![0; targets.len()];
    let mut was_stopped = vec![false; targets.len()];
    while !shared.stopping() {
        stats.wakeups.fetch_add(1, Ordering::Relaxed);
        for (i, t) in targets.iter().enumerate() {
            let slot = &ctl.enemies[t.slot];
            let ops = slot.ops.load(Ordering::Acquire);
            let stopped = slot.stopped_self.load(Ordering::Acquire) == 1;
            if stopped && !was_stopped[i] {
                stats.throttles.fetch_add(1, Ordering::Relaxed);
                let over = ops.saturating_sub(allowance[i]);
                stats.overshoot_bytes.fetch_add(over, Ordering::Relaxed);
                stats.overshoot_max.fetch_max(over, Ordering::Relaxed);
            }
            // New allowance first, then resume: an enemy that stops on the old allowance
            // just after this keeps its flag set and is resumed at the next period.
            allowance[i] = ops + budget;
            slot.allowance.store(allowance[i], Ordering::Release);
            if stopped {
                unsafe { libc::kill(t.pid, libc::SIGCONT) };
            }
            was_stopped[i] = false;
        }
        stats.periods.fetch_add(1, Ordering::Relaxed);
        period_start += period;
        let now = mono_ns();
        if period_start < now {
            period_start += ((now - period_start) / period + 1) * period;
        }
        // Sleep in two halves: a throttle noticed mid-period is counted in its own period.
        sleep_until(period_start - period / 2);
        for (i, t) in targets.iter().enumerate() {
            let slot = &ctl.enemies[t.slot];
            if slot.stopped_self.load(Ordering::Acquire) == 1 && !was_stopped[i] {
                was_stopped[i] = true;
                stats.throttles.fetch_add(1, Ordering::Relaxed);
                let over = slot.ops.load(Ordering::Acquire).saturating_sub(allowance[i]);
                stats.overshoot_bytes.fetch_add(over, Ordering::Relaxed);
                stats.overshoot_max.fetch_max(over, Ordering::Relaxed);
            }
        }
        sleep_until(period_start);
    }
    for t in targets {
        ctl.enemies[t.slot].allowance.store(u64::MAX, Ordering::Release);
        unsafe { libc::kill(t.pid, libc::SIGCONT) };
    }
    record_cpu(shared);
}

fn record_cpu(shared: &Shared) {
    let stats = &shared.ctl().regulator;
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let cpu = (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) as u64 * 1_000_000_000 + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) as u64 * 1000;
    stats.cpu_ns.store(cpu, Ordering::Release);
}
