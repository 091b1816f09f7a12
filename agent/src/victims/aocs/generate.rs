//! `xtalk-agent aocs-generate`: closes the loop once, alone, to produce the scenario's
//! files. At each step the plant's true state is sampled by the sensors (the input record),
//! the flight software computes its commands (the expected-output record) and the plant
//! integrates them over one step. The victim later runs the same `Fsw::step` code on the
//! recorded inputs, so its outputs must equal the expected file bit for bit.

use super::dynamics;
use super::fsw::Fsw;
use super::io::{self, Header, Writer};
use super::scenario::{self, DT};
use super::sensors::Sensors;
use serde_json::{json, Value};
use std::path::Path;

pub const INPUT_FILE: &str = "aocs-input.bin";
pub const EXPECTED_FILE: &str = "aocs-expected.bin";

fn err(p: &Path) -> impl Fn(std::io::Error) -> String + '_ {
    move |e| format!("{}: {e}", p.display())
}

/// Write `dir/aocs-input.bin` and `dir/aocs-expected.bin` for `steps` steps from `seed`;
/// return a summary of the closed loop (pointing error, modes, wheel momentum).
pub fn generate(dir: &Path, steps: u64, seed: u64) -> Result<Value, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let header = |magic, record_f64| Header { magic, record_f64, steps, seed, dt: DT, first_step: 0 };
    let ip = dir.join(INPUT_FILE);
    let ep = dir.join(EXPECTED_FILE);
    let mut inputs = Writer::create(&ip, &header(io::INPUT_MAGIC, io::INPUT_F64 as u32)).map_err(err(&ip))?;
    let mut expected = Writer::create(&ep, &header(io::EXPECTED_MAGIC, io::OUTPUT_F64 as u32)).map_err(err(&ep))?;
    let mut state = scenario::initial_state();
    let mut sensors = Sensors::new(seed);
    let mut fsw = Fsw::new();
    let (mut worst, mut sum_err, mut counted) = (0.0f64, 0.0f64, 0u64);
    let mut modes = [0u64; 3];
    let (mut star_frames, mut max_h) = (0u64, 0.0f64);
    for k in 0..steps {
        let t = k as f64 * DT;
        let m = sensors.sample(k, t, &state);
        let out = fsw.step(&m);
        inputs.record(&m.encode()).map_err(err(&ip))?;
        expected.record(&io::encode_output(&out)).map_err(err(&ep))?;
        state = dynamics::propagate(&state, t, DT, 4, [out[0], out[1], out[2]], [out[3], out[4], out[5]]);
        // True pointing error against the guidance, after the initial convergence.
        if k >= 400 {
            let e = super::quat::angle_between(scenario::guidance(t + DT).0, state.q);
            worst = worst.max(e);
            sum_err += e;
            counted += 1;
        }
        modes[out[7] as usize] += 1;
        star_frames += m.star_valid as u64;
        max_h = max_h.max(super::quat::norm(state.h));
    }
    inputs.finish().map_err(err(&ip))?;
    expected.finish().map_err(err(&ep))?;
    Ok(json!({
        "input": ip, "expected": ep, "steps": steps, "seed": seed, "dt_s": DT,
        "pointing_error_mean_rad": if counted > 0 { sum_err / counted as f64 } else { 0.0 },
        "pointing_error_max_rad": worst,
        "steps_per_mode": {"nominal": modes[0], "unloading": modes[1], "critical": modes[2]},
        "star_tracker_availability": star_frames as f64 / steps.max(1) as f64,
        "wheel_momentum_max_nms": max_h,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn closed_loop_tracks_the_target_and_is_reproducible() {
        let d1 = tempfile::tempdir().unwrap();
        let d2 = tempfile::tempdir().unwrap();
        let s = generate(d1.path(), 16_000, 7).unwrap();
        generate(d2.path(), 16_000, 7).unwrap();
        // Pointing stays within 2 mrad after convergence, through closest approach.
        assert!(s["pointing_error_max_rad"].as_f64().unwrap() < 2e-3, "{s}");
        assert!(s["steps_per_mode"]["unloading"].as_u64().unwrap() > 0, "momentum management engaged: {s}");
        assert!(s["steps_per_mode"]["critical"].as_u64().unwrap() > 0, "{s}");
        for f in [INPUT_FILE, EXPECTED_FILE] {
            assert_eq!(std::fs::read(d1.path().join(f)).unwrap(), std::fs::read(d2.path().join(f)).unwrap(), "{f} differs");
        }
        let other = tempfile::tempdir().unwrap();
        generate(other.path(), 100, 8).unwrap();
        let a = std::fs::read(d1.path().join(INPUT_FILE)).unwrap();
        let b = std::fs::read(other.path().join(INPUT_FILE)).unwrap();
        assert_ne!(a[64..64 + 100 * io::INPUT_BYTES], b[64..], "another seed gives other noise");
    }
}
