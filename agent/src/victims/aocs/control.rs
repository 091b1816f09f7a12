//! Attitude control: quaternion feedback (PD on the error quaternion, gyroscopic
//! compensation, feed-forward of the guidance rate) with reaction wheels, and momentum
//! management: when the wheels' stored momentum exceeds a threshold, thrusters apply an
//! external torque that unloads it (hysteresis), inhibited around closest approach.

use super::dynamics::INERTIA;
use super::quat::{self, Q, V3};

/// Closed-loop natural frequency (rad/s) and damping.
const WN: f64 = 0.15;
const ZETA: f64 = 0.9;
/// Wheel torque limit, N·m.
pub const WHEEL_TORQUE_MAX: f64 = 0.2;
/// Unloading thresholds (N·m·s), gain (1/s) and thruster torque limit (N·m).
const H_ON: f64 = 0.4;
const H_OFF: f64 = 0.1;
const K_DUMP: f64 = 0.02;
const DUMP_TORQUE_MAX: f64 = 0.02;

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Mode {
    Nominal = 0,
    Unloading = 1,
    /// Around closest approach: no thruster firing (pointing has priority).
    Critical = 2,
}

#[derive(Clone, Copy, Debug)]
pub struct Controller {
    pub mode: Mode,
}

pub struct Command {
    pub wheel: V3,
    pub dump: V3,
    pub error_angle: f64,
}

impl Controller {
    pub fn new() -> Controller {
        Controller { mode: Mode::Nominal }
    }

    /// Wheel and thruster torques from the estimated attitude/rate, the guidance and the
    /// measured wheel momentum. `critical` inhibits unloading.
    pub fn command(&mut self, q: Q, w: V3, qd: Q, wd: V3, h: V3, critical: bool) -> Command {
        let mut qe = quat::mul(quat::conj(qd), q);
        if qe[0] < 0.0 {
            qe = [-qe[0], -qe[1], -qe[2], -qe[3]];
        }
        let we = quat::sub(w, quat::rotate_inv(qe, wd));
        let kp = quat::scale(INERTIA, 2.0 * WN * WN);
        let kd = quat::scale(INERTIA, 2.0 * ZETA * WN);
        let gyro = quat::cross(w, quat::add(quat::diag_mul(INERTIA, w), h));
        let tau = quat::add(quat::scale(quat::add(quat::diag_mul(kp, quat::vec(qe)), quat::diag_mul(kd, we)), -1.0), gyro);
        let hn = quat::norm(h);
        self.mode = match (self.mode, critical) {
            (_, true) => Mode::Critical,
            (Mode::Unloading, false) if hn > H_OFF => Mode::Unloading,
            (_, false) if hn > H_ON => Mode::Unloading,
            _ => Mode::Nominal,
        };
        let dump = if self.mode == Mode::Unloading { quat::clamp(quat::scale(h, -K_DUMP), DUMP_TORQUE_MAX) } else { [0.0; 3] };
        // Body torque = dump − wheel torque; the wheels absorb what the thrusters remove.
        let wheel = quat::clamp(quat::sub(dump, tau), WHEEL_TORQUE_MAX);
        Command { wheel, dump, error_angle: quat::angle_between(qd, q) }
    }
}
