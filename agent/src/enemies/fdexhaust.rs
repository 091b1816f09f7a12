//! `fdexhaust`: opens /dev/null until the descriptor table is full (EMFILE under
//! RLIMIT_NOFILE = `fds`), closes them all and starts again. Counts descriptors opened.
use super::limits;
use super::kind::{Kind, Param};
use super::EnemyLoad;

pub struct FdExhaust {
    open: Vec<i32>,
}

impl FdExhaust {
    pub fn new(fds: u64) -> FdExhaust {
        limits::cap(libc::RLIMIT_NOFILE, fds, "RLIMIT_NOFILE");
        FdExhaust { open: Vec::with_capacity(fds as usize) }
    }
}

impl EnemyLoad for FdExhaust {
    fn chunk(&mut self) -> u64 {
        let mut n = 0;
        for _ in 0..64 {
            let fd = unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
            if fd < 0 {
                for fd in self.open.drain(..) {
                    unsafe { libc::close(fd) };
                }
                break;
            }
            self.open.push(fd);
            n += 1;
        }
        n
    }
}

/// The `fdexhaust` kind (registry: mod.rs).
pub const KIND: Kind = Kind::new("fdexhaust", "failure propagation: descriptors opened up to RLIMIT_NOFILE = fds, closed, again", "descriptors",
    &[Param::u64("fds", "RLIMIT_NOFILE").range(16, 65_536).file_default("1024")], |a, _| Ok(Box::new(FdExhaust::new(a.u64("fds")))))
.channel("descriptors")
.fault();
