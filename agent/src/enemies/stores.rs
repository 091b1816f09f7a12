//! Store methods of the write-class enemies (`write`, `ntstore`) and the measurement that
//! picks the fastest on this CPU, as stress-ng's memrate shows it matters: on a 16-core Xeon
//! guest plain stores reached 7.0 GB/s where memrate's non-temporal `write128nt` reached
//! 16.7 GB/s, and on other parts temporal stores win. So `method = "auto"` times each
//! method this CPU has over the enemy's own buffer (its real footprint: a buffer in cache
//! favours temporal stores, one beyond the LLC usually favours streaming ones) and keeps
//! the fastest; an explicit method is taken as given.
//!
//! x86_64: `store64` (8-byte `mov`), `store128` (SSE2 `movdqa`), `store256` (AVX `vmovdqa`),
//! `nt64` (`movnti`), `nt128` (`movntdq`), `nt256` (AVX `vmovntdq`). aarch64: `store64`,
//! `store128` (`stp` of two words), `stnp` (non-temporal pair). Elsewhere `store64` only.
use crate::observe::clock::mono_ns;

/// One way of storing a value over a slice of words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Store64,
    Store128,
    Store256,
    Nt64,
    Nt128,
    Nt256,
    Stnp,
}

/// Every method name a plan may give, besides "auto" (the catalog lists them all; the check
/// refuses those this CPU lacks).
#[cfg(test)]
pub const NAMES: &[&str] = &["store64", "store128", "store256", "nt64", "nt128", "nt256", "stnp"];
/// `write`'s choices and `ntstore`'s.
pub const WRITE_CHOICES: &[&str] = &["auto", "store64", "store128", "store256", "nt64", "nt128", "nt256", "stnp"];
pub const NT_CHOICES: &[&str] = &["auto", "nt64", "nt128", "nt256", "stnp"];
/// The architectures each method exists on (the catalog's `choice_arch`: `xtalk worst` draws
/// only those of its machine); `store64` and `auto` exist everywhere. AVX, needed by the
/// 256-bit ones, is the check's to refuse on an x86_64 without it.
pub const ARCH: &[(&str, &[&str])] = &[
    ("store128", &["x86_64", "aarch64"]),
    ("store256", &["x86_64"]),
    ("nt64", &["x86_64"]),
    ("nt128", &["x86_64"]),
    ("nt256", &["x86_64"]),
    ("stnp", &["aarch64"]),
];

impl Method {
    pub fn name(self) -> &'static str {
        match self {
            Method::Store64 => "store64",
            Method::Store128 => "store128",
            Method::Store256 => "store256",
            Method::Nt64 => "nt64",
            Method::Nt128 => "nt128",
            Method::Nt256 => "nt256",
            Method::Stnp => "stnp",
        }
    }
    pub fn parse(s: &str) -> Option<Method> {
        [Method::Store64, Method::Store128, Method::Store256, Method::Nt64, Method::Nt128, Method::Nt256, Method::Stnp].into_iter().find(|m| m.name() == s)
    }
    /// Bypasses the caches (streaming / non-temporal hint).
    pub fn non_temporal(self) -> bool {
        matches!(self, Method::Nt64 | Method::Nt128 | Method::Nt256 | Method::Stnp)
    }
    /// Whether this CPU can run it; None when it can, else why not.
    pub fn unavailable(self) -> Option<&'static str> {
        #[cfg(target_arch = "x86_64")]
        return match self {
            Method::Store256 | Method::Nt256 if !std::arch::is_x86_feature_detected!("avx") => Some("needs AVX, which this CPU lacks"),
            Method::Stnp => Some("is an Arm instruction; this CPU is x86_64"),
            _ => None,
        };
        #[cfg(target_arch = "aarch64")]
        return match self {
            Method::Store64 | Method::Store128 | Method::Stnp => None,
            _ => Some("is an x86_64 instruction; this CPU is aarch64 (use store64, store128 or stnp)"),
        };
        #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
        return if self == Method::Store64 { None } else { Some("is not implemented on this architecture (use store64)") };
    }
}

/// The methods this CPU has, among `names`.
pub fn available(names: &[&str]) -> Vec<Method> {
    names.iter().filter_map(|n| Method::parse(n)).filter(|m| m.unavailable().is_none()).collect()
}

/// Store `v` into every word of `dst` with `m` (available on this CPU: checked with the plan).
pub fn store(m: Method, dst: &mut [u64], v: u64) {
    let done = unsafe { kernel(m, dst, v) };
    for w in dst[done..].iter_mut() {
        unsafe { std::ptr::write_volatile(w, v) };
    }
    if m.non_temporal() {
        fence();
    }
}

