//! tracefs itself: found where mounted, else mounted for the agents that need it and unmounted
//! by the last of them. Agents of one machine agree through two flocks in the agent's own
//! directory: `tracefs.lock`, held exclusively only while one decides to mount or unmount, and
//! `tracefs.users`, held shared by every agent between `acquire` and `release`. Without them
//! two agents that start together (a campaign's plans, four at once) both see tracefs absent,
//! both mount it, and the second is refused (EBUSY: the same file system on the same mount
//! point); and one agent's unmount could pull tracefs from under another that has not yet
//! made its instance. The marker that says xtalk mounted it is per mount namespace, so an
//! agent in another one (a test's private cgroup2 namespace) never unmounts what it did not mount.

use super::capabilities::tracefs_root;
use crate::safefs::{self, Dir};
use std::ffi::CString;
use std::fs::{self, File};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

pub const DEFAULT_MOUNT: &str = "/sys/kernel/tracing";
const GATE: &str = "tracefs.lock";
const USERS: &str = "tracefs.users";

/// tracefs in use by this agent until dropped: the last user unmounts what xtalk mounted.
pub struct TracefsUse {
    pub root: PathBuf,
    users: Option<File>,
    /// Whether a trace instance name is a live agent's (one of an older version holds no lock).
    is_live: fn(&str) -> bool,
}

impl Drop for TracefsUse {
    fn drop(&mut self) {
        drop(self.users.take()); // our shared lock, so that the test below sees only the others
        unmount_if_unused(&self.root, &self.is_live);
    }
}

fn flock(f: &File, op: libc::c_int) -> bool {
    loop {
        if unsafe { libc::flock(f.as_raw_fd(), op) } == 0 {
            return true;
        }
        if std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return false;
        }
    }
}

fn lock_file(dir: &Dir, name: &str) -> Option<File> {
    dir.open_or_create(name, 0o600).ok()
}

/// Present while tracefs is mounted because xtalk mounted it, one per mount namespace (the
/// namespace's inode number after the dot).
fn marker() -> String {
    use std::os::unix::fs::MetadataExt;
    format!("tracefs-mounted.{}", fs::metadata("/proc/self/ns/mnt").map(|m| m.ino()).unwrap_or(0))
}

fn mount(dir: Option<&Dir>) -> Result<(), String> {
    let src = CString::new("nodev").unwrap();
    let dst = CString::new(DEFAULT_MOUNT).unwrap();
    let ty = CString::new("tracefs").unwrap();
    if unsafe { libc::mount(src.as_ptr(), dst.as_ptr(), ty.as_ptr(), 0, std::ptr::null()) } != 0 {
        let e = std::io::Error::last_os_error();
        // EBUSY: tracefs is already there (mounted by someone outside xtalk since we looked).
        if e.raw_os_error() == Some(libc::EBUSY) && tracefs_root().as_deref() == Some(DEFAULT_MOUNT) {
            return Ok(());
        }
        return Err(format!("tracefs is not mounted and mounting it at {DEFAULT_MOUNT} failed: {e} (as root: mount -t tracefs nodev {DEFAULT_MOUNT})"));
    }
    if let Some(d) = dir {
        let _ = d.unlink(&marker()); // a stale one, left by a killed agent
        let _ = d.create(&marker(), 0o600).and_then(|mut f| std::io::Write::write_all(&mut f, DEFAULT_MOUNT.as_bytes()));
    }
    Ok(())
}

/// tracefs for this agent: the existing mount, or one made now. `is_live`: whether a trace
/// instance name is a live agent's.
pub fn acquire(is_live: fn(&str) -> bool) -> Result<TracefsUse, String> {
    // Without the agent's directory (not root) nothing is mounted anyway: no locks needed.
    let dir = safefs::own_dir(Path::new(safefs::AGENT_DIR)).ok();
    let gate = dir.as_ref().and_then(|d| lock_file(d, GATE));
    let users = dir.as_ref().and_then(|d| lock_file(d, USERS));
    if let Some(g) = &gate {
        flock(g, libc::LOCK_EX);
    }
    let root = match tracefs_root() {
        Some(r) => PathBuf::from(r),
        None => {
            mount(dir.as_ref())?;
            PathBuf::from(DEFAULT_MOUNT)
        }
    };
    if let Some(u) = &users {
        flock(u, libc::LOCK_SH);
    }
    Ok(TracefsUse { root, users, is_live }) // the gate's lock goes with its file
}

/// Does any live agent still have a trace instance (an agent of an older version, which
/// holds no users lock)?
fn live_instances(root: &Path, is_live: &dyn Fn(&str) -> bool) -> bool {
    fs::read_dir(root.join("instances")).map(|d| d.flatten().any(|e| is_live(&e.file_name().to_string_lossy()))).unwrap_or(false)
}

/// Unmount tracefs if xtalk mounted it in this namespace and no agent uses it. True if it did.
fn unmount_if_unused(root: &Path, is_live: &dyn Fn(&str) -> bool) -> bool {
    let Ok(dir) = safefs::own_dir(Path::new(safefs::AGENT_DIR)) else { return false };
    let (Some(gate), Some(users)) = (lock_file(&dir, GATE), lock_file(&dir, USERS)) else { return false };
    flock(&gate, libc::LOCK_EX);
    let last = flock(&users, libc::LOCK_EX | libc::LOCK_NB);
    if !last || dir.read(&marker()).is_err() || live_instances(root, is_live) {
        return false;
    }
    let dst = CString::new(root.to_string_lossy().as_bytes()).unwrap();
    unsafe { libc::umount2(dst.as_ptr(), libc::MNT_DETACH) };
    let _ = dir.unlink(&marker());
    true
}

/// `recover`: unmount tracefs that xtalk mounted if no agent uses it (its last user was killed).
pub fn recover(is_live: &dyn Fn(&str) -> bool) -> Option<String> {
    let root = tracefs_root()?;
    unmount_if_unused(Path::new(&root), is_live).then(|| format!("unmounted tracefs at {root}, which xtalk had mounted"))
}
