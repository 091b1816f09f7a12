//! Checks a parsed plan against itself and against the machine (CPUs, privileges, memory)
//! before anything is started. Every error names the field and the fix. The machine is the
//! facts of observe/facts.rs: this one, or a recorded fixture ($XTALK_MACHINE).

use crate::enemies;
use crate::plan::{err, refused, Enemy, Placement, Plan, PlanError, Sched, Victim, PLAN_VERSION};
use crate::observe::facts::{self, Machine};
use crate::observe::{machine, perf, trace};

pub use crate::victims::taskset::{DL_MIN_RUNTIME_NS, MAX_TASKS};

pub fn check(plan: &Plan) -> Result<(), PlanError> {
    if plan.version != PLAN_VERSION {
        return err("version", format!("plan version {} is not supported; this agent reads version {PLAN_VERSION}", plan.version));
    }
    if plan.run_id.is_empty() || plan.run_id.contains('/') {
        return err("run_id", "must be a non-empty name without '/'");
    }
    crate::bounds::check(plan)?;
    if !(plan.settle_ms >= 0.0 && plan.settle_ms <= 60_000.0) {
        return err("settle_ms", "must be between 0 and 60000");
    }
    if let Some(t) = &plan.trace {
        check_trace(t)?;
    }
    let m = facts::current();
    let (online, allowed) = (m.online.clone(), m.allowed.clone());
    check_names(plan)?;
    check_victim("victim", &plan.victim, &online, &allowed)?;
    let mut footprint = crate::victims::footprint(&plan.victim.body);
    for (i, a) in plan.applications.iter().enumerate() {
        check_victim(&format!("applications[{i}]"), a, &online, &allowed)?;
        footprint = footprint.saturating_add(crate::victims::footprint(&a.body));
    }
    for (i, e) in plan.enemies.iter().enumerate() {
        check_enemy(i, e, &online, &allowed)?;
        if plan.enemies[..i].iter().any(|o| o.name == e.name) {
            return err(format!("enemies[{i}].name"), format!("'{}' is used twice; give each enemy its own name", e.name));
        }
        footprint = footprint.saturating_add(enemies::footprint(&e.load));
    }
    check_groups(plan, &online)?;
    check_deadline_admission(plan, &online)?;
    if let Some(r) = &plan.regulator {
        check_regulator(plan, r)?;
    }
    let avail = m.mem_available;
    if avail > 0 && footprint > avail / 10 * 9 {
        return err("enemies", format!("the measured processes and enemies need {} MiB but only {} MiB are available; use smaller buffers",
            footprint >> 20, avail >> 20));
    }
    let needed_s = crate::victims::run_seconds(plan);
    if !(plan.timeout_s > needed_s) {
        return err("timeout_s", format!("{} s is shorter than the run itself ({needed_s:.3} s); raise it", plan.timeout_s));
    }
    Ok(())
}

/// A measured process's name becomes a directory (`applications/<name>/`) and a value of
/// the results' `application` column.
fn valid_name(n: &str) -> bool {
    (1..=64).contains(&n.len()) && n.chars().all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c)) && n != "." && n != ".."
}

/// Names of the measured processes: well formed, unique; `may_fail` for applications only.
fn check_names(plan: &Plan) -> Result<(), PlanError> {
    if let Some(n) = &plan.victim.name {
        if !valid_name(n) {
            return err("victim.name", format!("'{n}' is not a name: 1 to 64 letters, digits, '_', '.' or '-'"));
        }
    }
    if plan.victim.may_fail {
        return err("victim.may_fail", "only applications may fail while the run goes on; remove it from the victim");
    }
    for (i, a) in plan.applications.iter().enumerate() {
        let Some(n) = &a.name else {
            return err(format!("applications[{i}].name"), "is required: give each application a name");
        };
        if !valid_name(n) {
            return err(format!("applications[{i}].name"), format!("'{n}' is not a name: 1 to 64 letters, digits, '_', '.' or '-'"));
        }
        if plan.victim.name() == n || plan.applications[..i].iter().any(|o| o.name() == n) {
            return err(format!("applications[{i}].name"), format!("'{n}' is used twice; names are unique across the victim and the applications"));
        }
    }
    Ok(())
}


