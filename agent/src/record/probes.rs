//! `probes.bin`: the buffer user probes (include/xtalk/probe.h) write into. Created by the
//! agent, handed to the victim command as an inherited descriptor (XTALK_PROBE_FD).
//! Header (64 bytes): magic "XTPROBE1", version u32, record_size u32 (32), capacity u64,
//! next u64 (slots handed out, in per-thread chunks), dropped u64, reserved. Records: seq u64
//! (slot + 1 when complete; 0 in a chunk's unused tail), ticks u64, id u32, kind u32 (0 begin,
//! 1 end, 2 mark, 3 name: eight bytes of the probe's name in `ticks` at byte offset `cpu`),
//! cpu u32, tid u32. The agent reads only `seq`; the host reads the rest (store/probes.py).

use super::mapped::MappedFile;
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

pub const MAGIC: [u8; 8] = *b"XTPROBE1";

pub struct ProbeBuffer {
    map: MappedFile,
    pub fd: i32,
}

impl ProbeBuffer {
    pub fn create(path: &Path, capacity: u64) -> io::Result<ProbeBuffer> {
        let map = MappedFile::create(path, 64 + capacity as usize * 32)?;
        unsafe {
            std::ptr::copy_nonoverlapping(MAGIC.as_ptr(), map.base, 8);
            std::ptr::write(map.base.add(8) as *mut u32, 1);
            std::ptr::write(map.base.add(12) as *mut u32, 32);
            std::ptr::write(map.base.add(16) as *mut u64, capacity);
        }
        map.prefault(64);
        // A descriptor of our own for the victim to inherit (the mapping's is closed).
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        let fd = unsafe { libc::open(c.as_ptr(), libc::O_RDWR | libc::O_NOFOLLOW | libc::O_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(ProbeBuffer { map, fd })
    }

    fn word(&self, off: usize) -> &AtomicU64 {
        unsafe { &*(self.map.base.add(off) as *const AtomicU64) }
    }

    /// (complete records, probes dropped).
    pub fn counts(&self) -> (u64, u64) {
        let capacity = unsafe { std::ptr::read(self.map.base.add(16) as *const u64) };
        let handed = self.word(24).load(Ordering::Acquire).min(capacity);
        let complete = (0..handed).filter(|&k| self.word(64 + k as usize * 32).load(Ordering::Acquire) == k + 1).count() as u64;
        (complete, self.word(32).load(Ordering::Acquire))
    }

    pub fn flush(&self) {
        self.map.flush();
    }
}

impl Drop for ProbeBuffer {
    fn drop(&mut self) {
        unsafe { libc::close(self.fd) };
    }
}
