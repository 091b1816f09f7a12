//! The AOCS data files and pipe records, little-endian f64.
//!
//! File = 64-byte header (`magic` 8 bytes, `version` u32 = 1, `record_f64` u32, `steps`
//! u64, `seed` u64, `dt` f64, `first_step` u64, 16 bytes reserved) then `steps` records of `record_f64` f64.
//! Inputs (`XTAOCSIN`, 16 f64): t, gyro[3], star_valid, star q[4] (w first), sun_valid,
//! sun[3], wheel momentum[3]. Outputs (`XTAOCSEX` expected, `XTAOCSOU` recorded, 8 f64):
//! wheel torque[3], unloading torque[3], pointing error (rad), mode.

use std::io::{Read, Write};
use std::path::Path;
use crate::plan::{err, PlanError};

pub const INPUT_MAGIC: [u8; 8] = *b"XTAOCSIN";
pub const EXPECTED_MAGIC: [u8; 8] = *b"XTAOCSEX";
pub const OUTPUT_MAGIC: [u8; 8] = *b"XTAOCSOU";
pub const HEADER_BYTES: usize = 64;
pub const INPUT_F64: usize = 16;
pub const OUTPUT_F64: usize = 8;
pub const INPUT_BYTES: usize = INPUT_F64 * 8;
pub const OUTPUT_BYTES: usize = OUTPUT_F64 * 8;

#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Input {
    pub t: f64,
    pub gyro: [f64; 3],
    pub star_valid: bool,
    pub star: [f64; 4],
    pub sun_valid: bool,
    pub sun: [f64; 3],
    pub wheel_h: [f64; 3],
}

impl Input {
    pub fn encode(&self) -> [u8; INPUT_BYTES] {
        let mut v = [0.0f64; INPUT_F64];
        v[0] = self.t;
        v[1..4].copy_from_slice(&self.gyro);
        v[4] = self.star_valid as u8 as f64;
        v[5..9].copy_from_slice(&self.star);
        v[9] = self.sun_valid as u8 as f64;
        v[10..13].copy_from_slice(&self.sun);
        v[13..16].copy_from_slice(&self.wheel_h);
        to_bytes(&v)
    }

    pub fn decode(b: &[u8; INPUT_BYTES]) -> Input {
        let v: [f64; INPUT_F64] = from_bytes(b);
        Input {
            t: v[0],
            gyro: [v[1], v[2], v[3]],
            star_valid: v[4] != 0.0,
            star: [v[5], v[6], v[7], v[8]],
            sun_valid: v[9] != 0.0,
            sun: [v[10], v[11], v[12]],
            wheel_h: [v[13], v[14], v[15]],
        }
    }
}

fn to_bytes<const N: usize, const B: usize>(v: &[f64; N]) -> [u8; B] {
    let mut out = [0u8; B];
    for (i, x) in v.iter().enumerate() {
        out[i * 8..i * 8 + 8].copy_from_slice(&x.to_le_bytes());
    }
    out
}

fn from_bytes<const N: usize, const B: usize>(b: &[u8; B]) -> [f64; N] {
    let mut v = [0.0f64; N];
    for (i, x) in v.iter_mut().enumerate() {
        *x = f64::from_le_bytes(b[i * 8..i * 8 + 8].try_into().unwrap());
    }
    v
}