fn check_victim(at: &str, v: &Victim, online: &[usize], allowed: &[usize]) -> Result<(), PlanError> {
    crate::victims::checked(v, at, online)?;
    if v.period_ns < 10_000 {
        return err(format!("{at}.period_ns"), "must be at least 10000 (10 us)");
    }
    if v.jobs == 0 {
        return err(format!("{at}.jobs"), "must be at least 1");
    }
    if v.deadline_ns == Some(0) {
        return err(format!("{at}.deadline_ns"), "must be positive, or absent for deadline = period");
    }
    check_counters(at, v)?;
    check_placement(at, &v.placement, online, allowed)?;
    check_sched(at, &v.sched, &v.placement, online)?;
    check_lock(at, v.lock_memory, crate::victims::footprint(&v.body))
}

/// Why the machine the facts describe has no resctrl for `g`'s cache or bandwidth share.
fn resctrl_unavailable(g: &crate::plan::Group) -> Option<String> {
    let m = facts::current();
    let (mount, supported) = match &m.fixture {
        Some(f) => (f.doc["capabilities"]["resctrl"]["mount"].as_str().map(std::path::PathBuf::from),
                    f.doc["capabilities"]["resctrl"]["supported"].as_bool().unwrap_or(false)),
        None => (crate::launch::resctrl::mount(), std::fs::read_to_string("/proc/filesystems").is_ok_and(|s| s.contains("resctrl"))),
    };
    crate::launch::resctrl::unavailable(g, mount.as_deref(), supported)
}

fn check_groups(plan: &Plan, online: &[usize]) -> Result<(), PlanError> {
    for (i, g) in plan.groups.iter().enumerate() {
        let at = format!("groups[{i}]");
        if g.name.is_empty() || !g.name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
            return err(format!("{at}.name"), "letters, digits, '_' and '-' only");
        }
        if plan.groups[..i].iter().any(|o| o.name == g.name) {
            return err(format!("{at}.name"), format!("'{}' is used twice", g.name));
        }
        if g.name == crate::launch::cgroups::RUN_GROUP {
            return err(format!("{at}.name"), format!("'{}' is the run's own group; choose another name", g.name));
        }
        if let Some(c) = &g.cpus {
            if c.is_empty() {
                return err(format!("{at}.cpus"), "a cpuset with no CPU can run nothing; list CPUs or leave cpus out");
            }
            if let Some(bad) = c.iter().find(|x| !online.contains(x)) {
                return err(format!("{at}.cpus"), format!("CPU {bad} does not exist or is offline; online: {}", machine::cpu_list(online)));
            }
        }
        if g.cpu_quota_us == Some(0) || g.cpu_period_us.map_or(false, |p| !(1000..=1_000_000).contains(&p)) {
            return err(format!("{at}.cpu_quota_us"), "quota must be positive and the period 1000..1000000 us");
        }
        if let Some(rt) = g.rt_runtime_us {
            let period = g.rt_period_us.unwrap_or(1_000_000) as i64;
            if rt <= 0 || rt > period {
                return err(format!("{at}.rt_runtime_us"), format!("must be in 1..=rt_period_us ({period})"));
            }
        }
        if g.pids_max == Some(0) {
            return err(format!("{at}.pids_max"), "must be at least 1");
        }
        if g.memory_max.map_or(false, |m| m < 4 << 20) {
            return err(format!("{at}.memory_max"), "must be at least 4 MiB");
        }
        if g.isolated && g.cpus.is_none() {
            return err(format!("{at}.cpus"), "an isolated partition needs its CPUs listed (and the others left to the system)");
        }
        if let Some(io) = &g.io_max {
            if io.paths.is_empty() && io.devices.is_empty() {
                return err(format!("{at}.io_max"), "name the devices (\"MAJ:MIN\") or the paths whose disks it limits");
            }
            if [io.rbps, io.wbps, io.riops, io.wiops].iter().all(|x| x.is_none()) || [io.rbps, io.wbps, io.riops, io.wiops].contains(&Some(0)) {
                return err(format!("{at}.io_max"), "give at least one of rbps, wbps, riops, wiops, each at least 1");
            }
        }
        if g.cache_ways.as_ref().is_some_and(|w| w.is_empty()) || g.mb_percent.is_some_and(|p| !(1..=100).contains(&p)) {
            return err(format!("{at}.cache_ways"), "cache_ways lists at least one way; mb_percent is 1..=100");
        }
        if let Some(why) = resctrl_unavailable(g) {
            return refused(at, format!("this kernel cannot provide it: {why}"));
        }
        let needs = match crate::launch::cgroups::settings(g) {
            Err(why) => return refused(at, format!("this kernel cannot provide it: {why}")),
            Ok(v) => v,
        };
        check_group_hierarchies(&at, needs.iter().map(|(c, _, _)| *c))?;
    }
    if let Some(max) = plan.pids_max {
        // The agent's children, plus each measured process's helpers (AOCS reader and comparer, a spawn child).
        let least = plan.enemies.len() as u64 + 4 + 3 * plan.applications.len() as u64;
        if max < least {
            return err("pids_max", format!("{max} cannot hold the run's own {least} processes; raise it to at least {least}"));
        }
        if facts::current().controller("pids").is_none() {
            return err("pids_max", "the pids controller is not mounted; mount it or leave pids_max out");
        }
        check_group_hierarchies("pids_max", ["pids"].into_iter())?;
    }
    let known = |name: &Option<String>, at: String| -> Result<(), PlanError> {
        match name {
            Some(n) if !plan.groups.iter().any(|g| &g.name == n) => err(at, format!("no group named '{n}' in groups")),
            _ => Ok(()),
        }
    };
    known(&plan.victim.group, "victim.group".into())?;
    for (i, a) in plan.applications.iter().enumerate() {
        known(&a.group, format!("applications[{i}].group"))?;
    }
    for (i, e) in plan.enemies.iter().enumerate() {
        known(&e.group, format!("enemies[{i}].group"))?;
    }
    if let Some(h) = &plan.housekeeping_cpus {
        if h.is_empty() || h.iter().any(|c| !online.contains(c)) {
            return err("housekeeping_cpus", format!("list online CPUs ({})", machine::cpu_list(online)));
        }
    }
    if plan.steer_irqs && plan.housekeeping_cpus.is_none() {
        return err("steer_irqs", "needs housekeeping_cpus (where the interrupts go)");
    }
    Ok(())
}

