//! xtalk probes for Rust programs: the records of `include/xtalk/probe.h`, byte for byte.
//!
//! ```no_run
//! xtalk_probe::begin(7);
//! // work
//! xtalk_probe::end(7);
//! let _s = xtalk_probe::span(8); // ends when dropped
//! ```
//!
//! Run by xtalk as a `command` victim, the agent hands over a buffer (descriptor
//! `XTALK_PROBE_FD`); each probe writes {ticks, id, begin/end, CPU, thread id} into it as the C
//! header does: the same counter (x86-64: rdtsc + rdpid, or rdtscp where rdpid is missing;
//! arm64: CNTVCT_EL0), slots claimed 64 at a time per thread with one atomic add (so Rust, C
//! and the preload library share one buffer), each record published by a release store of its
//! sequence number. No system call, no lock; a full buffer counts a drop. Outside xtalk every
//! probe returns after one check. Layout: docs/observe.md.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
compile_error!("xtalk-probe: the probe counter is defined on x86_64 and aarch64 only (as the agent's)");

/// "XTPROBE1" as little-endian bytes.
pub const MAGIC: u64 = 0x3145_424f_5250_5458;
pub const CHUNK: u64 = 64;
pub const HEADER_SIZE: usize = 64;
pub const RECORD_SIZE: usize = 32;
pub const BEGIN: u32 = 0;
pub const END: u32 = 1;

extern "C" {
    fn mmap(addr: *mut u8, len: usize, prot: i32, flags: i32, fd: i32, off: i64) -> *mut u8;
    fn madvise(addr: *mut u8, len: usize, advice: i32) -> i32;
    fn syscall(n: i64, ...) -> i64;
    fn pthread_atfork(prepare: Option<extern "C" fn()>, parent: Option<extern "C" fn()>, child: Option<extern "C" fn()>) -> i32;
    #[cfg(target_arch = "aarch64")]
    fn sched_getcpu() -> i32;
}
const PROT_READ_WRITE: i32 = 0x3;
const MAP_SHARED: i32 = 0x1;
const MADV_POPULATE_WRITE: i32 = 23;
#[cfg(target_arch = "x86_64")]
const SYS_GETTID: i64 = 186;
#[cfg(target_arch = "aarch64")]
const SYS_GETTID: i64 = 178;

/// A probe buffer: the 64-byte header, then `capacity` records of 32 bytes.
pub struct Buffer {
    base: *mut u8,
}
// The buffer is shared memory written only through atomics and claimed slots.
unsafe impl Send for Buffer {}
unsafe impl Sync for Buffer {}

thread_local! {
    // This thread's claimed slots [cursor, limit) and its thread id (0: not read yet).
    static SLOTS: Cell<(u64, u64)> = const { Cell::new((0, 0)) };
    static TID: Cell<u32> = const { Cell::new(0) };
}

impl Buffer {
    /// A buffer at `base`, laid out as the agent lays it out (record/probes.rs).
    ///
    /// # Safety
    /// `base` must point to a mapping of at least 64 + capacity × 32 bytes, 8-byte aligned,
    /// whose header holds the magic and the capacity, valid for the life of the Buffer.
    pub unsafe fn from_raw(base: *mut u8) -> Option<Buffer> {
        (std::ptr::read(base as *const u64) == MAGIC).then_some(Buffer { base })
    }

    fn word(&self, off: usize) -> &AtomicU64 {
        unsafe { &*(self.base.add(off) as *const AtomicU64) }
    }

    fn capacity(&self) -> u64 {
        unsafe { std::ptr::read(self.base.add(16) as *const u64) }
    }

    /// Probes that found the buffer full.
    pub fn dropped(&self) -> u64 {
        self.word(32).load(Ordering::Acquire)
    }

