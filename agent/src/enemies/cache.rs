//! `l1d`, `l2`, `llc`: cache thrash. A read-modify-write of one word in every cache line
//! of a buffer sized to the cache level (the host resolves "l1d", "l2", "llc" from the
//! target's topology): the enemy keeps the whole level filled with its own dirty lines,
//! so the victim's lines are evicted and every eviction costs a write-back. Sequential
//! order lets the prefetchers run the enemy at the level's full bandwidth.
use super::EnemyLoad;
use super::kind::{Args, Kind, Param};
use crate::kernels::Buffer;

const LINE_WORDS: usize = 8;
const CHUNK_LINES: usize = 4096;

pub struct Thrash {
    buf: Buffer,
    at: usize,
}

impl Thrash {
    pub fn new(bytes: u64, huge_pages: bool) -> Thrash {
        let mut buf = Buffer::zeroed((bytes / 8) as usize, huge_pages);
        buf.fill(1);
        Thrash { buf, at: 0 }
    }
}

impl EnemyLoad for Thrash {
    fn chunk(&mut self) -> u64 {
        let lines = self.buf.len() / LINE_WORDS;
        for _ in 0..CHUNK_LINES {
            let w = unsafe { self.buf.get_unchecked_mut(self.at * LINE_WORDS) };
            *w = w.wrapping_add(1);
            self.at += 1;
            if self.at == lines {
                self.at = 0;
            }
        }
        std::hint::black_box(self.buf.as_ptr());
        CHUNK_LINES as u64
    }
}

fn thrash(a: &Args, cx: &super::Ctx) -> Result<Box<dyn EnemyLoad>, String> {
    Ok(Box::new(Thrash::new(a.u64("bytes"), cx.huge_pages)))
}
// The host resolves each level's name ("l1d") against the target's topology.
const L1D_BYTES: &[Param] = &[super::BYTES.file_default("l1d")];
const L2_BYTES: &[Param] = &[super::BYTES.file_default("l2")];
const LLC_BYTES: &[Param] = &[super::BYTES.file_default("llc")];
const fn level(name: &'static str, doc: &'static str, params: &'static [Param]) -> Kind {
    Kind::new(name, doc, "lines", params, thrash).footprint(1, &["bytes"]).channel(name)
}
/// The cache kinds (registry: mod.rs).
pub const L1D: Kind = level("l1d", "L1 data cache: read-modify-write of one word per line of a buffer sized to it", L1D_BYTES);
pub const L2: Kind = level("l2", "L2 cache: read-modify-write of one word per line of a buffer sized to it", L2_BYTES);
pub const LLC: Kind = level("llc", "last-level cache: read-modify-write of one word per line of a buffer sized to it", LLC_BYTES);

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn every_line_is_written_once_per_pass() {
        let mut t = Thrash::new(64 * 1024, false); // 1024 lines: 4 passes per chunk
        assert_eq!(t.chunk(), 4096);
        assert!(t.buf.iter().step_by(8).all(|&w| w == 5));
        assert!(t.buf.iter().enumerate().filter(|(i, _)| i % 8 != 0).all(|(_, &w)| w == 1));
    }
}
