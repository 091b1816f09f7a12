//! `memhog`: allocates and touches memory until the allocation fails, frees it all and
//! starts again, under RLIMIT_AS = its current address space + `bytes` (a hard ceiling that
//! holds for root; the plan check keeps `bytes` under half of the available memory).
//! Counts bytes touched.
use super::limits;
use super::kind::{Kind, Param};
use crate::plan::err;
use super::EnemyLoad;

const STEP: usize = 1 << 20;

pub struct MemHog {
    held: Vec<*mut libc::c_void>,
}

fn vm_size() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("VmSize:")).and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok()))
        .unwrap_or(0)
        * 1024
}

impl MemHog {
    pub fn new(bytes: u64) -> MemHog {
        // Headroom for the enemy's own stack and allocator beside the hog's chunks.
        limits::cap(libc::RLIMIT_AS, vm_size() + bytes + (16 << 20), "RLIMIT_AS");
        MemHog { held: Vec::with_capacity(1 << 16) }
    }
}

impl EnemyLoad for MemHog {
    fn chunk(&mut self) -> u64 {
        let p = unsafe { libc::mmap(std::ptr::null_mut(), STEP, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0) };
        if p == libc::MAP_FAILED || self.held.len() == self.held.capacity() {
            // The ceiling: give everything back and grow again.
            for q in self.held.drain(..) {
                unsafe { libc::munmap(q, STEP) };
            }
            return 0;
        }
        for off in (0..STEP).step_by(4096) {
            unsafe { std::ptr::write_volatile((p as *mut u8).add(off), 1) };
        }
        self.held.push(p);
        STEP as u64
    }
}

/// The `memhog` kind (registry: mod.rs).
pub const KIND: Kind = Kind::new("memhog", "failure propagation: memory touched up to RLIMIT_AS = bytes over its own, freed, again", "bytes",
    &[Param::u64("bytes", "the hard ceiling (at most half the available memory)").min(1 << 20).unit("bytes")],
    |a, _| Ok(Box::new(MemHog::new(a.u64("bytes")))))
.footprint(1, &["bytes"])
.check(|a, at| {
    let avail = crate::observe::facts::current().mem_available;
    if avail > 0 && a.u64("bytes") > avail / 2 {
        return err(format!("{at}.bytes"), format!("must be between 1 MiB and half the available memory ({} MiB)", avail >> 21));
    }
    Ok(())
})
.channel("memory-capacity")
.fault();
