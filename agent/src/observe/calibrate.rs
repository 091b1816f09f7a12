//! Calibration of the measuring instruments (METRICS method, seed 004 §IV): read each time
//! source or counter twice in a row, many times, on a pinned CPU; the offset between the two
//! readings bounds the cost of one reading. Also characterises the clocks: resolution, the
//! TSC rate, the offset between cores (ping-pong), and drift between clocks over a window.

use super::perf;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicI64, AtomicU32, Ordering};

use super::clock::read as clock_ns;

fn resolution_ns(id: libc::clockid_t) -> i64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    unsafe { libc::clock_getres(id, &mut ts) };
    ts.tv_sec as i64 * 1_000_000_000 + ts.tv_nsec as i64
}

/// The processor's cycle/time counter: TSC on x86_64, the generic timer's virtual count
/// (CNTVCT_EL0) on arm64.
#[inline(always)]
pub fn ticks() -> u64 {
    #[cfg(target_arch = "x86_64")]
    unsafe {
        core::arch::x86_64::_rdtsc()
    }
    #[cfg(target_arch = "aarch64")]
    unsafe {
        // isb: the counter may otherwise be read ahead of the instructions before it.
        let v: u64;
        core::arch::asm!("isb", "mrs {}, cntvct_el0", out(reg) v, options(nostack, nomem, preserves_flags));
        v
    }
}

/// The probe counter and CLOCK_MONOTONIC at one instant, for the run's probe time references.
/// The counter is read on both sides of the clock and the narrowest of a few brackets kept: a
/// preemption between two plain reads would shift the reference by its length, and the probes'
/// linear map from ticks to ns would carry that error, growing across the run.
pub fn ticks_and_mono() -> (u64, i64) {
    let mut best = (u64::MAX, 0u64, 0i64);
    for _ in 0..16 {
        let t0 = ticks();
        let m = super::clock::mono_ns();
        let t1 = ticks();
        if t1 >= t0 && t1 - t0 < best.0 {
            best = (t1 - t0, t0 + (t1 - t0) / 2, m);
        }
    }
    if best.0 == u64::MAX {
        return (ticks(), super::clock::mono_ns()); // the counter went backwards every time: keep one plain read
    }
    (best.1, best.2)
}

/// The tick counter's frequency where the architecture states it: CNTFRQ_EL0 on arm64 (set
/// by the firmware, readable from user space). None on x86_64, whose TSC rate is measured.
pub fn counter_hz() -> Option<u64> {
    #[cfg(target_arch = "aarch64")]
    {
        let hz: u64;
        unsafe { core::arch::asm!("mrs {}, cntfrq_el0", out(reg) hz, options(nostack, nomem, preserves_flags)) };
        return Some(hz).filter(|&h| h > 0);
    }
    #[allow(unreachable_code)]
    None
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn ticks_serialized() -> u64 {
    let mut aux = 0u32;
    unsafe { core::arch::x86_64::__rdtscp(&mut aux) }
}

/// Ticks per ns: the stated frequency (arm64's CNTFRQ_EL0) where there is one, else
/// measured against CLOCK_MONOTONIC_RAW over `window_ns`.
pub fn ticks_per_ns(window_ns: i64) -> f64 {
    if let Some(hz) = counter_hz() {
        return hz as f64 / 1e9;
    }
    measured_ticks_per_ns(window_ns)
}

/// Ticks per ns measured against CLOCK_MONOTONIC_RAW over `window_ns`.
pub fn measured_ticks_per_ns(window_ns: i64) -> f64 {
    let (t0, c0) = (clock_ns(libc::CLOCK_MONOTONIC_RAW), ticks());
    while clock_ns(libc::CLOCK_MONOTONIC_RAW) - t0 < window_ns {
        std::hint::spin_loop();
    }
    let (t1, c1) = (clock_ns(libc::CLOCK_MONOTONIC_RAW), ticks());
    (c1 - c0) as f64 / (t1 - t0) as f64
}

/// Distribution summary of pair offsets (ns), plus 1000 quantiles for the sorted plot.
fn summary(mut v: Vec<f64>) -> Value {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let q = |p: f64| v[((v.len() - 1) as f64 * p).round() as usize];
    let curve: Vec<f64> = (0..1000).map(|i| q(i as f64 / 999.0)).collect();
    json!({"n": v.len(), "min": v[0], "median": q(0.5), "p99": q(0.99), "p9999": q(0.9999), "max": v[v.len() - 1],
           "below_110ns": v.iter().filter(|&&x| x < 110.0).count() as f64 / v.len() as f64, "sorted_quantiles": curve})
}

/// Pairs timed by the source itself (its second reading minus its first), in ns.
fn self_timed(n: usize, to_ns: f64, read: impl Fn() -> u64) -> Vec<f64> {
    (0..n).map(|_| {
        let a = read();
        let b = read();
        b.wrapping_sub(a) as f64 * to_ns
    }).collect()
}

/// A reading that is not a time source: bracket one call with the tick counter and
/// subtract the cost of the bracket itself.
fn tick_timed(n: usize, ns_per_tick: f64, mut call: impl FnMut()) -> Vec<f64> {
    let bare: Vec<u64> = (0..n.min(20_000)).map(|_| { let a = ticks(); let b = ticks(); b - a }).collect();
    let floor = *bare.iter().min().unwrap_or(&0);
    (0..n).map(|_| {
        let a = ticks();
        call();
        let b = ticks();
        (b - a).saturating_sub(floor) as f64 * ns_per_tick
    }).collect()
}

fn pin(cpu: usize) -> bool {
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    unsafe { libc::CPU_SET(cpu, &mut set) };
    unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0 }
}