/// The hierarchies of `controllers` where the run makes its groups, tried on a live machine
/// (crate::preflight::cgroup_usable); a fixture records no such state.
fn check_group_hierarchies(at: &str, controllers: impl Iterator<Item = &'static str>) -> Result<(), PlanError> {
    let m = facts::current();
    if m.fixture.is_some() || !m.root {
        return Ok(());
    }
    for c in controllers {
        if let Some(ctl) = m.controller(c) {
            crate::preflight::cgroup_usable(&ctl).or_else(|why| refused(at, why))?;
        }
    }
    Ok(())
}

/// SCHED_DEADLINE bandwidth of the whole plan against the kernel's admission limit.
fn check_deadline_admission(plan: &Plan, online: &[usize]) -> Result<(), PlanError> {
    let bw = |s: &Sched| match *s {
        Sched::Deadline { runtime_ns, period_ns, .. } => runtime_ns as f64 / period_ns as f64,
        _ => 0.0,
    };
    let total = plan.measured().map(|v| bw(&v.sched)).sum::<f64>() + plan.enemies.iter().map(|e| bw(&e.sched)).sum::<f64>();
    if total == 0.0 {
        return Ok(());
    }
    let m = facts::current();
    let (rt, period) = (m.rt_runtime_us.map_or(950_000.0, |v| v as f64), m.rt_period_us.map_or(1e6, |v| v as f64));
    let limit = if rt < 0.0 { online.len() as f64 } else { online.len() as f64 * rt / period };
    if total > limit {
        return err("victim.sched", format!("SCHED_DEADLINE bandwidth of the plan is {total:.2} CPUs, above the admission limit {limit:.2} ({} CPUs × {rt}/{period}); lower the runtimes", online.len()));
    }
    Ok(())
}

