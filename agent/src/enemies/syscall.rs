//! `syscall`: system-call storm. Raw getppid(2) calls (through syscall(2), so neither glibc
//! nor the vDSO can answer them from user space): each one enters and leaves the kernel,
//! with the entry/exit mitigations of this kernel (page-table switches, buffer clears),
//! loading the kernel's own paths and whatever per-CPU state they share. The counter is
//! system calls made.
use super::EnemyLoad;
use super::kind::Kind;

const CHUNK_CALLS: u64 = 1000;

pub struct Syscall;

impl EnemyLoad for Syscall {
    fn chunk(&mut self) -> u64 {
        for _ in 0..CHUNK_CALLS {
            unsafe { libc::syscall(libc::SYS_getppid) };
        }
        CHUNK_CALLS
    }
}

/// The `syscall` kind (registry: mod.rs).
pub const KIND: Kind = Kind::new("syscall", "kernel entry and exit: getppid(2) as fast as possible", "syscalls", &[], |_, _| Ok(Box::new(Syscall)))
.channel("kernel");
