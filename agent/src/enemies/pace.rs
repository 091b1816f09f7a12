//! Intensity and rate pacing shared by every enemy (and its helper threads).
//!
//! Intensity is a fine-grained duty cycle: in each window (1 ms) the enemy works for
//! `intensity` % of it, then sleeps with `clock_nanosleep(TIMER_ABSTIME)` until the window
//! ends, so the load is spread evenly over time rather than in long bursts the victim
//! could fall between. A target rate (units per second) paces chunks against the clock:
//! after each chunk the enemy sleeps until the date at which its count is due. Sleeps are
//! cut into slices of at most 10 ms so that the stop flag is seen promptly.

use super::EnemyLoad;
use crate::observe::clock::{mono_ns, sleep_until};
use std::sync::atomic::{AtomicU32, Ordering};

pub const WINDOW_NS: i64 = 1_000_000;
const SLICE_NS: i64 = 10_000_000;

pub struct Pacer {
    window: i64,
    budget: i64,
    rate: Option<f64>,
    start: i64,
    win_start: i64,
    last_chunk: i64,
}

impl Pacer {
    pub fn new(intensity: f64, rate: Option<f64>, window: i64, now: i64) -> Pacer {
        let budget = (window as f64 * intensity.clamp(0.0, 100.0) / 100.0) as i64;
        Pacer { window, budget, rate, start: now, win_start: now, last_chunk: 0 }
    }

    /// Intensity 100 % and no target rate: never sleep.
    pub fn unpaced(&self) -> bool {
        self.budget >= self.window && self.rate.is_none()
    }

    /// After a chunk that ran from `t0` to `t1` with `ops` done in all: sleep if the window's
    /// budget is spent (or would be by the next chunk), or if the count is ahead of the rate.
    pub fn pace(&mut self, t0: i64, t1: i64, ops: u64, load: &mut dyn EnemyLoad, stop: &AtomicU32) {
        self.last_chunk = t1 - t0;
        let mut wake = t1;
        if self.budget < self.window {
            if self.last_chunk >= self.budget {
                // A chunk longer than the budget (a fork with exec, say): rest in
                // proportion to it, so the duty cycle holds over several windows.
                wake = t1 + ((self.last_chunk as i128 * (self.window - self.budget) as i128) / self.budget.max(1) as i128) as i64;
            } else if t1 - self.win_start + self.last_chunk / 2 >= self.budget {
                // Stop when the next chunk would overrun the budget by more than half of it,
                // so the achieved duty cycle centres on the target instead of overshooting.
                wake = self.win_start + self.window;
            }
        }
        if let Some(r) = self.rate {
            let due = self.start + (ops as f64 / r * 1e9) as i64;
            wake = wake.max(due);
        }
        if wake > t1 {
            load.pause();
            sleep_checked(wake, stop);
            load.resume();
        }
        let now = mono_ns();
        if now - self.win_start >= self.window {
            // A new window starts on the grid, or now if we fell more than one behind.
            let next = self.win_start + self.window;
            self.win_start = if now - next < self.window { next } else { now };
        }
    }
}

/// Sleep until `t` (absolute CLOCK_MONOTONIC) or until the stop flag is raised.
pub fn sleep_checked(t: i64, stop: &AtomicU32) {
    loop {
        let now = mono_ns();
        if now >= t || stop.load(Ordering::Relaxed) != 0 {
            return;
        }
        sleep_until(t.min(now + SLICE_NS));
    }
}

/// The loop of a helper thread (second side of a coherence enemy): same pacing as the
/// enemy's own loop, its count published in `ops`.
pub fn helper_loop(intensity: f64, rate: Option<f64>, stop: &AtomicU32, ops: &std::sync::atomic::AtomicU64, mut work: impl FnMut() -> u64) {
    struct Work<F: FnMut() -> u64>(F);
    impl<F: FnMut() -> u64> EnemyLoad for Work<F> {
        fn chunk(&mut self) -> u64 {
            (self.0)()
        }
    }
    let mut w = Work(&mut work);
    let start = mono_ns();
    // A rate applies to the enemy as a whole: each of the two sides takes half of it.
    let mut pacer = Pacer::new(intensity, rate.map(|r| r / 2.0), WINDOW_NS, start);
    let mut n = 0u64;
    while stop.load(Ordering::Relaxed) == 0 {
        let t0 = mono_ns();
        n += w.chunk();
        ops.store(n, Ordering::Relaxed);
        if !pacer.unpaced() {
            pacer.pace(t0, mono_ns(), n, &mut w, stop);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Spin(i64);
    impl EnemyLoad for Spin {
        fn chunk(&mut self) -> u64 {
            let end = mono_ns() + self.0;
            while mono_ns() < end {}
            1
        }
    }

    fn duty(intensity: f64, rate: Option<f64>, run_ns: i64) -> (f64, u64) {
        let stop = AtomicU32::new(0);
        let start = mono_ns();
        let mut p = Pacer::new(intensity, rate, WINDOW_NS, start);
        let mut load = Spin(20_000);
        let (mut busy, mut ops) = (0i64, 0u64);
        while mono_ns() - start < run_ns {
            let t0 = mono_ns();
            ops += load.chunk();
            let t1 = mono_ns();
            busy += t1 - t0;
            p.pace(t0, t1, ops, &mut load, &stop);
        }
        (busy as f64 / (mono_ns() - start) as f64, ops)
    }

    #[test]
    fn intensity_sets_the_duty_cycle() {
        let (d, _) = duty(30.0, None, 200_000_000);
        // Only the upper bound is the pacing's promise (an unpaced loop gives 1); a busy
        // machine wakes the sleeper late, so below it the duty cycle only has to be non-zero.
        assert!(d > 0.0 && d < 0.6, "30 % intensity gave a duty cycle of {d}");
        assert!(Pacer::new(100.0, None, WINDOW_NS, 0).unpaced());
        assert!(!Pacer::new(100.0, Some(5.0), WINDOW_NS, 0).unpaced());
    }

    #[test]
    fn chunks_longer_than_the_budget_rest_in_proportion() {
        let stop = AtomicU32::new(0);
        let start = mono_ns();
        let mut p = Pacer::new(25.0, None, WINDOW_NS, start);
        let mut load = Spin(2_000_000); // 2 ms chunks, 0.25 ms budget per window
        let mut busy = 0;
        for _ in 0..10 {
            let t0 = mono_ns();
            load.chunk();
            let t1 = mono_ns();
            busy += t1 - t0;
            p.pace(t0, t1, 0, &mut load, &stop);
        }
        let d = busy as f64 / (mono_ns() - start) as f64;
        assert!(d > 0.0 && d < 0.6, "25 % intensity with long chunks gave {d}");
    }

    #[test]
    fn rate_paces_the_count() {
        let (_, ops) = duty(100.0, Some(1000.0), 200_000_000);
        // The upper bound is the pacing; the lower one only allows for a busy machine.
        assert!((100..=260).contains(&ops), "1000/s over 0.2 s gave {ops}");
    }
}
