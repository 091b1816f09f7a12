//! `aocs` enemy: one more instance of the AOCS application (victims/aocs/), the victim's
//! own loop with its reader and comparer children, at its own period, replaying its window
//! of steps over and over. Several of them, on the victim's files or on copies, give the
//! shared-versus-duplicated-files experiment of seed 000 §5.3.1. Each chunk is one period
//! (one step); a mismatch against the expected outputs ends the enemy with status 1 (the
//! run notes it). The executable is the agent's: forked (text shared with the victim), or
//! with `duplicate_executable` a private copy run as `xtalk-agent aocs-instance`
//! (external.rs, `agent_copy`), which prints one line per step.
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
    Loop::new(input, expected, first_step, steps, None).unwrap_or_else(|e| {
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
