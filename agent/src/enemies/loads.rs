//! `loads`: seed 000's "Loads" benchmark. Strided loads, `stride_bytes` apart (one cache
//! line by default), over `lines` lines: every load touches a new line, so the enemy
//! occupies `lines` lines of the cache hierarchy (a chosen share of L2 in the seed) with
//! clean data and no stores.
use super::EnemyLoad;
use super::kind::{Dflt, Kind, Param};
use crate::kernels::Buffer;

const CHUNK_LOADS: u64 = 4096;

pub struct Loads {
    buf: Buffer,
    stride: usize,
    lines: usize,
    at: usize,
}

impl Loads {
    pub fn new(lines: u64, stride_bytes: u64, huge_pages: bool) -> Loads {
        let stride = (stride_bytes / 8) as usize;
        let mut buf = Buffer::zeroed(lines as usize * stride, huge_pages);
        for (i, w) in buf.iter_mut().enumerate() {
            *w = i as u64;
        }
        Loads { buf, stride, lines: lines as usize, at: 0 }
    }
}

impl EnemyLoad for Loads {
    fn chunk(&mut self) -> u64 {
        let mut s = 0u64;
        for _ in 0..CHUNK_LOADS {
            s = s.wrapping_add(unsafe { *self.buf.get_unchecked(self.at * self.stride) });
            self.at += 1;
            if self.at == self.lines {
                self.at = 0;
            }
        }
        std::hint::black_box(s);
        CHUNK_LOADS
    }
}

/// The `loads` kind (registry: mod.rs).
pub const KIND: Kind = Kind::new("loads", "strided loads, a new cache line each, no stores (seed 000 Loads)", "loads", &[
    Param::u64("lines", "lines touched").min(1).per_bytes("stride_bytes"),
    Param::u64("stride_bytes", "bytes between loads (64: one cache line per load)").min(8).multiple_of(8).default(Dflt::U64(64)).unit("bytes"),
], |a, cx| Ok(Box::new(Loads::new(a.u64("lines"), a.u64("stride_bytes"), cx.huge_pages))))
.footprint(1, &["lines", "stride_bytes"])
.channel("read");
