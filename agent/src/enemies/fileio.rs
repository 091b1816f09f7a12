//! `fileio`: page-cache file I/O (seed 000 §5.3.1, mono versus multi file). The enemy
//! reads a `bytes` file with pread(2) in 64 KiB blocks, over and over: after the first
//! pass the file lives in the page cache, so each read is a system call plus a kernel copy
//! from page-cache pages, loading the kernel paths, the LLC and memory. With `shared`,
//! every copy of the enemy in the run reads one file (one set of page-cache pages,
//! seed 000's "mono file"); without it each copy has its own file ("multi files", n times
//! the footprint). Files go to a private directory the agent made in `dir` (default:
//! $TMPDIR or /tmp) for the run (`xtalk-fileio-<random>`, mode 0700, removed at the end
//! whatever happens): nothing is ever created by a predictable name in a directory others
//! can write, and every file is created O_EXCL|O_NOFOLLOW relative to that directory.
//! Files are unlinked as soon as every reader holds them open (after the start barrier; at
//! once for private files). The counter is bytes read.
use super::{Ctx, EnemyLoad};
use super::kind::{Dflt, Kind, Param};
use crate::plan::err;
use crate::safefs::{self, Dir};
use std::io::Write;
use std::os::unix::io::AsRawFd;

const BLOCK: usize = 64 << 10;
const BLOCKS_PER_CHUNK: usize = 4;

pub struct FileIo {
    file: std::fs::File,
    /// The shared file's name, removed past the barrier (every reader holds it open then).
    shared: Option<(Dir, String)>,
    len: u64,
    at: u64,
    buf: Vec<u8>,
    prepared: bool,
}

fn fill(dir: &Dir, name: &str, bytes: u64) -> std::io::Result<()> {
    let mut f = dir.create(name, 0o600)?;
    let block: Vec<u8> = (0..BLOCK).map(|i| (i * 131 % 251) as u8).collect();
    let mut left = bytes;
    while left > 0 {
        let n = left.min(BLOCK as u64) as usize;
        f.write_all(&block[..n])?;
        left -= n as u64;
    }
    Ok(())
}

impl FileIo {
    pub fn new(bytes: u64, shared: bool, cx: &Ctx) -> Result<FileIo, String> {
        let path = cx.scratch.as_ref().ok_or("fileio: the run has no scratch directory for it")?;
        // Made by the agent; verified again: still a private directory of ours.
        let dir = safefs::open_verified(path, true).map_err(|e| format!("fileio: {e}"))?;
        let own = format!("own-{}", cx.index);
        let attempt = || -> std::io::Result<(std::fs::File, Option<String>)> {
            fill(&dir, &own, bytes)?;
            if shared {
                // link(2) fails if the name exists: the first enemy to finish its copy wins,
                // and every reader sees a complete file.
                let name = format!("shared-{bytes}");
                if let Err(e) = dir.link(&own, &name) {
                    if e.raw_os_error() != Some(libc::EEXIST) {
                        return Err(e);
                    }
                }
                let _ = dir.unlink(&own);
                Ok((dir.open_file(&name, libc::O_RDONLY)?, Some(name)))
            } else {
                let f = dir.open_file(&own, libc::O_RDONLY)?;
                dir.unlink(&own)?;
                Ok((f, None))
            }
        };
        match attempt() {
            Ok((file, name)) => Ok(FileIo { file, shared: name.map(|n| (dir, n)), len: bytes, at: 0, buf: vec![0; BLOCK], prepared: false }),
            Err(e) => {
                let _ = dir.unlink(&own);
                Err(format!("fileio: cannot prepare a file in {}: {e}", path.display()))
            }
        }
    }
}

impl EnemyLoad for FileIo {
    fn prepare(&mut self) {
        // One full pass: the file is in the page cache before the window.
        let mut read = 0;
        while read < self.len {
            read += self.chunk();
        }
        self.at = 0;
        self.prepared = true;
    }

    fn chunk(&mut self) -> u64 {
        if self.prepared {
            // Past the barrier every reader holds the shared file open: drop its name.
            if let Some((dir, name)) = self.shared.take() {
                let _ = dir.unlink(&name);
            }
        }
        let mut done = 0u64;
        for _ in 0..BLOCKS_PER_CHUNK {
            let want = (self.len - self.at).min(BLOCK as u64) as usize;
            let n = unsafe { libc::pread(self.file.as_raw_fd(), self.buf.as_mut_ptr() as *mut libc::c_void, want, self.at as i64) };
            if n <= 0 {
                self.at = 0;
                continue;
            }
            done += n as u64;
            self.at += n as u64;
            if self.at >= self.len {
                self.at = 0;
            }
        }
        done
    }
}

/// The `fileio` kind (registry: mod.rs).
pub const KIND: Kind = Kind::new("fileio", "page cache and kernel copy: pread of a file in 64 KiB blocks, over and over", "bytes", &[
    super::BYTES.file_default("16MiB"),
    Param::bool("shared", "one file for every copy in the run (mono file) instead of one each"),
    Param::str("dir", "directory of the files (default: $TMPDIR)").default(Dflt::Unset),
], |a, cx| Ok(Box::new(FileIo::new(a.u64("bytes"), a.bool("shared"), cx)?)))
.footprint(1, &["bytes"])
.scratch_in("dir")
.check(|a, at| {
    if let Some(d) = a.opt_str("dir") {
        let c = std::ffi::CString::new(d.as_bytes()).or_else(|_| err(format!("{at}.dir"), "holds a NUL byte"))?;
        if !std::path::Path::new(&d).is_dir() || unsafe { libc::access(c.as_ptr(), libc::W_OK) } != 0 {
            return err(format!("{at}.dir"), format!("'{d}' is not a writable directory; create it or leave `dir` out for $TMPDIR"));
        }
    }
    Ok(())
})
.channel("page-cache");
