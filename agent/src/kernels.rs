//! Memory kernels shared by victim bodies and enemies: a seeded PRNG and pointer-chase
//! cycles laid out one node per `stride_words` u64 words.

/// xorshift64*: deterministic, seedable, good enough for shuffles.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Uniform in [0, n).
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next() as u128 * n as u128) >> 64) as u64
    }
}

/// A u64 buffer in its own anonymous mapping, 2 MiB aligned, optionally backed by
/// transparent huge pages (MADV_HUGEPAGE), so TLB reach is a chosen property of a run
/// rather than an accident of malloc.
pub struct Buffer {
    ptr: *mut u64,
    words: usize,
    raw: *mut libc::c_void,
    map_len: usize,
}

unsafe impl Send for Buffer {}

const HUGE: usize = 2 << 20;

impl Buffer {
    pub fn zeroed(words: usize, huge_pages: bool) -> Buffer {
        let len = (words.max(1) * 8 + HUGE - 1) / HUGE * HUGE;
        let map_len = len + HUGE;
        let raw = unsafe {
            libc::mmap(std::ptr::null_mut(), map_len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0)
        };
        assert!(raw != libc::MAP_FAILED, "mmap of {map_len} bytes failed: {}", std::io::Error::last_os_error());
        let aligned = ((raw as usize + HUGE - 1) / HUGE * HUGE) as *mut libc::c_void;
        let advice = if huge_pages { libc::MADV_HUGEPAGE } else { libc::MADV_NOHUGEPAGE };
        unsafe { libc::madvise(aligned, len, advice) };
        Buffer { ptr: aligned as *mut u64, words, raw, map_len }
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        unsafe { libc::munmap(self.raw, self.map_len) };
    }
}

impl std::ops::Deref for Buffer {
    type Target = [u64];
    fn deref(&self) -> &[u64] {
        unsafe { std::slice::from_raw_parts(self.ptr, self.words) }
    }
}

impl std::ops::DerefMut for Buffer {
    fn deref_mut(&mut self) -> &mut [u64] {
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.words) }
    }
}

/// The nodes of a single cycle in the order a walk meets them: 0, 1, 2... (linear), or
/// shuffled by Sattolo's algorithm (random).
fn cycle_order(nodes: usize, random: bool, seed: u64) -> Vec<usize> {
    let mut order: Vec<usize> = (0..nodes).collect();
    if random {
        let mut rng = Rng::new(seed);
        for i in (1..nodes).rev() {
            let j = rng.below(i as u64) as usize;
            order.swap(i, j);
        }
    }
    order
}

fn link(order: &[usize], stride_words: usize, huge_pages: bool) -> Buffer {
    let nodes = order.len();
    let mut buf = Buffer::zeroed(nodes * stride_words, huge_pages);
    for k in 0..nodes {
        let from = order[k];
        let to = order[(k + 1) % nodes];
        buf[from * stride_words] = (to * stride_words) as u64;
        // Fill the rest of the node so its pages are really backed.
        for w in 1..stride_words {
            buf[from * stride_words + w] = w as u64;
        }
    }
    buf
}

/// Build a single cycle over `nodes` nodes: node i's first word holds the word offset of
/// the next node. Random order uses Sattolo's algorithm (one cycle through every node),
/// so a walk of `nodes` steps touches each node exactly once.
pub fn chase_cycle(nodes: usize, stride_words: usize, random: bool, seed: u64, huge_pages: bool) -> Buffer {
    link(&cycle_order(nodes, random, seed), stride_words, huge_pages)
}

/// `chase_cycle`, and the word offsets of `walkers` nodes evenly spaced along the cycle
/// from node 0 (the nodes a walk from node 0 meets at steps 0, n/k, 2n/k...): read from the
/// cycle's order rather than found by walking it, which took 9 s for 1.2 GB in random order.
pub fn chase_cycle_walkers(nodes: usize, stride_words: usize, random: bool, seed: u64, huge_pages: bool,
                           walkers: usize) -> (Buffer, Vec<u64>) {
    let order = cycle_order(nodes, random, seed);
    let buf = link(&order, stride_words, huge_pages);
    let k = walkers.clamp(1, nodes.max(1));
    let gap = nodes / k;
    let zero = order.iter().position(|&n| n == 0).unwrap_or(0);
    let at = (0..k).map(|i| (order[(zero + i * gap) % nodes.max(1)] * stride_words) as u64).collect();
    (buf, at)
}