fn check_regulator(plan: &Plan, r: &crate::plan::Regulator) -> Result<(), PlanError> {
    if !(1000..=100_000).contains(&r.period_us) {
        return err("regulator.period_us", "regulation period must be 1000..100000 us (1–100 ms)");
    }
    match (r.budget_bytes, r.target_exec_ns) {
        (Some(0), _) => return err("regulator.budget_bytes", "a budget of zero starves the enemies; give bytes per period"),
        (None, None) => return err("regulator", "give budget_bytes (budget mode) or target_exec_ns (feedback mode)"),
        (Some(_), Some(_)) => return err("regulator", "budget_bytes and target_exec_ns are two modes; choose one"),
        _ => {}
    }
    if !(1..=99).contains(&r.priority) {
        return err("regulator.priority", "1..99");
    }
    if r.source == crate::plan::Source::Hardware {
        perf::resolve(&r.event).or_else(|e| err("regulator.event", e))?;
        if let Err(why) = facts::current().counter(&r.event, false) {
            return err("regulator.source", format!("hardware accounting counts '{}', which this machine cannot: {why}; use source = \"cooperative\" (offered: {})",
                r.event, facts::current().countable(false).join(", ")));
        }
        if r.bytes_per_event == 0 {
            return err("regulator.bytes_per_event", "must be positive (64: one cache line per miss)");
        }
    }
    if plan.enemies.is_empty() {
        return err("regulator", "there is no enemy to regulate in this plan");
    }
    for (i, n) in r.enemies.iter().enumerate() {
        if !plan.enemies.iter().any(|e| &e.name == n) {
            return err(format!("regulator.enemies[{i}]"), format!("no enemy named '{n}'"));
        }
    }
    if r.throttle == crate::plan::Throttle::Freeze {
        for e in plan.enemies.iter().filter(|e| r.enemies.is_empty() || r.enemies.contains(&e.name)) {
            let ok = e.group.as_ref().and_then(|g| plan.groups.iter().find(|x| &x.name == g)).map_or(false, |g| g.freezable);
            if !ok {
                return err("regulator.throttle", format!("'freeze' needs enemy '{}' in a group with freezable = true", e.name));
            }
        }
    }
    // The regulator itself runs at SCHED_FIFO: where the kernel refuses that (a cgroup
    // without RT runtime, as in a container) the run would fail at set-up; say so now.
    let m = facts::current();
    let fifo = Sched::Fifo { priority: r.priority };
    m.try_sched(&fifo).or_else(|e| refused("regulator", format!("the regulator runs at SCHED_FIFO: {}", crate::preflight::refusal(&fifo, &e, m))))?;
    Ok(())
}

fn check_trace(t: &crate::plan::Trace) -> Result<(), PlanError> {
    if !(64..=1 << 20).contains(&t.buffer_kb) {
        return err("trace.buffer_kb", "must be between 64 and 1048576 (KiB per CPU)");
    }
    if t.events.is_empty() {
        return err("trace.events", "is empty; leave it out for the default set");
    }
    for (i, ev) in t.events.iter().enumerate() {
        trace::valid_event_name(ev).or_else(|why| err(format!("trace.events[{i}]"), why))?;
    }
    check_segments(t)?;
    let m = facts::current();
    m.trace_events(&t.events).map_err(|(field, message)| PlanError { field, message, machine: false })?;
    if m.fixture.is_none() {
        // The files the run will write, opened for writing (crate::preflight).
        trace::with_tracefs(|root| crate::preflight::tracefs_writable(root, &t.events)).or_else(|why| err("trace", why))?;
    }
    Ok(())
}

