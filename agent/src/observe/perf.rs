//! Per-job performance counters through perf_event_open(2).
//!
//! Events are named as `perf` names them: generic hardware events ("cycles",
//! "instructions", "cache-misses", ...), hardware cache events ("L1-dcache-load-misses",
//! "LLC-loads", ...), software events ("task-clock", "context-switches", "cpu-migrations",
//! "page-faults", ...), a raw code ("r01c2"), or an alias the PMU publishes in sysfs
//! ("cpu/mem_load_retired.l3_miss/" style names under /sys/bus/event_source/devices/*/events).
//! All counters of a run form one group on the victim thread, read with one read(2) around
//! every job (PERF_FORMAT_GROUP with time_enabled / time_running, so multiplexing shows).

use perf_event_open_sys as sys;
use sys::bindings as b;
use std::fs;

#[derive(Debug, Clone, PartialEq)]
pub struct EventSpec {
    pub name: String,
    pub type_: u32,
    pub config: u64,
}

const GENERIC: &[(&str, u64)] = &[
    ("cycles", b::PERF_COUNT_HW_CPU_CYCLES as u64),
    ("cpu-cycles", b::PERF_COUNT_HW_CPU_CYCLES as u64),
    ("instructions", b::PERF_COUNT_HW_INSTRUCTIONS as u64),
    ("cache-references", b::PERF_COUNT_HW_CACHE_REFERENCES as u64),
    ("cache-misses", b::PERF_COUNT_HW_CACHE_MISSES as u64),
    ("branch-instructions", b::PERF_COUNT_HW_BRANCH_INSTRUCTIONS as u64),
    ("branches", b::PERF_COUNT_HW_BRANCH_INSTRUCTIONS as u64),
    ("branch-misses", b::PERF_COUNT_HW_BRANCH_MISSES as u64),
    ("bus-cycles", b::PERF_COUNT_HW_BUS_CYCLES as u64),
    ("stalled-cycles-frontend", b::PERF_COUNT_HW_STALLED_CYCLES_FRONTEND as u64),
    ("stalled-cycles-backend", b::PERF_COUNT_HW_STALLED_CYCLES_BACKEND as u64),
    ("ref-cycles", b::PERF_COUNT_HW_REF_CPU_CYCLES as u64),
];

const SOFTWARE: &[(&str, u64)] = &[
    ("task-clock", b::PERF_COUNT_SW_TASK_CLOCK as u64),
    ("cpu-clock", b::PERF_COUNT_SW_CPU_CLOCK as u64),
    ("context-switches", b::PERF_COUNT_SW_CONTEXT_SWITCHES as u64),
    ("cs", b::PERF_COUNT_SW_CONTEXT_SWITCHES as u64),
    ("cpu-migrations", b::PERF_COUNT_SW_CPU_MIGRATIONS as u64),
    ("migrations", b::PERF_COUNT_SW_CPU_MIGRATIONS as u64),
    ("page-faults", b::PERF_COUNT_SW_PAGE_FAULTS as u64),
    ("faults", b::PERF_COUNT_SW_PAGE_FAULTS as u64),
    ("minor-faults", b::PERF_COUNT_SW_PAGE_FAULTS_MIN as u64),
    ("major-faults", b::PERF_COUNT_SW_PAGE_FAULTS_MAJ as u64),
    ("alignment-faults", b::PERF_COUNT_SW_ALIGNMENT_FAULTS as u64),
    ("emulation-faults", b::PERF_COUNT_SW_EMULATION_FAULTS as u64),
];

const CACHES: &[(&str, u64)] = &[
    ("L1-dcache", b::PERF_COUNT_HW_CACHE_L1D as u64),
    ("L1-icache", b::PERF_COUNT_HW_CACHE_L1I as u64),
    ("LLC", b::PERF_COUNT_HW_CACHE_LL as u64),
    ("dTLB", b::PERF_COUNT_HW_CACHE_DTLB as u64),
    ("iTLB", b::PERF_COUNT_HW_CACHE_ITLB as u64),
    ("branch", b::PERF_COUNT_HW_CACHE_BPU as u64),
    ("node", b::PERF_COUNT_HW_CACHE_NODE as u64),
];

