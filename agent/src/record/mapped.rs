//! A file mapped MAP_SHARED: what a process writes there survives its death (the page
//! cache holds it), with no system call per write.
use std::fs::OpenOptions;
use std::io;
use std::path::Path;

pub struct MappedFile {
    pub base: *mut u8,
    pub len: usize,
}

unsafe impl Send for MappedFile {}

impl MappedFile {
    /// Create `path` (a new file: O_EXCL|O_NOFOLLOW, so never through a symlink) with `len`
    /// bytes and map it.
    pub fn create(path: &Path, len: usize) -> io::Result<MappedFile> {
        let (dir, name) = crate::safefs::parent_of(path)?; // no component followed as a symlink
        let f = dir.create(&name, 0o644)?;
        f.set_len(len as u64)?;
        let base = unsafe {
            libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, std::os::fd::AsRawFd::as_raw_fd(&f), 0)
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(MappedFile { base: base as *mut u8, len })
    }

    /// Touch every page after `from` so no page fault happens in the measured window.
    pub fn prefault(&self, from: usize) {
        let mut off = from;
        while off < self.len {
            unsafe { std::ptr::write_volatile(self.base.add(off), 0) };
            off += 4096;
        }
    }

    /// Ask the kernel to write the file out now (after the measured window).
    pub fn flush(&self) {
        unsafe { libc::msync(self.base as *mut libc::c_void, self.len, libc::MS_SYNC) };
    }
}

impl Drop for MappedFile {
    fn drop(&mut self) {
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.len) };
    }
}

/// Cut a record file (jobs.bin, counters.bin, probes.bin: magic, version u32, record_size
/// u32, capacity u64, then the published count u64) down to its published records, so that
/// a run stopped early copies what it recorded, not its whole capacity. A file that does not
/// have this header, or already ends there, is left alone.
pub fn trim_to_published(path: &Path) -> io::Result<()> {
    use std::io::Read;
    let f = OpenOptions::new().read(true).write(true).open(path)?;
    let mut h = [0u8; 64];
    if (&f).read_exact(&mut h).is_err() || &h[..2] != b"XT" {
        return Ok(());
    }
    let u64_at = |o: usize| u64::from_le_bytes(h[o..o + 8].try_into().unwrap());
    let record = u32::from_le_bytes(h[12..16].try_into().unwrap()) as u64;
    let (capacity, count) = (u64_at(16), u64_at(24));
    let keep = 64u64.saturating_add(count.min(capacity).saturating_mul(record));
    if keep < f.metadata()?.len() {
        f.set_len(keep)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trim_keeps_the_published_records_only() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("jobs.bin");
        let log = crate::record::jobs::JobLog::create(&p, 1000, 10, 10).unwrap();
        log.push(0, &Default::default());
        log.push(1, &Default::default());
        drop(log);
        assert_eq!(std::fs::metadata(&p).unwrap().len(), 64 + 1000 * 80);
        trim_to_published(&p).unwrap();
        assert_eq!(std::fs::metadata(&p).unwrap().len(), 64 + 2 * 80);
        let (count, _, recs) = crate::record::jobs::read_file(&p).unwrap();
        assert_eq!((count, recs.len()), (2, 2));
        let other = dir.path().join("notes.txt");
        std::fs::write(&other, b"not a record file, longer than nothing at all").unwrap();
        trim_to_published(&other).unwrap();
        assert_eq!(std::fs::read(&other).unwrap(), b"not a record file, longer than nothing at all");
    }
}
