//! `command` victim: the user's own program, run once per run after the barrier, in place
//! of the victim process (exec), with its placement and policy. Job 0 spans the program's
//! life; the agent completes the record from wait4's rusage when the program ends. The
//! program's probes (include/xtalk/probe.h) write into probes.bin through XTALK_PROBE_FD.

use crate::observe::clock::{current_cpu, mono_ns, sleep_until};
use super::body::{BodyKind, Run};
use crate::declare::{Dflt, Param, Values};
use crate::plan::{err, JobsFrom, PlanError, Victim};
use std::collections::BTreeMap;
use crate::record::jobs::{JobLog, JobRecord, FLAG_MISSED};
use std::ffi::CString;

/// In the victim process, after set-up and the barrier: wait for the release, note the
/// start in record 0 (unpublished) and exec. Never returns.
fn exec(cx: &super::Ctx) -> ! {
    let (v, shared, log, probe_fd, settle_ns) = (cx.victim, cx.shared, cx.log, cx.probe_fd, cx.settle_ns);
    let a = BODY.values(&v.body);
    let (argv, preload) = (a.strings("argv"), a.opt_str("preload"));
    let env: BTreeMap<String, String> = a.json("env").ok().flatten().unwrap_or_default();
    log.prefault();
    shared.barrier_wait();
    cx.passed_barrier();
    let t0 = shared.first_release(settle_ns);
    log.set_t0(t0);
    sleep_until(t0);
    let wakeup = mono_ns();
    let args: Vec<CString> = argv.iter().map(|a| CString::new(a.as_str()).unwrap_or_default()).collect();
    let mut ptrs: Vec<*const libc::c_char> = args.iter().map(|a| a.as_ptr()).collect();
    ptrs.push(std::ptr::null());
    unsafe { libc::fcntl(probe_fd, libc::F_SETFD, 0) }; // inherited across exec
    std::env::set_var("XTALK_PROBE_FD", probe_fd.to_string());
    if let Some(p) = &preload {
        std::env::set_var("LD_PRELOAD", p);
    }
    for (k, val) in env {
        std::env::set_var(k, val);
    }
    let start = mono_ns();
    log.stage(0, &JobRecord { job: 0, release_ns: t0, wakeup_ns: wakeup, start_ns: start, cpu_start: current_cpu(), cpu_end: -1, ..Default::default() });
    unsafe { libc::execvp(ptrs[0], ptrs.as_ptr()) };
    cx.slot.fail(&format!("{}: exec {}: {}", cx.who, argv[0], std::io::Error::last_os_error()));
    unsafe { libc::_exit(127) }
}

/// In the agent, once the program has ended: complete and publish record 0.
pub fn finish(v: &Victim, log: &JobLog, end_ns: i64, ru: &libc::rusage) {
    let mut r = log.staged(0);
    if r.start_ns == 0 {
        return; // never reached exec
    }
    r.end_ns = end_ns;
    r.cpu_time_ns = (ru.ru_utime.tv_sec as i64 + ru.ru_stime.tv_sec as i64) * 1_000_000_000
        + (ru.ru_utime.tv_usec as i64 + ru.ru_stime.tv_usec as i64) * 1_000;
    r.nvcsw = ru.ru_nvcsw as i64;
    r.nivcsw = ru.ru_nivcsw as i64;
    if end_ns > r.release_ns + v.deadline() as i64 {
        r.flags |= FLAG_MISSED;
    }
    log.push(0, &r);
}

/// The executable a program name resolves to: a path, or the first match on PATH.
pub fn find_program(cmd: &str) -> Option<std::path::PathBuf> {
    let exec = |p: &std::path::Path| {
        let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).ok()?;
        (p.is_file() && unsafe { libc::access(c.as_ptr(), libc::X_OK) } == 0).then(|| p.to_path_buf())
    };
    if cmd.contains('/') {
        return exec(std::path::Path::new(cmd));
    }
    std::env::var_os("PATH").and_then(|path| std::env::split_paths(&path).find_map(|d| exec(&d.join(cmd))))
}

/// Most probe records of one run (2 GiB of probes.bin at 32 bytes each).
const MAX_PROBES: u64 = 1 << 26;

/// The `command` body (registry: mod.rs): the process execs the program after its set-up
/// and the barrier; the agent completes job 0 from wait4 (`finish`).
pub const BODY: BodyKind = BodyKind::new("command", "any program (argv, no shell), run once per run as job 0; per-section timing from its probes in probes.bin", &[
    Param::strings("argv", "the program and its arguments"),
    Param::json("env", "map", "environment variables set for the program (name -> value)"),
    Param::str("preload", "a shared library to LD_PRELOAD (the syscall probes, libxtalk_preload.so)").default(Dflt::Unset),
    Param::u64("probe_capacity", "probe records probes.bin holds").range(1, MAX_PROBES).default(Dflt::U64(1 << 18)),
    Param::json("probe_names", "map", "probe id (digits) -> name, from the experiment file; the host reads them"),
    Param::json("jobs_from", "jobs_from", "where the host takes the program's jobs from (its probes or the scheduler trace)"),
], Run::Own(exec))
.sections(&["slowdown", "distributions", "series", "spikes", "pwcet", "wakeup", "probes"])
.probes("probe_capacity")
.finish(finish)
.check(check);

fn check(a: &Values, v: &Victim, at: &str, _: &[usize]) -> Result<(), PlanError> {
    let argv = a.strings("argv");
    if argv.is_empty() || argv[0].is_empty() {
        return err(format!("{at}.body.argv"), "is empty; give the program and its arguments, e.g. [\"./app\", \"-n\", \"10\"]");
    }
    if find_program(&argv[0]).is_none() {
        return err(format!("{at}.body.argv[0]"), format!("'{}' is not an executable file here (nor on PATH)", argv[0]));
    }
    if let Some(p) = a.opt_str("preload") {
        if !std::path::Path::new(&p).is_file() {
            return err(format!("{at}.body.preload"), format!("'{p}' does not exist; build it with `make setup` (build/libxtalk_preload.so)"));
        }
    }
    for key in ["env", "probe_names"] {
        if let Err(e) = a.json::<BTreeMap<String, String>>(key) {
            return err(format!("{at}.body.{key}"), format!("{e}; give a table of strings"));
        }
    }
    if let Err(e) = a.json::<JobsFrom>("jobs_from") {
        return err(format!("{at}.body.jobs_from"), format!("{e}; fix it"));
    }
    if v.jobs != 1 || v.warmup_jobs != 0 {
        return err(format!("{at}.jobs"), "a command body runs once per run: jobs = 1, warmup_jobs = 0");
    }
    Ok(())
}
