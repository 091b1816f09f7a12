//! `buslock`: bus locks. An atomic read-modify-write whose operand straddles two cache lines
//! (a "split lock") cannot be done inside one line's coherence protocol, so an x86 processor
//! locks the memory bus (or its equivalent in the interconnect) for the whole operation, and
//! every other core's memory accesses wait meanwhile, whatever their cache, partition or
//! bank (Intel SDM vol. 3A §9.1.2.2; Zhang, Zhang & Lee, "Memory DoS Attacks in Multi-tenant
//! Clouds: Severity and Mitigation", arXiv 1603.03404, the bus-locking attack; the Linux
//! kernel's split-lock documentation, Documentation/arch/x86/buslock.rst). One core issuing
//! them back to back is enough: a split lock takes about a microsecond, hundreds of a
//! victim's memory accesses.
//!
//! `split = true` (default) straddles a line boundary on every operation, walking the line
//! pairs of a `bytes` buffer; `split = false` is the control: the same locked adds, aligned
//! inside each line (a cache lock only, no bus lock), so the difference between the two is
//! the bus lock's.
//!
//! Kernels may trap split locks (`split_lock_detect` on Intel, `bus_lock_detect` on AMD
//! Zen 5): a trapping task is delayed or killed (`split_lock_detect=fatal`, refused at the
//! plan's check). The note says what the kernel declares; the achieved rate shows what got
//! through. Only x86_64 does split locks at all: elsewhere a misaligned atomic faults, and
//! the kind is refused. The counter is locked operations.
use super::kind::{Dflt, Kind, Param};
use super::EnemyLoad;
use crate::kernels::Buffer;
use crate::plan::err;

const LINE: usize = 64;
/// Locked operations per chunk: about 0.3 ms of split locks (≈ 1 µs each), a few µs aligned.
const CHUNK_LOCKS: u64 = 256;

pub struct BusLock {
    buf: Buffer,
    /// Byte offset of the operand inside each line: 62 straddles into the next line.
    offset: usize,
    lines: usize,
    i: usize,
    note: String,
}

impl BusLock {
    pub fn new(bytes: u64, split: bool, huge_pages: bool) -> BusLock {
        let mut buf = Buffer::zeroed((bytes / 8) as usize, huge_pages);
        buf.fill(0); // back every page before the window
        // The last line has no next line to straddle into.
        let lines = bytes as usize / LINE - 1;
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let mitigate = std::fs::read_to_string("/proc/sys/kernel/split_lock_mitigate").ok();
        BusLock { buf, offset: if split { LINE - 2 } else { 0 }, lines, i: 0, note: kernel_trap_note(split, &cpuinfo, mitigate.as_deref()) }
    }

    /// Address of the operand of line `i`.
    fn operand(&mut self, i: usize) -> *mut u32 {
        unsafe { (self.buf.as_mut_ptr() as *mut u8).add(i * LINE + self.offset) as *mut u32 }
    }
}

/// One locked add of 1 to the 4 bytes at `p`, aligned or not: `lock add` takes any address
/// on x86_64, which Rust's atomics (aligned only) do not.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn locked_add(p: *mut u32) {
    unsafe { std::arch::asm!("lock add dword ptr [{p}], 1", p = in(reg) p, options(nostack)) };
}
#[cfg(not(target_arch = "x86_64"))]
fn locked_add(_: *mut u32) {
    unreachable!("buslock is refused at the plan's check on this architecture")
}

impl EnemyLoad for BusLock {
    fn chunk(&mut self) -> u64 {
        for _ in 0..CHUNK_LOCKS {
            let p = self.operand(self.i);
            locked_add(p);
            self.i += 1;
            if self.i == self.lines {
                self.i = 0;
            }
        }
        CHUNK_LOCKS
    }
    fn note(&self) -> Option<String> {
        Some(self.note.clone())
    }
}

