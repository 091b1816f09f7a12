//! `tlb`: TLB thrash. One load per page over `pages` pages of `page_bytes`, in a random
//! order, on 4 KiB pages (never huge pages): with more pages than the TLBs hold, nearly
//! every load needs a page walk, and the walks compete for the shared L2/LLC with the
//! victim's. The line inside each page rotates so that the loads spread over every cache
//! set instead of piling onto one.
use super::EnemyLoad;
use super::kind::{Dflt, Kind, Param};
use crate::plan::err;
use crate::kernels::{Buffer, Rng};

const CHUNK_LOADS: u64 = 4096;

pub struct Tlb {
    buf: Buffer,
    /// Word offsets of the loads, in visiting order.
    order: Vec<u32>,
    at: usize,
}

impl Tlb {
    pub fn new(pages: u64, page_bytes: u64) -> Tlb {
        let page_words = (page_bytes / 8) as usize;
        let mut buf = Buffer::zeroed(pages as usize * page_words, false);
        let mut pick: Vec<usize> = (0..pages as usize).collect();
        let mut rng = Rng::new(0x71b);
        for i in (1..pick.len()).rev() {
            pick.swap(i, rng.below(i as u64 + 1) as usize);
        }
        let lines_per_page = (page_words / 8).max(1);
        let order = pick.iter().enumerate().map(|(k, &p)| (p * page_words + (k % lines_per_page) * 8) as u32).collect::<Vec<_>>();
        for p in 0..pages as usize {
            buf[p * page_words] = p as u64; // back every page
        }
        Tlb { buf, order, at: 0 }
    }
}

impl EnemyLoad for Tlb {
    fn chunk(&mut self) -> u64 {
        let mut s = 0u64;
        for _ in 0..CHUNK_LOADS {
            let off = unsafe { *self.order.get_unchecked(self.at) } as usize;
            s = s.wrapping_add(unsafe { *self.buf.get_unchecked(off) });
            self.at += 1;
            if self.at == self.order.len() {
                self.at = 0;
            }
        }
        std::hint::black_box(s);
        CHUNK_LOADS
    }
}

/// The `tlb` kind (registry: mod.rs).
pub const KIND: Kind = Kind::new("tlb", "TLBs and page walks: one load per page in random order", "pages", &[
    Param::u64("pages", "pages touched").min(2).per_bytes("page_bytes").file_default("32MiB"),
    Param::u64("page_bytes", "bytes per page").min(4096).multiple_of(4096).default(Dflt::U64(4096)).unit("bytes"),
], |a, _| Ok(Box::new(Tlb::new(a.u64("pages"), a.u64("page_bytes")))))
.footprint(1, &["pages", "page_bytes"])
.small_pages()
.check(|a, at| {
    if a.u64("pages").saturating_mul(a.u64("page_bytes")) / 8 >= 1 << 32 {
        return err(format!("{at}.pages"), "pages x page_bytes must stay under 32 GiB");
    }
    Ok(())
})
.channel("tlb");

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn one_load_per_page_each_pass() {
        let t = Tlb::new(100, 4096);
        let mut pages: Vec<usize> = t.order.iter().map(|&o| o as usize / 512).collect();
        pages.sort();
        assert_eq!(pages, (0..100).collect::<Vec<_>>());
    }
}
