//! Checks a parsed plan against itself and against this machine (CPUs, privileges,
//! memory) before anything is started. Every error names the field and the fix.

use crate::plan::{err, Body, Enemy, Load, Placement, Plan, PlanError, Sched, Victim, PLAN_VERSION};
use crate::observe::{machine, perf, trace};

/// Smallest SCHED_DEADLINE runtime the kernel accepts (2^10 ns, sched/deadline.c).
const DL_MIN_RUNTIME_NS: u64 = 1 << 10;

pub fn check(plan: &Plan) -> Result<(), PlanError> {
    if plan.version != PLAN_VERSION {
        return err("version", format!("plan version {} is not supported; this agent reads version {PLAN_VERSION}", plan.version));
    }
    if plan.run_id.is_empty() || plan.run_id.contains('/') {
        return err("run_id", "must be a non-empty name without '/'");
    }
    if !(plan.settle_ms >= 0.0 && plan.settle_ms <= 60_000.0) {
        return err("settle_ms", "must be between 0 and 60000");
    }
    if let Some(t) = &plan.trace {
        check_trace(t)?;
    }
    let online = machine::online_cpus();
    let allowed = machine::allowed_cpus();
    check_victim(&plan.victim, &online, &allowed)?;
    let mut footprint = victim_footprint(&plan.victim.body);
    for (i, e) in plan.enemies.iter().enumerate() {
        check_enemy(i, e, &online, &allowed)?;
        if plan.enemies[..i].iter().any(|o| o.name == e.name) {
            return err(format!("enemies[{i}].name"), format!("'{}' is used twice; give each enemy its own name", e.name));
        }
        footprint += e.load.footprint();
    }
    let avail = machine::mem_available_bytes();
    if avail > 0 && footprint > avail / 10 * 9 {
        return err("enemies", format!("victim and enemies need {} MiB but only {} MiB are available; use smaller buffers",
            footprint >> 20, avail >> 20));
    }
    let needed_s = plan.settle_ms / 1e3 + run_periods(&plan.victim) * plan.victim.period_ns as f64 / 1e9;
    if !(plan.timeout_s > needed_s) {
        return err("timeout_s", format!("{} s is shorter than the run itself ({needed_s:.3} s); raise it", plan.timeout_s));
    }
    Ok(())
}

fn victim_footprint(b: &Body) -> u64 {
    match b {
        Body::Chase { bytes, .. } | Body::Sum { bytes } => *bytes,
        Body::Pi { .. } | Body::Command { .. } | Body::Aocs { .. } | Body::Latency {} | Body::Taskset { .. } => 0,
    }
}

/// Periods the victim runs: one per job, or for a task set one per hyperperiod (plus the
/// hyperperiod a late task may use before it gives up).
fn run_periods(v: &Victim) -> f64 {
    match &v.body {
        Body::Taskset { tasks, .. } if !tasks.is_empty() => {
            let per: u64 = tasks.iter().map(|t| v.period_ns / t.period_ns.max(1)).sum();
            (v.total_jobs() / per.max(1)) as f64 + 1.0
        }
        _ => v.total_jobs() as f64,
    }
}

/// The AOCS files at `at.input` / `at.expected` exist, belong together and hold the
/// window `first_step .. first_step + steps` (set by `window_field`, described by `window`).
fn check_aocs(at: &str, input: &str, expected: &str, first_step: u64, steps: u64, window_field: &str, window: &str) -> Result<(), PlanError> {
    use crate::victims::aocs::io;
    let fix = "; write the files with `xtalk-agent aocs-generate --out DIR`";
    let ih = io::read_header(input.as_ref(), io::INPUT_MAGIC, io::INPUT_F64).or_else(|m| err(format!("{at}.input"), format!("{m}{fix}")))?;
    let eh = io::read_header(expected.as_ref(), io::EXPECTED_MAGIC, io::OUTPUT_F64).or_else(|m| err(format!("{at}.expected"), format!("{m}{fix}")))?;
    if (ih.steps, ih.seed) != (eh.steps, eh.seed) {
        return err(format!("{at}.expected"), format!("'{expected}' ({} steps, seed {}) does not belong to '{input}' ({} steps, seed {}); use files generated together", eh.steps, eh.seed, ih.steps, ih.seed));
    }
    let end = first_step + steps;
    if end > ih.steps {
        return err(window_field, format!("the window {window} = {end} passes the {} steps of '{input}'; lower them", ih.steps));
    }
    Ok(())
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 { a } else { gcd(b, a % b) }
}

