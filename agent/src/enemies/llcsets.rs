//! `llcsets`: LLC set conflicts on a chosen range of sets (a page colour), the cache
//! denial of service of Bechtel & Yun (RTAS 2019) aimed where the victim's lines live
//! rather than at the whole cache (set-targeted eviction as in Liu et al., "Last-level cache
//! side-channel attacks are practical", IEEE S&P 2015). The LLC's set index repeats every
//! `way_bytes` (its size over its associativity), so the lines of a buffer whose address
//! modulo `way_bytes` falls in [`first_set` × 64, (`first_set` + `sets`) × 64) share those
//! sets; with `bytes` / `way_bytes` of them per set, well over the associativity, the enemy's
//! read-modify-writes keep those sets full of its own dirty lines and the victim's lines
//! there are evicted, while the rest of the cache is left alone.
//!
//! The approximation, said in run.json's notes: the set index is taken from the physical
//! address where /proc/self/pagemap gives it (root), else from the virtual one, which is the
//! physical one within a page (4 KiB: 64 sets exact, the page colour left to chance; a
//! 2 MiB huge page: up to 32768 sets exact). Slice hashing (Intel, and AMD parts with
//! several L3 slices) spreads one set index over the slices, so fewer lines land in each
//! (slice, set) than `bytes` / `way_bytes`: raise `bytes` to compensate. The counter is lines
//! written.
use super::kind::{Dflt, Kind, Param};
use super::EnemyLoad;
use crate::kernels::Buffer;
use crate::plan::err;

const LINE: u64 = 64;
const PAGE: u64 = 4096;
const CHUNK_LINES: u64 = 4096;

pub struct LlcSets {
    buf: Buffer,
    /// Word offsets of the selected lines.
    lines: Vec<usize>,
    at: usize,
    note: String,
}

/// Word offsets of the lines of a buffer of `pages` 4 KiB pages whose address modulo
/// `way_bytes` lies in the chosen sets; `addr(p)` is the address of page `p` (physical or
/// virtual). Ordered page by page, so consecutive lines of one page stay together.
pub fn select(pages: usize, addr: impl Fn(usize) -> u64, way_bytes: u64, first_set: u64, sets: u64) -> Vec<usize> {
    let (lo, hi) = (first_set * LINE, (first_set + sets) * LINE);
    let mut out = Vec::new();
    for p in 0..pages {
        let base = addr(p);
        for l in 0..PAGE / LINE {
            let off = (base + l * LINE) % way_bytes;
            if off >= lo && off < hi {
                out.push(((p as u64 * PAGE + l * LINE) / 8) as usize);
            }
        }
    }
    out
}

/// Physical addresses of the buffer's pages from /proc/self/pagemap, when it gives them
/// (root; the pages must be backed): None otherwise.
fn physical_pages(buf: &Buffer) -> Option<Vec<u64>> {
    use std::os::unix::fs::FileExt;
    let f = std::fs::File::open("/proc/self/pagemap").ok()?;
    let pages = buf.len() * 8 / PAGE as usize;
    let first = buf.as_ptr() as u64 / PAGE;
    let mut raw = vec![0u8; pages * 8];
    f.read_exact_at(&mut raw, first * 8).ok()?;
    let pfns: Vec<u64> = raw.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().unwrap())).collect();
    // Bit 63: present; bits 0..54: frame number (0 without CAP_SYS_ADMIN).
    let present = |e: &u64| e >> 63 == 1 && e & ((1 << 55) - 1) != 0;
    pfns.iter().all(present).then(|| pfns.iter().map(|e| (e & ((1 << 55) - 1)) * PAGE).collect())
}

impl LlcSets {
    pub fn new(bytes: u64, way_bytes: u64, first_set: u64, sets: u64, huge_pages: bool) -> LlcSets {
        let mut buf = Buffer::zeroed((bytes / 8) as usize, huge_pages);
        buf.fill(1); // back every page (pagemap reports only backed ones)
        let pages = buf.len() * 8 / PAGE as usize;
        let base = buf.as_ptr() as u64;
        let (lines, how) = match physical_pages(&buf) {
            Some(phys) => (select(pages, |p| phys[p], way_bytes, first_set, sets), "physical addresses (pagemap)".to_string()),
            None => (select(pages, |p| base + p as u64 * PAGE, way_bytes, first_set, sets),
                     format!("virtual addresses: exact within {}, the page colour left to chance beyond", if huge_pages { "a huge page if the kernel backed one" } else { "a 4 KiB page" })),
        };
        let per_set = lines.len() as u64 / sets.max(1);
        let note = format!("sets {first_set}..{} of a {way_bytes}-byte way: {} lines selected by {how}, about {per_set} per set index (before slice hashing)",
                           first_set + sets - 1, lines.len());
        LlcSets { buf, lines, at: 0, note }
    }
}

