//! clone_into against the live kernel: a child started in a fresh cgroup v2 group is in it
//! from its first instruction, carries its own TID and the robust list glibc registered, and
//! a directory that is not a v2 group gives no child. The tests' processes are
//! multi-threaded (the test harness); the children only make system calls and _exit, which
//! is what `clone_into`'s single-thread rule is there to allow.
use super::*;
use std::path::PathBuf;

/// A group made for one test below the cgroup2 mount, removed with its children. Not named
/// xtalk-*: another session's leftover check must not take it for a run's.
struct Group {
    dir: PathBuf,
    child: Option<libc::pid_t>,
}

impl Group {
    /// None (and why) where no cgroup2 file system takes a new group here.
    fn new(tag: &str) -> Result<Group, String> {
        let mounts = crate::observe::cgroupfs::mounts();
        let (mount, _, _) = mounts.iter().find(|(_, t, _)| t == "cgroup2").ok_or("no cgroup2 file system is mounted")?;
        let dir = Path::new(mount).join(format!("xt-clone-test-{tag}-{}", std::process::id()));
        std::fs::create_dir(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        Ok(Group { dir, child: None })
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        if let Some(pid) = self.child {
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, std::ptr::null_mut(), 0);
            }
        }
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// A test that cannot run here says why (cargo test shows it with --nocapture).
fn skip(why: &str) {
    eprintln!("skipped: {why}");
}

#[test]
fn a_child_cloned_into_a_v2_group_is_in_it() {
    let mut g = match Group::new("in") {
        Ok(g) => g,
        Err(why) => return skip(&why),
    };
    let fd = open_v2(&g.dir).expect("a directory of the cgroup2 mount is a v2 group");
    let mut pipe = [0; 2];
    assert_eq!(unsafe { libc::pipe(pipe.as_mut_ptr()) }, 0);
    let cloned = unsafe { clone_into(&fd) };
    if cloned.is_err() {
        unsafe {
            libc::close(pipe[0]);
            libc::close(pipe[1]);
        }
    }
    match cloned {
        Err(e) if matches!(e, libc::ENOSYS | libc::EINVAL | libc::E2BIG | libc::EPERM) => return skip(&format!("this kernel does not clone into a cgroup: errno {e}")),
        Err(e) => panic!("clone_into: errno {e}"),
        Ok(0) => unsafe {
            // The child: is its descriptor's TID its own, and its robust list the parent's?
            let mut tid: *mut libc::c_int = std::ptr::null_mut();
            let settid = libc::prctl(libc::PR_GET_TID_ADDRESS, &mut tid as *mut *mut libc::c_int) == 0 && !tid.is_null();
            let own_tid = !settid || *tid == libc::syscall(libc::SYS_gettid) as libc::c_int;
            let mut head: *mut libc::c_void = std::ptr::null_mut();
            let mut len: libc::size_t = 0;
            let robust = libc::syscall(libc::SYS_get_robust_list, 0, &mut head, &mut len) == 0 && !head.is_null();
            let report = [own_tid as u8, robust as u8];
            libc::write(pipe[1], report.as_ptr() as *const libc::c_void, 2);
            libc::pause();
            libc::_exit(0);
        },
        Ok(pid) => {
            g.child = Some(pid);
            let mut report = [0u8; 2];
            assert_eq!(unsafe { libc::read(pipe[0], report.as_mut_ptr() as *mut libc::c_void, 2) }, 2);
            unsafe {
                libc::close(pipe[0]);
                libc::close(pipe[1]);
            }
            let member = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
            let name = g.dir.file_name().unwrap().to_str().unwrap();
            assert!(member.lines().any(|l| l.starts_with("0::") && l.ends_with(&format!("/{name}"))), "{member}");
            let procs = std::fs::read_to_string(g.dir.join("cgroup.procs")).unwrap();
            assert_eq!(procs.split_whitespace().collect::<Vec<_>>(), vec![pid.to_string()]);
            assert_eq!(report, [1, 1], "the child's TID in its descriptor, its robust list");
        }
    }
}

#[test]
fn what_is_not_a_v2_group_gives_no_child() {
    let t = tempfile::tempdir().unwrap();
    assert!(open_v2(t.path()).is_none());
    assert!(open_v2(&t.path().join("missing")).is_none());
    // A v1 hierarchy's directory is no v2 group either (where this machine has one).
    if let Some((m, _, _)) = crate::observe::cgroupfs::mounts().iter().find(|(_, t, _)| t == "cgroup") {
        assert!(open_v2(Path::new(m)).is_none());
    }
    // Handed a directory that is not a cgroup, the kernel refuses (EBADF), and nothing forks.
    let fd: OwnedFd = std::fs::File::open(t.path()).unwrap().into();
    match unsafe { clone_into(&fd) } {
        Ok(0) => unsafe { libc::_exit(0) },
        Ok(pid) => panic!("cloned {pid} into a temporary directory"),
        Err(e) => assert!(matches!(e, libc::EBADF | libc::ENOSYS | libc::EINVAL | libc::EPERM | libc::E2BIG), "errno {e}"),
    }
}

#[test]
fn single_threaded_counts_the_threads() {
    // The test harness runs this on a thread of its own: never single-threaded here.
    assert!(!single_threaded());
    // A forked child has one thread, as /proc/self/task lists it (under qemu-user, the
    // emulator's own threads are the process's too: then neither says one).
    match unsafe { libc::fork() } {
        0 => {
            let tasks = std::fs::read_dir("/proc/self/task").map(|d| d.count()).unwrap_or(0);
            unsafe { libc::_exit(if single_threaded() == (tasks == 1) { 0 } else { 1 }) }
        }
        pid => {
            let mut st = 0;
            assert_eq!(unsafe { libc::waitpid(pid, &mut st, 0) }, pid);
            assert!(libc::WIFEXITED(st) && libc::WEXITSTATUS(st) == 0, "status {st}");
        }
    }
}
