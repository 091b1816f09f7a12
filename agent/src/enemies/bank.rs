//! `bank`: DRAM bank conflicts. Lines in one bank but in different rows cannot both be in
//! the bank's row buffer: each access closes one row and opens another (a row-buffer
//! conflict, tens of ns more than a hit), and a victim whose data lies in that bank waits
//! behind them (Moscibroda & Mutlu, "Memory performance attacks", USENIX Security 2007; the
//! mapping found by timing as in Pessl et al., "DRAMA: Exploiting DRAM addressing for
//! cross-CPU attacks", USENIX Security 2016).
//!
//! The mapping is found by timing, without physical addresses: a pair of lines loaded
//! together and flushed, many times over, takes longer when the two share a bank but not a
//! row. Line 0 of the buffer is timed against `candidates` random lines; the slow cluster
//! (`slow_cluster`: the widest gap in the upper half of the sorted times, wide enough to
//! stand out of the noise) are its bank mates; they are confirmed against each other, and
//! up to `lines` of them are hammered: load, flush, next. With huge pages the bits of the
//! offset inside a 2 MiB page are physical ones, so the enemy also times line 0 against
//! line 0 with one address bit flipped (bits 6..20): a slow flip is a row bit that no bank
//! function uses; the note lists them. Where no cluster stands out (a virtual machine whose
//! memory is interleaved differently, a part with too few banks to tell, noise), the notes
//! say so and the enemy hammers lines `fallback_stride` bytes apart with flushes instead:
//! every access still goes to DRAM, but the bank conflicts are then left to chance. On an
//! architecture with no user-space cache flush (neither x86_64 nor aarch64) the kind is
//! refused. The counter is DRAM accesses (loads after a flush).
use super::kind::{Dflt, Kind, Param};
use super::EnemyLoad;
use crate::kernels::{flush_line, full_fence, Buffer, Rng};
use crate::observe::clock::mono_ns;
use crate::plan::err;

const LINE_WORDS: usize = 8;
const CHUNK_ACCESSES: u64 = 1024;
/// Load-and-flush rounds per timed pair, and trials per pair (the fastest kept: a trial hit
/// by an interrupt is slower, never faster).
const REPS: u32 = 24;
const TRIALS: usize = 3;
/// The slow cluster must lie this far (relative to the median) above the fast one.
const MIN_GAP: f64 = 0.08;

pub struct Bank {
    buf: Buffer,
    /// Word offsets of the lines hammered, in order.
    lines: Vec<usize>,
    at: usize,
    note: String,
}

/// The slow cluster of `lat`, if one stands apart: the split of the sorted times with the
/// widest gap among those leaving at least `min_members` above it and at least half below,
/// kept when the gap is at least `min_gap` × the median. (threshold, indices above it).
pub fn slow_cluster(lat: &[f64], min_members: usize, min_gap: f64) -> Option<(f64, Vec<usize>)> {
    let n = lat.len();
    if n < 2 * min_members.max(1) {
        return None;
    }
    let mut v: Vec<f64> = lat.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let median = v[n / 2];
    let (mut best_k, mut best_gap) = (0, 0.0);
    for k in (n / 2).max(1)..=n - min_members.max(1) {
        let gap = v[k] - v[k - 1];
        if gap > best_gap {
            (best_k, best_gap) = (k, gap);
        }
    }
    if best_k == 0 || best_gap < min_gap * median {
        return None;
    }
    let threshold = (v[best_k] + v[best_k - 1]) / 2.0;
    Some((threshold, (0..n).filter(|&i| lat[i] > threshold).collect()))
}

/// Nanoseconds per round of loading the lines at word offsets `a` and `b` together and
/// flushing both, the fastest of `TRIALS`.
fn pair_ns(buf: &Buffer, a: usize, b: usize) -> f64 {
    let (pa, pb) = unsafe { (buf.as_ptr().add(a), buf.as_ptr().add(b)) };
    let mut best = f64::MAX;
    for _ in 0..TRIALS {
        let t0 = mono_ns();
        for _ in 0..REPS {
            unsafe {
                std::ptr::read_volatile(pa);
                std::ptr::read_volatile(pb);
            }
            flush_line(pa);
            flush_line(pb);
            full_fence();
        }
        best = best.min((mono_ns() - t0) as f64 / REPS as f64);
    }
    best
}

