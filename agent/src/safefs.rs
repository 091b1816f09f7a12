//! Paths the agent (root) can trust. Nothing under a world-writable directory is trusted by
//! name: what the agent creates lives in a private directory it made itself (random name,
//! mode 0700, verified after creation: a real directory owned by this user), files are
//! created O_EXCL|O_NOFOLLOW relative to that directory's descriptor, and the kernel files
//! the journal writes are opened O_NOFOLLOW and must be on a kernel file system. The journal
//! directory (/run/xtalk) is verified the same way before it is used.
//!
//! Every path is reached without following a symbolic link in any component (the run
//! directory may sit where another user could plant one): `openat2` with
//! RESOLVE_NO_SYMLINKS where the kernel has it (5.6+), otherwise one `openat(O_NOFOLLOW)`
//! per component. The host writes its own files the same way (src/xtalk/safepath.py).

use std::ffi::CString;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

pub const CGROUP_SUPER_MAGIC: i64 = 0x27e0eb;
pub const CGROUP2_SUPER_MAGIC: i64 = 0x6367_7270;
/// resctrl: its groups are made, written and removed like cgroups.
pub const RDTGROUP_SUPER_MAGIC: i64 = 0x0765_5821;
const PROC_SUPER_MAGIC: i64 = 0x9fa0;
const SYSFS_MAGIC: i64 = 0x6265_6572;
const TRACEFS_MAGIC: i64 = 0x7472_6163;
const DEBUGFS_MAGIC: i64 = 0x6462_6720;

/// File systems whose files are kernel settings: the only ones the journal writes.
pub const KERNEL_FS: &[i64] = &[PROC_SUPER_MAGIC, SYSFS_MAGIC, CGROUP_SUPER_MAGIC, CGROUP2_SUPER_MAGIC, TRACEFS_MAGIC, DEBUGFS_MAGIC, RDTGROUP_SUPER_MAGIC];

fn cstr(s: &[u8]) -> io::Result<CString> {
    CString::new(s).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path holds a NUL byte"))
}

fn check(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

fn fs_type_of(fd: libc::c_int) -> io::Result<i64> {
    let mut s: libc::statfs = unsafe { std::mem::zeroed() };
    check(unsafe { libc::fstatfs(fd, &mut s) })?;
    Ok(s.f_type as i64)
}

fn stat_of(fd: libc::c_int) -> io::Result<libc::stat> {
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    check(unsafe { libc::fstat(fd, &mut st) })?;
    Ok(st)
}

#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}

const RESOLVE_NO_SYMLINKS: u64 = 0x04;
/// openat2 on this kernel: 0 not tried yet, 1 present, 2 absent (ENOSYS, or denied by seccomp).
static OPENAT2: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);

/// Open `path` with `flags`, following no symbolic link in any component (ELOOP if one is met).
pub fn open_no_symlinks(path: &Path, flags: libc::c_int, mode: libc::mode_t) -> io::Result<OwnedFd> {
    use std::sync::atomic::Ordering::Relaxed;
    let c = cstr(path.as_os_str().as_bytes())?;
    if OPENAT2.load(Relaxed) != 2 {
        let how = OpenHow { flags: (flags | libc::O_CLOEXEC) as u64, mode: if flags & libc::O_CREAT != 0 { mode as u64 } else { 0 }, resolve: RESOLVE_NO_SYMLINKS };
        let fd = unsafe { libc::syscall(libc::SYS_openat2, libc::AT_FDCWD, c.as_ptr(), &how as *const OpenHow, std::mem::size_of::<OpenHow>()) };
        if fd >= 0 {
            OPENAT2.store(1, Relaxed);
            return Ok(unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) });
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::ENOSYS) | Some(libc::EPERM) if OPENAT2.load(Relaxed) == 0 => OPENAT2.store(2, Relaxed),
            _ => return Err(e),
        }
    }
    walk(path, flags, mode)
}

