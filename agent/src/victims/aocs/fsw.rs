//! The flight software step: what the periodic AOCS process computes once per period.
//! Estimation, guidance (the flyby), control and momentum management, from one input
//! record to one output record. Its state (attitude estimate, bias, controller mode) carries
//! from step to step, so step k's output depends on every input before it: a window that
//! starts at step s first replays steps 0..s (outside the measured window).

use super::control::{Controller, Mode};
use super::estimator::Estimator;
use super::io::{Input, OUTPUT_F64};
use super::scenario::{self, DT};

/// Half-width of the critical window around closest approach (s): no unloading there.
const CRITICAL_S: f64 = 300.0;

#[derive(Clone, Copy, Debug)]
pub struct Fsw {
    est: Estimator,
    ctl: Controller,
}

impl Fsw {
    pub fn new() -> Fsw {
        Fsw { est: Estimator::new(), ctl: Controller::new() }
    }

    /// One step: fuse the sensors, point at the target, command wheels and thrusters.
    pub fn step(&mut self, m: &Input) -> [f64; OUTPUT_F64] {
        let rate = self.est.update(m, DT);
        let (qd, wd) = scenario::guidance(m.t);
        let critical = (m.t - scenario::STEPS as f64 * DT / 2.0).abs() < CRITICAL_S;
        let c = self.ctl.command(self.est.q, rate, qd, wd, m.wheel_h, critical);
        self.est.propagate(rate, DT);
        let mode = match self.ctl.mode {
            Mode::Nominal => 0.0,
            Mode::Unloading => 1.0,
            Mode::Critical => 2.0,
        };
        [c.wheel[0], c.wheel[1], c.wheel[2], c.dump[0], c.dump[1], c.dump[2], c.error_angle, mode]
    }
}