/// Offset of `read` on CPU b relative to CPU a: ping-pong, keep the round with the smallest
/// round trip (its midpoint estimate is the tightest). Returns (offset, round trip) in ns.
fn core_offset(a: usize, b: usize, rounds: usize, to_ns: f64, read: fn() -> u64) -> Option<(f64, f64)> {
    static FLAG: AtomicU32 = AtomicU32::new(0);
    static REMOTE: AtomicI64 = AtomicI64::new(0);
    FLAG.store(0, Ordering::SeqCst);
    let responder = std::thread::spawn(move || {
        if !pin(b) {
            return false;
        }
        for r in 0..rounds as u32 {
            while FLAG.load(Ordering::Acquire) != 2 * r + 1 {
                std::hint::spin_loop();
            }
            REMOTE.store(read() as i64, Ordering::Relaxed);
            FLAG.store(2 * r + 2, Ordering::Release);
        }
        true
    });
    if !pin(a) {
        return None;
    }
    let mut best: Option<(f64, f64)> = None;
    for r in 0..rounds as u32 {
        let t0 = read();
        FLAG.store(2 * r + 1, Ordering::Release);
        while FLAG.load(Ordering::Acquire) != 2 * r + 2 {
            std::hint::spin_loop();
        }
        let t1 = read();
        let rtt = t1.wrapping_sub(t0) as f64 * to_ns;
        let off = (REMOTE.load(Ordering::Relaxed) as f64 - (t0 as f64 + t1 as f64) / 2.0) * to_ns;
        if best.map_or(true, |(_, r)| rtt < r) {
            best = Some((off, rtt));
        }
    }
    responder.join().ok().filter(|&ok| ok).and(best)
}

fn mono_u64() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC) as u64
}

fn ticks_u64() -> u64 {
    ticks()
}

