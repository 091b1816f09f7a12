//! Where the record files live during a run. A file-backed mapping on a disk file system is
//! written back by the kernel while the victim runs, and the victim's next store to a page
//! written back takes a fault that can wait on the file system's journal (measured on ext4:
//! p99 wake-up latency 19.8 ms against 0.25 ms on tmpfs). So the records live on tmpfs
//! (/dev/shm/xtalk-<pid>/) during the run, the run directory holds symlinks to them (readable
//! whatever dies), and moving them into the run directory is a journalled change: done when
//! the run ends, or by the next agent's recovery if this one was killed.

use crate::launch::journal::Journal;
use std::path::{Path, PathBuf};

pub struct Staging {
    dir: Option<PathBuf>,
    out: PathBuf,
}

const TMPFS: &str = "/dev/shm";

fn is_tmpfs(p: &str) -> bool {
    std::fs::read_to_string("/proc/mounts")
        .map(|m| m.lines().any(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.len() > 2 && f[1] == p && f[2] == "tmpfs"
        }))
        .unwrap_or(false)
}

impl Staging {
    /// A staging directory on tmpfs, or none (files go straight to `out`) where there is none.
    pub fn new(out: &Path, journal: &mut Journal) -> Staging {
        let dir = is_tmpfs(TMPFS).then(|| PathBuf::from(format!("{TMPFS}/xtalk-{}", std::process::id())));
        let dir = dir.filter(|d| journal.mkdir(d).is_ok());
        Staging { dir, out: out.to_path_buf() }
    }

    /// Where to create record file `name`: on tmpfs with a symlink from the run directory,
    /// the move journalled; or in the run directory itself.
    pub fn file(&self, name: &str, journal: &mut Journal) -> Result<PathBuf, String> {
        let dest = self.out.join(name);
        let Some(dir) = &self.dir else { return Ok(dest) };
        let tmp = dir.join(name);
        journal.stage(&tmp, &dest)?;
        // Left by an attempt killed before it wrote run.json (a directory holding a run is
        // refused before this): replace it, as creating the file in place would.
        if dest.symlink_metadata().is_ok() {
            std::fs::remove_file(&dest).map_err(|e| format!("{}: {e}", dest.display()))?;
        }
        std::os::unix::fs::symlink(&tmp, &dest).map_err(|e| format!("{}: {e}", dest.display()))?;
        Ok(tmp)
    }

    /// The directory the records are staged in (tmpfs), if any.
    pub fn on_tmpfs(&self) -> bool {
        self.dir.is_some()
    }
}

/// Move a staged file into place: copy, fsync, rename over the symlink, remove the original.
/// A run directory that no longer exists (moved or deleted by its owner): the copy is dropped.
pub fn materialize(tmp: &Path, dest: &Path) -> Result<(), String> {
    if !tmp.exists() {
        return Ok(());
    }
    if !dest.parent().map_or(false, |p| p.is_dir()) {
        let _ = std::fs::remove_file(tmp);
        return Ok(());
    }
    let part = dest.with_extension("part");
    let copy = || -> std::io::Result<()> {
        super::mapped::trim_to_published(tmp)?; // a stopped run copies what it recorded
        std::fs::copy(tmp, &part)?;
        std::fs::File::open(&part)?.sync_all()?;
        std::fs::rename(&part, dest)?;
        std::fs::remove_file(tmp)
    };
    copy().map_err(|e| format!("{} -> {}: {e}", tmp.display(), dest.display()))
}