const CACHE_OPS: &[(&str, u64, u64)] = &[
    ("loads", b::PERF_COUNT_HW_CACHE_OP_READ as u64, b::PERF_COUNT_HW_CACHE_RESULT_ACCESS as u64),
    ("load-misses", b::PERF_COUNT_HW_CACHE_OP_READ as u64, b::PERF_COUNT_HW_CACHE_RESULT_MISS as u64),
    ("stores", b::PERF_COUNT_HW_CACHE_OP_WRITE as u64, b::PERF_COUNT_HW_CACHE_RESULT_ACCESS as u64),
    ("store-misses", b::PERF_COUNT_HW_CACHE_OP_WRITE as u64, b::PERF_COUNT_HW_CACHE_RESULT_MISS as u64),
    ("prefetches", b::PERF_COUNT_HW_CACHE_OP_PREFETCH as u64, b::PERF_COUNT_HW_CACHE_RESULT_ACCESS as u64),
    ("prefetch-misses", b::PERF_COUNT_HW_CACHE_OP_PREFETCH as u64, b::PERF_COUNT_HW_CACHE_RESULT_MISS as u64),
];

/// Armv8 PMUv3 common events (Arm ARM D17.11), by the names Linux gives them under
/// /sys/bus/event_source/devices/armv8_pmuv3*/events: the seeds' Cortex-A53 counters (L1D
/// refill, L2 refill, bus access, memory access) and their neighbours. On arm64 they are raw
/// events (the PMU driver takes the event number as config), so they count even where the
/// kernel publishes no alias (an emulated PMU); elsewhere the numbers mean other things.
const ARMV8_COMMON: &[(&str, u64)] = &[
    ("l1i_cache_refill", 0x01),
    ("l1d_cache_refill", 0x03),
    ("l1d_cache", 0x04),
    ("inst_retired", 0x08),
    ("br_mis_pred", 0x10),
    ("cpu_cycles", 0x11),
    ("mem_access", 0x13),
    ("l1i_cache", 0x14),
    ("l1d_cache_wb", 0x15),
    ("l2d_cache", 0x16),
    ("l2d_cache_refill", 0x17),
    ("l2d_cache_wb", 0x18),
    ("bus_access", 0x19),
    ("bus_cycles", 0x1d),
];

/// The Armv8 common event `name` (either case), as (name, event number).
fn armv8_common(name: &str) -> Option<(&'static str, u64)> {
    ARMV8_COMMON.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).copied()
}

/// Where the kernel lists PMUs; "cpu" (x86) or "armv8_*" (arm64) carries the core events.
const PMU_DIR: &str = "/sys/bus/event_source/devices";

/// The core PMU's sysfs directory, if the machine exposes one.
pub fn core_pmu() -> Option<String> {
    let dir = fs::read_dir(PMU_DIR).ok()?;
    let mut names: Vec<String> = dir.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    names.into_iter().find(|n| n == "cpu" || n == "cpu_core" || n.starts_with("armv8") || n.starts_with("armv9"))
}

/// Parse "event=0x3c,umask=0x1" (the sysfs alias format, common fields only) into a config.
fn sysfs_config(pmu: &str, terms: &str) -> Option<u64> {
    let mut config = 0u64;
    for term in terms.trim().split(',') {
        let (k, v) = term.split_once('=').unwrap_or((term, "1"));
        let v = u64::from_str_radix(v.trim_start_matches("0x"), if v.starts_with("0x") { 16 } else { 10 }).ok()?;
        // The field's bit range comes from the PMU's format directory, e.g. "config:0-7".
        let fmt = fs::read_to_string(format!("{PMU_DIR}/{pmu}/format/{k}")).ok()?;
        let (reg, bits) = fmt.trim().split_once(':')?;
        if reg != "config" {
            return None;
        }
        let lo: u32 = bits.split(['-', ',']).next()?.parse().ok()?;
        config |= v << lo;
    }
    Some(config)
}

fn pmu_type(pmu: &str) -> Option<u32> {
    fs::read_to_string(format!("{PMU_DIR}/{pmu}/type")).ok()?.trim().parse().ok()
}

