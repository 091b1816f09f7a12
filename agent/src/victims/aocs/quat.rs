//! Small vector and quaternion algebra for the AOCS model. Quaternions are `[w, x, y, z]`
//! (scalar first), Hamilton product, and rotate body vectors into the inertial frame:
//! `v_i = q ⊗ v_b ⊗ q*`. Every function is a fixed sequence of f64 operations, so results
//! are bit-for-bit reproducible for one binary on one machine.

pub type V3 = [f64; 3];
pub type Q = [f64; 4];

pub const IDENTITY: Q = [1.0, 0.0, 0.0, 0.0];

pub fn add(a: V3, b: V3) -> V3 {
    [a[0] + b[0], a[1] + b[1], a[2] + b[2]]
}

pub fn sub(a: V3, b: V3) -> V3 {
    [a[0] - b[0], a[1] - b[1], a[2] - b[2]]
}

pub fn scale(a: V3, k: f64) -> V3 {
    [a[0] * k, a[1] * k, a[2] * k]
}

pub fn dot(a: V3, b: V3) -> f64 {
    a[0] * b[0] + a[1] * b[1] + a[2] * b[2]
}

pub fn cross(a: V3, b: V3) -> V3 {
    [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]]
}

pub fn norm(a: V3) -> f64 {
    dot(a, a).sqrt()
}

/// `a / |a|`; the zero vector stays zero (no NaN leaks into the loop).
pub fn unit(a: V3) -> V3 {
    let n = norm(a);
    if n > 0.0 {
        scale(a, 1.0 / n)
    } else {
        a
    }
}

/// Diagonal inertia times a vector.
pub fn diag_mul(d: V3, a: V3) -> V3 {
    [d[0] * a[0], d[1] * a[1], d[2] * a[2]]
}

/// Each component clamped to ±`limit`.
pub fn clamp(a: V3, limit: f64) -> V3 {
    [a[0].clamp(-limit, limit), a[1].clamp(-limit, limit), a[2].clamp(-limit, limit)]
}

pub fn mul(a: Q, b: Q) -> Q {
    [
        a[0] * b[0] - a[1] * b[1] - a[2] * b[2] - a[3] * b[3],
        a[0] * b[1] + a[1] * b[0] + a[2] * b[3] - a[3] * b[2],
        a[0] * b[2] - a[1] * b[3] + a[2] * b[0] + a[3] * b[1],
        a[0] * b[3] + a[1] * b[2] - a[2] * b[1] + a[3] * b[0],
    ]
}

pub fn conj(q: Q) -> Q {
    [q[0], -q[1], -q[2], -q[3]]
}

pub fn normalize(q: Q) -> Q {
    let n = (q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3]).sqrt();
    [q[0] / n, q[1] / n, q[2] / n, q[3] / n]
}

pub fn vec(q: Q) -> V3 {
    [q[1], q[2], q[3]]
}

/// Body vector into the inertial frame.
pub fn rotate(q: Q, v: V3) -> V3 {
    vec(mul(mul(q, [0.0, v[0], v[1], v[2]]), conj(q)))
}

/// Inertial vector into the body frame.
pub fn rotate_inv(q: Q, v: V3) -> V3 {
    rotate(conj(q), v)
}

/// Rotation by the vector `theta` (axis × angle, rad).
pub fn from_rotvec(theta: V3) -> Q {
    let a = norm(theta);
    if a < 1e-12 {
        return normalize([1.0, 0.5 * theta[0], 0.5 * theta[1], 0.5 * theta[2]]);
    }
    let s = (0.5 * a).sin() / a;
    [(0.5 * a).cos(), theta[0] * s, theta[1] * s, theta[2] * s]
}

/// Attitude whose body axes are the columns of the rotation matrix [x y z] (inertial).
pub fn from_axes(x: V3, y: V3, z: V3) -> Q {
    // Shepperd's method: pick the largest pivot for accuracy.
    let (m00, m11, m22) = (x[0], y[1], z[2]);
    let tr = m00 + m11 + m22;
    let q = if tr > 0.0 {
        let s = (tr + 1.0).sqrt() * 2.0;
        [0.25 * s, (y[2] - z[1]) / s, (z[0] - x[2]) / s, (x[1] - y[0]) / s]
    } else if m00 > m11 && m00 > m22 {
        let s = (1.0 + m00 - m11 - m22).sqrt() * 2.0;
        [(y[2] - z[1]) / s, 0.25 * s, (y[0] + x[1]) / s, (z[0] + x[2]) / s]
    } else if m11 > m22 {
        let s = (1.0 + m11 - m00 - m22).sqrt() * 2.0;
        [(z[0] - x[2]) / s, (y[0] + x[1]) / s, 0.25 * s, (z[1] + y[2]) / s]
    } else {
        let s = (1.0 + m22 - m00 - m11).sqrt() * 2.0;
        [(x[1] - y[0]) / s, (z[0] + x[2]) / s, (z[1] + y[2]) / s, 0.25 * s]
    };
    let q = normalize(q);
    if q[0] < 0.0 {
        [-q[0], -q[1], -q[2], -q[3]]
    } else {
        q
    }
}

/// Rotation angle (rad) between two attitudes.
pub fn angle_between(a: Q, b: Q) -> f64 {
    let e = mul(conj(a), b);
    2.0 * norm(vec(e)).atan2(e[0].abs())
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn rotation_round_trips() {
        let q = from_rotvec([0.3, -0.2, 0.9]);
        let v = [1.0, 2.0, 3.0];
        let back = rotate_inv(q, rotate(q, v));
        assert!(norm(sub(back, v)) < 1e-12);
    }
    #[test]
    fn axes_give_the_rotation_that_maps_body_to_inertial() {
        let q = from_rotvec([0.1, 0.7, -0.4]);
        let (x, y, z) = (rotate(q, [1.0, 0.0, 0.0]), rotate(q, [0.0, 1.0, 0.0]), rotate(q, [0.0, 0.0, 1.0]));
        assert!(angle_between(from_axes(x, y, z), q) < 1e-9);
    }
}
