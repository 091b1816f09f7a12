//! The AOCS victim with the process structure of seeds 000 §5.1 / 002 §IV-A: the periodic
//! compute process (this victim) and two non-periodic children it forks, one reading the
//! input file into the input pipe, the other reading the output pipe and comparing each
//! record with the expected-output file, bit for bit. Per job the victim reads one input
//! record (between its wake-up and start timestamps, as in Fig. 5.4), computes one step
//! (the timed body) and writes the output record (after the job is recorded).
//!
//! The comparer keeps its counts in a shared anonymous mapping (they survive its death),
//! writes what it received to `aocs-outputs.bin` and the victim writes `aocs.json` in the
//! run directory; any mismatch fails the run with the count in run.json's reason.

use super::fsw::Fsw;
use super::io::{self, Input};
use crate::launch::setup;
use crate::victims::JobBody;
use serde_json::json;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

pub const OUTPUTS_FILE: &str = "aocs-outputs.bin";
pub const REPORT_FILE: &str = "aocs.json";

/// Counts shared with the comparer (anonymous MAP_SHARED: visible after its exit).
#[repr(C)]
struct Tally {
    compared: AtomicU64,
    mismatches: AtomicU64,
    /// Scenario step of the first mismatch, −1 when none.
    first_mismatch: AtomicI64,
}

pub struct Aocs {
    fsw: Fsw,
    /// Last input fed to the loop, for the warm-up step on a scratch copy.
    last: Input,
    pending: Option<Input>,
    out: [u8; io::OUTPUT_BYTES],
    in_rd: i32,
    out_wr: i32,
    children: [libc::pid_t; 2],
    tally: &'static Tally,
    first_step: u64,
    steps: u64,
    input: PathBuf,
    expected: PathBuf,
    run_dir: Option<PathBuf>,
    io_error: Option<String>,
}

fn open_at(path: &Path, record_bytes: usize, step: u64) -> Result<std::io::BufReader<std::fs::File>, String> {
    let mut f = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    f.seek(SeekFrom::Start((io::HEADER_BYTES + step as usize * record_bytes) as u64)).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(std::io::BufReader::with_capacity(1 << 16, f))
}

fn pipe() -> Result<[i32; 2], String> {
    let mut fds = [0; 2];
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(format!("pipe: {}", std::io::Error::last_os_error()));
    }
    Ok(fds)
}

/// Fork a helper that dies with the victim and runs `f`; its exit status is `f`'s.
fn fork_helper(name: &str, close: &[i32], f: impl FnOnce() -> Result<(), String>) -> Result<libc::pid_t, String> {
    let parent = unsafe { libc::getpid() };
    match unsafe { libc::fork() } {
        -1 => Err(format!("fork: {}", std::io::Error::last_os_error())),
        0 => {
            setup::set_name(name);
            let _ = setup::die_with_parent(parent);
            for &fd in close {
                unsafe { libc::close(fd) };
            }
            let code = match f() {
                Ok(()) => 0,
                Err(m) => {
                    eprintln!("{name}: {m}");
                    1
                }
            };
            unsafe { libc::_exit(code) }
        }
        pid => Ok(pid),
    }
}

impl Aocs {
    /// Replay steps 0..first_step (state only), then fork the reader and the comparer for
    /// the `steps` steps of the window.
    pub fn new(input: &Path, expected: &Path, first_step: u64, steps: u64, run_dir: Option<PathBuf>) -> Result<Aocs, String> {
        let ih = io::read_header(input, io::INPUT_MAGIC, io::INPUT_F64)?;
        io::read_header(expected, io::EXPECTED_MAGIC, io::OUTPUT_F64)?;
        let mut fsw = Fsw::new();
        let mut last = Input::default();
        let mut rd = open_at(input, io::INPUT_BYTES, 0)?;
        let mut buf = [0u8; io::INPUT_BYTES];
        for _ in 0..first_step {
            rd.read_exact(&mut buf).map_err(|e| format!("{}: {e}", input.display()))?;
            last = Input::decode(&buf);
            fsw.step(&last);
        }
        let tally = unsafe {
            let p = libc::mmap(std::ptr::null_mut(), std::mem::size_of::<Tally>(), libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED | libc::MAP_ANONYMOUS, -1, 0);
            if p == libc::MAP_FAILED {
                return Err(format!("mmap: {}", std::io::Error::last_os_error()));
            }
            &*(p as *const Tally)
        };
        tally.first_mismatch.store(-1, Ordering::Relaxed);
        let [in_rd, in_wr] = pipe()?;
        let [out_rd, out_wr] = pipe()?;
        let inp = input.to_path_buf();
        let reader = fork_helper("xt-aocs-in", &[in_rd, out_rd, out_wr], move || {
            let mut rd = open_at(&inp, io::INPUT_BYTES, first_step)?;
            let mut rec = [0u8; io::INPUT_BYTES];
            for _ in 0..steps {
                rd.read_exact(&mut rec).map_err(|e| format!("{}: {e}", inp.display()))?;
                io::write_full(in_wr, &rec)?;
            }
            Ok(())
        })?;
        let (exp, dir) = (expected.to_path_buf(), run_dir.clone());
        let comparer = fork_helper("xt-aocs-cmp", &[in_rd, in_wr, out_wr], move || {
            let mut rd = open_at(&exp, io::OUTPUT_BYTES, first_step)?;
            let header = io::Header { magic: io::OUTPUT_MAGIC, record_f64: io::OUTPUT_F64 as u32, steps, seed: ih.seed, dt: ih.dt, first_step };
            let mut keep = match &dir {
                Some(d) => Some(io::Writer::create(&d.join(OUTPUTS_FILE), &header).map_err(|e| format!("{OUTPUTS_FILE}: {e}"))?),
                None => None,
            };
            let (mut got, mut want) = ([0u8; io::OUTPUT_BYTES], [0u8; io::OUTPUT_BYTES]);
            for k in 0..steps {
                if !io::read_full(out_rd, &mut got)? {
                    break; // the victim stopped early; the count says how far it got
                }
                rd.read_exact(&mut want).map_err(|e| format!("{}: {e}", exp.display()))?;
                if got != want {
                    if tally.mismatches.fetch_add(1, Ordering::Relaxed) == 0 {
                        tally.first_mismatch.store((first_step + k) as i64, Ordering::Relaxed);
                    }
                }
                tally.compared.fetch_add(1, Ordering::Release);
                if let Some(w) = keep.as_mut() {
                    w.record(&got).map_err(|e| format!("{OUTPUTS_FILE}: {e}"))?;
                }
            }
            keep.map(|w| w.finish().map_err(|e| format!("{OUTPUTS_FILE}: {e}"))).transpose().map(|_| ())
        })?;
        // The victim keeps only its ends: read inputs, write outputs.
        for fd in [in_wr, out_rd] {
            unsafe { libc::close(fd) };
        }
        Ok(Aocs {
            fsw, last, pending: None, out: [0; io::OUTPUT_BYTES], in_rd, out_wr, children: [reader, comparer], tally,
            first_step, steps, input: input.to_path_buf(), expected: expected.to_path_buf(), run_dir, io_error: None,
        })
    }