/// Everything, as JSON. `pairs` per source, measured on `cpu`; drift over `drift_ns`.
pub fn run(pairs: usize, cpu: usize, drift_ns: i64, cpus: &[usize]) -> Value {
    let pinned = pin(cpu);
    let tpn = ticks_per_ns(100_000_000);
    let ns_per_tick = 1.0 / tpn;
    let mut sources = serde_json::Map::new();
    sources.insert("ticks (rdtsc/cntvct)".into(), summary(self_timed(pairs, ns_per_tick, ticks)));
    #[cfg(target_arch = "x86_64")]
    sources.insert("rdtscp".into(), summary(self_timed(pairs, ns_per_tick, ticks_serialized)));
    for (name, id) in [("clock_gettime MONOTONIC", libc::CLOCK_MONOTONIC), ("clock_gettime MONOTONIC_RAW", libc::CLOCK_MONOTONIC_RAW),
                       ("clock_gettime THREAD_CPUTIME_ID", libc::CLOCK_THREAD_CPUTIME_ID)] {
        sources.insert(name.into(), summary(self_timed(pairs, 1.0, || clock_ns(id) as u64)));
    }
    sources.insert("getrusage(RUSAGE_THREAD)".into(), summary(tick_timed(pairs, ns_per_tick, || { super::clock::ctx_switches(); })));
    sources.insert("sched_getcpu".into(), summary(tick_timed(pairs, ns_per_tick, || { super::clock::current_cpu(); })));
    let mut notes = Vec::new();
    match perf::resolve("task-clock").and_then(|e| perf::Group::open(&[e], false)) {
        Ok(mut g) => {
            let mut r = perf::Reading::default();
            sources.insert("perf read() (task-clock group)".into(), summary(tick_timed(pairs, ns_per_tick, || g.read(&mut r))));
        }
        Err(e) => notes.push(format!("perf read() not measured: {e}")),
    }
    notes.push(match perf::core_pmu() {
        Some(p) => format!("user-space rdpmc not measured: not implemented yet (PMU {p})"),
        None => "user-space rdpmc not measured: no hardware PMU".into(),
    });
    // Drift: how clocks move against each other over the window.
    let (m0, r0, t0, w0) = (clock_ns(libc::CLOCK_MONOTONIC), clock_ns(libc::CLOCK_MONOTONIC_RAW), ticks(), clock_ns(libc::CLOCK_REALTIME));
    std::thread::sleep(std::time::Duration::from_nanos(drift_ns as u64));
    let (m1, r1, t1, w1) = (clock_ns(libc::CLOCK_MONOTONIC), clock_ns(libc::CLOCK_MONOTONIC_RAW), ticks(), clock_ns(libc::CLOCK_REALTIME));
    let dm = (m1 - m0) as f64;
    let ppm = |x: f64| (x - dm) / dm * 1e6;
    let mut offsets = Vec::new();
    for &b in cpus.iter().filter(|&&b| b != cpu) {
        for (clock, read, to_ns) in [("ticks", ticks_u64 as fn() -> u64, ns_per_tick), ("MONOTONIC", mono_u64 as fn() -> u64, 1.0)] {
            if let Some((off, rtt)) = core_offset(cpu, b, 2000, to_ns, read) {
                offsets.push(json!({"from_cpu": cpu, "to_cpu": b, "clock": clock, "offset_ns": off, "round_trip_ns": rtt}));
            }
        }
    }
    pin(cpu);
    json!({
        "cpu": cpu,
        "pinned": pinned,
        "pairs": pairs,
        "sources": sources,
        "clocks": {
            "resolution_ns": {"MONOTONIC": resolution_ns(libc::CLOCK_MONOTONIC), "MONOTONIC_RAW": resolution_ns(libc::CLOCK_MONOTONIC_RAW),
                              "THREAD_CPUTIME_ID": resolution_ns(libc::CLOCK_THREAD_CPUTIME_ID), "ticks": ns_per_tick},
            "ticks_per_ns": tpn,
            "ticks_rate_from": if counter_hz().is_some() { "CNTFRQ_EL0" } else { "measured against MONOTONIC_RAW" },
            "drift_window_ns": drift_ns,
            "drift_ppm_vs_monotonic": {"MONOTONIC_RAW": ppm((r1 - r0) as f64), "ticks": ppm((t1 - t0) as f64 / tpn), "REALTIME": ppm((w1 - w0) as f64)},
            "inter_core_offsets": offsets,
        },
        "notes": notes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reference_pair_lies_between_plain_reads_of_both_clocks() {
        let (t_before, m_before) = (ticks(), super::super::clock::mono_ns());
        let (t, m) = ticks_and_mono();
        let (t_after, m_after) = (ticks(), super::super::clock::mono_ns());
        assert!(t_before <= t && t <= t_after, "{t_before} {t} {t_after}");
        assert!(m_before <= m && m <= m_after, "{m_before} {m} {m_after}");
    }

    #[test]
    fn the_tick_counter_advances() {
        let a = ticks();
        std::thread::sleep(std::time::Duration::from_millis(2));
        assert!(ticks() > a);
    }

    #[test]
    fn the_stated_counter_frequency_is_the_rate_it_counts_at() {
        match counter_hz() {
            // arm64: CNTFRQ_EL0 must be the generic timer's rate, not a stale or scaled value;
            // the loose bound tolerates a loaded machine, not a wrong register.
            Some(hz) => {
                let stated = hz as f64 / 1e9;
                let measured = measured_ticks_per_ns(200_000_000);
                assert!((measured / stated - 1.0).abs() < 0.25, "CNTFRQ_EL0 says {stated} ticks/ns, counted {measured}");
                assert_eq!(ticks_per_ns(1), stated, "the stated rate is used, without a measuring window");
            }
            None => assert!(cfg!(not(target_arch = "aarch64")), "arm64 states its counter frequency"),
        }
    }
}