/// Segments are the host's to compute; their names must be sane and their events traced
/// (src/xtalk/plan.py `segment_problem` says the same).
fn check_segments(t: &crate::plan::Trace) -> Result<(), PlanError> {
    if t.segments.len() > 32 {
        return err("trace.segments", "at most 32 segments per run");
    }
    let short = |e: &str| e.rsplit(':').next().unwrap_or(e).to_string();
    let traced: Vec<String> = t.events.iter().map(|e| short(e)).collect();
    let ident = |s: &str, max: usize| !s.is_empty() && s.len() <= max && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    for (i, s) in t.segments.iter().enumerate() {
        let at = format!("trace.segments[{i}]");
        if !ident(&s.name, 48) || !s.name.as_bytes()[0].is_ascii_lowercase() {
            return err(format!("{at}.name"), format!("'{}' is not a segment name: lower-case letters, digits and '_', a letter first", s.name.escape_debug()));
        }
        if t.segments[..i].iter().any(|o| o.name == s.name) {
            return err(format!("{at}.name"), format!("'{}' is given twice", s.name));
        }
        if s.occurrence != "first" && s.occurrence != "last" {
            return err(format!("{at}.occurrence"), "must be \"first\" or \"last\"");
        }
        for (key, end) in [("start", &s.start), ("end", &s.end)] {
            trace::valid_event_name(&end.event).or_else(|why| err(format!("{at}.{key}.event"), why))?;
            if !t.events.contains(&end.event) && !traced.contains(&short(&end.event)) {
                return err(format!("{at}.{key}.event"), format!("'{}' is not traced; add it to trace.events", end.event));
            }
            for (f, v) in &end.filter {
                if !ident(f, 64) {
                    return err(format!("{at}.{key}.where"), format!("'{}' is not a field name", f.escape_debug()));
                }
                if !(v.is_i64() || v.is_u64() || v.is_string()) {
                    return err(format!("{at}.{key}.where.{f}"), "give an integer or a string");
                }
            }
        }
    }
    Ok(())
}

fn check_counters(at: &str, v: &Victim) -> Result<(), PlanError> {
    if v.counters.len() > perf::MAX_EVENTS {
        return err(format!("{at}.counters"), format!("{} counters; at most {} per run", v.counters.len(), perf::MAX_EVENTS));
    }
    for (i, c) in v.counters.iter().enumerate() {
        let field = format!("{at}.counters[{i}].event");
        perf::resolve(&c.event).or_else(|e| err(&field, e))?;
        let m = facts::current();
        if let Err(why) = m.counter(&c.event, v.counters_exclude_kernel) {
            if !c.optional {
                return err(field, format!("'{}' cannot be counted here: {why}; this machine offers: {}; or mark it optional = true",
                    c.event, m.countable(v.counters_exclude_kernel).join(", ")));
            }
        }
        if v.counters[..i].iter().any(|o| o.event == c.event) {
            return err(field, format!("'{}' is listed twice", c.event));
        }
    }
    if facts::current().fixture.is_none() {
        // Each event opens alone; the run opens them as one group, which a PMU with fewer
        // counters than asked refuses: that group opened for real and closed again.
        let (active, _) = perf::select(&v.counters, v.counters_exclude_kernel);
        if !active.is_empty() {
            if let Err(why) = perf::Group::open(&active, v.counters_exclude_kernel) {
                return err(format!("{at}.counters"), format!("the {} counters cannot be counted together in one group ({why}); the PMU has fewer \
                    counters than asked: count fewer, or mark some optional = true", active.len()));
            }
        }
    }
    Ok(())
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
    // The load's parameters, as its kind declares them (enemies/<kind>.rs).
    let args = enemies::checked(&e.load, &format!("{at}.load"))?;
    if e.huge_pages && args.kind.small_pages {
        return err(format!("{at}.huge_pages"), format!("'{}' needs 4 KiB pages; set huge_pages = false", e.load.kind));
    }
    check_placement(&at, &e.placement, online, allowed)?;
    check_sched(&at, &e.sched, &e.placement, online)?;
    check_lock(&at, e.lock_memory, args.footprint())
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
    let m = facts::current();
    let privileged = m.cap_sys_nice;
    match *s {
        Sched::Other { nice } => {
            if !(-20..=19).contains(&nice) {
                return err(f("nice"), format!("{nice} is out of range; use -20..19"));
            }
            if nice < 0 && !privileged && m.nice_floor > nice {
                return err(f("nice"), "a negative nice needs CAP_SYS_NICE or RLIMIT_NICE; run as root or use nice >= 0");
            }
        }
        Sched::Fifo { priority } | Sched::Rr { priority } => {
            if !(1..=99).contains(&priority) {
                return err(f("priority"), format!("{priority} is out of range; use 1..99"));
            }
            if !privileged && (m.rlimit_rtprio.min(i64::MAX as u64) as i64) < priority as i64 {
                return refused(f("policy"), "a real-time policy needs CAP_SYS_NICE (or RLIMIT_RTPRIO); run as root or use policy 'other'");
            }
            preflight_sched(at, s, m)?;
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
                return refused(f("policy"), "SCHED_DEADLINE needs CAP_SYS_NICE; run as root or use policy 'other'");
            }
            if let Some(cpus) = &p.cpus {
                if online.iter().any(|c| !cpus.contains(c)) {
                    return err(format!("{at}.placement.cpus"), "SCHED_DEADLINE tasks may not be pinned to a subset of the root domain; leave placement unpinned (or use an exclusive cpuset)");
                }
            }
            preflight_sched(at, s, m)?;
        }
    }
    Ok(())
}

