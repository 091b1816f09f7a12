//! `icache`: instruction-cache thrash. 4096 distinct functions are generated at compile
//! time (monomorphisations of one const-generic body with different constants, so none can
//! be merged); the enemy calls `functions` of them through a table in a shuffled order.
//! Their code (a few hundred KiB) exceeds the L1 instruction cache and the micro-op cache,
//! and the indirect calls load the iTLB and the branch target buffer; instruction fetches
//! then miss to L2 and LLC, which the victim shares.
use super::EnemyLoad;
use super::kind::{Dflt, Kind, Param};
use crate::kernels::Rng;
use super::MAX_FUNCTIONS;

const CHUNK_CALLS: u64 = 4096;

/// One generated function. The constants differ per K, so every instance is its own
/// machine code; the dependent arithmetic chain keeps the body from being folded away.
#[inline(never)]
fn body<const K: u64>(x: u64) -> u64 {
    let a = K.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let b = K.wrapping_mul(0xC2B2_AE3D_27D4_EB4F) ^ 0x1656_67B1_9E37_79F9;
    let mut y = x ^ b;
    y = y.wrapping_mul(a).rotate_left((K % 61 + 1) as u32);
    y ^= y >> ((K % 29) + 3);
    y = y.wrapping_add(b.rotate_right((K % 37) as u32)).wrapping_mul(a ^ 0xFF51_AFD7_ED55_8CCD);
    y ^= y >> ((K % 23) + 5);
    y = y.wrapping_mul(b | 1).wrapping_add(K);
    y ^ (y >> 31)
}

type F = fn(u64) -> u64;

macro_rules! row16 {
    ($b:expr) => {
        [
            body::<{ $b }>, body::<{ $b + 1 }>, body::<{ $b + 2 }>, body::<{ $b + 3 }>,
            body::<{ $b + 4 }>, body::<{ $b + 5 }>, body::<{ $b + 6 }>, body::<{ $b + 7 }>,
            body::<{ $b + 8 }>, body::<{ $b + 9 }>, body::<{ $b + 10 }>, body::<{ $b + 11 }>,
            body::<{ $b + 12 }>, body::<{ $b + 13 }>, body::<{ $b + 14 }>, body::<{ $b + 15 }>,
        ]
    };
}
macro_rules! block256 {
    ($b:expr) => {
        [
            row16!($b), row16!($b + 16), row16!($b + 32), row16!($b + 48),
            row16!($b + 64), row16!($b + 80), row16!($b + 96), row16!($b + 112),
            row16!($b + 128), row16!($b + 144), row16!($b + 160), row16!($b + 176),
            row16!($b + 192), row16!($b + 208), row16!($b + 224), row16!($b + 240),
        ]
    };
}

static TABLE: [[[F; 16]; 16]; 16] = [
    block256!(0), block256!(256), block256!(512), block256!(768),
    block256!(1024), block256!(1280), block256!(1536), block256!(1792),
    block256!(2048), block256!(2304), block256!(2560), block256!(2816),
    block256!(3072), block256!(3328), block256!(3584), block256!(3840),
];

const _: () = assert!(MAX_FUNCTIONS == 4096);

fn function(i: usize) -> F {
    TABLE[i >> 8][(i >> 4) & 15][i & 15]
}

pub struct Icache {
    order: Vec<F>,
    at: usize,
    acc: u64,
}

impl Icache {
    pub fn new(functions: u64) -> Icache {
        let mut idx: Vec<usize> = (0..functions as usize).collect();
        let mut rng = Rng::new(0x1cac4e);
        for i in (1..idx.len()).rev() {
            idx.swap(i, rng.below(i as u64 + 1) as usize);
        }
        Icache { order: idx.into_iter().map(function).collect(), at: 0, acc: 1 }
    }
}

impl EnemyLoad for Icache {
    fn chunk(&mut self) -> u64 {
        for _ in 0..CHUNK_CALLS {
            self.acc = (self.order[self.at])(self.acc);
            self.at += 1;
            if self.at == self.order.len() {
                self.at = 0;
            }
        }
        std::hint::black_box(self.acc);
        CHUNK_CALLS
    }
}

/// The `icache` kind (registry: mod.rs).
pub const KIND: Kind = Kind::new("icache", "instruction cache, iTLB, BTB: indirect calls through distinct generated functions", "calls", &[
    Param::u64("functions", "distinct functions called").range(1, MAX_FUNCTIONS).default(Dflt::U64(MAX_FUNCTIONS)),
], |a, _| Ok(Box::new(Icache::new(a.u64("functions")))))
.channel("icache");

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn generated_functions_are_distinct_code() {
        let mut addrs: Vec<usize> = (0..4096).map(|i| function(i) as usize).collect();
        addrs.sort();
        addrs.dedup();
        assert_eq!(addrs.len(), 4096, "every function has its own address");
        // The code spans well over a typical 32-64 KiB L1 instruction cache.
        assert!(addrs[4095] - addrs[0] > 128 * 1024, "code span {} bytes", addrs[4095] - addrs[0]);
        assert_ne!(function(1)(7), function(2)(7));
    }
}
