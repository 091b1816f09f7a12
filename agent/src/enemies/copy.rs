//! `copy`: memory copy bandwidth (STREAM "copy"). Copies 128 KiB blocks from the first
//! half of a `bytes` buffer to the second, walking both halves, so a buffer larger than
//! the LLC keeps the memory controller busy with reads and write-backs at once. The
//! counter is bytes read plus bytes written, as STREAM counts copy traffic.
use super::EnemyLoad;
use super::kind::{Kind, Param};
use crate::kernels::Buffer;

/// Below glibc's non-temporal threshold, so memcpy uses ordinary (cached) stores.
const BLOCK_WORDS: usize = 16 << 10;

pub struct Copy {
    buf: Buffer,
    half: usize,
    at: usize,
}

impl Copy {
    pub fn new(bytes: u64, huge_pages: bool) -> Copy {
        let mut buf = Buffer::zeroed((bytes / 8) as usize, huge_pages);
        for (i, w) in buf.iter_mut().enumerate() {
            *w = i as u64;
        }
        let half = buf.len() / 2;
        Copy { buf, half, at: 0 }
    }
}

impl EnemyLoad for Copy {
    fn chunk(&mut self) -> u64 {
        let n = BLOCK_WORDS.min(self.half - self.at);
        let (src, dst) = self.buf.split_at_mut(self.half);
        dst[self.at..self.at + n].copy_from_slice(&src[self.at..self.at + n]);
        std::hint::black_box(dst.as_ptr());
        self.at += n;
        if self.at == self.half {
            self.at = 0;
        }
        2 * 8 * n as u64
    }
}

/// The `copy` kind (registry: mod.rs). Copy counts bytes read plus bytes written, as STREAM does.
pub const KIND: Kind = Kind::new("copy", "copy bandwidth (STREAM copy): 128 KiB memcpy blocks from one half of the buffer to the other", "bytes",
    &[Param::u64("bytes", "buffer size (two halves of at least 4 KiB)").min(8192).unit("bytes")], |a, cx| {
    Ok(Box::new(Copy::new(a.u64("bytes"), cx.huge_pages)))
})
.footprint(1, &["bytes"])
.channel("copy");

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn copies_the_first_half_to_the_second() {
        let mut c = Copy::new(1 << 20, false);
        let mut total = 0;
        while total < 1 << 20 {
            total += c.chunk();
        }
        assert_eq!(total, 1 << 20, "one pass moves each half once: bytes read + written = buffer");
        let h = c.half;
        assert!((0..h).all(|i| c.buf[h + i] == i as u64));
    }
}