/// The fallback of `open_no_symlinks`: from `/` (or the working directory), one component at
/// a time, each opened O_NOFOLLOW relative to the one before.
fn walk(path: &Path, flags: libc::c_int, mode: libc::mode_t) -> io::Result<OwnedFd> {
    use std::path::Component;
    let start = if path.is_absolute() { cstr(b"/")? } else { cstr(b".")? };
    let first = check(unsafe { libc::open(start.as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC) })?;
    let mut fd = unsafe { OwnedFd::from_raw_fd(first) };
    let parts: Vec<&std::ffi::OsStr> = path
        .components()
        .filter_map(|c| match c {
            Component::Normal(s) => Some(s),
            Component::ParentDir => Some(std::ffi::OsStr::new("..")),
            _ => None,
        })
        .collect();
    for (i, part) in parts.iter().enumerate() {
        let f = if i + 1 == parts.len() { flags } else { libc::O_RDONLY | libc::O_DIRECTORY };
        let c = cstr(part.as_bytes())?;
        let next = check(unsafe { libc::openat(fd.as_raw_fd(), c.as_ptr(), f | libc::O_NOFOLLOW | libc::O_CLOEXEC, mode as libc::c_uint) })?;
        fd = unsafe { OwnedFd::from_raw_fd(next) };
    }
    Ok(fd)
}

/// The directory holding `path` (opened as `Dir::open` does) and the file name within it.
pub fn parent_of(path: &Path) -> io::Result<(Dir, String)> {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, format!("{}: not a file name", path.display())))?;
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    Ok((Dir::open(parent)?, name.to_string()))
}

/// mkdir -p `path`: each component made (mode 0755 less the umask) where missing and opened
/// without following a symbolic link.
pub fn create_dirs(path: &Path) -> io::Result<Dir> {
    let mut cur = PathBuf::new();
    for c in path.components() {
        cur.push(c);
        if let std::path::Component::Normal(_) = c {
            let (dir, name) = parent_of(&cur)?;
            let n = cstr(name.as_bytes())?;
            if unsafe { libc::mkdirat(dir.fd.as_raw_fd(), n.as_ptr(), 0o755) } != 0 {
                let e = io::Error::last_os_error();
                if e.raw_os_error() != Some(libc::EEXIST) {
                    return Err(e);
                }
            }
        }
    }
    Dir::open(path)
}

/// An open directory: every file operation is relative to its descriptor, so a path
/// component swapped after it was opened changes nothing.
#[derive(Debug)]
pub struct Dir {
    fd: OwnedFd,
    pub path: PathBuf,
}

impl Dir {
    /// Open `path` as a directory; no component of it may be a symlink.
    pub fn open(path: &Path) -> io::Result<Dir> {
        let fd = open_no_symlinks(path, libc::O_RDONLY | libc::O_DIRECTORY, 0)?;
        Ok(Dir { fd, path: path.to_path_buf() })
    }

    pub fn stat(&self) -> io::Result<libc::stat> {
        stat_of(self.fd.as_raw_fd())
    }

    /// The file system's magic number (statfs f_type).
    pub fn fs_type(&self) -> io::Result<i64> {
        fs_type_of(self.fd.as_raw_fd())
    }