/// The policy tried for real in a throwaway child (crate::preflight), or its outcome as a
/// fixture recorded it: what the kernel will refuse is refused here, with its cause, before
/// anything starts.
fn preflight_sched(at: &str, s: &Sched, m: &Machine) -> Result<(), PlanError> {
    m.try_sched(s).or_else(|e| refused(format!("{at}.sched.policy"), crate::preflight::refusal(s, &e, m)))
}

fn check_lock(at: &str, lock: bool, footprint: u64) -> Result<(), PlanError> {
    use std::sync::atomic::{AtomicU64, Ordering};
    /// The largest size already locked for real in this check: a smaller one needs no new try.
    static LOCKED: AtomicU64 = AtomicU64::new(u64::MAX);
    if !lock {
        return Ok(());
    }
    let m = facts::current();
    if m.fixture.is_none() {
        // Live: the planned size locked for real in a throwaway child (crate::preflight).
        let done = LOCKED.load(Ordering::Relaxed);
        if done != u64::MAX && footprint <= done {
            return Ok(());
        }
        crate::preflight::lock(footprint).or_else(|why| err(format!("{at}.lock_memory"), why))?;
        LOCKED.store(footprint.max(if done == u64::MAX { 0 } else { done }), Ordering::Relaxed);
        return Ok(());
    }
    if !m.cap_ipc_lock {
        let lim = m.rlimit_memlock;
        if lim != u64::MAX && lim < footprint + (64 << 20) {
            return err(format!("{at}.lock_memory"), format!("needs CAP_IPC_LOCK or RLIMIT_MEMLOCK >= {} MiB (now {} KiB); run as root or set lock_memory = false", (footprint >> 20) + 64, lim >> 10));
        }
    }
    Ok(())
}


/// The plan's applications (measured processes beside the victim) are judged like the
/// victim: names well formed and unique, `may_fail` for applications only, and each body,
/// period and count refused with the application's own field named.
#[cfg(test)]
mod apps_tests {
    use crate::plan::{parse, PlanError};
    use serde_json::{json, Value};

    fn base() -> Value {
        json!({
            "version": 1, "run_id": "apps", "timeout_s": 30.0, "settle_ms": 10.0,
            "victim": {"body": {"kind": "sum", "bytes": 65536}, "period_ns": 1_000_000, "jobs": 10},
            "applications": [
                {"name": "b", "body": {"kind": "pi", "iterations": 1000}, "period_ns": 2_000_000, "jobs": 5},
                {"name": "c", "may_fail": true, "body": {"kind": "sum", "bytes": 4096}, "period_ns": 1_000_000, "jobs": 5},
            ],
        })
    }

    fn judged(plan: &Value) -> Result<(), PlanError> {
        let p = parse(&plan.to_string())?;
        super::check(&p)
    }

    /// The plan is refused and the error names `field`, with `hint` in its message.
    fn refused(plan: Value, field: &str, hint: &str) {
        let e = judged(&plan).expect_err(&format!("{field} should be refused"));
        assert_eq!(e.field, field, "{e}");
        assert!(e.message.contains(hint), "{e}");
    }

