//! `pi` body: the pi/4 Leibniz series in registers, no loads or stores (seed 000 §6.4.2).
//! Cost is linear in the iteration count; sensitive only to CPU time taken away.
use super::body::{BodyKind, Run};
use super::JobBody;
use crate::declare::Param;

pub struct Pi {
    iterations: u64,
}

impl Pi {
    pub fn new(iterations: u64) -> Pi {
        Pi { iterations }
    }
}

/// Sum of (-1)^k / (2k+1) for k < n, kept in registers.
#[inline(never)]
pub fn leibniz(n: u64) -> f64 {
    let mut acc = 0.0f64;
    let mut sign = 1.0f64;
    let mut den = 1.0f64;
    for _ in 0..std::hint::black_box(n) {
        acc += sign / den;
        sign = -sign;
        den += 2.0;
    }
    acc
}

impl JobBody for Pi {
    fn run_job(&mut self) -> u64 {
        leibniz(self.iterations).to_bits()
    }
}

/// The `pi` body (registry: mod.rs).
pub const BODY: BodyKind = BodyKind::new("pi", "pi/4 Leibniz series in registers: no loads or stores, sensitive only to CPU time taken away", &[
    Param::u64("iterations", "terms of the series per job").min(1),
], Run::Jobs(|a, _| Ok(Box::new(Pi::new(a.u64("iterations"))))))
.work("iterations");


#[cfg(test)]
mod tests {
    #[test]
    fn series_approaches_pi_over_four() {
        assert!((super::leibniz(1_000_000) - std::f64::consts::FRAC_PI_4).abs() < 1e-5);
    }
}
