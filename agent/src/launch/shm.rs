//! The control block shared by the agent, the measured processes (the victim and the
//! applications) and the enemies: a process-shared barrier (seed 000 §6.5.2), the stop flag,
//! the common first release, and one slot per process (an enemy's achieved work, a set-up
//! failure's message). It lives in an anonymous shared mapping, so nothing outlives the
//! processes. Every slot starts on its own cache line: an enemy counting its work never
//! writes a line a measured process reads or writes.

use std::sync::atomic::{AtomicI64, AtomicU32, AtomicU64, Ordering};

pub const MAX_ENEMIES: usize = 256;
pub use crate::plan::MAX_APPLICATIONS;
pub const MSG_LEN: usize = 200;
/// Room for an enemy's note (what it chose by measurement: a store method, a bank set).
pub const NOTE_LEN: usize = 400;

#[repr(C, align(64))]
pub struct Slot {
    /// Work done so far (bytes or accesses; unit given by the enemy kind).
    pub ops: AtomicU64,
    pub started_ns: AtomicI64,
    pub stopped_ns: AtomicI64,
    /// Time spent working (not sleeping for `intensity` or `rate`), ns.
    pub busy_ns: AtomicU64,
    /// Non-zero: setup failed, message in `msg`.
    pub failed: AtomicU32,
    /// Regulated enemies stop themselves once `ops` reaches this (u64::MAX: unregulated).
    pub allowance: AtomicU64,
    /// 1 while the enemy has stopped itself over budget (it clears it once resumed).
    pub stopped_self: AtomicU32,
    /// A measured process: 1 when it reads its counters with rdpmc, 0 with read(2).
    pub counters_rdpmc: AtomicU32,
    pub msg: [u8; MSG_LEN],
    /// Non-zero: the enemy left a note in `note` (run.json's notes).
    pub noted: AtomicU32,
    pub note: [u8; NOTE_LEN],
}

/// What the regulator did (see regulate/).
#[repr(C)]
pub struct RegulatorStats {
    pub wakeups: AtomicU64,
    pub periods: AtomicU64,
    pub throttles: AtomicU64,
    pub overshoot_bytes: AtomicU64,
    pub overshoot_max: AtomicU64,
    pub cpu_ns: AtomicU64,
}

#[repr(C)]
pub struct Control {
    pub barrier: libc::pthread_barrier_t,
    pub stop: AtomicU32,
    /// Enemy work counters snapshotted by the victim at the start and end of its window.
    pub window_start_ns: AtomicI64,
    pub window_end_ns: AtomicI64,
    pub ops_at_start: [AtomicU64; MAX_ENEMIES],
    pub ops_at_end: [AtomicU64; MAX_ENEMIES],
    /// Paced enemies' busy time at the same instants (their achieved intensity over the window).
    pub busy_at_start: [AtomicU64; MAX_ENEMIES],
    pub busy_at_end: [AtomicU64; MAX_ENEMIES],
    /// 1 when the victim reads its counters with rdpmc (no system call), 0 with read(2).
    pub counters_rdpmc: AtomicU32,
    /// The victim's last job time (the regulator's feedback mode reads it).
    pub victim_last_exec_ns: AtomicI64,
    pub regulator: RegulatorStats,
    /// The measured processes' common first release (CLOCK_MONOTONIC ns; 0 until the first
    /// one past the barrier sets it): every measured process is released at that instant.
    pub first_release_ns: AtomicI64,
    pub victim: Slot,
    pub enemies: [Slot; MAX_ENEMIES],
    /// One slot per application, in plan order.
    pub applications: [Slot; MAX_APPLICATIONS],
}

pub struct Shared {
    ptr: *mut Control,
}

unsafe impl Send for Shared {}
unsafe impl Sync for Shared {}

impl Shared {
    /// Map the control block and initialise a barrier for `parties` processes.
    pub fn new(parties: u32) -> std::io::Result<Shared> {
        let len = std::mem::size_of::<Control>();
        let p = unsafe {
            libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED | libc::MAP_ANONYMOUS, -1, 0)
        };
        if p == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        let ptr = p as *mut Control;
        unsafe {
            for s in (*ptr).enemies.iter() {
                s.allowance.store(u64::MAX, Ordering::Relaxed);
            }
            let mut attr: libc::pthread_barrierattr_t = std::mem::zeroed();
            libc::pthread_barrierattr_init(&mut attr);
            libc::pthread_barrierattr_setpshared(&mut attr, libc::PTHREAD_PROCESS_SHARED);
            libc::pthread_barrier_init(&mut (*ptr).barrier, &attr, parties);
            libc::pthread_barrierattr_destroy(&mut attr);
        }
        Ok(Shared { ptr })
    }

    pub fn ctl(&self) -> &Control {
        unsafe { &*self.ptr }
    }

    /// Wait until every party has arrived.
    pub fn barrier_wait(&self) {
        unsafe { libc::pthread_barrier_wait(&mut (*self.ptr).barrier) };
    }

    /// The common first release: the first measured process past the barrier sets it to
    /// now + `settle_ns`, the others read it, so every measured process starts its grid at
    /// the same instant.
    pub fn first_release(&self, settle_ns: i64) -> i64 {
        let mine = crate::observe::clock::mono_ns() + settle_ns;
        match self.ctl().first_release_ns.compare_exchange(0, mine, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => mine,
            Err(first) => first,
        }
    }

    pub fn stopping(&self) -> bool {
        self.ctl().stop.load(Ordering::Relaxed) != 0
    }
}

impl Slot {
    pub fn fail(&self, msg: &str) {
        let bytes = msg.as_bytes();
        let n = bytes.len().min(MSG_LEN - 1);
        let dst = self.msg.as_ptr() as *mut u8;
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), dst, n) };
        unsafe { *dst.add(n) = 0 };
        self.failed.store(1, Ordering::Release);
    }

    /// Leave a note for run.json (written once, before the barrier).
    pub fn set_note(&self, note: &str) {
        let bytes = note.as_bytes();
        let n = bytes.len().min(NOTE_LEN - 1);
        let dst = self.note.as_ptr() as *mut u8;
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), dst, n) };
        unsafe { *dst.add(n) = 0 };
        self.noted.store(1, Ordering::Release);
    }

    /// The note the enemy left, if any.
    pub fn note(&self) -> Option<String> {
        if self.noted.load(Ordering::Acquire) == 0 {
            return None;
        }
        let end = self.note.iter().position(|&b| b == 0).unwrap_or(NOTE_LEN);
        Some(String::from_utf8_lossy(&self.note[..end]).into_owned())
    }

    pub fn message(&self) -> Option<String> {
        if self.failed.load(Ordering::Acquire) == 0 {
            return None;
        }
        let end = self.msg.iter().position(|&b| b == 0).unwrap_or(MSG_LEN);
        Some(String::from_utf8_lossy(&self.msg[..end]).into_owned())
    }
}
