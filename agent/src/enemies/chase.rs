//! `chase`: the linked-list attacker of seed 003, linear (prefetch-friendly) or random
//! (latency-bound) order over `elements` nodes of `element_bytes`. With `chains` = k > 1,
//! k walkers follow the same single cycle from evenly spaced starting nodes: their loads
//! are independent of each other, so k misses are in flight at once (memory-level
//! parallelism, as IsolBench's bandwidth/latency attackers), while each walker stays
//! latency bound.
use super::EnemyLoad;
use super::kind::{Dflt, Kind, Param};
use crate::plan::err;
use crate::kernels::{chase, chase_cycle_walkers, Buffer};
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
        // The walkers start at steps 0, n/k, 2n/k... of the cycle: disjoint segments.
        let k = chains.clamp(1, elements) as usize;
        let (buf, at) = chase_cycle_walkers(elements as usize, stride, order == Order::Random, seed, huge_pages, k);
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

/// The `chase` kind (registry: mod.rs).
pub const KIND: Kind = Kind::new("chase", "memory latency: dependent loads over a linked list, k walkers keeping k misses in flight", "accesses", &[
    Param::u64("elements", "nodes of the list").min(2).per_bytes("element_bytes"),
    Param::u64("element_bytes", "bytes per node").min(8).multiple_of(8).default(Dflt::U64(64)).unit("bytes"),
    Param::choice("order", &["random", "linear"], "random (Sattolo cycle) or linear order").default(Dflt::Str("random")),
    Param::u64("seed", "seed of the random order").default(Dflt::U64(0)),
    Param::u64("chains", "independent walkers (memory-level parallelism), at most one per node").range(1, MAX_CHAINS).default(Dflt::U64(1)).at_most("elements"),
], |a, cx| {
    let order = if a.str("order") == "linear" { Order::Linear } else { Order::Random };
    Ok(Box::new(Chase::new(a.u64("elements"), a.u64("element_bytes"), order, a.u64("seed"), a.u64("chains"), cx.huge_pages)))
})
.footprint(1, &["elements", "element_bytes"])
.check(|a, at| {
    if a.u64("chains") > a.u64("elements") {
        return err(format!("{at}.chains"), format!("{} is out of range; use 1..{MAX_CHAINS} walkers, at most one per element", a.u64("chains")));
    }
    Ok(())
})
.channel("latency");
/// Most walkers of one chase.
pub const MAX_CHAINS: u64 = 64;

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
