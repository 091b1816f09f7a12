//! `write`: sequential write bandwidth over a buffer (store traffic, write-backs). The store
//! method is the fastest this CPU has over this buffer, measured when the enemy starts
//! (`method = "auto"`, stores.rs, as stress-ng's memrate compares its write methods), or the
//! one the plan names; run.json's notes say which was used and what each one measured.
use super::kind::{Dflt, Kind, Param};
use super::stores::{self, Method};
use super::EnemyLoad;
use crate::kernels::Buffer;

const CHUNK_WORDS: usize = 32 << 10; // 256 KiB per chunk

pub struct Write {
    buf: Buffer,
    at: usize,
    value: u64,
    method: Method,
    note: String,
}

impl Write {
    pub fn new(bytes: u64, huge_pages: bool, method: &str) -> Write {
        let mut buf = Buffer::zeroed((bytes / 8) as usize, huge_pages);
        buf.fill(1); // back every page before the window
        let (method, note) = stores::choose(method, stores::WRITE_CHOICES, &mut buf, CHUNK_WORDS);
        Write { buf, at: 0, value: 0, method, note }
    }
}

impl EnemyLoad for Write {
    fn chunk(&mut self) -> u64 {
        let end = (self.at + CHUNK_WORDS).min(self.buf.len());
        self.value = self.value.wrapping_add(1);
        stores::store(self.method, &mut self.buf[self.at..end], self.value);
        std::hint::black_box(self.buf.as_ptr());
        let n = end - self.at;
        self.at = if end == self.buf.len() { 0 } else { end };
        n as u64 * 8
    }
    fn note(&self) -> Option<String> {
        Some(self.note.clone())
    }
}

/// The `write` kind (registry: mod.rs).
pub const KIND: Kind = Kind::new("write", "write bandwidth: sequential stores, with the store method measured fastest on this CPU", "bytes", &[
    super::BYTES,
    Param::choice("method", stores::WRITE_CHOICES, "store method: auto (the fastest measured over the buffer at start) or store64/128/256, nt64/128/256 (x86_64), stnp (aarch64)").default(Dflt::Str("auto")).arch(stores::ARCH),
], |a, cx| Ok(Box::new(Write::new(a.u64("bytes"), cx.huge_pages, &a.str("method")))))
.footprint(1, &["bytes"])
.check(|a, at| stores::check(&a.str("method"), at))
.channel("write");

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn each_method_writes_the_whole_buffer_and_says_which_it_is() {
        for m in stores::available(stores::NAMES) {
            let mut w = Write::new(1 << 20, false, m.name());
            assert_eq!(w.method, m);
            let mut total = 0;
            while total < 2 << 20 {
                total += w.chunk(); // 4 chunks a pass, each storing the next value
            }
            assert!(w.buf.iter().all(|&x| (5..=8).contains(&x)), "{}", m.name());
            assert!(w.note().unwrap().contains(m.name()));
        }
    }
}
