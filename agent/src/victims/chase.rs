//! `chase` body: dependent loads, one cache line per access, over a buffer of N bytes.
//! Latency-bound: each load waits for the previous one, so contention shows directly.
use super::JobBody;
use crate::kernels::{chase, chase_cycle, Buffer};
use crate::plan::Order;

pub struct Chase {
    buf: Buffer,
    steps: u64,
}

impl Chase {
    pub fn new(bytes: u64, order: Order, accesses: Option<u64>, seed: u64, huge_pages: bool) -> Chase {
        let lines = (bytes / 64).max(2) as usize;
        Chase { buf: chase_cycle(lines, 8, order == Order::Random, seed, huge_pages), steps: accesses.unwrap_or(lines as u64) }
    }
}

impl JobBody for Chase {
    fn run_job(&mut self) -> u64 {
        // Every job starts at the head: the same lines in the same order each time.
        chase(&self.buf, 0, self.steps)
    }
}
