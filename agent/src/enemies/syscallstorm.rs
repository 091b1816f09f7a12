//! `syscallstorm`: a tight loop of cheap system calls that take kernel paths shared with
//! other processes (scheduler, memory map, file table): getppid, sched_yield, a 4 KiB
//! mmap/munmap pair, open/close of /dev/null. Counts system calls.
use super::EnemyLoad;
use super::kind::Kind;

pub struct SyscallStorm;

impl EnemyLoad for SyscallStorm {
    fn chunk(&mut self) -> u64 {
        for _ in 0..100 {
            unsafe {
                libc::syscall(libc::SYS_getppid);
                libc::sched_yield();
                let p = libc::mmap(std::ptr::null_mut(), 4096, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0);
                if p != libc::MAP_FAILED {
                    libc::munmap(p, 4096);
                }
                let fd = libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
                if fd >= 0 {
                    libc::close(fd);
                }
            }
        }
        600
    }
}

/// The `syscallstorm` kind (registry: mod.rs).
pub const KIND: Kind = Kind::new("syscallstorm", "kernel paths: cheap system calls (getppid, sched_yield, mmap/munmap, open/close) in a tight loop", "syscalls", &[], |_, _| Ok(Box::new(SyscallStorm)))
.channel("kernel");
