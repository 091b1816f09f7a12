//! `chase`: the linked-list attacker of seed 003, linear (prefetch-friendly) or random
//! (latency-bound) order over `elements` nodes of `element_bytes`. With `chains` = k > 1,
//! k walkers follow the same single cycle from evenly spaced starting nodes: their loads
//! are independent of each other, so k misses are in flight at once (memory-level
//! parallelism, as IsolBench's bandwidth/latency attackers), while each walker stays
//! latency bound.
use super::EnemyLoad;
use crate::kernels::{chase, chase_cycle, Buffer};
use crate::plan::Order;

/// Loads per chunk, shared among the walkers.
const STEPS: u64 = 4096;

pub struct Chase {
    buf: Buffer,
    at: Vec<u64>,
}

impl Chase {
    pub fn new(elements: u64, element_bytes: u64, order: Order, seed: u64, chains: u64, huge_pages: bool) -> Chase {
        let stride = (element_bytes / 8) as usize;
        let buf = chase_cycle(elements as usize, stride, order == Order::Random, seed, huge_pages);
        // Walk the cycle once to find the nodes at steps 0, n/k, 2n/k...: disjoint segments.
        let k = chains.clamp(1, elements);
        let gap = elements / k;
        let mut at = Vec::with_capacity(k as usize);
        let mut p = 0u64;
        for i in 0..elements {
            if i % gap == 0 && (at.len() as u64) < k {
                at.push(p);
            }
            p = buf[p as usize];
        }
        Chase { buf, at }
    }
}

impl EnemyLoad for Chase {
    fn chunk(&mut self) -> u64 {
        match self.at.len() {
            1 => {
                self.at[0] = chase(&self.buf, self.at[0], STEPS);
                STEPS
            }
            k => {
                let rounds = (STEPS / k as u64).max(1);
                for _ in 0..rounds {
                    // One load per walker per round; the walkers' loads overlap.
                    for a in self.at.iter_mut() {
                        *a = unsafe { *self.buf.get_unchecked(*a as usize) };
                    }
                }
                rounds * k as u64
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn walkers_start_on_distinct_nodes_and_count_every_load() {
        let mut c = Chase::new(1000, 64, Order::Random, 3, 4, false);
        assert_eq!(c.at.len(), 4);
        let mut s = c.at.clone();
        s.sort();
        s.dedup();
        assert_eq!(s.len(), 4);
        assert_eq!(c.chunk(), 4096);
        assert_eq!(Chase::new(1000, 64, Order::Linear, 0, 1, false).chunk(), 4096);
    }
}
