//! `read`: sequential read bandwidth over a buffer (memory bus / DRAM when it exceeds the LLC).
use super::EnemyLoad;
use super::kind::Kind;
use crate::kernels::Buffer;

const CHUNK_WORDS: usize = 32 << 10; // 256 KiB per chunk

pub struct Read {
    buf: Buffer,
    at: usize,
}

impl Read {
    pub fn new(bytes: u64, huge_pages: bool) -> Read {
        let mut buf = Buffer::zeroed((bytes / 8) as usize, huge_pages);
        for (i, w) in buf.iter_mut().enumerate() {
            *w = i as u64;
        }
        Read { buf, at: 0 }
    }
}

/// Sum of `words`: four independent 256-bit accumulators where the CPU has AVX2 (more loads
/// in flight per cycle than the compiler's baseline SSE2 loop: +5–10 % from DRAM on the
/// development VM), the plain fold elsewhere (on aarch64 the compiler vectorises it with
/// NEON, which every Armv8-A core has, so no run-time check is needed).
fn sum(words: &[u64]) -> u64 {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        return unsafe { sum_avx2(words) };
    }
    words.iter().fold(0u64, |a, &x| a.wrapping_add(x))
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn sum_avx2(words: &[u64]) -> u64 {
    use std::arch::x86_64::*;
    let blocks = words.len() / 16;
    let p = words.as_ptr() as *const __m256i;
    let mut acc = [_mm256_setzero_si256(); 4];
    for i in 0..blocks {
        for (j, a) in acc.iter_mut().enumerate() {
            *a = _mm256_add_epi64(*a, _mm256_loadu_si256(p.add(i * 4 + j)));
        }
    }
    let all = _mm256_add_epi64(_mm256_add_epi64(acc[0], acc[1]), _mm256_add_epi64(acc[2], acc[3]));
    let mut lanes = [0u64; 4];
    _mm256_storeu_si256(lanes.as_mut_ptr() as *mut __m256i, all);
    let tail = words[blocks * 16..].iter().fold(0u64, |a, &x| a.wrapping_add(x));
    lanes.iter().fold(tail, |a, &x| a.wrapping_add(x))
}

impl EnemyLoad for Read {
    fn chunk(&mut self) -> u64 {
        let end = (self.at + CHUNK_WORDS).min(self.buf.len());
        let s = sum(&self.buf[self.at..end]);
        std::hint::black_box(s);
        let n = end - self.at;
        self.at = if end == self.buf.len() { 0 } else { end };
        n as u64 * 8
    }
}

/// The `read` kind (registry: mod.rs).
pub const KIND: Kind = Kind::new("read", "read bandwidth: sequential sum over the buffer", "bytes", &[super::BYTES], |a, cx| {
    Ok(Box::new(Read::new(a.u64("bytes"), cx.huge_pages)))
})
.footprint(1, &["bytes"])
.channel("read");

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn vector_sum_equals_the_plain_fold() {
        let words: Vec<u64> = (0..1000u64).map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15)).collect();
        for n in [0, 1, 15, 16, 17, 999, 1000] {
            let want = words[..n].iter().fold(0u64, |a, &x| a.wrapping_add(x));
            assert_eq!(sum(&words[..n]), want, "n = {n}");
        }
    }
}
