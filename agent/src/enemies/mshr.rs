//! `mshr`: miss-handling-register exhaustion, the parallel-miss attack of Bechtel & Yun,
//! "Denial-of-Service Attacks on Shared Cache in Multicore: Analysis and Prevention" (RTAS
//! 2019): loads to many distinct lines beyond the LLC, independent of each other, so the
//! core keeps as many misses in flight as its MSHRs hold and the shared cache's MSHRs fill
//! too; a victim's miss then waits for a free register even when its data would be a short
//! trip away. Two forms:
//! - `chains = 0` (default): the address of each load is computed (a golden-ratio stride
//!   over the lines, kernels::scatter_step), never loaded, so nothing but the core's own
//!   limits (MSHRs, load queue) bounds the misses in flight, and no prefetcher follows.
//! - `chains = k`: k random pointer chases over disjoint parts of the buffer, interleaved
//!   one load each per round: exactly k misses in flight (k at or above the MSHR count
//!   exhausts them; smaller k measures how many it takes).
//! Huge pages (`huge_pages = true`) keep page walks from bounding the misses instead. The
//! counter is lines loaded.
use super::kind::{Dflt, Kind, Param};
use super::EnemyLoad;
use crate::kernels::{chase_cycle, scatter_step, Buffer};

const LINE_WORDS: u64 = 8;
const CHUNK_LOADS: u64 = 4096;
/// Most chains (interleaved chases).
const MAX_CHAINS: u64 = 256;

enum Form {
    /// Computed addresses: one buffer, its line count, the stride, the position.
    Independent { buf: Buffer, lines: u64, step: u64, i: u64 },
    /// One cycle per chain and where each walker is.
    Chains { bufs: Vec<Buffer>, at: Vec<u64> },
}

pub struct Mshr {
    form: Form,
}

impl Mshr {
    pub fn new(bytes: u64, chains: u64, seed: u64, huge_pages: bool) -> Mshr {
        let form = if chains == 0 {
            let mut buf = Buffer::zeroed((bytes / 8) as usize, huge_pages);
            for (i, w) in buf.iter_mut().enumerate() {
                *w = i as u64;
            }
            let lines = buf.len() as u64 / LINE_WORDS;
            Form::Independent { buf, lines, step: scatter_step(lines), i: 0 }
        } else {
            let nodes = (bytes / 64 / chains).max(2) as usize;
            let bufs: Vec<Buffer> = (0..chains).map(|c| chase_cycle(nodes, LINE_WORDS as usize, true, seed.wrapping_add(c), huge_pages)).collect();
            Form::Chains { at: vec![0; bufs.len()], bufs }
        };
        Mshr { form }
    }
}

impl EnemyLoad for Mshr {
    fn chunk(&mut self) -> u64 {
        match &mut self.form {
            Form::Independent { buf, lines, step, i } => {
                let (n, s) = (*lines, *step);
                let mut sum = 0u64;
                let mut pos = *i * s % n;
                for _ in 0..CHUNK_LOADS {
                    // The next address depends on a counter, never on loaded data.
                    sum = sum.wrapping_add(unsafe { *buf.get_unchecked((pos * LINE_WORDS) as usize) });
                    pos += s;
                    if pos >= n {
                        pos -= n;
                    }
                }
                *i = (*i + CHUNK_LOADS) % n;
                std::hint::black_box(sum);
                CHUNK_LOADS
            }
            Form::Chains { bufs, at } => {
                let rounds = (CHUNK_LOADS / at.len() as u64).max(1);
                for _ in 0..rounds {
                    for (a, b) in at.iter_mut().zip(bufs.iter()) {
                        *a = unsafe { *b.get_unchecked(*a as usize) };
                    }
                }
                rounds * at.len() as u64
            }
        }
    }
}

/// The `mshr` kind (registry: mod.rs).
pub const KIND: Kind = Kind::new("mshr", "miss-handling registers (Bechtel & Yun, RTAS 2019): independent loads to distinct lines beyond the LLC, as many misses in flight as the core holds", "lines", &[
    Param::u64("bytes", "buffer size: well beyond the LLC, so every load misses").min(64 << 10).unit("bytes").file_default("4*llc"),
    Param::u64("chains", "0: computed addresses (the core's own limit of misses in flight); k: k interleaved pointer chases (exactly k in flight)").max(MAX_CHAINS).default(Dflt::U64(0)),
    Param::u64("seed", "seed of the chases' random order").default(Dflt::U64(0)),
], |a, cx| Ok(Box::new(Mshr::new(a.u64("bytes"), a.u64("chains"), a.u64("seed"), cx.huge_pages))))
.footprint(1, &["bytes"])
.channel("read");
// bytes >= 64 KiB (1024 lines) and chains <= 256: every chain has at least 4 lines.

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn independent_loads_cover_every_line_and_count_each() {
        let mut m = Mshr::new(256 << 10, 0, 0, false); // 4096 lines: one chunk is one pass
        let Form::Independent { lines, step, .. } = &m.form else { panic!() };
        let mut seen = vec![false; *lines as usize];
        let mut pos = 0;
        for _ in 0..*lines {
            seen[pos as usize] = true;
            pos = (pos + step) % lines;
        }
        assert!(seen.iter().all(|&s| s));
        assert_eq!(m.chunk(), CHUNK_LOADS);
    }

    #[test]
    fn chains_walk_their_own_cycles() {
        let mut m = Mshr::new(1 << 20, 16, 3, false);
        assert_eq!(m.chunk(), CHUNK_LOADS);
        let Form::Chains { bufs, at } = &m.form else { panic!() };
        assert_eq!(bufs.len(), 16);
        assert!(at.iter().zip(bufs.iter()).all(|(&a, b)| (a as usize) < b.len() && a % 8 == 0));
    }
}
