//! Two-sided enemies (coherence): the enemy process runs one side on the first CPU of its
//! placement and spawns a helper thread for the other side on the second CPU (the same
//! CPU when the placement has one; unpinned when it has none). Threads rather than two
//! processes keep the pair inside one enemy, with one counter and one teardown, and the
//! shared line is ordinary memory of that process. Both sides follow the enemy's intensity
//! and share its target rate.
use super::pace::helper_loop;
use super::Ctx;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// A cache line of its own (64-byte aligned and sized).
#[repr(C, align(64))]
pub struct Line(pub [AtomicU64; 8]);

impl Line {
    pub fn new() -> Line {
        Line(Default::default())
    }
}

/// Pin the calling thread to one CPU.
fn pin_thread(cpu: usize) {
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    unsafe {
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

pub struct Pair {
    pub line: Arc<Line>,
    helper_ops: Arc<AtomicU64>,
    seen: u64,
}

impl Pair {
    /// Start the helper thread running `side(line)` chunks; the caller runs the other side.
    pub fn start(cx: &Ctx, side: fn(&Line) -> u64) -> Pair {
        let line = Arc::new(Line::new());
        let helper_ops = Arc::new(AtomicU64::new(0));
        let cpus = cx.cpus.clone();
        if let Some(c) = &cpus {
            pin_thread(c[0]);
        }
        let (l, ops, stop, intensity, rate) = (line.clone(), helper_ops.clone(), cx.stop, cx.intensity, cx.rate);
        std::thread::Builder::new()
            .name(format!("xt-enemy-{}b", cx.index))
            .spawn(move || {
                if let Some(c) = &cpus {
                    pin_thread(c[1 % c.len()]);
                }
                helper_loop(intensity, rate, stop, &ops, || side(&l));
            })
            .expect("spawn the helper thread");
        Pair { line, helper_ops, seen: 0 }
    }

    /// Work the helper did since the last call.
    pub fn helper_delta(&mut self) -> u64 {
        let now = self.helper_ops.load(Ordering::Relaxed);
        let d = now - self.seen;
        self.seen = now;
        d
    }
}
