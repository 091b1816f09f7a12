//! Sensor models, sampled by the generator from the true state with noise from a seeded
//! generator (kernels::Rng + Box–Muller): rate gyros with a drifting bias, a star tracker
//! (attitude quaternion, blinded near the sun and dropping frames), a sun sensor (unit sun
//! vector, valid inside its field of view), and wheel tachometers.

use super::dynamics::State;
use super::io::Input;
use super::quat::{self, V3};
use super::scenario::SUN;
use crate::kernels::Rng;

/// Gyro white noise (rad/s, 1σ per sample) and bias random walk (rad/s per √step).
const GYRO_NOISE: f64 = 2e-5;
const GYRO_BIAS_WALK: f64 = 1e-7;
/// Star tracker noise, rad (1σ per axis); blinded when the sun is within 30° of its boresight.
const ST_NOISE: f64 = 5e-5;
const ST_SUN_EXCLUSION_COS: f64 = 0.866;
/// Star tracker boresight in the body frame (−Y, away from the payload on +Z).
const ST_BORESIGHT: V3 = [0.0, -1.0, 0.0];
/// Sun sensor on +X, half-cone field of view 60°, noise 1 mrad.
const SUN_NOISE: f64 = 1e-3;
const SUN_FOV_COS: f64 = 0.5;
/// Tachometer noise, N·m·s.
const TACHO_NOISE: f64 = 1e-4;

pub struct Sensors {
    rng: Rng,
    spare: Option<f64>,
    gyro_bias: V3,
}

impl Sensors {
    pub fn new(seed: u64) -> Sensors {
        Sensors { rng: Rng::new(seed), spare: None, gyro_bias: [3e-5, -2e-5, 1e-5] }
    }

    /// Standard normal deviate (Box–Muller, the second value kept for the next call).
    fn gauss(&mut self) -> f64 {
        if let Some(z) = self.spare.take() {
            return z;
        }
        let u1 = ((self.rng.next() >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
        let u2 = (self.rng.next() >> 11) as f64 / (1u64 << 53) as f64;
        let r = (-2.0 * u1.ln()).sqrt();
        let a = 2.0 * std::f64::consts::PI * u2;
        self.spare = Some(r * a.sin());
        r * a.cos()
    }

    fn noise3(&mut self, sigma: f64) -> V3 {
        [sigma * self.gauss(), sigma * self.gauss(), sigma * self.gauss()]
    }

    /// Every sensor's reading of `s` at step `k`, time `t`.
    pub fn sample(&mut self, k: u64, t: f64, s: &State) -> Input {
        let walk = self.noise3(GYRO_BIAS_WALK);
        self.gyro_bias = quat::add(self.gyro_bias, walk);
        let gyro = quat::add(quat::add(s.w, self.gyro_bias), self.noise3(GYRO_NOISE));
        let sun_body = quat::rotate_inv(s.q, SUN);
        // Frames drop on a fixed pattern (one in 16, the tracker's processing cycle) and at
        // random (2 %), and while the sun blinds the tracker.
        let dropped = k % 16 == 15 || self.rng.below(100) < 2;
        let blinded = quat::dot(sun_body, ST_BORESIGHT) > ST_SUN_EXCLUSION_COS;
        let st_noise = self.noise3(ST_NOISE);
        let star = quat::normalize(quat::mul(s.q, quat::from_rotvec(st_noise)));
        let sun_valid = sun_body[0] > SUN_FOV_COS;
        let sun_noise = self.noise3(SUN_NOISE);
        let sun = quat::unit(quat::add(sun_body, sun_noise));
        let tacho = quat::add(s.h, self.noise3(TACHO_NOISE));
        Input {
            t,
            gyro,
            star_valid: !(dropped || blinded),
            star: if dropped || blinded { [0.0; 4] } else { star },
            sun_valid,
            sun: if sun_valid { sun } else { [0.0; 3] },
            wheel_h: tacho,
        }
    }
}