/// Turn an event name into what perf_event_open needs. Err names what is understood.
pub fn resolve(name: &str) -> Result<EventSpec, String> {
    let spec = |type_: u32, config: u64| Ok(EventSpec { name: name.to_string(), type_, config });
    if let Some((_, c)) = GENERIC.iter().find(|(n, _)| *n == name) {
        return spec(b::PERF_TYPE_HARDWARE, *c);
    }
    if let Some((_, c)) = SOFTWARE.iter().find(|(n, _)| *n == name) {
        return spec(b::PERF_TYPE_SOFTWARE, *c);
    }
    if let Some((cache, op)) = name.split_once('-').and_then(|_| {
        CACHES.iter().find_map(|(c, id)| name.strip_prefix(c).and_then(|r| r.strip_prefix('-')).map(|rest| (*id, rest)))
    }) {
        if let Some((_, o, r)) = CACHE_OPS.iter().find(|(n, _, _)| *n == op) {
            return spec(b::PERF_TYPE_HW_CACHE, cache | (o << 8) | (r << 16));
        }
    }
    if let Some((common, code)) = armv8_common(name) {
        if cfg!(target_arch = "aarch64") {
            return spec(b::PERF_TYPE_RAW, code);
        }
        return Err(format!("'{common}' is an Armv8 PMUv3 common event (0x{code:02x}), counted by the arm64 agent only; \
                            on {} use a perf name (cache-misses, L1-dcache-load-misses, LLC-load-misses, ...) or a raw code r<hex>",
                           std::env::consts::ARCH));
    }
    if let Some(hex) = name.strip_prefix('r') {
        if let Ok(code) = u64::from_str_radix(hex, 16) {
            return spec(b::PERF_TYPE_RAW, code);
        }
    }
    // "pmu/alias/" or a bare alias of the core PMU.
    let (pmu, alias) = match name.trim_end_matches('/').split_once('/') {
        Some((p, a)) => (Some(p.to_string()), a.to_string()),
        None => (core_pmu(), name.to_string()),
    };
    if let Some(pmu) = pmu {
        if let (Ok(terms), Some(t)) = (fs::read_to_string(format!("{PMU_DIR}/{pmu}/events/{alias}")), pmu_type(&pmu)) {
            if let Some(config) = sysfs_config(&pmu, &terms) {
                return spec(t, config);
            }
        }
    }
    Err(format!("unknown event '{name}'; use a perf name (cycles, instructions, cache-misses, L1-dcache-load-misses, task-clock, context-switches, ...), a raw code r<hex>, or a sysfs alias"))
}

fn attr_for(e: &EventSpec, leader: bool, exclude_kernel: bool) -> b::perf_event_attr {
    let mut a: b::perf_event_attr = unsafe { std::mem::zeroed() };
    a.type_ = e.type_;
    a.size = std::mem::size_of::<b::perf_event_attr>() as u32;
    a.config = e.config;
    a.read_format = (b::PERF_FORMAT_GROUP | b::PERF_FORMAT_TOTAL_TIME_ENABLED | b::PERF_FORMAT_TOTAL_TIME_RUNNING) as u64;
    a.set_disabled(if leader { 1 } else { 0 });
    a.set_exclude_hv(1);
    a.set_exclude_kernel(exclude_kernel as u64);
    a
}

fn open_one(e: &EventSpec, group: i32, exclude_kernel: bool) -> Result<i32, String> {
    open_for(e, 0, group, exclude_kernel)
}

fn open_for(e: &EventSpec, pid: libc::pid_t, group: i32, exclude_kernel: bool) -> Result<i32, String> {
    let mut a = attr_for(e, group < 0, exclude_kernel);
    let fd = unsafe { sys::perf_event_open(&mut a, pid, -1, group, b::PERF_FLAG_FD_CLOEXEC as libc::c_ulong) };
    if fd < 0 {
        let err = std::io::Error::last_os_error();
        let why = match err.raw_os_error() {
            Some(libc::ENOENT) | Some(libc::EOPNOTSUPP) | Some(libc::ENODEV) if e.type_ != b::PERF_TYPE_SOFTWARE => {
                if core_pmu().is_none() { "no hardware PMU on this machine (virtualised?)".to_string() } else { format!("not supported by this PMU ({err})") }
            }
            Some(libc::EACCES) | Some(libc::EPERM) => format!("not permitted ({err}); lower /proc/sys/kernel/perf_event_paranoid or run as root"),
            _ => err.to_string(),
        };
        return Err(why);
    }
    Ok(fd)
}

