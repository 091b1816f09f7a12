//! A file mapped MAP_SHARED: what a process writes there survives its death (the page
//! cache holds it), with no system call per write.
use std::fs::OpenOptions;
use std::os::unix::fs::OpenOptionsExt;
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
        let f = OpenOptions::new().read(true).write(true).create_new(true).mode(0o644).custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC).open(path)?;
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
