//! `timer`: high-rate timer wake-ups. Sleeps of `interval_ns` with clock_nanosleep, one
//! after the other: every expiry is a high-resolution timer interrupt, a wake-up and a
//! context switch on the enemy's CPU, and load on the timer and scheduler code the victim
//! depends on for its own releases. The counter is wake-ups.
use super::EnemyLoad;
use super::kind::{Kind, Param};

pub struct Timer {
    interval: libc::timespec,
    per_chunk: u64,
}

impl Timer {
    pub fn new(interval_ns: u64) -> Timer {
        let interval = libc::timespec { tv_sec: (interval_ns / 1_000_000_000) as i64, tv_nsec: (interval_ns % 1_000_000_000) as i64 };
        // About 1 ms of sleeping per chunk, so the stop flag is seen promptly.
        Timer { interval, per_chunk: (1_000_000 / interval_ns).max(1) }
    }
}

impl EnemyLoad for Timer {
    fn chunk(&mut self) -> u64 {
        for _ in 0..self.per_chunk {
            unsafe { libc::clock_nanosleep(libc::CLOCK_MONOTONIC, 0, &self.interval, std::ptr::null_mut()) };
        }
        self.per_chunk
    }
}

/// The `timer` kind (registry: mod.rs).
pub const KIND: Kind = Kind::new("timer", "high-resolution timers, wake-ups, context switches: consecutive clock_nanosleep", "wakeups", &[
    Param::u64("interval_ns", "sleep between wake-ups").range(1_000, 1_000_000_000).unit("ns").file_default("50us"),
], |a, _| Ok(Box::new(Timer::new(a.u64("interval_ns")))))
.channel("timer");