/// Can this event be counted on this machine for the calling process? Err says why not.
pub fn probe(e: &EventSpec, exclude_kernel: bool) -> Result<(), String> {
    let fd = open_one(e, -1, exclude_kernel)?;
    unsafe { libc::close(fd) };
    Ok(())
}

// One reading and the events in a group: the shape counters.bin records (record/counters.rs).
pub use crate::record::counters::{Reading, MAX_EVENTS};

/// The generic and software events this machine can count for this process.
pub fn available(exclude_kernel: bool) -> Vec<&'static str> {
    let mut seen = Vec::new();
    GENERIC.iter().chain(SOFTWARE.iter()).filter(|(n, _)| !matches!(*n, "cpu-cycles" | "branches" | "cs" | "migrations" | "faults")).for_each(|(n, _)| {
        if let Ok(e) = resolve(n) {
            if probe(&e, exclude_kernel).is_ok() {
                seen.push(*n);
            }
        }
    });
    seen
}

/// Split the requested counters into those counted here and those skipped (optional ones
/// the machine cannot count), with the reason for each skip.
pub fn select(wanted: &[crate::plan::Counter], exclude_kernel: bool) -> (Vec<EventSpec>, Vec<(String, String)>) {
    let (mut active, mut skipped) = (Vec::new(), Vec::new());
    for c in wanted {
        match resolve(&c.event).and_then(|e| probe(&e, exclude_kernel).map(|_| e)) {
            Ok(e) => active.push(e),
            Err(why) => skipped.push((c.event.clone(), why)),
        }
    }
    (active, skipped)
}

/// A counter group on the calling thread.
pub struct Group {
    leader: i32,
    fds: Vec<i32>,
    buf: [u64; 3 + MAX_EVENTS],
}

impl Group {
    /// Open every event in one group on the calling thread and start counting.
    pub fn open(events: &[EventSpec], exclude_kernel: bool) -> Result<Group, String> {
        if events.is_empty() || events.len() > MAX_EVENTS {
            return Err(format!("between 1 and {MAX_EVENTS} events per group"));
        }
        let leader = open_one(&events[0], -1, exclude_kernel).map_err(|e| format!("{}: {e}", events[0].name))?;
        let mut fds = vec![leader];
        for e in &events[1..] {
            match open_one(e, leader, exclude_kernel) {
                Ok(fd) => fds.push(fd),
                Err(why) => {
                    for &fd in &fds {
                        unsafe { libc::close(fd) };
                    }
                    return Err(format!("{}: {why}", e.name));
                }
            }
        }
        unsafe { libc::ioctl(leader, b::ENABLE as _, b::PERF_IOC_FLAG_GROUP) };
        Ok(Group { leader, fds, buf: [0; 3 + MAX_EVENTS] })
    }

    /// Read the whole group: one system call.
    #[inline(always)]
    pub fn read(&mut self, out: &mut Reading) {
        let n = self.fds.len();
        let want = (3 + n) * 8;
        let got = unsafe { libc::read(self.leader, self.buf.as_mut_ptr() as *mut libc::c_void, want) };
        if got as usize == want {
            out.enabled = self.buf[1];
            out.running = self.buf[2];
            out.values[..n].copy_from_slice(&self.buf[3..3 + n]);
        }
    }

}