    fn open_at(&self, name: &str, flags: libc::c_int, mode: libc::mode_t) -> io::Result<File> {
        if name.contains('/') || name == ".." || name == "." || name.is_empty() {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("'{name}' is not a plain file name")));
        }
        let c = cstr(name.as_bytes())?;
        let fd = check(unsafe { libc::openat(self.fd.as_raw_fd(), c.as_ptr(), flags | libc::O_NOFOLLOW | libc::O_CLOEXEC, mode as libc::c_uint) })?;
        Ok(unsafe { File::from_raw_fd(fd) })
    }

    /// Create a new file (fails if anything, a symlink included, has the name).
    pub fn create(&self, name: &str, mode: libc::mode_t) -> io::Result<File> {
        self.open_at(name, libc::O_RDWR | libc::O_CREAT | libc::O_EXCL, mode)
    }

    /// Open a file for reading and writing, creating it if absent (never through a symlink):
    /// a lock file that every agent opens.
    pub fn open_or_create(&self, name: &str, mode: libc::mode_t) -> io::Result<File> {
        self.open_at(name, libc::O_RDWR | libc::O_CREAT, mode)
    }

    /// Open an existing file (not a symlink) with `flags` (O_RDONLY, O_RDWR...).
    pub fn open_file(&self, name: &str, flags: libc::c_int) -> io::Result<File> {
        self.open_at(name, flags, 0)
    }

    /// Read a (kernel or private) file.
    pub fn read(&self, name: &str) -> io::Result<String> {
        let mut s = String::new();
        self.open_at(name, libc::O_RDONLY, 0)?.read_to_string(&mut s)?;
        Ok(s)
    }

    /// Write an existing file (a kernel setting such as freezer.state); never creates one.
    pub fn write(&self, name: &str, value: &str) -> io::Result<()> {
        self.open_at(name, libc::O_WRONLY, 0)?.write_all(value.as_bytes())
    }

    pub fn unlink(&self, name: &str) -> io::Result<()> {
        let c = cstr(name.as_bytes())?;
        check(unsafe { libc::unlinkat(self.fd.as_raw_fd(), c.as_ptr(), 0) }).map(|_| ())
    }

    /// Rename `from` to `to` inside this directory (replacing `to`, even a symlink, never following it).
    pub fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        let (a, b) = (cstr(from.as_bytes())?, cstr(to.as_bytes())?);
        let fd = self.fd.as_raw_fd();
        check(unsafe { libc::renameat(fd, a.as_ptr(), fd, b.as_ptr()) }).map(|_| ())
    }

    /// Hard-link `from` to `to` inside this directory (fails if `to` exists).
    pub fn link(&self, from: &str, to: &str) -> io::Result<()> {
        let (a, b) = (cstr(from.as_bytes())?, cstr(to.as_bytes())?);
        let fd = self.fd.as_raw_fd();
        check(unsafe { libc::linkat(fd, a.as_ptr(), fd, b.as_ptr(), 0) }).map(|_| ())
    }

    /// Names of the entries (without . and ..).
    pub fn names(&self) -> io::Result<Vec<String>> {
        // Through /proc/self/fd: the directory this descriptor holds, whatever its path now.
        let mut v: Vec<String> = std::fs::read_dir(format!("/proc/self/fd/{}", self.fd.as_raw_fd()))?
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        Ok(v)
    }
}

/// Is `st` a directory owned by this user that nobody else may write (with `strict`, that
/// nobody else may even read or enter)?
pub fn check_private(path: &Path, st: &libc::stat, strict: bool) -> Result<(), String> {
    let euid = unsafe { libc::geteuid() };
    let open = if strict { 0o077 } else { 0o022 };
    if st.st_mode & libc::S_IFMT != libc::S_IFDIR {
        return Err(format!("{} is not a directory", path.display()));
    }
    if st.st_uid != euid {
        return Err(format!("{} belongs to uid {}, not to this user (uid {euid})", path.display(), st.st_uid));
    }
    if st.st_mode & open != 0 {
        return Err(format!("{} has mode {:o}; others may {}", path.display(), st.st_mode & 0o7777, if strict { "use it" } else { "write it" }));
    }
    Ok(())
}

/// The agent's own directory: journals, the lock, markers of what it mounted.
pub const AGENT_DIR: &str = "/run/xtalk";

/// A directory of this agent's own at a fixed place (AGENT_DIR): created (mode 0700) if
/// missing, then verified: not a symlink, owned by this user, writable by no one else.
pub fn own_dir(path: &Path) -> Result<Dir, String> {
    let c = cstr(path.as_os_str().as_bytes()).map_err(|e| e.to_string())?;
    if unsafe { libc::mkdir(c.as_ptr(), 0o700) } != 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EEXIST) {
            return Err(format!("{}: {e}", path.display()));
        }
    }
    let dir = open_verified(path, false)?;
    Ok(dir)
}

/// Open an existing directory and verify it is private (see `check_private`).
pub fn open_verified(path: &Path, strict: bool) -> Result<Dir, String> {
    let dir = Dir::open(path).map_err(|e| match e.raw_os_error() {
        Some(libc::ELOOP) | Some(libc::ENOTDIR) => format!("{} is a symlink or not a directory; remove it", path.display()),
        _ => format!("{}: {e}", path.display()),
    })?;
    let st = dir.stat().map_err(|e| format!("{}: {e}", path.display()))?;
    check_private(path, &st, strict).map_err(|m| if strict { m } else { format!("{m}: remove it (it must be root's alone)") })?;
    Ok(dir)
}