fn check_taskset(v: &Victim, tasks: &[crate::plan::Task], policy: crate::plan::TaskPolicy, online: &[usize]) -> Result<(), PlanError> {
    use crate::plan::TaskPolicy;
    if tasks.is_empty() || tasks.len() > 64 {
        return err("victim.body.tasks", "give between 1 and 64 tasks");
    }
    let mut hyper = 1u64;
    for (i, t) in tasks.iter().enumerate() {
        let f = |k: &str| format!("victim.body.tasks[{i}].{k}");
        if t.name.is_empty() || tasks[..i].iter().any(|o| o.name == t.name) {
            return err(f("name"), "must be non-empty and unique in the task set");
        }
        if t.period_ns < 100_000 {
            return err(f("period_ns"), "must be at least 100000 (100 us)");
        }
        if t.wcet_ns < 1_000 {
            return err(f("wcet_ns"), "must be at least 1000 (1 us of busy loop)");
        }
        if t.deadline_ns == Some(0) || t.deadline() > t.period_ns {
            return err(f("deadline_ns"), "must be positive and at most the period (constrained deadlines)");
        }
        match policy {
            TaskPolicy::Rm => {
                if t.runtime_ns.is_some() {
                    return err(f("runtime_ns"), "is for policy 'deadline'; remove it or set policy = \"deadline\"");
                }
                if let Some(p) = t.priority {
                    if !(1..=99).contains(&p) {
                        return err(f("priority"), format!("{p} is out of range; use 1..99"));
                    }
                }
            }
            TaskPolicy::Deadline => {
                if t.priority.is_some() {
                    return err(f("priority"), "is for policy 'rm'; remove it or set policy = \"rm\"");
                }
                let r = crate::victims::taskset::runtime(t);
                if r < DL_MIN_RUNTIME_NS || r > t.deadline() {
                    return err(f("runtime_ns"), format!("{r} ns is outside [{DL_MIN_RUNTIME_NS}, deadline {}]; SCHED_DEADLINE needs runtime <= deadline <= period", t.deadline()));
                }
            }
        }
        hyper = hyper / gcd(hyper, t.period_ns) * t.period_ns;
        if hyper > 3_600_000_000_000 {
            return err("victim.body.tasks", "the hyperperiod exceeds one hour; use harmonic periods");
        }
    }
    if v.period_ns != hyper {
        return err("victim.period_ns", format!("{} is not the task set's hyperperiod; set it to {hyper}", v.period_ns));
    }
    let per: u64 = tasks.iter().map(|t| hyper / t.period_ns).sum();
    if v.jobs % per != 0 || v.warmup_jobs % per != 0 {
        return err("victim.jobs", format!("jobs and warmup_jobs count job records of whole hyperperiods: multiples of {per}"));
    }
    if !v.counters.is_empty() {
        return err("victim.counters", "counters are not read for a task set; remove them");
    }
    if policy == TaskPolicy::Deadline {
        if v.placement.cpus.as_ref().is_some_and(|c| online.iter().any(|o| !c.contains(o))) {
            return err("victim.placement.cpus", "SCHED_DEADLINE tasks may not be pinned to a subset of the root domain; leave placement unpinned");
        }
        let bw: f64 = tasks.iter().map(|t| crate::victims::taskset::runtime(t) as f64 / t.period_ns as f64).sum();
        let limit = crate::victims::taskset::dl_bandwidth_limit() * online.len() as f64;
        if bw > limit {
            return err("victim.body.tasks", format!("SCHED_DEADLINE admission would fail: the reservations add up to {bw:.3} CPUs, over the limit of {limit:.3} ({} CPUs x sched_rt_runtime/sched_rt_period); lower runtimes or drop tasks", online.len()));
        }
    }
    Ok(())
}

