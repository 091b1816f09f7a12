//! `sum` body: sum of a u64 array (seed 002 §VI-B): a constant number of memory accesses
//! per job, so any new miss is interference.
use super::JobBody;
use super::body::{BodyKind, Run};
use crate::declare::Param;
use crate::kernels::Buffer;

pub struct Sum {
    buf: Buffer,
}

impl Sum {
    pub fn new(bytes: u64, huge_pages: bool) -> Sum {
        let mut buf = Buffer::zeroed((bytes / 8).max(1) as usize, huge_pages);
        for (i, w) in buf.iter_mut().enumerate() {
            *w = i as u64;
        }
        Sum { buf }
    }
}

impl JobBody for Sum {
    fn run_job(&mut self) -> u64 {
        let buf: &[u64] = std::hint::black_box(&self.buf);
        buf.iter().fold(0u64, |a, &x| a.wrapping_add(x))
    }
}

/// The `sum` body (registry: mod.rs).
pub const BODY: BodyKind = BodyKind::new("sum", "sum of a u64 array of `bytes`: a constant number of memory accesses a job", &[
    Param::u64("bytes", "array size").min(8).unit("bytes"),
], Run::Jobs(|a, b| Ok(Box::new(Sum::new(a.u64("bytes"), b.victim.huge_pages)))))
.footprint(1, &["bytes"]);