impl EnemyLoad for LlcSets {
    fn chunk(&mut self) -> u64 {
        if self.lines.is_empty() {
            return 0;
        }
        for _ in 0..CHUNK_LINES {
            let w = unsafe { self.buf.get_unchecked_mut(*self.lines.get_unchecked(self.at)) };
            *w = w.wrapping_add(1);
            self.at += 1;
            if self.at == self.lines.len() {
                self.at = 0;
            }
        }
        std::hint::black_box(self.buf.as_ptr());
        CHUNK_LINES
    }
    fn note(&self) -> Option<String> {
        Some(self.note.clone())
    }
}

/// The `llcsets` kind (registry: mod.rs).
pub const KIND: Kind = Kind::new("llcsets", "LLC set conflicts on chosen sets (a page colour): read-modify-writes of lines that share those sets, many more than the ways", "lines", &[
    Param::u64("bytes", "buffer the lines are taken from: bytes / way_bytes lines per set").min(64 << 10).multiple_of(4096).unit("bytes").file_default("4*llc"),
    Param::u64("way_bytes", "LLC size over its associativity: the set index repeats every this many bytes").min(4096).multiple_of(4096).unit("bytes").file_default("llc/16"),
    Param::u64("first_set", "first set index targeted, in lines from the start of a way").default(Dflt::U64(0)),
    Param::u64("sets", "consecutive set indices targeted (64: one 4 KiB page colour)").min(1).default(Dflt::U64(64)),
], |a, cx| Ok(Box::new(LlcSets::new(a.u64("bytes"), a.u64("way_bytes"), a.u64("first_set"), a.u64("sets"), cx.huge_pages))))
.footprint(1, &["bytes"])
.channel("llc")
.check(|a, at| {
    let (way, first, sets) = (a.u64("way_bytes"), a.u64("first_set"), a.u64("sets"));
    if first.saturating_add(sets) > way / LINE {
        return err(format!("{at}.sets"), format!("first_set {first} + sets {sets} exceed the {} sets of a {way}-byte way; lower them", way / LINE));
    }
    if a.u64("bytes") < 2 * way {
        return err(format!("{at}.bytes"), format!("{} bytes give fewer than 2 lines per set of a {way}-byte way; use at least {} (more lines per set than the LLC has ways)", a.u64("bytes"), 2 * way));
    }
    Ok(())
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_selected_lines_all_map_to_the_chosen_sets() {
        // 64 pages at scattered "physical" addresses, a 16 KiB way, sets 70..79.
        let addr = |p: usize| ((p as u64 * 7919) % 1024) * PAGE;
        let got = select(64, addr, 16384, 70, 10);
        assert!(!got.is_empty());
        for &w in &got {
            let (p, off) = (w * 8 / PAGE as usize, (w * 8) as u64 % PAGE);
            let set = (addr(p) + off) % 16384 / LINE;
            assert!((70..80).contains(&set), "line at word {w} is in set {set}");
        }
        // Every line of those sets is taken: 10 sets × 64 pages / 4 pages per way.
        assert_eq!(got.len(), 10 * 64 / 4);
    }

    #[test]
    fn virtual_selection_of_a_page_colour_takes_whole_pages() {
        let got = select(32, |p| p as u64 * PAGE, 8 * PAGE, 64, 64); // colour 1 of 8
        assert_eq!(got.len(), 4 * 64);
        assert!(got.iter().all(|&w| (w * 8 / PAGE as usize) % 8 == 1));
    }

    #[test]
    fn the_enemy_writes_only_its_lines() {
        let mut l = LlcSets::new(256 << 10, 64 << 10, 0, 512, false); // half of each way: some pages are in it wherever they lie
        assert!(!l.lines.is_empty() && l.note.contains("lines selected"), "{}", l.note);
        assert_eq!(l.chunk(), CHUNK_LINES);
        let written = l.buf.iter().filter(|&&w| w != 1).count();
        assert_eq!(written, l.lines.len());
    }
}