/// Twelve random characters for a private directory's name (mkdtemp-style).
pub fn random_name(prefix: &str) -> String {
    let mut b = [0u8; 12];
    let mut got = 0;
    while got < b.len() {
        let n = unsafe { libc::getrandom(b[got..].as_mut_ptr() as *mut libc::c_void, b.len() - got, 0) };
        if n <= 0 {
            // No getrandom (very old kernel): time and pid still make a name nobody predicts exactly.
            let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
            unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
            let t = (ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64) ^ ((std::process::id() as u64) << 32);
            b.iter_mut().enumerate().for_each(|(i, x)| *x = (t >> ((i % 8) * 8)) as u8 ^ i as u8);
            break;
        }
        got += n as usize;
    }
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let s: String = b.iter().map(|x| ALPHABET[*x as usize % ALPHABET.len()] as char).collect();
    format!("{prefix}{s}")
}

/// Create the private directory `path` (mode 0700; an existing entry is an error, as with
/// mkdtemp) and verify what was created.
pub fn create_private(path: &Path) -> Result<Dir, String> {
    let c = cstr(path.as_os_str().as_bytes()).map_err(|e| e.to_string())?;
    if unsafe { libc::mkdir(c.as_ptr(), 0o700) } != 0 {
        return Err(format!("mkdir {}: {}", path.display(), io::Error::last_os_error()));
    }
    open_verified(path, true)
}

/// Write a kernel setting: the file is opened without following a symlink and must be on a
/// kernel file system (procfs, sysfs, cgroupfs, tracefs); nothing is ever created.
pub fn write_kernel_file(path: &Path, value: &str) -> io::Result<()> {
    let c = cstr(path.as_os_str().as_bytes())?;
    let fd = check(unsafe { libc::open(c.as_ptr(), libc::O_WRONLY | libc::O_NOFOLLOW | libc::O_CLOEXEC) })?;
    let mut f = unsafe { File::from_raw_fd(fd) };
    let t = fs_type_of(fd)?;
    if !KERNEL_FS.contains(&t) {
        return Err(io::Error::new(io::ErrorKind::PermissionDenied, format!("not a kernel file (file system type {t:#x})")));
    }
    f.write_all(value.as_bytes())
}

/// Read a file without following a symlink at its last component.
pub fn read_nofollow(path: &Path) -> io::Result<String> {
    let c = cstr(path.as_os_str().as_bytes())?;
    let fd = check(unsafe { libc::open(c.as_ptr(), libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_CLOEXEC) })?;
    let mut s = String::new();
    unsafe { File::from_raw_fd(fd) }.read_to_string(&mut s)?;
    Ok(s)
}

/// Create `path` afresh in a directory others may own (the run directory): a stale entry
/// (even a symlink) is removed, never followed, and the file is created O_EXCL|O_NOFOLLOW;
/// no component of the directory's path is followed as a symlink either.
pub fn create_new(path: &Path, mode: libc::mode_t) -> io::Result<File> {
    let (dir, name) = parent_of(path)?;
    match dir.unlink(&name) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    dir.create(&name, mode)
}

/// Replace `path` with `data` whole or not at all: a fresh temporary file beside it (random
/// name, O_EXCL|O_NOFOLLOW), fsync, renamed over `path` within the same directory descriptor.
pub fn replace(path: &Path, data: &[u8]) -> io::Result<()> {
    let (dir, name) = parent_of(path)?;
    let tmp = random_name(&format!(".{name}."));
    let mut f = dir.create(&tmp, 0o644)?;
    let done = f.write_all(data).and_then(|_| f.sync_all()).and_then(|_| dir.rename(&tmp, &name));
    if done.is_err() {
        let _ = dir.unlink(&tmp);
    }
    done
}

