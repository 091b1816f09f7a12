//! Checks a parsed plan against itself and against this machine (CPUs, privileges,
//! memory) before anything is started. Every error names the field and the fix.

use crate::plan::{err, Body, Enemy, Load, Placement, Plan, PlanError, Proto, Sched, Victim, MAX_FUNCTIONS, PLAN_VERSION};
use crate::observe::machine;

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
    let needed_s = plan.settle_ms / 1e3 + plan.victim.total_jobs() as f64 * plan.victim.period_ns as f64 / 1e9;
    if !(plan.timeout_s > needed_s) {
        return err("timeout_s", format!("{} s is shorter than the run itself ({needed_s:.3} s); raise it", plan.timeout_s));
    }
    Ok(())
}

fn victim_footprint(b: &Body) -> u64 {
    match b {
        Body::Chase { bytes, .. } | Body::Sum { bytes } => *bytes,
        Body::Pi { .. } | Body::Syscall { .. } => 0,
    }
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
        Body::Syscall { calls } if *calls == 0 => return err("victim.body.calls", "must be at least 1"),
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
    check_placement("victim", &v.placement, online, allowed)?;
    check_sched("victim", &v.sched, &v.placement, online)?;
    check_lock("victim", v.lock_memory, victim_footprint(&v.body))
}

