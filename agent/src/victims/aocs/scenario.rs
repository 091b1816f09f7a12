//! The flyby: the spacecraft passes a target body at closest-approach distance `D` with
//! relative velocity `V`, and must keep its boresight (+Z body) on the target while the
//! line of sight sweeps fastest at closest approach. The sun is fixed in the inertial frame.
//! Closest approach is placed at the middle of the 16 000-step scenario (8 Hz).

use super::quat::{self, Q, V3};

/// Model time per step, s (8 Hz, seed 000 §5.1): independent of the run's period, so a run
/// at 10 ms replays the same steps faster.
pub const DT: f64 = 0.125;
/// Steps of the full scenario (seed 000: 16 000 steps, about 33 minutes at 8 Hz).
pub const STEPS: u64 = 16_000;
/// Closest approach distance (m) and relative speed (m/s).
const D: f64 = 2.0e6;
const V: f64 = 5.0e3;
/// Time of closest approach, s.
const T_CA: f64 = STEPS as f64 * DT / 2.0;
/// Unit vector to the sun, inertial frame.
pub const SUN: V3 = [0.6, -0.64, 0.48];

/// Target position relative to the spacecraft and its rate, inertial frame.
pub fn target(t: f64) -> (V3, V3) {
    ([V * (t - T_CA), D, 0.0], [V, 0.0, 0.0])
}

/// Desired attitude and body rate at time `t`: +Z at the target, +X in the flyby plane
/// (orthogonal to the orbit normal +Z inertial), right-handed.
pub fn guidance(t: f64) -> (Q, V3) {
    let (r, v) = target(t);
    let z = quat::unit(r);
    let y = quat::unit(quat::cross(z, [0.0, 0.0, 1.0]));
    let x = quat::cross(y, z);
    let qd = quat::from_axes(x, y, z);
    // Line-of-sight rate r × v / |r|², expressed in the desired body frame.
    let wi = quat::scale(quat::cross(r, v), 1.0 / quat::dot(r, r));
    (qd, quat::rotate_inv(qd, wi))
}

/// Initial state: near the first guidance attitude with a small error and residual rate.
pub fn initial_state() -> super::dynamics::State {
    let (qd, wd) = guidance(0.0);
    super::dynamics::State { q: quat::mul(qd, quat::from_rotvec([0.02, -0.015, 0.01])), w: quat::add(wd, [1e-3, -5e-4, 8e-4]), h: [0.0; 3] }
}
