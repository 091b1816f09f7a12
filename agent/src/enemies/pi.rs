//! `pi`: CPU-only enemy (registers, no memory traffic; seed 000 §6.4.2).
use super::EnemyLoad;
use super::kind::Kind;
use crate::victims::leibniz;

const ITERATIONS: u64 = 100_000;

pub struct Pi;

impl Pi {
    pub fn new() -> Pi {
        Pi
    }
}

impl EnemyLoad for Pi {
    fn chunk(&mut self) -> u64 {
        std::hint::black_box(leibniz(ITERATIONS));
        ITERATIONS
    }
}

/// The `pi` kind (registry: mod.rs).
pub const KIND: Kind = Kind::new("pi", "CPU time only: the pi/4 series in registers", "iterations", &[], |_, _| Ok(Box::new(Pi::new())))
.channel("cpu");