fn check_victim(v: &Victim, online: &[usize], allowed: &[usize]) -> Result<(), PlanError> {
    match &v.body {
        Body::Chase { bytes, accesses, .. } => {
            if *bytes < 128 {
                return err("victim.body.bytes", "must be at least 128 (two cache lines)");
            }
            if *accesses == Some(0) {
                return err("victim.body.accesses", "must be at least 1, or absent for one pass over the buffer");
            }
        }
        Body::Sum { bytes } if *bytes < 8 => return err("victim.body.bytes", "must be at least 8"),
        Body::Pi { iterations } if *iterations == 0 => return err("victim.body.iterations", "must be at least 1"),
        Body::Command { argv, preload, probe_capacity, .. } => {
            if argv.is_empty() || argv[0].is_empty() {
                return err("victim.body.argv", "is empty; give the program and its arguments, e.g. [\"./app\", \"-n\", \"10\"]");
            }
            if find_program(&argv[0]).is_none() {
                return err("victim.body.argv[0]", format!("'{}' is not an executable file here (nor on PATH)", argv[0]));
            }
            if let Some(p) = preload {
                if !std::path::Path::new(p).is_file() {
                    return err("victim.body.preload", format!("'{p}' does not exist; build it with `make setup` (build/libxtalk_preload.so)"));
                }
            }
            if !(1..=1 << 26).contains(probe_capacity) {
                return err("victim.body.probe_capacity", "must be between 1 and 67108864 records");
            }
            if v.jobs != 1 || v.warmup_jobs != 0 {
                return err("victim.jobs", "a command victim runs once per run: jobs = 1, warmup_jobs = 0");
            }
        }
        Body::Aocs { input, expected, first_step } => {
            check_aocs("victim.body", input, expected, *first_step, v.total_jobs(), "victim.jobs", "first_step + warmup_jobs + jobs")?
        }
        Body::Taskset { tasks, policy } => check_taskset(v, tasks, *policy, online)?,
        _ => {}
    }
    if v.period_ns < 10_000 {
        return err("victim.period_ns", "must be at least 10000 (10 us)");
    }
    if v.jobs == 0 {
        return err("victim.jobs", "must be at least 1");
    }
    if v.deadline_ns == Some(0) {
        return err("victim.deadline_ns", "must be positive, or absent for deadline = period");
    }
    check_counters(v)?;
    check_placement("victim", &v.placement, online, allowed)?;
    check_sched("victim", &v.sched, &v.placement, online)?;
    check_lock("victim", v.lock_memory, victim_footprint(&v.body))
}

fn check_trace(t: &crate::plan::Trace) -> Result<(), PlanError> {
    if !(64..=1 << 20).contains(&t.buffer_kb) {
        return err("trace.buffer_kb", "must be between 64 and 1048576 (KiB per CPU)");
    }
    if t.events.is_empty() {
        return err("trace.events", "is empty; leave it out for the default set");
    }
    if unsafe { libc::geteuid() } != 0 {
        return err("trace", "kernel tracing needs root (tracefs); run as root or leave trace out");
    }
    trace::with_tracefs(|root| {
        for (i, ev) in t.events.iter().enumerate() {
            if let Err(why) = trace::event_dir(root, ev) {
                return Err(PlanError { field: format!("trace.events[{i}]"), message: format!("{why}; this kernel offers {}", trace::offered(root)) }.to_string());
            }
        }
        Ok(())
    })
    .map_err(|m| match m.split_once(": ") {
        Some((f, rest)) if f.starts_with("trace.events[") => PlanError { field: f.into(), message: rest.into() },
        _ => PlanError { field: "trace".into(), message: m },
    })
}