/// Actuator commands of one step, as written to the output pipe.
pub fn encode_output(v: &[f64; OUTPUT_F64]) -> [u8; OUTPUT_BYTES] {
    to_bytes(v)
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Header {
    pub magic: [u8; 8],
    pub record_f64: u32,
    pub steps: u64,
    pub seed: u64,
    pub dt: f64,
    /// Scenario step of the first record (0 for generated files; the window's first step
    /// for the outputs a run records).
    pub first_step: u64,
}

impl Header {
    pub fn encode(&self) -> [u8; HEADER_BYTES] {
        let mut h = [0u8; HEADER_BYTES];
        h[..8].copy_from_slice(&self.magic);
        h[8..12].copy_from_slice(&1u32.to_le_bytes());
        h[12..16].copy_from_slice(&self.record_f64.to_le_bytes());
        h[16..24].copy_from_slice(&self.steps.to_le_bytes());
        h[24..32].copy_from_slice(&self.seed.to_le_bytes());
        h[32..40].copy_from_slice(&self.dt.to_le_bytes());
        h[40..48].copy_from_slice(&self.first_step.to_le_bytes());
        h
    }
}

/// Read and validate the header of `path`: the expected magic and record size, and a file
/// long enough for every step it announces.
pub fn read_header(path: &Path, magic: [u8; 8], record_f64: usize) -> Result<Header, String> {
    let mut f = std::fs::File::open(path).map_err(|e| format!("cannot open '{}': {e}", path.display()))?;
    let mut h = [0u8; HEADER_BYTES];
    f.read_exact(&mut h).map_err(|_| format!("'{}' is too short for an AOCS file", path.display()))?;
    let u32_at = |o: usize| u32::from_le_bytes(h[o..o + 4].try_into().unwrap());
    let u64_at = |o: usize| u64::from_le_bytes(h[o..o + 8].try_into().unwrap());
    if h[..8] != magic || u32_at(8) != 1 {
        return Err(format!("'{}' is not an AOCS {} file (magic {:?})", path.display(), String::from_utf8_lossy(&magic), String::from_utf8_lossy(&h[..8])));
    }
    let header = Header { magic, record_f64: u32_at(12), steps: u64_at(16), seed: u64_at(24), dt: f64::from_le_bytes(h[32..40].try_into().unwrap()), first_step: u64_at(40) };
    if header.record_f64 as usize != record_f64 {
        return Err(format!("'{}' has {} values per record, expected {record_f64}", path.display(), header.record_f64));
    }
    let need = HEADER_BYTES as u64 + header.steps * record_f64 as u64 * 8;
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    if len < need {
        return Err(format!("'{}' is truncated: {len} bytes, its header announces {need}", path.display()));
    }
    Ok(header)
}

/// Writes a header and then records, through a buffer.
pub struct Writer {
    out: std::io::BufWriter<std::fs::File>,
}

impl Writer {
    pub fn create(path: &Path, header: &Header) -> std::io::Result<Writer> {
        let mut out = std::io::BufWriter::with_capacity(1 << 16, std::fs::File::create(path)?);
        out.write_all(&header.encode())?;
        Ok(Writer { out })
    }
    pub fn record(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.out.write_all(bytes)
    }
    pub fn finish(mut self) -> std::io::Result<()> {
        self.out.flush()?;
        self.out.get_ref().sync_all()
    }
}

/// Read exactly `buf.len()` bytes from a raw descriptor (pipe), retrying on EINTR and short
/// reads. Ok(false) at end of file before the first byte.
pub fn read_full(fd: i32, buf: &mut [u8]) -> Result<bool, String> {
    let mut got = 0;
    while got < buf.len() {
        let n = unsafe { libc::read(fd, buf[got..].as_mut_ptr() as *mut libc::c_void, buf.len() - got) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            return Err(format!("read: {e}"));
        }
        if n == 0 {
            return if got == 0 { Ok(false) } else { Err(format!("end of pipe after {got} of {} bytes", buf.len())) };
        }
        got += n as usize;
    }
    Ok(true)
}

/// Write all of `buf` to a raw descriptor (pipe), retrying on EINTR and short writes.
pub fn write_full(fd: i32, buf: &[u8]) -> Result<(), String> {
    let mut put = 0;
    while put < buf.len() {
        let n = unsafe { libc::write(fd, buf[put..].as_ptr() as *const libc::c_void, buf.len() - put) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            return Err(format!("write: {e}"));
        }
        put += n as usize;
    }
    Ok(())
}

/// The AOCS files at `at.input` / `at.expected` exist, belong together and hold the
/// window `first_step .. first_step + steps` (set by `window_field`, described by `window`).
pub fn check_window(at: &str, input: &str, expected: &str, first_step: u64, steps: u64, window_field: &str, window: &str) -> Result<(), PlanError> {
    let fix = "; write the files with `xtalk-agent aocs-generate --out DIR`";
    let ih = read_header(input.as_ref(), INPUT_MAGIC, INPUT_F64).or_else(|m| err(format!("{at}.input"), format!("{m}{fix}")))?;
    let eh = read_header(expected.as_ref(), EXPECTED_MAGIC, OUTPUT_F64).or_else(|m| err(format!("{at}.expected"), format!("{m}{fix}")))?;
    if (ih.steps, ih.seed) != (eh.steps, eh.seed) {
        return err(format!("{at}.expected"), format!("'{expected}' ({} steps, seed {}) does not belong to '{input}' ({} steps, seed {}); use files generated together", eh.steps, eh.seed, ih.steps, ih.seed));
    }
    let end = first_step.saturating_add(steps);
    if end > ih.steps {
        return err(window_field, format!("the window {window} = {end} passes the {} steps of '{input}'; lower them", ih.steps));
    }
    Ok(())
}