/// Is `path` a real directory on a cgroup file system (v1 or v2)?
pub fn is_cgroup_dir(path: &Path) -> Result<Dir, String> {
    let dir = Dir::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    match dir.fs_type() {
        Ok(CGROUP_SUPER_MAGIC) | Ok(CGROUP2_SUPER_MAGIC) | Ok(RDTGROUP_SUPER_MAGIC) => Ok(dir),
        Ok(t) => Err(format!("{} is not on a cgroup file system (type {t:#x})", path.display())),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp() -> tempfile::TempDir {
        tempfile::tempdir().unwrap()
    }

    #[test]
    fn create_private_refuses_an_existing_entry_and_a_symlink() {
        let t = tmp();
        let p = t.path().join("x");
        std::fs::create_dir(&p).unwrap();
        assert!(create_private(&p).is_err(), "an existing directory is not ours");
        let l = t.path().join("l");
        std::os::unix::fs::symlink(&p, &l).unwrap();
        assert!(create_private(&l).is_err());
        let q = t.path().join("y");
        let d = create_private(&q).unwrap();
        assert_eq!(d.stat().unwrap().st_mode & 0o777, 0o700);
    }

    #[test]
    fn open_verified_refuses_symlinks_and_open_modes() {
        let t = tmp();
        let p = t.path().join("d");
        std::fs::create_dir(&p).unwrap();
        std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
        assert!(open_verified(&p, false).unwrap_err().contains("mode 777"));
        std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        assert!(open_verified(&p, false).is_ok());
        assert!(open_verified(&p, true).is_err(), "0755 is not private enough for a staging directory");
        let l = t.path().join("l");
        std::os::unix::fs::symlink(&p, &l).unwrap();
        assert!(open_verified(&l, false).unwrap_err().contains("symlink"));
    }

    #[test]
    fn files_are_created_exclusively_and_never_through_a_symlink() {
        let t = tmp();
        let d = create_private(&t.path().join("p")).unwrap();
        let target = t.path().join("target");
        std::fs::write(&target, "precious").unwrap();
        std::os::unix::fs::symlink(&target, d.path.join("f")).unwrap();
        assert!(d.create("f", 0o600).is_err());
        assert!(d.write("f", "THAWED").is_err(), "writes never follow a symlink");
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "precious");
        assert!(d.create("../escape", 0o600).is_err());
        d.create("g", 0o600).unwrap();
        assert!(d.create("g", 0o600).is_err());
        assert_eq!(d.names().unwrap(), vec!["f".to_string(), "g".to_string()]);
    }

    #[test]
    fn kernel_writes_refuse_ordinary_files_and_symlinks() {
        let t = tmp();
        let f = t.path().join("freezer.state");
        std::fs::write(&f, "x").unwrap();
        assert!(write_kernel_file(&f, "THAWED").is_err());
        assert_eq!(std::fs::read_to_string(&f).unwrap(), "x");
        let l = t.path().join("l");
        std::os::unix::fs::symlink("/proc/sys/kernel/sched_rt_runtime_us", &l).unwrap();
        assert!(write_kernel_file(&l, "1").is_err());
        assert!(is_cgroup_dir(t.path()).is_err());
    }

    #[test]
    fn create_new_replaces_a_symlink_instead_of_following_it() {
        let t = tmp();
        let target = t.path().join("target");
        std::fs::write(&target, "precious").unwrap();
        let p = t.path().join("run.json.tmp");
        std::os::unix::fs::symlink(&target, &p).unwrap();
        create_new(&p, 0o644).unwrap().write_all(b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "precious");
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "new");
    }

    #[test]
    fn no_component_of_a_path_is_followed_as_a_symlink() {
        let t = tmp();
        let real = t.path().join("real");
        std::fs::create_dir(&real).unwrap();
        std::fs::write(real.join("precious"), "precious").unwrap();
        let link = t.path().join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        assert!(Dir::open(&link.join(".")).is_err(), "a link in the middle of the path is refused");
        assert!(create_new(&link.join("run.json"), 0o644).is_err());
        assert!(replace(&link.join("precious"), b"new").is_err());
        assert!(create_dirs(&link.join("a/b")).is_err());
        assert!(walk(&link.join("precious"), libc::O_RDONLY, 0).is_err(), "the fallback walk refuses it too");
        assert_eq!(std::fs::read_to_string(real.join("precious")).unwrap(), "precious");
        assert!(!real.join("run.json").exists() && !real.join("a").exists());
        let d = create_dirs(&t.path().join("x/y")).unwrap();
        assert!(walk(&t.path().join("x/y"), libc::O_RDONLY | libc::O_DIRECTORY, 0).is_ok());
        replace(&d.path.join("f.json"), b"one").unwrap();
        replace(&d.path.join("f.json"), b"two").unwrap();
        assert_eq!(d.names().unwrap(), vec!["f.json".to_string()], "no temporary left behind");
        std::os::unix::fs::symlink(real.join("precious"), d.path.join("g.json")).unwrap();
        replace(&d.path.join("g.json"), b"mine").unwrap();
        assert_eq!(std::fs::read_to_string(real.join("precious")).unwrap(), "precious", "the link is replaced, not followed");
    }

    #[test]
    fn random_names_differ() {
        let (a, b) = (random_name("xtalk-"), random_name("xtalk-"));
        assert!(a.starts_with("xtalk-") && a.len() == 18 && a != b);
    }
}