fn check_counters(v: &Victim) -> Result<(), PlanError> {
    if v.counters.len() > perf::MAX_EVENTS {
        return err("victim.counters", format!("{} counters; at most {} per run", v.counters.len(), perf::MAX_EVENTS));
    }
    for (i, c) in v.counters.iter().enumerate() {
        let field = format!("victim.counters[{i}].event");
        let spec = perf::resolve(&c.event).or_else(|e| err(&field, e))?;
        if let Err(why) = perf::probe(&spec, v.counters_exclude_kernel) {
            if !c.optional {
                return err(field, format!("'{}' cannot be counted here: {why}; this machine offers: {}; or mark it optional = true",
                    c.event, perf::available(v.counters_exclude_kernel).join(", ")));
            }
        }
        if v.counters[..i].iter().any(|o| o.event == c.event) {
            return err(field, format!("'{}' is listed twice", c.event));
        }
    }
    Ok(())
}

fn check_enemy(i: usize, e: &Enemy, online: &[usize], allowed: &[usize]) -> Result<(), PlanError> {
    let at = format!("enemies[{i}]");
    if e.name.is_empty() {
        return err(format!("{at}.name"), "must not be empty");
    }
    match &e.load {
        Load::Read { bytes } | Load::Write { bytes } if *bytes < 4096 => {
            return err(format!("{at}.load.bytes"), "must be at least 4096");
        }
        Load::Aocs { input, expected, first_step, steps, period_ns } => {
            if *steps == 0 {
                return err(format!("{at}.load.steps"), "must be at least 1");
            }
            if *period_ns < 100_000 {
                return err(format!("{at}.load.period_ns"), "must be at least 100000 (100 us)");
            }
            check_aocs(&format!("{at}.load"), input, expected, *first_step, *steps, &format!("{at}.load.steps"), "first_step + steps")?;
        }
        Load::Memhog { bytes } => {
            let avail = machine::mem_available_bytes();
            if *bytes < 1 << 20 || (avail > 0 && *bytes > avail / 2) {
                return err(format!("{at}.load.bytes"), format!("must be between 1 MiB and half the available memory ({} MiB)", avail >> 21));
            }
        }
        Load::Fdexhaust { fds } if !(16..=65_536).contains(fds) => {
            return err(format!("{at}.load.fds"), "must be between 16 and 65536");
        }
        Load::Forkbomb { max_procs } if !(1..=256).contains(max_procs) => {
            return err(format!("{at}.load.max_procs"), "must be between 1 and 256 (the ceiling that keeps the machine up)");
        }
        Load::Diskfill { dir, bytes } => {
            let free = fs_free_bytes(dir).or_else(|m| err(format!("{at}.load.dir"), m))?;
            if *bytes < 1 << 20 || *bytes > free / 2 {
                return err(format!("{at}.load.bytes"), format!("must be between 1 MiB and half the free space of '{dir}' ({} MiB)", free >> 21));
            }
        }
        Load::Chase { elements, element_bytes, .. } => {
            if *elements < 2 {
                return err(format!("{at}.load.elements"), "must be at least 2");
            }
            if *element_bytes < 8 || element_bytes % 8 != 0 {
                return err(format!("{at}.load.element_bytes"), "must be a multiple of 8, at least 8");
            }
        }
        _ => {}
    }
    check_placement(&at, &e.placement, online, allowed)?;
    check_sched(&at, &e.sched, &e.placement, online)?;
    check_lock(&at, e.lock_memory, e.load.footprint())
}

/// Free bytes of the file system holding directory `dir` (for unprivileged users).
fn fs_free_bytes(dir: &str) -> Result<u64, String> {
    if !std::path::Path::new(dir).is_dir() {
        return Err(format!("'{dir}' is not a directory; name an existing directory (default: the temporary directory)"));
    }
    let c = std::ffi::CString::new(dir).map_err(|_| "contains a NUL byte".to_string())?;
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return Err(format!("'{dir}': {}", std::io::Error::last_os_error()));
    }
    Ok(st.f_bavail as u64 * st.f_frsize as u64)
}

/// The executable `name` names: a path, or a file on PATH.
pub fn find_program(name: &str) -> Option<std::path::PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let ok = |p: &std::path::Path| p.is_file() && p.metadata().map(|m| m.permissions().mode() & 0o111 != 0).unwrap_or(false);
    if name.contains('/') {
        let p = std::path::PathBuf::from(name);
        return ok(&p).then_some(p);
    }
    std::env::var_os("PATH").and_then(|path| std::env::split_paths(&path).map(|d| d.join(name)).find(|p| ok(p)))
}

