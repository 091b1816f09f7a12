//! `write`: sequential write bandwidth over a buffer (store traffic, write-backs).
use super::EnemyLoad;
use super::kind::Kind;
use crate::kernels::Buffer;

const CHUNK_WORDS: usize = 32 << 10; // 256 KiB per chunk

pub struct Write {
    buf: Buffer,
    at: usize,
    value: u64,
}

impl Write {
    pub fn new(bytes: u64, huge_pages: bool) -> Write {
        let mut buf = Buffer::zeroed((bytes / 8) as usize, huge_pages);
        buf.fill(1); // back every page before the window
        Write { buf, at: 0, value: 0 }
    }
}

impl EnemyLoad for Write {
    fn chunk(&mut self) -> u64 {
        let end = (self.at + CHUNK_WORDS).min(self.buf.len());
        self.value = self.value.wrapping_add(1);
        for w in &mut self.buf[self.at..end] {
            *w = self.value;
        }
        std::hint::black_box(self.buf.as_ptr());
        let n = end - self.at;
        self.at = if end == self.buf.len() { 0 } else { end };
        n as u64 * 8
    }
}

/// The `write` kind (registry: mod.rs).
pub const KIND: Kind = Kind::new("write", "write bandwidth: sequential stores", "bytes", &[super::BYTES], |a, cx| {
    Ok(Box::new(Write::new(a.u64("bytes"), cx.huge_pages)))
})
.footprint(1, &["bytes"])
.channel("write");