/// Streaming stores are weakly ordered: order them before what follows.
fn fence() {
    #[cfg(target_arch = "x86_64")]
    unsafe { std::arch::x86_64::_mm_sfence() };
    #[cfg(target_arch = "aarch64")]
    unsafe { core::arch::asm!("dmb ishst", options(nostack, preserves_flags)) };
}

/// The vector part of `store`: how many leading words it stored (the rest is done word by
/// word). Vector forms need the slice aligned to their width (buffers are 2 MiB aligned and
/// chunks whole multiples of 256 KiB, so only an odd tail falls back).
#[cfg(target_arch = "x86_64")]
unsafe fn kernel(m: Method, dst: &mut [u64], v: u64) -> usize {
    use std::arch::x86_64::*;
    let p = dst.as_mut_ptr();
    let aligned = |bytes: usize| p as usize % bytes == 0;
    match m {
        Method::Store64 => {
            for i in 0..dst.len() {
                std::ptr::write_volatile(p.add(i), v);
            }
            dst.len()
        }
        Method::Nt64 => {
            for i in 0..dst.len() {
                _mm_stream_si64(p.add(i) as *mut i64, v as i64);
            }
            dst.len()
        }
        Method::Store128 | Method::Nt128 if aligned(16) => {
            let x = _mm_set1_epi64x(v as i64);
            let q = p as *mut __m128i;
            let n = dst.len() / 2;
            for i in 0..n {
                if m == Method::Nt128 { _mm_stream_si128(q.add(i), x) } else { _mm_store_si128(q.add(i), x) }
            }
            n * 2
        }
        Method::Store256 | Method::Nt256 if aligned(32) => avx(m == Method::Nt256, dst, v),
        _ => 0,
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
unsafe fn avx(nt: bool, dst: &mut [u64], v: u64) -> usize {
    use std::arch::x86_64::*;
    let x = _mm256_set1_epi64x(v as i64);
    let q = dst.as_mut_ptr() as *mut __m256i;
    let n = dst.len() / 4;
    if nt {
        for i in 0..n {
            _mm256_stream_si256(q.add(i), x);
        }
    } else {
        for i in 0..n {
            _mm256_store_si256(q.add(i), x);
        }
    }
    n * 4
}

#[cfg(target_arch = "aarch64")]
unsafe fn kernel(m: Method, dst: &mut [u64], v: u64) -> usize {
    let p = dst.as_mut_ptr();
    let pairs = dst.len() / 2;
    match m {
        Method::Store128 => {
            for i in 0..pairs {
                core::arch::asm!("stp {v}, {v}, [{p}]", v = in(reg) v, p = in(reg) p.add(2 * i), options(nostack, preserves_flags));
            }
            pairs * 2
        }
        Method::Stnp => {
            for i in 0..pairs {
                core::arch::asm!("stnp {v}, {v}, [{p}]", v = in(reg) v, p = in(reg) p.add(2 * i), options(nostack, preserves_flags));
            }
            pairs * 2
        }
        _ => 0, // store64: the word loop of `store`
    }
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
unsafe fn kernel(_: Method, _: &mut [u64], _: u64) -> usize {
    0
}

/// The fastest of the measured (method, bytes/s); on a tie the earlier one (temporal
/// methods come first, so a tie keeps the caches' ordinary behaviour).
pub fn fastest(rates: &[(Method, f64)]) -> Option<Method> {
    let mut best: Option<(Method, f64)> = None;
    for &(m, r) in rates {
        if best.is_none_or(|(_, b)| r > b) {
            best = Some((m, r));
        }
    }
    best.map(|(m, _)| m)
}

/// Time each of `methods` storing over `buf` in `chunk_words` slices (continuing where the
/// last left off, so a buffer beyond the LLC is measured at its real footprint), in
/// `ROUNDS` interleaved rounds of `SLICE_NS` each, after one warm-up slice per method; the
/// best rate of each method, bytes/s. About 0.1 s per method in all.
pub fn measure(methods: &[Method], buf: &mut [u64], chunk_words: usize) -> Vec<(Method, f64)> {
    const ROUNDS: usize = 3;
    const SLICE_NS: i64 = 25_000_000;
    let mut at = 0usize;
    let mut run = |m: Method, ns: i64, at: &mut usize| -> f64 {
        let (t0, mut words) = (mono_ns(), 0u64);
        let mut t = t0;
        while t - t0 < ns {
            let end = (*at + chunk_words).min(buf.len());
            store(m, &mut buf[*at..end], words | 1);
            words += (end - *at) as u64;
            *at = if end == buf.len() { 0 } else { end };
            t = mono_ns();
        }
        words as f64 * 8.0 / ((t - t0).max(1) as f64 / 1e9)
    };
    let mut best = vec![0.0f64; methods.len()];
    for &m in methods {
        run(m, SLICE_NS / 5, &mut at);
    }
    for _ in 0..ROUNDS {
        for (i, &m) in methods.iter().enumerate() {
            best[i] = best[i].max(run(m, SLICE_NS, &mut at));
        }
    }
    methods.iter().copied().zip(best).collect()
}

/// A planned `method` this CPU cannot run, refused at `{at}.method` with the reason.
pub fn check(method: &str, at: &str) -> Result<(), crate::plan::PlanError> {
    match Method::parse(method).and_then(Method::unavailable) {
        Some(why) => crate::plan::err(format!("{at}.method"), format!("'{method}' {why}; use \"auto\" or another method")),
        None => Ok(()),
    }
}

/// The method to use for a plan's `method` (among `auto_names` when "auto") and the note
/// saying how it was chosen.
pub fn choose(method: &str, auto_names: &[&str], buf: &mut [u64], chunk_words: usize) -> (Method, String) {
    if let Some(m) = Method::parse(method) {
        return (m, format!("store method {} (as planned)", m.name()));
    }
    let rates = measure(&available(auto_names), buf, chunk_words);
    let m = fastest(&rates).unwrap_or(Method::Store64);
    let each: Vec<String> = rates.iter().map(|(m, r)| format!("{} {:.0}", m.name(), r / 1e6)).collect();
    (m, format!("store method {} chosen by measurement over its buffer (MB/s: {})", m.name(), each.join(", ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_catalogs_architectures_are_those_the_check_accepts() {
        // A method the catalog says exists elsewhere only is refused here, and one it says
        // exists here is accepted (AVX aside): `xtalk worst` draws from the catalog's list.
        for name in NAMES {
            let m = Method::parse(name).unwrap();
            let here = ARCH.iter().find(|(c, _)| c == name).map_or(true, |(_, a)| a.contains(&std::env::consts::ARCH));
            match m.unavailable() {
                None => assert!(here, "{name} runs on {} but the catalog says it does not", std::env::consts::ARCH),
                Some(why) => assert!(!here || why.contains("AVX"), "{name}: {why}, but the catalog lists it here"),
            }
        }
    }

    #[test]
    fn every_available_method_stores_every_word() {
        for m in available(NAMES) {
            for words in [0usize, 1, 3, 4, 5, 1003, 4096] {
                let mut b = crate::kernels::Buffer::zeroed(words, false);
                store(m, &mut b, 7);
                assert!(b.iter().all(|&w| w == 7), "{} over {words} words", m.name());
            }
        }
    }

    #[test]
    fn the_fastest_wins_and_a_tie_keeps_the_first() {
        let r = [(Method::Store64, 5.0), (Method::Nt256, 9.0), (Method::Nt64, 9.0)];
        assert_eq!(fastest(&r), Some(Method::Nt256));
        assert_eq!(fastest(&[(Method::Store64, 3.0), (Method::Nt64, 3.0)]), Some(Method::Store64));
        assert_eq!(fastest(&[]), None);
    }

    #[test]
    fn names_round_trip_and_the_cpu_has_the_plain_store() {
        for n in NAMES {
            assert_eq!(Method::parse(n).map(Method::name), Some(*n));
        }
        assert!(Method::parse("auto").is_none());
        assert!(Method::Store64.unavailable().is_none());
        assert!(NT_CHOICES.iter().skip(1).all(|n| Method::parse(n).is_some_and(Method::non_temporal)));
    }

    #[test]
    fn auto_measures_the_available_methods_and_names_the_choice() {
        let mut b = crate::kernels::Buffer::zeroed(1 << 16, false);
        let (m, note) = choose("auto", WRITE_CHOICES, &mut b, 4096);
        assert!(m.unavailable().is_none());
        assert!(note.contains(&format!("store method {} chosen", m.name())), "{note}");
        for a in available(WRITE_CHOICES) {
            assert!(note.contains(&format!("{} ", a.name())), "{note} lacks {}", a.name());
        }
        assert_eq!(choose("nt64", WRITE_CHOICES, &mut b, 4096).0, Method::Nt64);
    }
}
