//! `pingpong`: cache-line ping-pong. Two threads on two CPUs (see pair.rs) do atomic
//! fetch-and-add on the same 64-bit word: each operation needs the line in exclusive
//! state, so it bounces between the two cores' caches through the coherence fabric
//! (snoops, the LLC / directory, the interconnect) on nearly every operation. The counter
//! is atomic operations of both threads.
use super::pair::{Line, Pair};
use super::kind::Kind;
use super::{Ctx, EnemyLoad};
use std::sync::atomic::Ordering;

const CHUNK_OPS: u64 = 4096;

fn side(l: &Line) -> u64 {
    for _ in 0..CHUNK_OPS {
        l.0[0].fetch_add(1, Ordering::SeqCst);
    }
    CHUNK_OPS
}

pub struct PingPong {
    pair: Pair,
}

impl PingPong {
    pub fn new(cx: &Ctx) -> PingPong {
        PingPong { pair: Pair::start(cx, side) }
    }
}

impl EnemyLoad for PingPong {
    fn chunk(&mut self) -> u64 {
        side(&self.pair.line) + self.pair.helper_delta()
    }
}

/// The `pingpong` kind (registry: mod.rs).
pub const KIND: Kind = Kind::new("pingpong", "coherence fabric: atomic read-modify-writes of one shared line from two threads", "atomics", &[],
    |_, cx| Ok(Box::new(PingPong::new(cx))))
.channel("coherence");
