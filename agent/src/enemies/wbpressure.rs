//! `wbpressure`: write-back-buffer pressure, the store attack of Bechtel & Yun, "Denial-of-
//! Service Attacks on Shared Cache in Multicore: Analysis and Prevention" (RTAS 2019). One
//! 8-byte store per cache line over a buffer well beyond the LLC (4 × LLC by default): every
//! store misses every level, takes a miss-handling register for its line fill and evicts a
//! dirty line whose write-back waits in the shared write-back buffer. With the buffers full
//! the shared cache blocks, so a victim whose own data hits in its (even partitioned) cache
//! share still waits. `linear` order lets the prefetchers run ahead (most misses in flight:
//! the paper's sequential attacker); `scattered` visits the lines in a golden-ratio stride
//! (kernels::scatter_step) that no prefetcher follows and that opens a new DRAM row at
//! almost every store. The counter is lines stored.
use super::kind::{Dflt, Kind, Param};
use super::EnemyLoad;
use crate::kernels::{scatter_step, Buffer};

const LINE_WORDS: u64 = 8;
const CHUNK_LINES: u64 = 4096;

pub struct WbPressure {
    buf: Buffer,
    lines: u64,
    step: u64,
    i: u64,
}

impl WbPressure {
    pub fn new(bytes: u64, scattered: bool, huge_pages: bool) -> WbPressure {
        let mut buf = Buffer::zeroed((bytes / 8) as usize, huge_pages);
        buf.fill(1); // back every page before the window
        let lines = buf.len() as u64 / LINE_WORDS;
        WbPressure { buf, lines, step: if scattered { scatter_step(lines) } else { 1 }, i: 0 }
    }
    /// Line visited at position `i` of the pass.
    fn line(&self, i: u64) -> u64 {
        (i as u128 * self.step as u128 % self.lines as u128) as u64
    }
}

impl EnemyLoad for WbPressure {
    fn chunk(&mut self) -> u64 {
        let v = self.i;
        for _ in 0..CHUNK_LINES {
            let w = (self.line(self.i) * LINE_WORDS) as usize;
            // A plain store (no read of the line: the core's read-for-ownership is the fill).
            unsafe { std::ptr::write_volatile(self.buf.as_mut_ptr().add(w), v) };
            self.i += 1;
            if self.i == self.lines {
                self.i = 0;
            }
        }
        CHUNK_LINES
    }
}

/// The `wbpressure` kind (registry: mod.rs).
pub const KIND: Kind = Kind::new("wbpressure", "write-back buffers (Bechtel & Yun, RTAS 2019): one store per line over a buffer beyond the LLC, each a miss that evicts a dirty line", "lines", &[
    Param::u64("bytes", "buffer size: well beyond the LLC, so every store misses").min(64 << 10).unit("bytes").file_default("4*llc"),
    Param::choice("order", &["linear", "scattered"], "linear (prefetchers run ahead: most misses in flight) or scattered (a golden-ratio stride no prefetcher follows)").default(Dflt::Str("linear")),
], |a, cx| Ok(Box::new(WbPressure::new(a.u64("bytes"), a.str("order") == "scattered", cx.huge_pages))))
.footprint(1, &["bytes"])
.channel("write");

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn one_store_per_line_reaches_every_line_in_both_orders() {
        for scattered in [false, true] {
            let mut w = WbPressure::new(1 << 20, scattered, false); // 16384 lines: 4 chunks
            for _ in 0..4 {
                assert_eq!(w.chunk(), CHUNK_LINES);
            }
            assert!(w.buf.iter().step_by(8).all(|&x| x != 1), "scattered = {scattered}: a line was missed");
            assert!(w.buf.iter().enumerate().filter(|(i, _)| i % 8 != 0).all(|(_, &x)| x == 1), "only the first word of a line is stored");
        }
    }
}
