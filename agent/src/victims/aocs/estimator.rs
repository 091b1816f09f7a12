//! Attitude estimator: an explicit complementary filter on SO(3) with gyro-bias estimation
//! (Mahony et al. 2008). Gyro rates propagate the attitude; star-tracker and sun-sensor
//! residuals, expressed as small body-frame rotations, correct it (proportional term) and
//! the bias (integral term). Missing measurements leave pure gyro propagation.

use super::io::Input;
use super::quat::{self, Q, V3};
use super::scenario::SUN;

/// Proportional gain on the attitude residual (1/s) and integral gain on the bias (1/s²).
const KP_STAR: f64 = 0.8;
const KP_SUN: f64 = 0.2;
const KI: f64 = 0.02;

#[derive(Clone, Copy, Debug)]
pub struct Estimator {
    pub q: Q,
    pub bias: V3,
    initialised: bool,
}

impl Estimator {
    pub fn new() -> Estimator {
        Estimator { q: quat::IDENTITY, bias: [0.0; 3], initialised: false }
    }

    /// Fuse the measurements of this step into the attitude predicted for it; returns the
    /// bias-corrected body rate.
    pub fn update(&mut self, m: &Input, dt: f64) -> V3 {
        if !self.initialised && m.star_valid {
            // First star-tracker fix: take it as the attitude (lost-in-space acquisition).
            self.q = m.star;
            self.initialised = true;
        }
        let mut e = [0.0; 3];
        if m.star_valid {
            let mut d = quat::mul(quat::conj(self.q), m.star);
            if d[0] < 0.0 {
                d = [-d[0], -d[1], -d[2], -d[3]];
            }
            e = quat::add(e, quat::scale(quat::vec(d), 2.0 * KP_STAR));
        }
        if m.sun_valid {
            let predicted = quat::rotate_inv(self.q, SUN);
            e = quat::add(e, quat::scale(quat::cross(m.sun, predicted), KP_SUN));
        }
        self.bias = quat::sub(self.bias, quat::scale(e, KI * dt));
        let rate = quat::sub(m.gyro, self.bias);
        // Apply the correction now, so the attitude used by the controller includes it.
        self.q = quat::normalize(quat::mul(self.q, quat::from_rotvec(quat::scale(e, dt))));
        rate
    }

    /// Predict the attitude at the next step from the corrected rate.
    pub fn propagate(&mut self, rate: V3, dt: f64) {
        self.q = quat::normalize(quat::mul(self.q, quat::from_rotvec(quat::scale(rate, dt))));
    }
}
