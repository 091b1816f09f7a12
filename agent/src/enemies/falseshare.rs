//! `falseshare`: false sharing. Two threads on two CPUs (see pair.rs) store to two
//! different words of one cache line: no data is shared, yet each store invalidates the
//! other core's copy of the line, so the line migrates between the cores as in
//! `pingpong` but through plain stores (store buffer, read-for-ownership) instead of
//! locked atomics. The counter is stores of both threads.
use super::pair::{Line, Pair};
use super::kind::Kind;
use super::{Ctx, EnemyLoad};
use std::sync::atomic::Ordering;

const CHUNK_STORES: u64 = 4096;

/// Relaxed load + store (not an atomic RMW): a plain increment the compiler may not elide.
fn side_at(l: &Line, word: usize) -> u64 {
    let w = &l.0[word];
    for _ in 0..CHUNK_STORES {
        w.store(w.load(Ordering::Relaxed).wrapping_add(1), Ordering::Relaxed);
    }
    CHUNK_STORES
}

fn helper_side(l: &Line) -> u64 {
    side_at(l, 1)
}

pub struct FalseShare {
    pair: Pair,
}

impl FalseShare {
    pub fn new(cx: &Ctx) -> FalseShare {
        FalseShare { pair: Pair::start(cx, helper_side) }
    }
}

impl EnemyLoad for FalseShare {
    fn chunk(&mut self) -> u64 {
        side_at(&self.pair.line, 0) + self.pair.helper_delta()
    }
}

/// The `falseshare` kind (registry: mod.rs).
pub const KIND: Kind = Kind::new("falseshare", "false sharing: plain stores to distinct words of one line from two threads", "stores", &[],
    |_, cx| Ok(Box::new(FalseShare::new(cx))))
.channel("coherence");
