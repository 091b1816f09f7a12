//! `chase`: the linked-list attacker of seed 003, linear (prefetch-friendly) or random
//! (latency-bound) order over `elements` nodes of `element_bytes`.
use super::EnemyLoad;
use crate::kernels::{chase, chase_cycle, Buffer};
use crate::plan::Order;

const STEPS: u64 = 4096;

pub struct Chase {
    buf: Buffer,
    at: u64,
}

impl Chase {
    pub fn new(elements: u64, element_bytes: u64, order: Order, seed: u64, huge_pages: bool) -> Chase {
        let stride = (element_bytes / 8) as usize;
        Chase { buf: chase_cycle(elements as usize, stride, order == Order::Random, seed, huge_pages), at: 0 }
    }
}

impl EnemyLoad for Chase {
    fn chunk(&mut self) -> u64 {
        self.at = chase(&self.buf, self.at, STEPS);
        STEPS
    }
}
