//! The AOCS victim with the process structure of seeds 000 §5.1 / 002 §IV-A: the periodic
//! compute process (this victim) and two non-periodic children it forks, one reading the
//! input file into the input pipe, the other reading the output pipe and comparing each
//! record with the expected-output file, bit for bit. Per job the victim reads
//! `steps_per_job` input records (between its wake-up and start timestamps, as in Fig.
//! 5.4), computes those consecutive steps (the timed body) and writes their output records
//! (after the job is recorded). A step costs 0.2–6 µs on a PC where the seed's flight
//! processor took milliseconds: `repeat_step` computes each step that many times (all but
//! the last on a scratch copy of the state, so the trajectory and the outputs are those of
//! one step, compared bit for bit), the work of a processor that many times slower; several
//! steps a job run more of the scenario per job (and read and write its records).
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
    /// The inputs of the next job (`per_job` of them once read).
    pending: Vec<Input>,
    /// The output records of the last job, written after it is recorded.
    out: Vec<u8>,
    per_job: usize,
    /// Each step computed this many times (all but the last on a scratch copy).
    repeat: u64,
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
    /// the `jobs` × `per_job` steps of the window.
    pub fn new(input: &Path, expected: &Path, first_step: u64, jobs: u64, per_job: u64, repeat: u64, run_dir: Option<PathBuf>) -> Result<Aocs, String> {
        let steps = jobs.saturating_mul(per_job.max(1));
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
            fsw, last, pending: Vec::with_capacity(per_job as usize), out: Vec::with_capacity(per_job as usize * io::OUTPUT_BYTES),
            per_job: per_job.max(1) as usize, repeat: repeat.max(1), in_rd, out_wr, children: [reader, comparer], tally,
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
        (0..self.per_job as u64 * self.repeat).fold(0, |a, _| a ^ Self::fold(&scratch.step(&self.last)))
    }

    fn before_job(&mut self) {
        self.pending.clear();
        let mut buf = [0u8; io::INPUT_BYTES];
        for _ in 0..self.per_job {
            match io::read_full(self.in_rd, &mut buf) {
                Ok(true) => self.pending.push(Input::decode(&buf)),
                Ok(false) => return self.fail("input pipe closed early (the reader ended)".into()),
                Err(m) => return self.fail(format!("input pipe: {m}")),
            }
        }
    }

    fn run_job(&mut self) -> u64 {
        self.out.clear();
        let mut folded = 0;
        for m in self.pending.drain(..) {
            for _ in 1..self.repeat {
                // The same step on a copy the optimiser cannot see through: its work, not its result.
                let mut scratch = std::hint::black_box(self.fsw);
                folded ^= Self::fold(&scratch.step(std::hint::black_box(&m)));
            }
            let out = self.fsw.step(&m);
            self.last = m;
            self.out.extend_from_slice(&io::encode_output(&out));
            folded ^= Self::fold(&out);
        }
        folded
    }

    fn after_job(&mut self) {
        if self.io_error.is_none() && !self.out.is_empty() {
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
        self.pending.clear();
        self.io_error.get_or_insert(why);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::victims::aocs::generate::generate;

    fn thread_cpu_ns() -> u64 {
        let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
        ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
    }

    /// `jobs` jobs of `per_job` steps: the median CPU time of a job's body, after finish()
    /// checked every output bit for bit.
    fn median_job_ns(dir: &Path, jobs: u64, per_job: u64, repeat: u64) -> u64 {
        let (inp, exp) = (dir.join(super::super::generate::INPUT_FILE), dir.join(super::super::generate::EXPECTED_FILE));
        let mut a = Aocs::new(&inp, &exp, 2990, jobs, per_job, repeat, Some(dir.to_path_buf())).unwrap();
        let mut t = Vec::new();
        for _ in 0..jobs {
            a.before_job();
            let t0 = thread_cpu_ns();
            std::hint::black_box(a.run_job());
            t.push(thread_cpu_ns() - t0);
            a.after_job();
        }
        a.finish().unwrap();
        let report: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.join(REPORT_FILE)).unwrap()).unwrap();
        assert_eq!(report["compared"], json!(jobs * per_job), "{report}");
        assert_eq!(report["mismatches"], json!(0), "{report}");
        t.sort_unstable();
        t[t.len() / 2]
    }

    #[test]
    fn more_steps_per_job_or_repeated_steps_scale_the_work_and_keep_the_outputs_bit_for_bit() {
        let d = tempfile::tempdir().unwrap();
        generate(d.path(), 16_000, 3).unwrap();
        let one = median_job_ns(d.path(), 40, 1, 1);
        // 256 steps a job, or one step computed 256 times: far more work than one step (a
        // ratio, not this machine's time; one step's median includes the clock reads).
        let steps = median_job_ns(d.path(), 40, 256, 1);
        let repeated = median_job_ns(d.path(), 40, 1, 256);
        assert!(steps > 20 * one.max(1), "1 step: {one} ns, 256 steps: {steps} ns");
        assert!(repeated > 20 * one.max(1), "1 step: {one} ns, 1 step × 256: {repeated} ns");
    }
}