fn check_enemy(i: usize, e: &Enemy, online: &[usize], allowed: &[usize]) -> Result<(), PlanError> {
    let at = format!("enemies[{i}]");
    if e.name.is_empty() {
        return err(format!("{at}.name"), "must not be empty");
    }
    if !(e.intensity > 0.0 && e.intensity <= 100.0) {
        return err(format!("{at}.intensity"), format!("{} is out of range; use a percentage in (0, 100]", e.intensity));
    }
    if let Some(r) = e.rate {
        if !(r > 0.0 && r.is_finite()) {
            return err(format!("{at}.rate"), format!("{r} is not a positive rate; give units per second, or leave it out"));
        }
    }
    if e.huge_pages && matches!(e.load, Load::Tlb { .. } | Load::Pagefault { .. }) {
        return err(format!("{at}.huge_pages"), format!("'{}' needs 4 KiB pages; set huge_pages = false", e.load.kind()));
    }
    check_load(&format!("{at}.load"), &e.load)?;
    check_placement(&at, &e.placement, online, allowed)?;
    check_sched(&at, &e.sched, &e.placement, online)?;
    check_lock(&at, e.lock_memory, e.load.footprint())
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

fn at_least(field: String, v: u64, min: u64, what: &str) -> Result<(), PlanError> {
    if v < min {
        return err(field, format!("{v} is too small; use at least {min}{what}"));
    }
    Ok(())
}

/// Parameters of each enemy kind (docs/enemies.md lists the ranges).
fn check_load(at: &str, load: &Load) -> Result<(), PlanError> {
    let f = |k: &str| format!("{at}.{k}");
    match load {
        Load::Read { bytes } | Load::Write { bytes } | Load::Ntstore { bytes } | Load::Pagefault { bytes } => at_least(f("bytes"), *bytes, 4096, " bytes"),
        Load::L1d { bytes } | Load::L2 { bytes } | Load::Llc { bytes } => at_least(f("bytes"), *bytes, 4096, " bytes"),
        Load::Copy { bytes } => at_least(f("bytes"), *bytes, 8192, " bytes (two halves of 4 KiB)"),
        Load::Chase { elements, element_bytes, chains, .. } => {
            at_least(f("elements"), *elements, 2, "")?;
            if *element_bytes < 8 || element_bytes % 8 != 0 {
                return err(f("element_bytes"), "must be a multiple of 8, at least 8");
            }
            if *chains < 1 || *chains > 64 || chains > elements {
                return err(f("chains"), format!("{chains} is out of range; use 1..64 walkers, at most one per element"));
            }
            Ok(())
        }
        Load::Loads { lines, stride_bytes } => {
            at_least(f("lines"), *lines, 1, "")?;
            if *stride_bytes < 8 || stride_bytes % 8 != 0 {
                return err(f("stride_bytes"), "must be a multiple of 8, at least 8 (64: one cache line per load)");
            }
            Ok(())
        }
        Load::Tlb { pages, page_bytes } => {
            at_least(f("pages"), *pages, 2, "")?;
            if *page_bytes < 4096 || page_bytes % 4096 != 0 {
                return err(f("page_bytes"), "must be a multiple of 4096");
            }
            if pages.saturating_mul(*page_bytes) / 8 >= 1 << 32 {
                return err(f("pages"), "pages x page_bytes must stay under 32 GiB");
            }
            Ok(())
        }
        Load::Icache { functions } => {
            if !(1..=MAX_FUNCTIONS).contains(functions) {
                return err(f("functions"), format!("{functions} is out of range; use 1..{MAX_FUNCTIONS}"));
            }
            Ok(())
        }
        Load::Fileio { bytes, dir, .. } => {
            at_least(f("bytes"), *bytes, 4096, " bytes")?;
            if let Some(d) = dir {
                let p = std::path::Path::new(d);
                let c = std::ffi::CString::new(d.as_bytes()).map_err(|_| PlanError { field: f("dir"), message: "holds a NUL byte".into() })?;
                if !p.is_dir() || unsafe { libc::access(c.as_ptr(), libc::W_OK) } != 0 {
                    return err(f("dir"), format!("'{d}' is not a writable directory; create it or leave `dir` out for $TMPDIR"));
                }
            }
            Ok(())
        }
        Load::Net { proto, message_bytes } => {
            let max = if *proto == Proto::Udp { 65_000 } else { 16 << 20 };
            if !(1..=max).contains(message_bytes) {
                return err(f("message_bytes"), format!("{message_bytes} is out of range; use 1..{max} for {}", if *proto == Proto::Udp { "udp" } else { "tcp" }));
            }
            Ok(())
        }
        Load::Timer { interval_ns } => {
            if !(1_000..=1_000_000_000).contains(interval_ns) {
                return err(f("interval_ns"), format!("{interval_ns} is out of range; use 1000 (1 us) .. 1000000000 (1 s)"));
            }
            Ok(())
        }
        Load::External { argv, rate_regex, unit } => {
            let Some(cmd) = argv.first().filter(|c| !c.is_empty()) else {
                return err(f("argv"), "is empty; give the command and its arguments, e.g. [\"stress-ng\", \"--cpu\", \"1\"]");
            };
            if find_command(cmd).is_none() {
                return err(f("argv[0]"), format!("'{cmd}' is not an executable file nor found on PATH; install it or give its full path"));
            }
            if let Some(r) = rate_regex {
                match regex::Regex::new(r) {
                    Err(e) => return err(f("rate_regex"), format!("is not a valid regex: {}", e.to_string().lines().last().unwrap_or(""))),
                    Ok(re) if re.captures_len() < 2 => return err(f("rate_regex"), "needs one capture group around the number, e.g. \"([0-9.]+) bogo ops\""),
                    _ => {}
                }
            }
            if unit.is_empty() {
                return err(f("unit"), "must not be empty");
            }
            Ok(())
        }
        Load::Pi {} | Load::Branch { .. } | Load::Pingpong {} | Load::Falseshare {} | Load::Syscall {} | Load::Fork { .. } => Ok(()),
    }
}

/// The executable a command name resolves to: a path, or the first match on PATH.
fn find_command(cmd: &str) -> Option<std::path::PathBuf> {
    let exec = |p: &std::path::Path| {
        let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).ok()?;
        (p.is_file() && unsafe { libc::access(c.as_ptr(), libc::X_OK) } == 0).then(|| p.to_path_buf())
    };
    if cmd.contains('/') {
        return exec(std::path::Path::new(cmd));
    }
    std::env::var_os("PATH").and_then(|path| std::env::split_paths(&path).find_map(|d| exec(&d.join(cmd))))
}