    /// Write one record (kind BEGIN or END) from the calling thread.
    pub fn record(&self, id: u32, kind: u32, ticks: u64, cpu: u32, tid: u32) {
        let (mut cursor, mut limit) = SLOTS.with(|s| s.get());
        if cursor == limit {
            let capacity = self.capacity();
            let mut chunk = capacity;
            if self.word(24).load(Ordering::Acquire) < capacity {
                chunk = self.word(24).fetch_add(CHUNK, Ordering::Relaxed);
            }
            if chunk >= capacity {
                self.word(32).fetch_add(1, Ordering::Relaxed);
                return;
            }
            (cursor, limit) = (chunk, (chunk + CHUNK).min(capacity));
        }
        SLOTS.with(|s| s.set((cursor + 1, limit)));
        let off = HEADER_SIZE + cursor as usize * RECORD_SIZE;
        unsafe {
            let r = self.base.add(off);
            std::ptr::write(r.add(8) as *mut u64, ticks);
            std::ptr::write(r.add(16) as *mut u32, id);
            std::ptr::write(r.add(20) as *mut u32, kind);
            std::ptr::write(r.add(24) as *mut u32, cpu);
            std::ptr::write(r.add(28) as *mut u32, tid);
        }
        self.word(off).store(cursor + 1, Ordering::Release);
    }
}

// A forked child has its own threads but shares the buffer: it claims slots anew.
extern "C" fn forked() {
    SLOTS.with(|s| s.set((0, 0)));
    TID.with(|t| t.set(0));
}

#[cfg(target_arch = "x86_64")]
static RDPID: OnceLock<bool> = OnceLock::new();

fn attach() -> Option<Buffer> {
    use std::os::fd::FromRawFd;
    let fd: i32 = std::env::var("XTALK_PROBE_FD").ok()?.parse().ok()?;
    if fd < 0 {
        return None;
    }
    // Borrow the descriptor for its size; the process keeps it.
    let file = std::mem::ManuallyDrop::new(unsafe { std::fs::File::from_raw_fd(fd) });
    let len = file.metadata().ok()?.len() as usize;
    if len < HEADER_SIZE {
        return None;
    }
    let p = unsafe { mmap(std::ptr::null_mut(), len, PROT_READ_WRITE, MAP_SHARED, fd, 0) };
    if p as isize == -1 {
        return None;
    }
    // Every page writable now, as probe.h does (Linux 5.14+; older kernels fault as the probes
    // go): else the first probe on each page takes a page fault (~1 µs every 64 pairs).
    unsafe { madvise(p, len, MADV_POPULATE_WRITE) };
    #[cfg(target_arch = "x86_64")]
    RDPID.get_or_init(|| {
        let r = unsafe { core::arch::x86_64::__cpuid_count(7, 0) };
        r.ecx & (1 << 22) != 0
    });
    unsafe { pthread_atfork(None, None, Some(forked)) };
    unsafe { Buffer::from_raw(p) }
}

// Attach when the program is loaded (an .init_array entry, as a C constructor), so that mapping
// and populating the buffer happens neither in a measured section nor in the first period.
#[used]
#[link_section = ".init_array"]
static ATTACH_AT_LOAD: extern "C" fn() = {
    extern "C" fn attach_at_load() {
        let _ = buffer();
    }
    attach_at_load
};

fn buffer() -> Option<&'static Buffer> {
    static BUFFER: OnceLock<Option<Buffer>> = OnceLock::new();
    BUFFER.get_or_init(attach).as_ref()
}

