//! Where the record files live during a run. A file-backed mapping on a disk file system is
//! written back by the kernel while the victim runs, and the victim's next store to a page
//! written back takes a fault that can wait on the file system's journal (measured on ext4:
//! p99 wake-up latency 19.8 ms against 0.25 ms on tmpfs). So the records live on tmpfs
//! (a private directory /dev/shm/xtalk-<random>/, mode 0700) during the run, the run directory holds symlinks to them (readable
//! whatever dies), and moving them into the run directory is a journalled change: done when
//! the run ends, or by the next agent's recovery if this one was killed.

use super::journal::{Journal, Outcome};
use crate::safefs::{self, Dir};
use std::path::{Path, PathBuf};

pub struct Staging {
    dir: Option<Dir>,
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
    /// A private staging directory on tmpfs (/dev/shm/xtalk-<random>, mode 0700, made and
    /// verified here, journalled), or none (files go straight to `out`) where there is none.
    pub fn new(out: &Path, journal: &mut Journal) -> Staging {
        let dir = is_tmpfs(TMPFS).then(|| Path::new(TMPFS).join(safefs::random_name("xtalk-")));
        let dir = dir.and_then(|d| journal.private(&d).ok());
        Staging { dir, out: out.to_path_buf() }
    }

    /// Where to create record file `name`: on tmpfs with a symlink from the run directory,
    /// the move journalled; or in the run directory itself. Whatever has the name in the run
    /// directory (left by an attempt killed before it wrote run.json: a directory holding a
    /// run is refused before this) is replaced, never followed.
    /// `name` may be a path below the run directory ("applications/<app>/jobs.bin"): its
    /// staged copy has one flat name in the staging directory ('/' written as '%', which no
    /// application name holds).
    pub fn file(&self, name: &str, journal: &mut Journal) -> Result<PathBuf, String> {
        let dest = self.out.join(name);
        if dest.symlink_metadata().is_ok() {
            std::fs::remove_file(&dest).map_err(|e| format!("{}: {e}", dest.display()))?;
        }
        let Some(dir) = &self.dir else { return Ok(dest) };
        let tmp = dir.path.join(name.replace('/', "%"));
        journal.stage(&tmp, &dest)?;
        std::os::unix::fs::symlink(&tmp, &dest).map_err(|e| format!("{}: {e}", dest.display()))?;
        Ok(tmp)
    }

    /// The directory the records are staged in (tmpfs), if any.
    pub fn on_tmpfs(&self) -> bool {
        self.dir.is_some()
    }
}

/// Move a staged file into place: copy into a fresh `.part` file (O_EXCL|O_NOFOLLOW), fsync,
/// rename over the symlink, remove the original. The staged file is read only from a private
/// directory of this user. A run directory that no longer exists (moved or deleted by its
/// owner): the copy is dropped.
pub fn materialize(tmp: &Path, dest: &Path) -> Vec<Outcome> {
    let (Some(parent), Some(name)) = (tmp.parent(), tmp.file_name().and_then(|n| n.to_str())) else {
        return vec![Outcome::Refused(format!("{} is not a staged file", tmp.display()))];
    };
    if parent.symlink_metadata().is_err() {
        return vec![];
    }
    let dir = match safefs::open_verified(parent, true) {
        Ok(d) => d,
        Err(why) => return vec![Outcome::Refused(format!("did not move {}: {why}", tmp.display()))],
    };
    let mut src = match dir.open_file(name, libc::O_RDONLY) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return vec![],
        Err(e) => return vec![Outcome::Refused(format!("did not move {}: {e}", tmp.display()))],
    };
    if !dest.parent().map_or(false, |p| p.is_dir()) {
        let _ = dir.unlink(name);
        return vec![Outcome::Done(format!("dropped {}: its run directory {} is gone", tmp.display(), dest.parent().unwrap_or(dest).display()))];
    }
    let part = dest.with_extension("part");
    let mut copy = || -> std::io::Result<()> {
        // A stopped run copies what it recorded (the file is in the verified private directory).
        crate::record::mapped::trim_to_published(tmp)?;
        let mut f = safefs::create_new(&part, 0o644)?;
        std::io::copy(&mut src, &mut f)?;
        f.sync_all()?;
        let (to, dest_name) = safefs::parent_of(dest)?;
        to.rename(part.file_name().and_then(|n| n.to_str()).unwrap_or_default(), &dest_name)?;
        dir.unlink(name)
    };
    match copy() {
        Ok(()) => vec![Outcome::Done(format!("moved {} to {}", tmp.display(), dest.display()))],
        Err(e) => vec![Outcome::Failed(format!("{} -> {}: {e}", tmp.display(), dest.display()))],
    }
}