/// Row bits among 6..20 (a flip that conflicts with line 0): meaningful on a huge page only.
fn row_bits(buf: &Buffer) -> Vec<u32> {
    let bits: Vec<u32> = (6..21).filter(|b| (1usize << b) / 8 < buf.len()).collect();
    let lat: Vec<f64> = bits.iter().map(|b| pair_ns(buf, 0, (1usize << b) / 8)).collect();
    slow_cluster(&lat, 1, MIN_GAP).map(|(_, i)| i.iter().map(|&i| bits[i]).collect()).unwrap_or_default()
}

impl Bank {
    pub fn new(bytes: u64, lines: u64, candidates: u64, fallback_stride: u64, huge_pages: bool) -> Bank {
        let mut buf = Buffer::zeroed((bytes / 8) as usize, huge_pages);
        for (i, w) in buf.iter_mut().enumerate() {
            *w = i as u64;
        }
        let total = buf.len() / LINE_WORDS;
        let mut rng = Rng::new(0xba4c);
        let mut cand: Vec<usize> = (0..candidates).map(|_| (1 + rng.below(total as u64 - 1) as usize) * LINE_WORDS).collect();
        cand.sort_unstable();
        cand.dedup();
        let lat: Vec<f64> = cand.iter().map(|&c| pair_ns(&buf, 0, c)).collect();
        let found = slow_cluster(&lat, 3, MIN_GAP).and_then(|(thr, slow)| {
            // Bank mates of line 0 are bank mates of each other: keep those that conflict
            // with the first mate too (a noisy timing rarely passes twice).
            let first = cand[slow[0]];
            let mates: Vec<usize> = slow.iter().map(|&i| cand[i]).filter(|&c| c == first || pair_ns(&buf, first, c) > thr).collect();
            (mates.len() >= 2).then_some((thr, slow.len(), mates))
        });
        let bits = if huge_pages { format!("; row bits inside a huge page (a flip conflicts): {:?}", row_bits(&buf)) } else { String::new() };
        let mut sorted = lat.clone();
        sorted.sort_by(|a, b| a.total_cmp(b));
        let median = sorted.get(sorted.len() / 2).copied().unwrap_or(0.0);
        let (hammer, note) = match found {
            Some((thr, slow, mates)) => {
                let mut h = vec![0usize];
                h.extend(mates.iter().copied().take(lines as usize - 1));
                let n = h.len();
                (h, format!("bank conflicts found by timing: {slow} of {} random lines conflict with line 0 (over {thr:.0} ns a pair, median {median:.0} ns), {} confirmed; hammering {n} lines of one bank{bits}", cand.len(), mates.len()))
            }
            None => {
                let stride = (fallback_stride as usize / 8).max(LINE_WORDS);
                let h: Vec<usize> = (0..lines as usize).map(|i| i * stride % (total * LINE_WORDS) / LINE_WORDS * LINE_WORDS).collect();
                (h, format!("no bank mapping found: no slow cluster among {} pair timings (median {median:.0} ns, fastest {:.0}, slowest {:.0}); hammering {lines} lines {fallback_stride} bytes apart with flushes instead{bits}",
                    cand.len(), sorted.first().copied().unwrap_or(0.0), sorted.last().copied().unwrap_or(0.0)))
            }
        };
        Bank { buf, lines: hammer, at: 0, note }
    }
}

impl EnemyLoad for Bank {
    fn chunk(&mut self) -> u64 {
        let mut sum = 0u64;
        for _ in 0..CHUNK_ACCESSES {
            let p = unsafe { self.buf.as_ptr().add(*self.lines.get_unchecked(self.at)) };
            sum = sum.wrapping_add(unsafe { std::ptr::read_volatile(p) });
            flush_line(p);
            self.at += 1;
            if self.at == self.lines.len() {
                self.at = 0;
            }
        }
        std::hint::black_box(sum);
        CHUNK_ACCESSES
    }
    fn note(&self) -> Option<String> {
        Some(self.note.clone())
    }
}

