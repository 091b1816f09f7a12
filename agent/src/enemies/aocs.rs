//! `aocs` enemy: one more instance of the AOCS application (victims/aocs/), the victim's
//! own loop with its reader and comparer children, at its own period, replaying its window
//! of steps over and over. Several of them, on the victim's files or on copies, give the
//! shared-versus-duplicated-files experiment of seed 000 §5.3.1. Each chunk is one period
//! (one step); a mismatch against the expected outputs ends the enemy with status 1 (the
//! run notes it). The executable is the agent's: forked (text shared with the victim), or
//! with `duplicate_executable` a private copy run as `xtalk-agent aocs-instance`
//! (external.rs, `agent_copy`), which prints one line per step.
use super::kind::{Kind, Param};
use super::EnemyLoad;
use crate::observe::clock::{mono_ns, sleep_until};
use crate::victims::aocs::body::Aocs as Loop;
use crate::victims::JobBody;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

pub struct Aocs {
    input: PathBuf,
    expected: PathBuf,
    first_step: u64,
    steps: u64,
    period: i64,
    next: i64,
    done: u64,
    app: Loop,
}

fn start(input: &PathBuf, expected: &PathBuf, first_step: u64, steps: u64) -> Loop {
    // The files were checked with the plan; failing here (fork, a file removed since) ends
    // the enemy during set-up, which the run reports.
    Loop::new(input, expected, first_step, steps, 1, 1, None).unwrap_or_else(|e| {
        eprintln!("aocs enemy: {e}");
        unsafe { libc::_exit(3) }
    })
}

impl Aocs {
    pub fn new(input: &str, expected: &str, first_step: u64, steps: u64, period_ns: u64) -> Aocs {
        let (input, expected) = (PathBuf::from(input), PathBuf::from(expected));
        let app = start(&input, &expected, first_step, steps);
        Aocs { input, expected, first_step, steps, period: period_ns as i64, next: 0, done: 0, app }
    }
}

impl EnemyLoad for Aocs {
    fn chunk(&mut self) -> u64 {
        if self.next == 0 {
            self.next = mono_ns();
        }
        sleep_until(self.next);
        self.next += self.period;
        self.app.before_job();
        std::hint::black_box(self.app.run_job());
        self.app.after_job();
        self.done += 1;
        if self.done == self.steps {
            // End of the window: check the comparer's verdict and start over.
            if let Err(m) = self.app.finish() {
                eprintln!("aocs enemy: {m}");
                unsafe { libc::_exit(1) };
            }
            self.app = start(&self.input, &self.expected, self.first_step, self.steps);
            self.done = 0;
        }
        1
    }
}

/// The `aocs` kind (registry: mod.rs): another instance of the AOCS loop (victims/aocs/)
/// with its reader and comparer, at its own period, replaying steps first_step..first_step
/// + steps over and over (seed 000 §5.3.1). `duplicate_executable`: run it from a private
/// copy of the agent's executable (text pages of its own) instead of the forked agent.
pub const KIND: Kind = Kind::new("aocs", "another AOCS instance (loop, reader, comparer) at its own period, replaying a window", "steps", &[
    Param::str("input", "the AOCS input file (xtalk-agent aocs-generate)"),
    Param::str("expected", "the AOCS expected-output file generated with it"),
    Param::u64("first_step", "first step of the window").default(super::kind::Dflt::U64(0)),
    Param::u64("steps", "steps replayed over and over").min(1).file_default("800"),
    Param::u64("period_ns", "the instance's period").range(100_000, crate::plan::MAX_PERIOD_NS).unit("ns").file_default("125ms"),
    Param::bool("duplicate_executable", "run from a private copy of the agent's executable (own text pages)"),
], |a, cx| {
    let (input, expected, first, steps, period) = (a.str("input"), a.str("expected"), a.u64("first_step"), a.u64("steps"), a.u64("period_ns"));
    if a.bool("duplicate_executable") {
        Ok(Box::new(super::external::External::agent_copy(&instance_args(&input, &expected, first, steps, period), cx)?))
    } else {
        Ok(Box::new(Aocs::new(&input, &expected, first, steps, period)))
    }
})
.runs_command(|a| a.bool("duplicate_executable"))
.check(|a, at| {
    crate::victims::aocs::io::check_window(at, &a.str("input"), &a.str("expected"), a.u64("first_step"), a.u64("steps"),
        &format!("{at}.steps"), "first_step + steps")
})
.channel("application");

/// The hidden subcommand line of one instance (main.rs `aocs-instance`).
pub fn instance_args(input: &str, expected: &str, first_step: u64, steps: u64, period_ns: u64) -> Vec<String> {
    ["aocs-instance", "--input", input, "--expected", expected].iter().map(|s| s.to_string())
        .chain(["--first-step".into(), first_step.to_string(), "--steps".into(), steps.to_string(), "--period-ns".into(), period_ns.to_string()])
        .collect()
}

static TERMINATE: AtomicBool = AtomicBool::new(false);

extern "C" fn on_term(_: libc::c_int) {
    TERMINATE.store(true, Ordering::Relaxed);
}

/// `xtalk-agent aocs-instance`: one instance on its own, one output line per step, until
/// SIGTERM (at the end of the step under way). A mismatch exits with status 1.
pub fn instance_main(input: &str, expected: &str, first_step: u64, steps: u64, period_ns: u64) -> i32 {
    crate::launch::setup::set_name("xt-aocs-copy");
    unsafe { libc::signal(libc::SIGTERM, on_term as *const () as libc::sighandler_t) };
    let mut app = Aocs::new(input, expected, first_step, steps, period_ns);
    let mut n = 0u64;
    while !TERMINATE.load(Ordering::Relaxed) {
        n += app.chunk();
        println!("{n}");
    }
    0
}