/// The processor's counter and the CPU it was read on, as probe.h reads them.
#[inline(always)]
pub fn ticks() -> (u64, u32) {
    #[cfg(target_arch = "x86_64")]
    unsafe {
        if *RDPID.get().unwrap_or(&false) {
            // rdtsc does not wait for earlier instructions as rdtscp does; rdpid reads TSC_AUX.
            let t = core::arch::x86_64::_rdtsc();
            let id: u64;
            core::arch::asm!(".byte 0xf3, 0x0f, 0xc7, 0xf8", out("rax") id, options(nostack, nomem, preserves_flags));
            (t, id as u32 & 0xfff)
        } else {
            let mut aux = 0u32;
            let t = core::arch::x86_64::__rdtscp(&mut aux);
            (t, aux & 0xfff) // Linux keeps the CPU number in TSC_AUX
        }
    }
    #[cfg(target_arch = "aarch64")]
    unsafe {
        let v: u64;
        core::arch::asm!("isb", "mrs {}, cntvct_el0", out(reg) v, options(nostack, nomem, preserves_flags));
        (v, sched_getcpu() as u32)
    }
}

#[inline]
fn probe(id: u32, kind: u32) {
    let Some(b) = buffer() else { return };
    let mut tid = TID.with(|t| t.get());
    if tid == 0 {
        tid = unsafe { syscall(SYS_GETTID) } as u32;
        TID.with(|t| t.set(tid));
    }
    let (t, cpu) = ticks();
    b.record(id, kind, t, cpu, tid);
}

/// Mark the beginning of measured section `id` (any number you choose).
pub fn begin(id: u32) {
    probe(id, BEGIN)
}

/// Mark the end of measured section `id`.
pub fn end(id: u32) {
    probe(id, END)
}

/// Whether this process writes probes (run by xtalk with XTALK_PROBE_FD).
pub fn attached() -> bool {
    buffer().is_some()
}

/// Probes dropped so far because the buffer was full.
pub fn dropped() -> u64 {
    buffer().map_or(0, Buffer::dropped)
}

/// A section that ends when the value is dropped.
pub struct Span(u32);

/// Begin section `id`; it ends when the returned value goes out of scope.
pub fn span(id: u32) -> Span {
    begin(id);
    Span(id)
}

impl Drop for Span {
    fn drop(&mut self) {
        end(self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A buffer as the agent makes it (record/probes.rs: magic, version 1, record size 32,
    /// capacity), in 8-byte words.
    fn agent_buffer(capacity: usize) -> Vec<u64> {
        let mut v = vec![0u64; (HEADER_SIZE + capacity * RECORD_SIZE) / 8];
        v[0] = MAGIC;
        v[1] = 1 | (32 << 32);
        v[2] = capacity as u64;
        v
    }

    #[test]
    fn records_have_the_header_layout() {
        let mut mem = agent_buffer(4);
        let b = unsafe { Buffer::from_raw(mem.as_mut_ptr() as *mut u8) }.unwrap();
        b.record(7, BEGIN, 0x1122_3344_5566_7788, 3, 4242);
        b.record(7, END, 0x1122_3344_5566_7799, 1, 4242);
        assert_eq!(mem[3], CHUNK, "one chunk claimed");
        let r0 = &mem[8..12];
        assert_eq!(r0, &[1, 0x1122_3344_5566_7788, 7 | (0u64 << 32), 3 | (4242u64 << 32)]);
        let r1 = &mem[12..16];
        assert_eq!(r1, &[2, 0x1122_3344_5566_7799, 7 | (1u64 << 32), 1 | (4242u64 << 32)]);
    }

    #[test]
    fn a_full_buffer_counts_drops() {
        // Its own thread: the slots claimed are per thread.
        std::thread::spawn(|| {
            let mut mem = agent_buffer(2);
            let b = unsafe { Buffer::from_raw(mem.as_mut_ptr() as *mut u8) }.unwrap();
            for _ in 0..5 {
                b.record(1, BEGIN, 1, 0, 1);
            }
            assert_eq!(b.dropped(), 3);
            assert_eq!((mem[8], mem[12]), (1, 2), "both slots published");
        })
        .join()
        .unwrap();
    }

    #[test]
    fn a_foreign_mapping_is_refused() {
        let mut mem = vec![0u64; 8];
        assert!(unsafe { Buffer::from_raw(mem.as_mut_ptr() as *mut u8) }.is_none());
    }
}
