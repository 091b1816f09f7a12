//! `counters.bin`: per-job counter deltas beside `jobs.bin`, same publication rule.
//!
//! Header (64 bytes): magic "XTCNTR01", version u32, record_size u32, capacity u64,
//! count u64, n_events u32, reserved. Record: job u64, enabled_ns u64, running_ns u64, then
//! `n_events` u64 deltas, in the order of run.json's `counters.events`. A value is only
//! meaningful with running_ns > 0; the host never turns an unread value into a zero.

use super::mapped::MappedFile;
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

pub const MAGIC: [u8; 8] = *b"XTCNTR01";

/// Events read in one group at most (observe/perf.rs opens them).
pub const MAX_EVENTS: usize = 16;

/// One reading: time enabled and running (ns) and the raw counts.
#[derive(Clone, Copy, Default)]
pub struct Reading {
    pub enabled: u64,
    pub running: u64,
    pub values: [u64; MAX_EVENTS],
}

pub struct CounterLog {
    map: MappedFile,
    n: usize,
}

impl CounterLog {
    pub fn record_size(n: usize) -> usize {
        24 + 8 * n
    }

    pub fn create(path: &Path, capacity: u64, n: usize) -> io::Result<CounterLog> {
        let map = MappedFile::create(path, 64 + capacity as usize * Self::record_size(n))?;
        unsafe {
            std::ptr::copy_nonoverlapping(MAGIC.as_ptr(), map.base, 8);
            std::ptr::write(map.base.add(8) as *mut u32, 1);
            std::ptr::write(map.base.add(12) as *mut u32, Self::record_size(n) as u32);
            std::ptr::write(map.base.add(16) as *mut u64, capacity);
            std::ptr::write(map.base.add(32) as *mut u32, n as u32);
        }
        Ok(CounterLog { map, n })
    }

    fn count(&self) -> &AtomicU64 {
        unsafe { &*(self.map.base.add(24) as *const AtomicU64) }
    }

    pub fn prefault(&self) {
        self.map.prefault(64);
    }

    /// Store the deltas between two readings as record `k` and publish it.
    #[inline(always)]
    pub fn push(&self, k: u64, job: u64, a: &Reading, z: &Reading) {
        let rec = unsafe { self.map.base.add(64 + k as usize * Self::record_size(self.n)) as *mut u64 };
        unsafe {
            *rec = job;
            *rec.add(1) = z.enabled.wrapping_sub(a.enabled);
            *rec.add(2) = z.running.wrapping_sub(a.running);
            for i in 0..self.n {
                *rec.add(3 + i) = z.values[i].wrapping_sub(a.values[i]);
            }
        }
        self.count().store(k + 1, Ordering::Release);
    }

    pub fn flush(&self) {
        self.map.flush();
    }
}
