//! The plant: a rigid spacecraft with three reaction wheels on its body axes. Used only by
//! the generator (`xtalk-agent aocs-generate`), which closes the loop around the flight
//! software to produce the input and expected-output files; the victim runs the flight
//! software alone on the recorded sensor readings.
//!
//! Euler's equation with wheel momentum `h`:  J ω̇ = τ_ext − ω × (J ω + h) − τ_w,
//! wheels: ḣ = τ_w, kinematics: q̇ = ½ q ⊗ (0, ω). Integrated by RK4 in sub-steps.

use super::quat::{self, Q, V3};

/// Principal inertia of the spacecraft, kg·m².
pub const INERTIA: V3 = [120.0, 100.0, 80.0];

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct State {
    pub q: Q,
    pub w: V3,
    /// Wheel angular momentum, N·m·s.
    pub h: V3,
}

/// Environmental torque at time `t` (s): a bias plus a slow orbital-like oscillation, so
/// wheel momentum builds up and momentum management has work to do.
pub fn disturbance(t: f64) -> V3 {
    let w = 2.0 * std::f64::consts::PI / 600.0;
    [2e-4 + 5e-5 * (w * t).sin(), -1e-4 + 5e-5 * (w * t).cos(), 1.5e-4 * (0.5 * w * t).sin()]
}

fn derivative(s: &State, tau_w: V3, tau_ext: V3) -> State {
    let jw = quat::diag_mul(INERTIA, s.w);
    let gyro = quat::cross(s.w, quat::add(jw, s.h));
    let rhs = quat::sub(quat::sub(tau_ext, gyro), tau_w);
    let wdot = [rhs[0] / INERTIA[0], rhs[1] / INERTIA[1], rhs[2] / INERTIA[2]];
    let qd = quat::mul(s.q, [0.0, s.w[0], s.w[1], s.w[2]]);
    State { q: [0.5 * qd[0], 0.5 * qd[1], 0.5 * qd[2], 0.5 * qd[3]], w: wdot, h: tau_w }
}

fn axpy(s: &State, d: &State, k: f64) -> State {
    State {
        q: [s.q[0] + k * d.q[0], s.q[1] + k * d.q[1], s.q[2] + k * d.q[2], s.q[3] + k * d.q[3]],
        w: quat::add(s.w, quat::scale(d.w, k)),
        h: quat::add(s.h, quat::scale(d.h, k)),
    }
}

/// Advance `s` by `dt` seconds from time `t` with constant commands (wheel torque, thruster
/// torque) under the environmental disturbance, in `substeps` RK4 steps.
pub fn propagate(s: &State, t: f64, dt: f64, substeps: u32, tau_w: V3, tau_dump: V3) -> State {
    propagate_with(s, t, dt, substeps, tau_w, |t| quat::add(disturbance(t), tau_dump))
}

/// As `propagate`, with the external torque a function of time (held over each sub-step).
pub fn propagate_with(s: &State, t: f64, dt: f64, substeps: u32, tau_w: V3, external: impl Fn(f64) -> V3) -> State {
    let mut x = *s;
    let h = dt / substeps as f64;
    for i in 0..substeps {
        let ext = external(t + i as f64 * h);
        let k1 = derivative(&x, tau_w, ext);
        let k2 = derivative(&axpy(&x, &k1, 0.5 * h), tau_w, ext);
        let k3 = derivative(&axpy(&x, &k2, 0.5 * h), tau_w, ext);
        let k4 = derivative(&axpy(&x, &k3, h), tau_w, ext);
        let mut n = axpy(&x, &k1, h / 6.0);
        n = axpy(&n, &k2, h / 3.0);
        n = axpy(&n, &k3, h / 3.0);
        n = axpy(&n, &k4, h / 6.0);
        n.q = quat::normalize(n.q);
        x = n;
    }
    x
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn total_momentum_is_conserved_without_external_torque() {
        // With wheel torque only, J ω + h (in the inertial frame) is constant.
        let s = State { q: quat::IDENTITY, w: [0.01, -0.02, 0.015], h: [0.1, 0.0, -0.2] };
        let mut x = s;
        let total = |x: &State| quat::rotate(x.q, quat::add(quat::diag_mul(INERTIA, x.w), x.h));
        let l0 = total(&s);
        for k in 0..200 {
            x = propagate_with(&x, k as f64 * 0.125, 0.125, 4, [0.01, -0.005, 0.002], |_| [0.0; 3]);
        }
        assert!(quat::norm(x.w) > 0.0 && quat::norm(quat::sub(total(&x), l0)) < 1e-9, "{:?} vs {:?}", total(&x), l0);
    }
}
