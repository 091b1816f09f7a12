//! `ntstore`: non-temporal store bandwidth. Streaming stores (x86_64: `movnti`, `movntdq` or
//! AVX `vmovntdq`) write a `bytes` buffer without reading it and without allocating its
//! lines in the caches: all of the traffic goes to the memory controller, and the caches the
//! victim uses are left alone, which separates the memory channel from the cache channel.
//! `method = "auto"` times each streaming width this CPU has over the buffer and keeps the
//! fastest (stores.rs; run.json's notes say which). On aarch64, `stnp` stores pairs of words
//! with the non-temporal hint (the core may stream them past its caches; the Cortex-A53 does
//! for whole lines). Other architectures have no streaming store: `ntstore` is refused there.
//! The counter is bytes stored.
use super::kind::{Dflt, Kind, Param};
use super::stores::{self, Method};
use super::EnemyLoad;
use crate::kernels::Buffer;

const CHUNK_WORDS: usize = 32 << 10; // 256 KiB per chunk

pub struct NtStore {
    buf: Buffer,
    at: usize,
    value: u64,
    method: Method,
    note: String,
}

impl NtStore {
    pub fn new(bytes: u64, huge_pages: bool, method: &str) -> NtStore {
        let mut buf = Buffer::zeroed((bytes / 8) as usize, huge_pages);
        buf.fill(1);
        let (method, note) = stores::choose(method, stores::NT_CHOICES, &mut buf, CHUNK_WORDS);
        NtStore { buf, at: 0, value: 0, method, note }
    }
}

impl EnemyLoad for NtStore {
    fn chunk(&mut self) -> u64 {
        let end = (self.at + CHUNK_WORDS).min(self.buf.len());
        self.value = self.value.wrapping_add(1);
        stores::store(self.method, &mut self.buf[self.at..end], self.value);
        let n = end - self.at;
        self.at = if end == self.buf.len() { 0 } else { end };
        n as u64 * 8
    }
    fn note(&self) -> Option<String> {
        Some(self.note.clone())
    }
}

/// The `ntstore` kind (registry: mod.rs).
pub const KIND: Kind = Kind::new("ntstore", "memory controller without cache pollution: non-temporal stores over the buffer", "bytes", &[
    super::BYTES,
    Param::choice("method", stores::NT_CHOICES, "streaming store: auto (the fastest measured at start) or nt64/nt128/nt256 (x86_64), stnp (aarch64)").default(Dflt::Str("auto")).arch(stores::ARCH),
], |a, cx| Ok(Box::new(NtStore::new(a.u64("bytes"), cx.huge_pages, &a.str("method")))))
.footprint(1, &["bytes"])
.check(|a, at| {
    if stores::available(stores::NT_CHOICES).is_empty() {
        return crate::plan::err(format!("{at}.kind"), "this CPU has no streaming store xtalk knows (x86_64 movnti/vmovntdq, aarch64 stnp); use write");
    }
    stores::check(&a.str("method"), at)
})
.channel("write");

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn stores_reach_every_word() {
        let mut s = NtStore::new(64 << 10, false, "auto");
        assert_eq!(s.chunk(), 64 << 10);
        s.chunk();
        assert!(s.buf.iter().all(|&w| w == 2));
    }

    #[test]
    fn a_tail_shorter_than_a_vector_is_stored_too() {
        let mut s = NtStore::new(8 * 1003, false, "auto");
        assert_eq!(s.chunk(), 8 * 1003);
        assert!(s.buf.iter().all(|&w| w == 1));
        s.chunk();
        assert!(s.buf.iter().all(|&w| w == 2), "{:?}", &s.buf[995..]);
    }
}
