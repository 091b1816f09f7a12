//! `branch`: branch-predictor thrash. Each step reads a byte of a random table (64 KiB,
//! fixed seed) and takes an 8-way indirect jump and a conditional branch on it; both arms
//! call distinct functions, so the compiler cannot turn the branches into conditional
//! moves. Outcomes are random, so the predictor mispredicts about half the conditionals
//! and most of the indirect jumps, and its shared tables (on SMT siblings, and its
//! history-based structures across context switches) are left polluted for the victim.
use super::EnemyLoad;
use super::kind::{Dflt, Kind, Param};
use crate::kernels::Rng;

const TABLE_BYTES: usize = 64 << 10;
const CHUNK_STEPS: usize = 4096;

macro_rules! arm {
    ($name:ident, $k:expr) => {
        #[inline(never)]
        fn $name(x: u64) -> u64 {
            x.wrapping_mul($k).rotate_left(($k % 63) as u32 + 1)
        }
    };
}
arm!(a0, 0x9E37_79B9_7F4A_7C15u64);
arm!(a1, 0xC2B2_AE3D_27D4_EB4Fu64);
arm!(a2, 0x1656_67B1_9E37_79F9u64);
arm!(a3, 0xFF51_AFD7_ED55_8CCDu64);
arm!(a4, 0xC4CE_B9FE_1A85_EC53u64);
arm!(a5, 0x2545_F491_4F6C_DD1Du64);
arm!(a6, 0x94D0_49BB_1331_11EBu64);
arm!(a7, 0xBF58_476D_1CE4_E5B9u64);

pub struct Branch {
    table: Vec<u8>,
    at: usize,
    acc: u64,
}

impl Branch {
    pub fn new(seed: u64) -> Branch {
        let mut rng = Rng::new(seed ^ 0xb4a9c4);
        let table = (0..TABLE_BYTES).map(|_| rng.next() as u8).collect();
        Branch { table, at: 0, acc: 1 }
    }
}

impl EnemyLoad for Branch {
    /// Counts branches executed: two per step (the indirect jump and the conditional).
    fn chunk(&mut self) -> u64 {
        let mut acc = self.acc;
        for _ in 0..CHUNK_STEPS {
            let b = self.table[self.at];
            self.at = (self.at + 1) % TABLE_BYTES;
            acc = match b & 7 {
                0 => a0(acc),
                1 => a1(acc),
                2 => a2(acc),
                3 => a3(acc),
                4 => a4(acc),
                5 => a5(acc),
                6 => a6(acc),
                _ => a7(acc),
            };
            acc = if b & 8 != 0 { a1(acc ^ 1) } else { a6(acc ^ 2) };
        }
        self.acc = std::hint::black_box(acc);
        2 * CHUNK_STEPS as u64
    }
}

/// The `branch` kind (registry: mod.rs).
pub const KIND: Kind = Kind::new("branch", "branch predictor: data-dependent, unpredictable branches", "branches",
    &[Param::u64("seed", "seed of the branch data").default(Dflt::U64(0))], |a, _| Ok(Box::new(Branch::new(a.u64("seed")))))
.channel("branch");