    #[test]
    fn a_plan_with_applications_is_accepted_and_written_back() {
        judged(&base()).unwrap();
        let p = parse(&base().to_string()).unwrap();
        assert_eq!(p.measured().map(|v| v.name()).collect::<Vec<_>>(), ["victim", "b", "c"]);
        assert!(p.applications[1].may_fail && !p.applications[0].may_fail);
        let back = serde_json::to_value(&p).unwrap();
        assert_eq!((&back["applications"][0]["name"], &back["applications"][1]["may_fail"]), (&json!("b"), &json!(true)));
        assert!(back["applications"][0].get("may_fail").is_none(), "may_fail = false is left out");
        // A plan without applications writes back without the new keys (old run.json files).
        let mut solo = base();
        solo.as_object_mut().unwrap().remove("applications");
        let back = serde_json::to_value(parse(&solo.to_string()).unwrap()).unwrap();
        assert!(back.get("applications").is_none() && back["victim"].get("name").is_none() && back["victim"].get("may_fail").is_none());
    }

    #[test]
    fn the_run_lasts_as_long_as_its_longest_measured_process() {
        let p = parse(&base().to_string()).unwrap();
        // victim 10 x 1 ms, b 5 x 2 ms, c 5 x 1 ms: 10 ms, plus 10 ms settle.
        assert!((crate::victims::run_seconds(&p) - 0.020).abs() < 1e-9, "{}", crate::victims::run_seconds(&p));
        let mut long = base();
        long["applications"][0]["jobs"] = json!(20_000); // 40 s, past timeout_s = 30
        refused(long, "timeout_s", "shorter than the run");
    }

    #[test]
    fn duplicate_names_are_refused() {
        let mut p = base();
        p["applications"][1]["name"] = json!("b");
        refused(p, "applications[1].name", "used twice");
        let mut p = base();
        p["applications"][0]["name"] = json!("victim");
        refused(p, "applications[0].name", "used twice");
        let mut p = base();
        p["victim"]["name"] = json!("c");
        refused(p, "applications[1].name", "used twice");
    }

    #[test]
    fn bad_names_and_a_missing_name_are_refused() {
        for bad in ["", "a/b", "..", "x y", &"n".repeat(65)] {
            let mut p = base();
            p["applications"][0]["name"] = json!(bad);
            refused(p, "applications[0].name", "not a name");
        }
        let mut p = base();
        p["victim"]["name"] = json!("a/b");
        refused(p, "victim.name", "not a name");
        let mut p = base();
        p["applications"][0].as_object_mut().unwrap().remove("name");
        refused(p, "applications[0].name", "required");
    }

    #[test]
    fn may_fail_is_for_applications_only() {
        let mut p = base();
        p["victim"]["may_fail"] = json!(true);
        refused(p, "victim.may_fail", "only applications");
    }

    #[test]
    fn an_application_with_a_bad_body_or_count_is_refused_with_its_own_field() {
        let mut p = base();
        p["applications"][1]["body"] = json!({"kind": "sum", "bytes": 1});
        refused(p, "applications[1].body.bytes", "at least 8");
        let mut p = base();
        p["applications"][0]["jobs"] = json!(0);
        refused(p, "applications[0].jobs", "at least 1");
        let mut p = base();
        p["applications"][0]["period_ns"] = json!(10);
        refused(p, "applications[0].period_ns", "at least 10000");
        let mut p = base();
        p["applications"][0]["body"] = json!({"kind": "command", "argv": ["/no/such/program"]});
        p["applications"][0]["jobs"] = json!(1);
        refused(p, "applications[0].body.argv[0]", "not an executable");
        let mut p = base();
        p["applications"][0]["placement"] = json!({"cpus": [4096]});
        refused(p, "applications[0].placement.cpus[0]", "does not exist");
        let mut p = base();
        p["applications"][0]["group"] = json!("nowhere");
        refused(p, "applications[0].group", "no group named");
        let mut p = base();
        p["applications"][0]["jobs"] = json!(crate::plan::MAX_JOBS + 1);
        refused(p, "applications[0].jobs", "above the limit");
        let mut p = base();
        p["applications"][0]["bogus"] = json!(1);
        let e = judged(&p).unwrap_err();
        assert!(e.field.starts_with("applications[0]") && e.message.contains("bogus"), "{e}");
    }

    #[test]
    fn more_applications_than_the_control_block_holds_are_refused() {
        let mut p = base();
        let one = p["applications"][0].clone();
        p["applications"] = (0..=crate::plan::MAX_APPLICATIONS).map(|i| {
            let mut a = one.clone();
            a["name"] = json!(format!("a{i}"));
            a
        }).collect();
        refused(p, "applications", "at most");
    }
}
