//! `ntstore`: non-temporal store bandwidth. Streaming stores (256-bit `vmovntdq` where the
//! CPU has AVX, else `movnti` through `_mm_stream_si64`, on x86_64) write a `bytes` buffer
//! without reading it and without allocating its lines in the caches: all of the traffic
//! goes to the memory controller, and the caches the victim uses are left alone, which
//! separates the memory channel from the cache channel. On aarch64, `stnp` stores pairs of
//! words with the non-temporal hint (the core may stream them past its caches; the Cortex-A53
//! does for whole lines). Other architectures use ordinary volatile stores (a portable
//! fallback, cached). The counter is bytes stored.
use super::EnemyLoad;
use super::kind::Kind;
use crate::kernels::Buffer;

const CHUNK_WORDS: usize = 32 << 10; // 256 KiB per chunk

pub struct NtStore {
    buf: Buffer,
    at: usize,
    value: u64,
}

impl NtStore {
    pub fn new(bytes: u64, huge_pages: bool) -> NtStore {
        let mut buf = Buffer::zeroed((bytes / 8) as usize, huge_pages);
        buf.fill(1);
        NtStore { buf, at: 0, value: 0 }
    }
}

#[cfg(target_arch = "x86_64")]
fn store(dst: &mut [u64], v: u64) {
    use std::arch::x86_64::{_mm_sfence, _mm_stream_si64};
    // Whole 32-byte stores where AVX allows (fewer, wider write-combining fills than 8-byte
    // movnti); movnti for the rest.
    let mut done = 0;
    if std::arch::is_x86_feature_detected!("avx") && dst.as_ptr() as usize % 32 == 0 {
        done = dst.len() / 4 * 4;
        unsafe { store_avx(&mut dst[..done], v) };
    }
    for w in dst[done..].iter_mut() {
        unsafe { _mm_stream_si64(w as *mut u64 as *mut i64, v as i64) };
    }
    // Order the streaming stores before anything that follows (they are weakly ordered).
    unsafe { _mm_sfence() };
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
unsafe fn store_avx(dst: &mut [u64], v: u64) {
    use std::arch::x86_64::{__m256i, _mm256_set1_epi64x, _mm256_stream_si256};
    let x = _mm256_set1_epi64x(v as i64);
    let p = dst.as_mut_ptr() as *mut __m256i;
    for i in 0..dst.len() / 4 {
        _mm256_stream_si256(p.add(i), x);
    }
}

#[cfg(target_arch = "aarch64")]
fn store(dst: &mut [u64], v: u64) {
    let mut pairs = dst.chunks_exact_mut(2);
    for p in &mut pairs {
        // SAFETY: `p` is two writable, 8-byte aligned words of the buffer.
        unsafe { core::arch::asm!("stnp {v}, {v}, [{p}]", v = in(reg) v, p = in(reg) p.as_mut_ptr(), options(nostack, preserves_flags)) };
    }
    for w in pairs.into_remainder() {
        unsafe { std::ptr::write_volatile(w, v) };
    }
    // stnp is exempt from address-dependency ordering: order it before what follows.
    unsafe { core::arch::asm!("dmb ishst", options(nostack, preserves_flags)) };
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
fn store(dst: &mut [u64], v: u64) {
    for w in dst.iter_mut() {
        unsafe { std::ptr::write_volatile(w, v) };
    }
}

impl EnemyLoad for NtStore {
    fn chunk(&mut self) -> u64 {
        let end = (self.at + CHUNK_WORDS).min(self.buf.len());
        self.value = self.value.wrapping_add(1);
        store(&mut self.buf[self.at..end], self.value);
        let n = end - self.at;
        self.at = if end == self.buf.len() { 0 } else { end };
        n as u64 * 8
    }
}

/// The `ntstore` kind (registry: mod.rs).
pub const KIND: Kind = Kind::new("ntstore", "memory controller without cache pollution: non-temporal stores over the buffer", "bytes", &[super::BYTES], |a, cx| {
    Ok(Box::new(NtStore::new(a.u64("bytes"), cx.huge_pages)))
})
.footprint(1, &["bytes"])
.channel("write");

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn stores_reach_every_word() {
        let mut s = NtStore::new(64 << 10, false);
        assert_eq!(s.chunk(), 64 << 10);
        s.chunk();
        assert!(s.buf.iter().all(|&w| w == 2));
    }

    #[test]
    fn a_tail_shorter_than_a_vector_is_stored_too() {
        let mut s = NtStore::new(8 * 1003, false);
        assert_eq!(s.chunk(), 8 * 1003);
        assert!(s.buf.iter().all(|&w| w == 1));
        s.chunk();
        assert!(s.buf.iter().all(|&w| w == 2), "{:?}", &s.buf[995..]);
    }
}
