//! `diskfill`: writes an unnamed file in `dir` (O_TMPFILE, or created and unlinked at once:
//! its space is freed when the enemy dies, however it dies) up to `bytes`, syncs it, empties
//! it and starts again. RLIMIT_FSIZE = `bytes` is the hard ceiling; the plan check keeps it
//! under half of the file system's free space. Counts bytes written.
use super::limits;
use super::kind::{Dflt, Kind, Param};
use crate::plan::err;
use super::EnemyLoad;
use std::ffi::CString;

const CHUNK: usize = 256 << 10;

pub struct DiskFill {
    fd: i32,
    bytes: u64,
    written: u64,
    buf: Vec<u8>,
}

fn unnamed_file(dir: &str) -> Result<i32, String> {
    let cdir = CString::new(dir).map_err(|_| "dir contains a NUL byte".to_string())?;
    let fd = unsafe { libc::open(cdir.as_ptr(), libc::O_TMPFILE | libc::O_RDWR | libc::O_CLOEXEC, 0o600) };
    if fd >= 0 {
        return Ok(fd);
    }
    // File systems without O_TMPFILE: create, then unlink before the first write.
    let path = CString::new(format!("{dir}/.xtalk-diskfill-{}", unsafe { libc::getpid() })).unwrap();
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_CREAT | libc::O_EXCL | libc::O_RDWR | libc::O_CLOEXEC, 0o600) };
    if fd < 0 {
        return Err(format!("{dir}: {}", std::io::Error::last_os_error()));
    }
    unsafe { libc::unlink(path.as_ptr()) };
    Ok(fd)
}

impl DiskFill {
    pub fn new(dir: &str, bytes: u64) -> DiskFill {
        // Past the ceiling write() fails with EFBIG instead of killing us with SIGXFSZ.
        unsafe { libc::signal(libc::SIGXFSZ, libc::SIG_IGN) };
        limits::cap(libc::RLIMIT_FSIZE, bytes, "RLIMIT_FSIZE");
        let fd = unnamed_file(dir).unwrap_or_else(|e| {
            eprintln!("diskfill: {e}");
            unsafe { libc::_exit(3) }
        });
        DiskFill { fd, bytes, written: 0, buf: vec![0xA5; CHUNK] }
    }
}

impl EnemyLoad for DiskFill {
    fn chunk(&mut self) -> u64 {
        let want = CHUNK.min((self.bytes - self.written) as usize);
        let n = if want == 0 { -1 } else { unsafe { libc::write(self.fd, self.buf.as_ptr() as *const libc::c_void, want) } };
        if n <= 0 {
            // Full (ceiling, EFBIG or ENOSPC): push it to the device, then empty it.
            unsafe {
                libc::fdatasync(self.fd);
                libc::ftruncate(self.fd, 0);
                libc::lseek(self.fd, 0, libc::SEEK_SET);
            }
            self.written = 0;
            return 0;
        }
        self.written += n as u64;
        n as u64
    }
}

/// The `diskfill` kind (registry: mod.rs).
pub const KIND: Kind = Kind::new("diskfill", "failure propagation: an unnamed file written up to RLIMIT_FSIZE = bytes, synced, emptied, again", "bytes", &[
    Param::str("dir", "directory of the unnamed file").default(Dflt::Str("/tmp")),
    Param::u64("bytes", "the hard ceiling (at most half the free space of dir)").min(1 << 20).unit("bytes"),
], |a, _| Ok(Box::new(DiskFill::new(&a.str("dir"), a.u64("bytes")))))
.check(|a, at| {
    let dir = a.str("dir");
    let free = fs_free_bytes(&dir).or_else(|m| err(format!("{at}.dir"), m))?;
    if a.u64("bytes") > free / 2 {
        return err(format!("{at}.bytes"), format!("must be between 1 MiB and half the free space of '{dir}' ({} MiB)", free >> 21));
    }
    Ok(())
})
.channel("disk")
.fault();

/// Free bytes of the file system holding directory `dir` (for unprivileged users).
pub fn fs_free_bytes(dir: &str) -> Result<u64, String> {
    if !std::path::Path::new(dir).is_dir() {
        return Err(format!("'{dir}' is not a directory; name an existing directory (default: the temporary directory)"));
    }
    let c = std::ffi::CString::new(dir).map_err(|_| "contains a NUL byte".to_string())?;
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return Err(format!("'{dir}': {}", std::io::Error::last_os_error()));
    }
    Ok(st.f_bavail as u64 * st.f_frsize as u64)
}
