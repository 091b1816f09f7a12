//! `fileio`: page-cache file I/O (seed 000 §5.3.1, mono versus multi file). The enemy
//! reads a `bytes` file with pread(2) in 64 KiB blocks, over and over: after the first
//! pass the file lives in the page cache, so each read is a system call plus a kernel copy
//! from page-cache pages, loading the kernel paths, the LLC and memory. With `shared`,
//! every copy of the enemy in the run reads one file (one set of page-cache pages,
//! seed 000's "mono file"); without it each copy has its own file ("multi files", n times
//! the footprint). Files go to `dir` (default: $TMPDIR or /tmp) and are unlinked as soon
//! as every reader holds them open (after the start barrier; at once for private files),
//! so nothing is left behind once the run ends. The counter is bytes read.
use super::{Ctx, EnemyLoad};
use std::ffi::CString;
use std::io::Write;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

const BLOCK: usize = 64 << 10;
const BLOCKS_PER_CHUNK: usize = 4;

pub struct FileIo {
    file: std::fs::File,
    path: Option<PathBuf>,
    len: u64,
    at: u64,
    buf: Vec<u8>,
    prepared: bool,
}

fn fill(path: &Path, bytes: u64) -> std::io::Result<()> {
    let mut f = std::fs::File::create(path)?;
    let block: Vec<u8> = (0..BLOCK).map(|i| (i * 131 % 251) as u8).collect();
    let mut left = bytes;
    while left > 0 {
        let n = left.min(BLOCK as u64) as usize;
        f.write_all(&block[..n])?;
        left -= n as u64;
    }
    Ok(())
}

/// link(2) fails if the name exists: the first enemy to finish its copy wins, and every
/// reader sees a complete file.
fn link(from: &Path, to: &Path) -> std::io::Result<()> {
    let a = CString::new(from.as_os_str().as_encoded_bytes()).unwrap();
    let b = CString::new(to.as_os_str().as_encoded_bytes()).unwrap();
    if unsafe { libc::link(a.as_ptr(), b.as_ptr()) } == 0 {
        return Ok(());
    }
    let e = std::io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EEXIST) {
        Ok(())
    } else {
        Err(e)
    }
}

impl FileIo {
    pub fn new(bytes: u64, shared: bool, dir: Option<&str>, cx: &Ctx) -> Result<FileIo, String> {
        let dir = dir.map(PathBuf::from).unwrap_or_else(std::env::temp_dir);
        let own = dir.join(format!("xtalk-fileio-{}-{}", cx.agent_pid, cx.index));
        let attempt = || -> std::io::Result<FileIo> {
            fill(&own, bytes)?;
            let (file, path) = if shared {
                let name = dir.join(format!("xtalk-fileio-{}-shared-{bytes}", cx.agent_pid));
                link(&own, &name)?;
                let _ = std::fs::remove_file(&own);
                (std::fs::File::open(&name)?, Some(name))
            } else {
                let f = std::fs::File::open(&own)?;
                std::fs::remove_file(&own)?;
                (f, None)
            };
            Ok(FileIo { file, path, len: bytes, at: 0, buf: vec![0; BLOCK], prepared: false })
        };
        attempt().map_err(|e| {
            let _ = std::fs::remove_file(&own);
            format!("fileio: cannot prepare a file in {}: {e}", dir.display())
        })
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
            if let Some(p) = self.path.take() {
                let _ = std::fs::remove_file(p);
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