/// What the kernel declares about split locks (from /proc/cpuinfo's flags and
/// kernel.split_lock_mitigate), for run.json's notes.
fn kernel_trap_note(split: bool, cpuinfo: &str, mitigate: Option<&str>) -> String {
    if !split {
        return "aligned locked adds (split = false): cache locks only, no bus lock".into();
    }
    let flagged: Vec<&str> = ["split_lock_detect", "bus_lock_detect"].into_iter().filter(|f| cpuinfo.split_whitespace().any(|w| w == *f)).collect();
    if flagged.is_empty() {
        return "split locks: no split_lock_detect or bus_lock_detect flag in /proc/cpuinfo, every lock reaches the bus".into();
    }
    let mitigate = mitigate.map_or("absent", str::trim);
    format!("split locks: the kernel traps them ({}; kernel.split_lock_mitigate {mitigate}): a trapped task is delayed, the rate shows what got through", flagged.join(", "))
}

/// The kernel kills split-lock users: its command line says `split_lock_detect=fatal`.
fn kills_split_locks(cmdline: &str) -> bool {
    cmdline.split_whitespace().any(|w| w == "split_lock_detect=fatal")
}

/// The `buslock` kind (registry: mod.rs).
pub const KIND: Kind = Kind::new("buslock", "bus locks (Zhang et al. 2016, the bus-locking attack): locked adds straddling two cache lines, each locking the memory bus for every core", "locks", &[
    Param::u64("bytes", "buffer whose line boundaries the operations walk").range(128, 1 << 30).default(Dflt::U64(4096)).unit("bytes"),
    Param::bool("split", "true: each operand straddles two lines (a bus lock); false: aligned in its line (a cache lock: the control)").default(Dflt::Bool(true)),
], |a, cx| Ok(Box::new(BusLock::new(a.u64("bytes"), a.bool("split"), cx.huge_pages))))
.footprint(1, &["bytes"])
.channel("bus-lock")
.check(|a, at| {
    if !cfg!(target_arch = "x86_64") {
        return err(format!("{at}.kind"), "buslock needs atomic operations that straddle cache lines (x86_64); this architecture faults on them; use mshr or wbpressure");
    }
    if a.bool("split") && kills_split_locks(&std::fs::read_to_string("/proc/cmdline").unwrap_or_default()) {
        return err(format!("{at}.split"), "this kernel kills split-lock users (split_lock_detect=fatal on its command line); use split = false, or boot with split_lock_detect=warn");
    }
    Ok(())
});

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;

    fn word_at(b: &BusLock, byte: usize) -> u32 {
        let bytes = unsafe { std::slice::from_raw_parts(b.buf.as_ptr() as *const u8, b.buf.len() * 8) };
        u32::from_le_bytes(bytes[byte..byte + 4].try_into().unwrap())
    }

    #[test]
    fn split_operands_straddle_a_line_boundary_and_every_add_lands() {
        let mut b = BusLock::new(4096, true, false); // 63 line pairs: 256 locks wrap 4 times
        assert_eq!(b.chunk(), CHUNK_LOCKS);
        let operand = b.operand(0) as usize;
        assert_eq!(operand / LINE + 1, (operand + 3) / LINE, "the operand spans two lines");
        let total: u32 = (0..b.lines).map(|i| word_at(&b, i * LINE + LINE - 2)).sum();
        assert_eq!(total as u64, CHUNK_LOCKS);
    }

    #[test]
    fn aligned_operands_stay_in_their_line() {
        let mut b = BusLock::new(1 << 16, false, false);
        b.chunk();
        assert_eq!(b.operand(5) as usize % LINE, 0);
        assert_eq!(word_at(&b, 0), 1);
        assert!(b.note().unwrap().contains("no bus lock"));
    }

    #[test]
    fn the_note_says_whether_the_kernel_traps_split_locks() {
        assert!(kernel_trap_note(true, "flags : fpu sse2 avx2", None).contains("every lock reaches the bus"));
        let trapped = kernel_trap_note(true, "flags : fpu split_lock_detect avx2", Some("1\n"));
        assert!(trapped.contains("traps them (split_lock_detect; kernel.split_lock_mitigate 1)"), "{trapped}");
        assert!(kernel_trap_note(true, "flags : bus_lock_detect", None).contains("mitigate absent"));
    }

    #[test]
    fn only_a_fatal_split_lock_mode_refuses_the_split_form() {
        assert!(kills_split_locks("BOOT_IMAGE=/vmlinuz root=/dev/sda1 split_lock_detect=fatal quiet"));
        assert!(!kills_split_locks("BOOT_IMAGE=/vmlinuz split_lock_detect=warn"));
        assert!(!kills_split_locks("split_lock_detect=fatalistic"));
    }
}
