//! `pagefault`: page-fault churn. Each step maps `bytes` of anonymous memory, writes one
//! byte per 4 KiB page (one minor fault each: zeroed page allocation, page-table update)
//! and unmaps it (TLB shoot-down to the CPUs that ran the process, pages freed): the
//! kernel's memory-management paths and the page allocator's shared state. The counter is
//! pages faulted in.
use super::EnemyLoad;
use super::kind::Kind;

const PAGE: usize = 4096;

pub struct PageFault {
    len: usize,
}

impl PageFault {
    pub fn new(bytes: u64) -> PageFault {
        PageFault { len: (bytes as usize).div_ceil(PAGE) * PAGE }
    }
}

impl EnemyLoad for PageFault {
    fn chunk(&mut self) -> u64 {
        let p = unsafe {
            libc::mmap(std::ptr::null_mut(), self.len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0)
        };
        if p == libc::MAP_FAILED {
            return 0;
        }
        // No huge pages: one fault per 4 KiB page is the point.
        unsafe { libc::madvise(p, self.len, libc::MADV_NOHUGEPAGE) };
        let base = p as *mut u8;
        for off in (0..self.len).step_by(PAGE) {
            unsafe { std::ptr::write_volatile(base.add(off), 1) };
        }
        unsafe { libc::munmap(p, self.len) };
        (self.len / PAGE) as u64
    }
}

/// The `pagefault` kind (registry: mod.rs).
pub const KIND: Kind = Kind::new("pagefault", "memory management: mmap, one write per 4 KiB page, munmap", "faults",
    &[super::BYTES.file_default("1MiB")], |a, _| Ok(Box::new(PageFault::new(a.u64("bytes")))))
.footprint(1, &["bytes"])
.small_pages()
.channel("memory-management");