fn check_placement(at: &str, p: &Placement, online: &[usize], allowed: &[usize]) -> Result<(), PlanError> {
    let Some(cpus) = &p.cpus else { return Ok(()) };
    if cpus.is_empty() {
        return err(format!("{at}.placement.cpus"), "is empty; list CPUs or leave it out to run unpinned");
    }
    for (k, c) in cpus.iter().enumerate() {
        if !online.contains(c) {
            return err(format!("{at}.placement.cpus[{k}]"), format!("CPU {c} does not exist or is offline; online CPUs: {}", machine::cpu_list(online)));
        }
        if !allowed.contains(c) {
            return err(format!("{at}.placement.cpus[{k}]"), format!("CPU {c} is outside this process's cpuset; allowed: {}", machine::cpu_list(allowed)));
        }
        if cpus[..k].contains(c) {
            return err(format!("{at}.placement.cpus[{k}]"), format!("CPU {c} is listed twice"));
        }
    }
    Ok(())
}

fn check_sched(at: &str, s: &Sched, p: &Placement, online: &[usize]) -> Result<(), PlanError> {
    let f = |k: &str| format!("{at}.sched.{k}");
    let privileged = machine::has_cap_sys_nice();
    match *s {
        Sched::Other { nice } => {
            if !(-20..=19).contains(&nice) {
                return err(f("nice"), format!("{nice} is out of range; use -20..19"));
            }
            if nice < 0 && !privileged && machine::rlimit_nice_floor() > nice {
                return err(f("nice"), "a negative nice needs CAP_SYS_NICE or RLIMIT_NICE; run as root or use nice >= 0");
            }
        }
        Sched::Fifo { priority } | Sched::Rr { priority } => {
            if !(1..=99).contains(&priority) {
                return err(f("priority"), format!("{priority} is out of range; use 1..99"));
            }
            if !privileged && (machine::rlimit_rtprio() as i64) < priority as i64 {
                return err(f("policy"), "a real-time policy needs CAP_SYS_NICE (or RLIMIT_RTPRIO); run as root or use policy 'other'");
            }
        }
        Sched::Deadline { runtime_ns, deadline_ns, period_ns } => {
            if runtime_ns < DL_MIN_RUNTIME_NS {
                return err(f("runtime_ns"), format!("must be at least {DL_MIN_RUNTIME_NS} ns"));
            }
            if runtime_ns > deadline_ns {
                return err(f("runtime_ns"), format!("runtime {runtime_ns} > deadline {deadline_ns}; SCHED_DEADLINE needs runtime <= deadline <= period"));
            }
            if deadline_ns > period_ns {
                return err(f("deadline_ns"), format!("deadline {deadline_ns} > period {period_ns}; SCHED_DEADLINE needs runtime <= deadline <= period"));
            }
            if !privileged {
                return err(f("policy"), "SCHED_DEADLINE needs CAP_SYS_NICE; run as root or use policy 'other'");
            }
            if let Some(cpus) = &p.cpus {
                if online.iter().any(|c| !cpus.contains(c)) {
                    return err(format!("{at}.placement.cpus"), "SCHED_DEADLINE tasks may not be pinned to a subset of the root domain; leave placement unpinned (or use an exclusive cpuset)");
                }
            }
        }
    }
    Ok(())
}

fn check_lock(at: &str, lock: bool, footprint: u64) -> Result<(), PlanError> {
    if lock && !machine::has_cap_ipc_lock() {
        let lim = machine::rlimit_memlock();
        if lim != u64::MAX && lim < footprint + (64 << 20) {
            return err(format!("{at}.lock_memory"), format!("needs CAP_IPC_LOCK or RLIMIT_MEMLOCK >= {} MiB (now {} KiB); run as root or set lock_memory = false", (footprint >> 20) + 64, lim >> 10));
        }
    }
    Ok(())
}
