//! `chase` body: dependent loads, one cache line per access, over a buffer of N bytes.
//! Latency-bound: each load waits for the previous one, so contention shows directly.
use super::JobBody;
use crate::kernels::{chase, chase_cycle, Buffer};
use super::body::{BodyKind, Run};
use crate::declare::{Dflt, Param};
use crate::plan::Order;

pub struct Chase {
    buf: Buffer,
    steps: u64,
    /// Where the next job starts: where the last one stopped.
    at: u64,
}

impl Chase {
    pub fn new(bytes: u64, order: Order, accesses: Option<u64>, seed: u64, huge_pages: bool) -> Chase {
        let lines = (bytes / 64).max(2) as usize;
        Chase { buf: chase_cycle(lines, 8, order == Order::Random, seed, huge_pages), steps: accesses.unwrap_or(lines as u64), at: 0 }
    }
}

impl JobBody for Chase {
    fn run_job(&mut self) -> u64 {
        // Each job goes on where the last one stopped, so the footprint stays the whole
        // buffer when the work per job (`accesses`, e.g. calibrated to a share of the period)
        // is less than one pass. With the default one pass, every job starts at the head.
        // Job k touches the same lines in every run, so runs compare job for job.
        self.at = chase(&self.buf, self.at, self.steps);
        self.at
    }
}

/// The `chase` body (registry: mod.rs).
pub const BODY: BodyKind = BodyKind::new("chase", "dependent loads, one per cache line, over `bytes`: latency-bound, every new miss shows", &[
    Param::u64("bytes", "buffer size (two cache lines at least)").min(128).unit("bytes"),
    Param::choice("order", &["random", "linear"], "order of the cycle through the lines").default(Dflt::Str("random")),
    Param::u64("accesses", "loads per job (default: one pass over the buffer)").min(1).default(Dflt::Unset),
    Param::u64("seed", "seed of the random cycle").default(Dflt::U64(0)),
], Run::Jobs(|a, b| {
    let order = if a.str("order") == "linear" { Order::Linear } else { Order::Random };
    Ok(Box::new(Chase::new(a.u64("bytes"), order, a.opt_u64("accesses"), a.u64("seed"), b.victim.huge_pages)))
}))
.work("accesses")
.footprint(1, &["bytes"]);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jobs_shorter_than_a_pass_go_on_where_the_last_stopped() {
        // 100 lines, 50 accesses a job: two jobs make one full pass and end at the head.
        let mut c = Chase::new(100 * 64, Order::Random, Some(50), 3, false);
        let first = c.run_job();
        assert_ne!(first, 0, "half a pass ends away from the head");
        assert_eq!(c.run_job(), 0, "the second half ends the cycle at the head");
        // The default work is one pass: every job starts and ends at the head.
        let mut whole = Chase::new(100 * 64, Order::Random, None, 3, false);
        assert_eq!((whole.run_job(), whole.run_job()), (0, 0));
    }
}
