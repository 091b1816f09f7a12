//! `jobs.bin`: a 64-byte header then `capacity` records of 80 bytes, little-endian.
//!
//! The victim writes record k, then publishes it by storing k+1 in `count` (release order).
//! No system call and no allocation happens on this path; pages are pre-faulted and may be
//! locked before the measured window. A reader trusts only the first `count` records.
//! Layout documented in docs/results.md; the host reads it with numpy.

use super::mapped::MappedFile;
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

pub const MAGIC: [u8; 8] = *b"XTJOBS01";
pub const FLAG_WARMUP: u32 = 1;
pub const FLAG_MISSED: u32 = 2;
pub const FLAG_MIGRATED: u32 = 4;
/// The job could not do its work (e.g. a refused fork); it also counts as missed.
pub const FLAG_FAILED: u32 = 8;

#[repr(C)]
pub struct Header {
    pub magic: [u8; 8],
    pub version: u32,
    pub record_size: u32,
    pub capacity: u64,
    pub count: AtomicU64,
    pub period_ns: u64,
    pub deadline_ns: u64,
    pub t0_ns: i64,
    pub reserved: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct JobRecord {
    pub job: u64,
    pub release_ns: i64,
    pub wakeup_ns: i64,
    pub start_ns: i64,
    pub end_ns: i64,
    pub cpu_time_ns: i64,
    pub nvcsw: i64,
    pub nivcsw: i64,
    pub cpu_start: i32,
    pub cpu_end: i32,
    pub flags: u32,
    pub reserved: u32,
}

const _: () = assert!(std::mem::size_of::<Header>() == 64);
const _: () = assert!(std::mem::size_of::<JobRecord>() == 80);

/// A mapped job log. Created by the agent before fork; the victim inherits the mapping.
pub struct JobLog {
    map: MappedFile,
    /// The run's output directory (the log itself may be staged elsewhere).
    out_dir: std::path::PathBuf,
}

impl JobLog {
    /// Create `path` sized for `capacity` records and map it shared.
    pub fn create(path: &Path, capacity: u64, period_ns: u64, deadline_ns: u64) -> io::Result<JobLog> {
        let out_dir = path.parent().map(|p| p.to_path_buf()).unwrap_or_default();
        let log = JobLog { map: MappedFile::create(path, 64 + capacity as usize * 80)?, out_dir };
        let h = log.header_mut();
        h.magic = MAGIC;
        h.version = 1;
        h.record_size = 80;
        h.capacity = capacity;
        h.count.store(0, Ordering::Release);
        h.period_ns = period_ns;
        h.deadline_ns = deadline_ns;
        h.t0_ns = 0;
        Ok(log)
    }

    /// The run's output directory, where bodies write result files of their own.
    pub fn out_dir(&self) -> &Path {
        &self.out_dir
    }

    pub fn set_out_dir(&mut self, dir: &Path) {
        self.out_dir = dir.to_path_buf();
    }

    fn header_mut(&self) -> &mut Header {
        unsafe { &mut *(self.map.base as *mut Header) }
    }

    pub fn header(&self) -> &Header {
        unsafe { &*(self.map.base as *const Header) }
    }

    /// Touch every page so no page fault happens in the measured window.
    pub fn prefault(&self) {
        self.map.prefault(64);
    }

    pub fn set_t0(&self, t0: i64) {
        self.header_mut().t0_ns = t0;
    }

    /// Store record `k` without publishing it (a command victim's job, completed later).
    pub fn stage(&self, k: u64, rec: &JobRecord) {
        unsafe { std::ptr::write(self.map.base.add(64 + k as usize * 80) as *mut JobRecord, *rec) };
    }

    /// Read back a record, published or not.
    pub fn staged(&self, k: u64) -> JobRecord {
        unsafe { std::ptr::read(self.map.base.add(64 + k as usize * 80) as *const JobRecord) }
    }

    /// Store record `k` and publish it. Caller guarantees k == count and k < capacity.
    #[inline(always)]
    pub fn push(&self, k: u64, rec: &JobRecord) {
        unsafe { std::ptr::write(self.map.base.add(64 + k as usize * 80) as *mut JobRecord, *rec) };
        self.header().count.store(k + 1, Ordering::Release);
    }

    pub fn count(&self) -> u64 {
        self.header().count.load(Ordering::Acquire)
    }

    /// Ask the kernel to write the log out now (after the measured window).
    pub fn flush(&self) {
        self.map.flush();
    }
}

/// Read a job log file without mapping it (used by `xtalk-agent dump`).
pub fn read_file(path: &Path) -> io::Result<(u64, u64, Vec<JobRecord>)> {
    let bytes = std::fs::read(path)?;
    if bytes.len() < 64 || bytes[..8] != MAGIC {
        return Err(io::Error::new(io::ErrorKind::InvalidData, "not an xtalk job log"));
    }
    let u64_at = |o: usize| u64::from_le_bytes(bytes[o..o + 8].try_into().unwrap());
    let capacity = u64_at(16);
    let count = u64_at(24).min(capacity).min(((bytes.len() - 64) / 80) as u64);
    let period = u64_at(32);
    let recs = (0..count as usize)
        .map(|k| unsafe { std::ptr::read_unaligned(bytes.as_ptr().add(64 + k * 80) as *const JobRecord) })
        .collect();
    Ok((count, period, recs))
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn records_are_published_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("jobs.bin");
        let log = JobLog::create(&p, 4, 10, 10).unwrap();
        log.prefault();
        let r = JobRecord { job: 0, release_ns: 5, end_ns: 9, flags: FLAG_MISSED, ..Default::default() };
        log.push(0, &r);
        assert_eq!(log.count(), 1);
        drop(log);
        let (count, period, recs) = read_file(&p).unwrap();
        assert_eq!((count, period), (1, 10));
        assert_eq!(recs[0], r);
    }
    #[test]
    fn rejects_foreign_files() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x");
        std::fs::write(&p, b"hello").unwrap();
        assert!(read_file(&p).is_err());
    }
}