/// Count from a user-space read (perf_event_mmap_page): `offset` plus the raw counter
/// sign-extended from its `width` bits. Hardware counters are 32 to 48 bits wide and wrap
/// (seed 002 added 2^32 by hand); the sign extension and the kernel's offset undo the wrap.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))] // the arm64 agent reads with read(2)
pub fn count_from(offset: i64, raw: u64, width: u16) -> u64 {
    let w = width.clamp(1, 64) as u32;
    let shifted = (raw << (64 - w)) as i64 >> (64 - w);
    offset.wrapping_add(shifted) as u64
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn rdpmc(counter: u32) -> u64 {
    let (lo, hi): (u32, u32);
    unsafe { core::arch::asm!("rdpmc", in("ecx") counter, out("eax") lo, out("edx") hi, options(nostack, nomem)) };
    ((hi as u64) << 32) | lo as u64
}

/// User-space reads of a group's counters with rdpmc, when the kernel allows it for every
/// event (cap_user_rdpmc and a hardware counter index): no system call per read.
pub struct Rdpmc {
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    pages: Vec<*const b::perf_event_mmap_page>,
}

impl Group {
    /// Map each event's control page; None unless rdpmc works for all of them.
    pub fn rdpmc(&self) -> Option<Rdpmc> {
        if !cfg!(target_arch = "x86_64") {
            return None;
        }
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
        let mut pages = Vec::new();
        for &fd in &self.fds {
            let p = unsafe { libc::mmap(std::ptr::null_mut(), page, libc::PROT_READ, libc::MAP_SHARED, fd, 0) };
            if p == libc::MAP_FAILED {
                return None;
            }
            let m = p as *const b::perf_event_mmap_page;
            if unsafe { (*m).__bindgen_anon_1.__bindgen_anon_1.cap_user_rdpmc() == 0 || std::ptr::read_volatile(&(*m).index) == 0 } {
                return None;
            }
            pages.push(m);
        }
        Some(Rdpmc { pages })
    }
}

impl Rdpmc {
    /// Read every counter (the kernel's seqlock protocol); values as read(2) would give.
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    pub fn read(&self, out: &mut Reading) {
        for (i, &m) in self.pages.iter().enumerate() {
            loop {
                let seq = unsafe { std::ptr::read_volatile(&(*m).lock) };
                std::sync::atomic::compiler_fence(std::sync::atomic::Ordering::SeqCst);
                let idx = unsafe { std::ptr::read_volatile(&(*m).index) };
                let offset = unsafe { std::ptr::read_volatile(&(*m).offset) };
                let width = unsafe { std::ptr::read_volatile(&(*m).pmc_width) };
                let raw = if idx == 0 { 0 } else { rdpmc(idx - 1) };
                std::sync::atomic::compiler_fence(std::sync::atomic::Ordering::SeqCst);
                if unsafe { std::ptr::read_volatile(&(*m).lock) } == seq {
                    out.values[i] = if idx == 0 { offset as u64 } else { count_from(offset, raw, width) };
                    break;
                }
            }
        }
        // rdpmc counts while the task runs; enabled and running are not read on this path.
        out.enabled = 1;
        out.running = 1;
    }

    #[cfg(not(target_arch = "x86_64"))]
    pub fn read(&self, _out: &mut Reading) {}
}

/// One event counting another process (the regulator's hardware accounting).
pub struct ProcessCounter {
    fd: i32,
}

impl ProcessCounter {
    pub fn open(e: &EventSpec, pid: libc::pid_t) -> Result<ProcessCounter, String> {
        let fd = open_for(e, pid, -1, false)?;
        unsafe { libc::ioctl(fd, b::ENABLE as _, 0) };
        Ok(ProcessCounter { fd })
    }

    /// The count so far (read(2) of a one-event group).
    pub fn read(&self) -> u64 {
        let mut buf = [0u64; 4];
        let n = unsafe { libc::read(self.fd, buf.as_mut_ptr() as *mut libc::c_void, 32) };
        if n >= 32 { buf[3] } else { 0 }
    }
}

impl Drop for ProcessCounter {
    fn drop(&mut self) {
        unsafe { libc::close(self.fd) };
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        for &fd in &self.fds {
            unsafe { libc::close(fd) };
        }
    }
}


#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_resolve_like_perf() {
        assert_eq!(resolve("cycles").unwrap().type_, b::PERF_TYPE_HARDWARE);
        assert_eq!(resolve("task-clock").unwrap().type_, b::PERF_TYPE_SOFTWARE);
        let l1 = resolve("L1-dcache-load-misses").unwrap();
        assert_eq!(l1.type_, b::PERF_TYPE_HW_CACHE);
        assert_eq!(l1.config, (b::PERF_COUNT_HW_CACHE_L1D | (b::PERF_COUNT_HW_CACHE_OP_READ << 8) | (b::PERF_COUNT_HW_CACHE_RESULT_MISS << 16)) as u64);
        assert_eq!(resolve("r01c2").unwrap(), EventSpec { name: "r01c2".into(), type_: b::PERF_TYPE_RAW, config: 0x01c2 });
        assert!(resolve("no-such-event").unwrap_err().contains("unknown event"));
    }

    #[test]
    fn armv8_common_events_are_raw_on_arm64_and_refused_with_a_reason_elsewhere() {
        for (name, code) in [("l1d_cache_refill", 0x03), ("L2D_CACHE_REFILL", 0x17), ("bus_access", 0x19), ("mem_access", 0x13)] {
            let got = resolve(name);
            if cfg!(target_arch = "aarch64") {
                assert_eq!(got, Ok(EventSpec { name: name.into(), type_: b::PERF_TYPE_RAW, config: code }));
            } else {
                let why = got.unwrap_err();
                assert!(why.contains("Armv8 PMUv3 common event") && why.contains(&format!("0x{code:02x}")), "{why}");
            }
        }
        // x86 keeps its names: the generic events resolve the same on both.
        assert_eq!(resolve("cache-misses").unwrap().type_, b::PERF_TYPE_HARDWARE);
    }

    #[test]
    fn wrapped_counters_are_sign_extended_from_their_width() {
        // A 32-bit counter just past its wrap reads small; the kernel's offset carries the rest.
        assert_eq!(count_from(1 << 32, 0x10, 32), (1 << 32) + 0x10);
        // Read just before the wrap as a large raw value: negative, then the offset.
        assert_eq!(count_from((1 << 32) + 100, 0xFFFF_FFF0, 32), (1 << 32) + 100 - 16);
        assert_eq!(count_from(0, 5, 48), 5);
        assert_eq!(count_from(7, 1 << 47, 48), (7i64 - (1i64 << 47)) as u64);
        // A raw 32-bit counter that wraps between two readings (same offset): the increment.
        let before = count_from(1_000, 0xFFFF_FF00, 32);
        let after = count_from(1_000, 0x0000_0100, 32);
        assert_eq!(after - before, 0x200);
    }

    /// Why perf_event_open(2) cannot be tested here, if it cannot: qemu-user (the aarch64 tests
    /// on an x86_64 machine) does not emulate it and answers ENOSYS, as does a kernel without
    /// CONFIG_PERF_EVENTS. Any other error is for the test to report.
    fn perf_missing() -> Option<String> {
        let mut a = attr_for(&resolve("task-clock").unwrap(), true, false);
        let fd = unsafe { sys::perf_event_open(&mut a, 0, -1, -1, b::PERF_FLAG_FD_CLOEXEC as libc::c_ulong) };
        if fd >= 0 {
            unsafe { libc::close(fd) };
            return None;
        }
        let err = std::io::Error::last_os_error();
        (err.raw_os_error() == Some(libc::ENOSYS)).then(|| format!("skipped: perf_event_open(2) is not implemented here ({err}; qemu-user?)"))
    }

    #[test]
    fn software_events_have_no_rdpmc_path() {
        if let Some(why) = perf_missing() {
            return eprintln!("{why}");
        }
        let g = Group::open(&[resolve("task-clock").unwrap()], false).unwrap();
        assert!(g.rdpmc().is_none(), "software counters are not in hardware registers");
    }

    #[test]
    fn software_counters_count_this_thread() {
        if let Some(why) = perf_missing() {
            return eprintln!("{why}");
        }
        let evs = [resolve("task-clock").unwrap(), resolve("page-faults").unwrap()];
        let mut g = Group::open(&evs, false).expect("software events work everywhere perf does");
        let (mut a, mut z) = (Reading::default(), Reading::default());
        g.read(&mut a);
        let v: Vec<u8> = vec![1; 8 << 20]; // fresh pages: faults
        std::hint::black_box(&v);
        g.read(&mut z);
        assert!(z.values[0] > a.values[0], "task-clock advances");
        assert!(z.values[1] > a.values[1], "page faults counted");
        assert!(z.enabled >= z.running && z.running > 0);
    }
}
