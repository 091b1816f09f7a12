//! `aocs` enemy: one more instance of the AOCS application (victims/aocs/), the victim's
//! own loop with its reader and comparer children, at its own period, replaying its window
//! of steps over and over. Several of them, on the victim's files or on copies, give the
//! shared-versus-duplicated-files experiment of seed 000 §5.3.1. Each chunk is one period
//! (one step); a mismatch against the expected outputs ends the enemy with status 1 (the
//! run notes it). The executable is always the agent's (forked, shared text).
use super::EnemyLoad;
use crate::observe::clock::{mono_ns, sleep_until};
use crate::victims::aocs::body::Aocs as Loop;
use crate::victims::JobBody;
use std::path::PathBuf;

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