/// Follow `steps` links from word offset `at`; returns where the walk ended.
#[inline(never)]
pub fn chase(buf: &[u64], mut at: u64, steps: u64) -> u64 {
    for _ in 0..steps {
        at = unsafe { *buf.get_unchecked(at as usize) };
    }
    at
}

/// A step coprime with `n` near n / φ (golden ratio): visiting (i × step) mod n for i in
/// 0..n touches every index once, and consecutive indices land far apart, so neither the
/// stride prefetchers nor the row buffer see a pattern (wrapping breaks the stride).
pub fn scatter_step(n: u64) -> u64 {
    if n <= 2 {
        return 1;
    }
    let gcd = |mut a: u64, mut b: u64| {
        while b != 0 {
            (a, b) = (b, a % b);
        }
        a
    };
    let mut s = ((n as f64 * 0.618_033_988_7) as u64).max(1);
    while gcd(s, n) != 1 {
        s += 1;
    }
    s
}

/// Evict the cache line holding `p` from every level (x86_64 `clflush`, aarch64 `dc civac`,
/// which Linux lets user space run), so the next access goes to memory. Returns false on
/// architectures without a user-space flush (nothing is done there).
#[inline(always)]
pub fn flush_line(p: *const u64) -> bool {
    #[cfg(target_arch = "x86_64")]
    unsafe {
        std::arch::x86_64::_mm_clflush(p as *const u8);
        return true;
    }
    #[cfg(target_arch = "aarch64")]
    unsafe {
        core::arch::asm!("dc civac, {p}", p = in(reg) p, options(nostack, preserves_flags));
        return true;
    }
    #[allow(unreachable_code)]
    {
        let _ = p;
        false
    }
}

/// Full memory barrier: loads and flushes before it complete before what follows.
#[inline(always)]
pub fn full_fence() {
    #[cfg(target_arch = "x86_64")]
    unsafe { std::arch::x86_64::_mm_mfence() };
    #[cfg(target_arch = "aarch64")]
    unsafe { core::arch::asm!("dsb sy", options(nostack, preserves_flags)) };
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn random_cycle_visits_every_node_once() {
        for &random in &[true, false] {
            let n = 1000;
            let buf = chase_cycle(n, 8, random, 7, false);
            let mut seen = vec![false; n];
            let mut at = 0u64;
            for _ in 0..n {
                let node = at as usize / 8;
                assert!(!seen[node], "node visited twice");
                seen[node] = true;
                at = buf[at as usize];
            }
            assert_eq!(at, 0, "walk of n steps returns to the start");
            assert!(seen.iter().all(|&s| s));
        }
    }
    #[test]
    fn walkers_start_where_a_walk_from_node_zero_meets_them() {
        for &random in &[true, false] {
            for &(n, k) in &[(1000usize, 1usize), (1000, 8), (1001, 7), (5, 5)] {
                let (buf, at) = chase_cycle_walkers(n, 8, random, 3, false, k);
                let mut walked = Vec::new();
                let mut p = 0u64;
                for i in 0..n {
                    if i % (n / k) == 0 && walked.len() < k {
                        walked.push(p);
                    }
                    p = buf[p as usize];
                }
                assert_eq!(at, walked, "n {n}, k {k}, random {random}");
            }
        }
    }
    #[test]
    fn buffers_are_aligned_and_writable() {
        for &huge in &[true, false] {
            let mut b = Buffer::zeroed(1000, huge);
            assert_eq!(b.as_ptr() as usize % (2 << 20), 0);
            b[999] = 7;
            assert_eq!(b.iter().sum::<u64>(), 7);
        }
    }
    #[test]
    fn scatter_step_visits_every_index_once() {
        for n in [1u64, 2, 3, 10, 64, 1000, 4096, 65_537] {
            let s = scatter_step(n);
            let mut seen = vec![false; n as usize];
            for i in 0..n {
                seen[(i * s % n) as usize] = true;
            }
            assert!(seen.iter().all(|&x| x), "n = {n}, step = {s}");
            assert!(n < 10 || (s > n / 2 && s < n - n / 4), "n = {n}: step {s} is not far");
        }
    }
    #[test]
    fn rng_below_stays_in_range() {
        let mut r = Rng::new(1);
        assert!((0..10_000).all(|_| r.below(13) < 13));
    }
}