    fn fold(out: &[f64; io::OUTPUT_F64]) -> u64 {
        out.iter().fold(0u64, |a, x| a ^ x.to_bits())
    }
}

impl JobBody for Aocs {
    fn warm(&mut self) -> u64 {
        // A scratch copy: the real state must not advance outside the window.
        let mut scratch = self.fsw;
        Self::fold(&scratch.step(&self.last))
    }

    fn before_job(&mut self) {
        let mut buf = [0u8; io::INPUT_BYTES];
        match io::read_full(self.in_rd, &mut buf) {
            Ok(true) => self.pending = Some(Input::decode(&buf)),
            Ok(false) => self.fail("input pipe closed early (the reader ended)".into()),
            Err(m) => self.fail(format!("input pipe: {m}")),
        }
    }

    fn run_job(&mut self) -> u64 {
        let Some(m) = self.pending.take() else { return 0 };
        let out = self.fsw.step(&m);
        self.last = m;
        self.out = io::encode_output(&out);
        Self::fold(&out)
    }

    fn after_job(&mut self) {
        if self.io_error.is_none() {
            if let Err(m) = io::write_full(self.out_wr, &self.out) {
                self.fail(format!("output pipe: {m}"));
            }
        }
    }

    fn finish(&mut self) -> Result<(), String> {
        unsafe {
            libc::close(self.out_wr); // end of file for the comparer
            libc::close(self.in_rd);
        }
        let mut exits = Vec::new();
        for pid in self.children {
            let mut st = 0;
            unsafe { libc::waitpid(pid, &mut st, 0) };
            exits.push(if libc::WIFEXITED(st) { json!(libc::WEXITSTATUS(st)) } else { json!(format!("signal {}", libc::WTERMSIG(st))) });
        }
        let compared = self.tally.compared.load(Ordering::Acquire);
        let mismatches = self.tally.mismatches.load(Ordering::Relaxed);
        let first = self.tally.first_mismatch.load(Ordering::Relaxed);
        if let Some(d) = &self.run_dir {
            let doc = json!({
                "input": self.input, "expected": self.expected, "outputs": OUTPUTS_FILE,
                "first_step": self.first_step, "steps": self.steps, "compared": compared, "mismatches": mismatches,
                "first_mismatch_step": if first >= 0 { json!(first) } else { json!(null) },
                "reader_exit": exits[0], "comparer_exit": exits[1], "io_error": self.io_error,
            });
            let _ = crate::launch::jsonfile::write_atomic(&d.join(REPORT_FILE), &doc);
        }
        if let Some(e) = &self.io_error {
            return Err(format!("aocs: {e}"));
        }
        if mismatches > 0 {
            return Err(format!("aocs: {mismatches} of {compared} steps differ from the expected outputs (first at step {first}); see {REPORT_FILE}"));
        }
        if compared != self.steps || exits.iter().any(|e| e != &json!(0)) {
            return Err(format!("aocs: {compared} of {} steps compared (reader exit {}, comparer exit {})", self.steps, exits[0], exits[1]));
        }
        Ok(())
    }
}

impl Aocs {
    fn fail(&mut self, why: String) {
        self.pending = None;
        self.io_error.get_or_insert(why);
    }
}
