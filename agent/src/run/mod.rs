//! One run, in named phases: `prepare` (records, trace, control block, groups), `spawn`
//! (fork the enemies, the victim and the regulator), `release` (wait until every process
//! is past the barrier), `wait` (block until the victim ends, the watchdog fires or a signal
//! ends the run), `teardown` (stop and reap every child, empty the run's group) and
//! `outcome` (write run.json, undo every change). Nothing in the agent polls while
//! measuring. launch/ is the plumbing these phases use.

mod children;
mod outcome;
mod prepare;
mod release;
mod spawn;
mod teardown;
mod wait;

use crate::launch::{journal, signals};
use crate::observe::{clock::mono_ns, env, trace};
use crate::outcome::{RunOutcome, Status};
use crate::plan::Plan;
use crate::launch::jsonfile::write_atomic;
use std::path::Path;

/// Exit codes of `xtalk-agent run` (documented in docs/agent.md).
pub const EXIT_COMPLETED: i32 = 0;
pub const EXIT_FAILED: i32 = 1;
pub const EXIT_BAD_INPUT: i32 = 2;
pub const EXIT_INTERNAL: i32 = 3;
pub const EXIT_INTERRUPTED: i32 = 130;

/// How the run is going: `Completed` until something ends it, with the reason why.
pub struct Verdict {
    pub status: Status,
    pub reason: Option<String>,
}

impl Verdict {
    /// Still going: nothing has ended the run.
    pub fn open(&self) -> bool {
        self.reason.is_none()
    }
    pub fn end(&mut self, status: Status, reason: String) {
        self.status = status;
        self.reason = Some(reason);
    }
}

pub fn unix_ns() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as i64).unwrap_or(0)
}

/// Undo whatever dead agents left (their journals: cgroups and the processes in them, IRQ
/// affinities, staging directories; their trace instances): one line per change restored.
pub fn recover() -> Vec<String> {
    let mut lines = journal::recover();
    lines.extend(trace::recover());
    lines
}

/// Execute `plan`, writing `run.json` and `jobs.bin` under `out`. Returns the exit code.
/// From the first line on, the termination signals are blocked (they end the run through
/// `sigtimedwait`, never the agent): whatever arrives, SIGKILL aside, the machine is
/// restored and run.json is left with the run's outcome, never `running`.
pub fn execute(plan: &Plan, out: &Path, exit_with_parent: bool) -> Result<i32, String> {
    signals::block_watched();
    let run_json = out.join("run.json");
    // What a dead run left (cgroups, IRQ affinity, ...) is undone before anything else.
    let recovered = recover();
    let mut journal = journal::Journal::open()?;
    let mut doc = RunOutcome::running(plan, env::collect(), unix_ns());
    write_atomic(&run_json, &doc).map_err(|e| format!("{}: {e}", run_json.display()))?;
    journal.run_json(&run_json)?;
    match phases(plan, out, exit_with_parent, &mut journal, &mut doc, recovered) {
        Ok(code) => Ok(code),
        Err(e) => {
            // Set-up failed before any child was forked: restore, and say so in run.json.
            let undo_errors = journal.undo();
            doc.set_up_failed(e.clone(), undo_errors, unix_ns());
            let _ = write_atomic(&run_json, &doc);
            Err(e)
        }
    }
}

/// The phases in order; an error is a set-up failure before any child was forked.
fn phases(plan: &Plan, out: &Path, exit_with_parent: bool, journal: &mut journal::Journal, doc: &mut RunOutcome, recovered: Vec<String>) -> Result<i32, String> {
    let prep = prepare::prepare(plan, out, journal)?;
    if exit_with_parent {
        // The host may die (even by SIGKILL): tear the run down rather than outlive it.
        unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM as libc::c_ulong, 0, 0, 0) };
    }
    // The watchdog counts from before the first fork.
    let deadline = mono_ns() + (plan.timeout_s * 1e9) as i64;
    let mut verdict = Verdict { status: Status::Completed, reason: None };
    let mut spawned = spawn::spawn(plan, &prep, journal, &mut verdict)?;
    let measuring = release::release(plan, &prep, &mut spawned.children, deadline, &mut verdict);
    let mut notes = outcome::io_notes(plan);
    if measuring {
        wait::wait(plan, &prep, &mut spawned.children, deadline, &mut verdict);
    }
    let runaways = teardown::teardown(plan, &prep, &mut spawned.children);
    outcome::write(plan, out, prep, spawned, measuring, verdict, runaways, &mut notes, recovered, journal, doc)
}
