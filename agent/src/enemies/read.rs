//! `read`: sequential read bandwidth over a buffer (memory bus / DRAM when it exceeds the LLC).
use super::EnemyLoad;
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

impl EnemyLoad for Read {
    fn chunk(&mut self) -> u64 {
        let end = (self.at + CHUNK_WORDS).min(self.buf.len());
        let s = self.buf[self.at..end].iter().fold(0u64, |a, &x| a.wrapping_add(x));
        std::hint::black_box(s);
        let n = end - self.at;
        self.at = if end == self.buf.len() { 0 } else { end };
        n as u64 * 8
    }
}