/// The `bank` kind (registry: mod.rs).
pub const KIND: Kind = Kind::new("bank", "DRAM bank conflicts (Moscibroda & Mutlu 2007; mapping by timing as DRAMA, 2016): lines of one bank, different rows, loaded and flushed in turn", "accesses", &[
    Param::u64("bytes", "buffer searched for lines of one bank").min(1 << 20).default(Dflt::U64(64 << 20)).unit("bytes"),
    Param::u64("lines", "lines hammered (line 0 and its bank mates)").range(2, 1024).default(Dflt::U64(16)),
    Param::u64("candidates", "random lines timed against line 0 to find its bank mates").range(64, 65536).default(Dflt::U64(2048)),
    Param::u64("fallback_stride", "where no bank mates are found: bytes between the lines hammered instead").min(64).multiple_of(64).default(Dflt::U64(8192)).unit("bytes"),
], |a, cx| Ok(Box::new(Bank::new(a.u64("bytes"), a.u64("lines"), a.u64("candidates"), a.u64("fallback_stride"), cx.huge_pages))))
.footprint(1, &["bytes"])
.channel("dram-bank")
.check(|a, at| {
    if !cfg!(any(target_arch = "x86_64", target_arch = "aarch64")) {
        return err(format!("{at}.kind"), "bank needs a user-space cache flush (x86_64 clflush, aarch64 dc civac), which this architecture lacks; use chase or mshr");
    }
    let lines = a.u64("bytes") / 64;
    if a.u64("candidates") >= lines {
        return err(format!("{at}.candidates"), format!("{} is not below the {lines} lines of the buffer; use fewer candidates or more bytes", a.u64("candidates")));
    }
    if a.u64("fallback_stride") >= a.u64("bytes") {
        return err(format!("{at}.fallback_stride"), format!("{} is not below the buffer's {} bytes; use a smaller stride", a.u64("fallback_stride"), a.u64("bytes")));
    }
    Ok(())
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slow_cluster_is_found_among_noisy_fast_times() {
        // 1000 pairs around 250 ns (±5), 30 conflicts around 330 ns, one interrupt at 2000.
        let mut r = Rng::new(5);
        let mut lat: Vec<f64> = (0..1000).map(|_| 245.0 + r.below(10) as f64).collect();
        let slow: Vec<usize> = (0..30).map(|i| i * 33 + 7).collect();
        for &i in &slow {
            lat[i] = 325.0 + r.below(10) as f64;
        }
        lat[500] = 2000.0;
        let (thr, got) = slow_cluster(&lat, 3, MIN_GAP).expect("cluster");
        assert!(thr > 255.0 && thr < 325.0, "{thr}");
        let mut want = slow.clone();
        want.push(500);
        want.sort();
        assert_eq!(got, want);
    }

    #[test]
    fn unimodal_noise_gives_no_cluster() {
        let mut r = Rng::new(9);
        let lat: Vec<f64> = (0..2000).map(|_| 240.0 + r.below(20) as f64).collect();
        assert_eq!(slow_cluster(&lat, 3, MIN_GAP), None);
        assert_eq!(slow_cluster(&[1.0, 2.0], 3, MIN_GAP), None);
    }

    #[test]
    fn row_bits_stand_out_among_single_bit_flips() {
        // Bits 6..20: column and bank bits fast, bits 18 and 20 row-only (slow).
        let bits: Vec<u32> = (6..21).collect();
        let lat: Vec<f64> = bits.iter().map(|&b| if b == 18 || b == 20 { 310.0 } else { 240.0 + (b % 3) as f64 }).collect();
        let (_, i) = slow_cluster(&lat, 1, MIN_GAP).unwrap();
        assert_eq!(i.iter().map(|&i| bits[i]).collect::<Vec<_>>(), vec![18, 20]);
    }

    #[test]
    fn the_enemy_hammers_the_lines_it_chose_and_says_how() {
        let mut b = Bank::new(4 << 20, 8, 256, 8192, false);
        assert!(b.lines.len() >= 2 && b.lines.len() <= 8 && b.lines.iter().all(|&w| w % LINE_WORDS == 0 && w < b.buf.len()));
        assert_eq!(b.chunk(), CHUNK_ACCESSES);
        assert!(b.note.contains("bank conflicts found") || b.note.contains("no bank mapping found"), "{}", b.note);
    }
}
