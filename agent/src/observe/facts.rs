//! The machine facts a plan is checked against — CPUs, memory, privileges, cgroup layout, RT
//! throttling, which policies the kernel lets this process take, countable events, tracefs —
//! read either from the live system or from a recorded machine fixture (`XTALK_MACHINE=FILE`,
//! the JSON `xtalk-agent sysinfo` prints). One struct, two sources: `check` and the pre-flight
//! ask it and never the system directly, so a plan for a machine one does not have is
//! checked as that machine would check it. A fixture is for planning only: `run` refuses it.

use super::cgroupfs::{self, Controller, Version};
use crate::observe::machine;
use crate::plan::Sched;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::OnceLock;

/// The environment variable naming a machine fixture.
pub const ENV_VAR: &str = "XTALK_MACHINE";
/// Version of the facts in `sysinfo`'s document (bumped when a fixture must be re-recorded).
pub const FACTS_VERSION: u64 = 1;

/// What a plan is checked against. Plain facts are read once; what must be tried for real
/// on a live machine (policies, counters, tracefs) goes through the methods below.
pub struct Machine {
    /// Some when the facts come from a recorded fixture.
    pub fixture: Option<Fixture>,
    pub online: Vec<usize>,
    /// CPUs this process may run on (cpuset and affinity).
    pub allowed: Vec<usize>,
    pub mem_available: u64,
    pub root: bool,
    pub cap_sys_nice: bool,
    pub cap_ipc_lock: bool,
    pub rlimit_rtprio: u64,
    pub rlimit_memlock: u64,
    /// Lowest nice value allowed without privilege.
    pub nice_floor: i32,
    /// kernel.sched_rt_runtime_us / sched_rt_period_us (-1: no throttling).
    pub rt_runtime_us: Option<i64>,
    pub rt_period_us: Option<i64>,
    /// The cpu-controller group this process sits in and its cpu.rt_runtime_us, if readable.
    pub cpu_group: Option<(PathBuf, Option<i64>)>,
}

/// What only a fixture holds: its path and document, and the recorded outcomes of what a
/// live machine would try for real.
pub struct Fixture {
    pub path: PathBuf,
    pub doc: Value,
    controllers: Vec<Controller>,
    rt_group_files: bool,
    policies: serde_json::Map<String, Value>,
    countable: Vec<String>,
    tracefs: Option<String>,
}

static CURRENT: OnceLock<Machine> = OnceLock::new();

/// The facts every command uses: the fixture named by $XTALK_MACHINE, else the live machine.
/// Err (one line) when the fixture cannot be used.
pub fn init() -> Result<&'static Machine, String> {
    if let Some(m) = CURRENT.get() {
        return Ok(m);
    }
    let m = match std::env::var_os(ENV_VAR).filter(|v| !v.is_empty()) {
        Some(p) => Machine::from_fixture(PathBuf::from(p))?,
        None => Machine::live(),
    };
    Ok(CURRENT.get_or_init(|| m))
}

/// The current facts (`init` first; a bad fixture was refused there).
pub fn current() -> &'static Machine {
    init().unwrap_or_else(|e| panic!("{e}"))
}

/// Kernel errno names recorded in fixtures (readable, stable across architectures).
const ERRNOS: &[(&str, i32)] = &[("EPERM", libc::EPERM), ("EACCES", libc::EACCES), ("EBUSY", libc::EBUSY), ("EINVAL", libc::EINVAL), ("ENOSYS", libc::ENOSYS)];

fn errno_name(code: i32) -> String {
    ERRNOS.iter().find(|(_, c)| *c == code).map(|(n, _)| n.to_string()).unwrap_or_else(|| format!("errno {code}"))
}

fn errno_code(name: &str) -> Option<i32> {
    ERRNOS.iter().find(|(n, _)| *n == name).map(|(_, c)| *c).or_else(|| name.strip_prefix("errno ")?.parse().ok())
}

/// The policy key of `s` in the fixture's `policies` (None: nothing to try).
fn policy_key(s: &Sched) -> Option<&'static str> {
    match *s {
        Sched::Fifo { .. } => Some("fifo"),
        Sched::Rr { .. } => Some("rr"),
        Sched::Deadline { .. } => Some("deadline"),
        Sched::Other { nice } if nice < 0 => Some("nice"),
        Sched::Other { .. } => None,
    }
}

/// The policies `sysinfo` tries in throwaway children: the lowest real-time priority, a 1 %
/// DEADLINE reservation, nice -1. Their outcome is what a fixture records.
fn probe_policies() -> [(&'static str, Sched); 4] {
    [
        ("fifo", Sched::Fifo { priority: 1 }),
        ("rr", Sched::Rr { priority: 1 }),
        ("deadline", Sched::Deadline { runtime_ns: 100_000, deadline_ns: 10_000_000, period_ns: 10_000_000 }),
        ("nice", Sched::Other { nice: -1 }),
    ]
}

/// The cpu-controller group this process sits in and its RT runtime (v1 cpu.rt_runtime_us).
fn live_cpu_group() -> Option<(PathBuf, Option<i64>)> {
    let ctl = cgroupfs::controller("cpu")?;
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let rel = own.lines().find_map(|l| {
        let mut f = l.splitn(3, ':');
        let (_, names, path) = (f.next()?, f.next()?, f.next()?);
        let v1 = names.split(',').any(|n| n == "cpu");
        ((ctl.version == Version::V1 && v1) || (ctl.version == Version::V2 && names.is_empty())).then(|| path.to_string())
    })?;
    let dir = ctl.mount.join(rel.trim_start_matches('/'));
    let runtime = std::fs::read_to_string(dir.join("cpu.rt_runtime_us")).ok().and_then(|t| t.trim().parse().ok());
    Some((dir, runtime))
}

fn read_i64(path: &str) -> Option<i64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// u64::MAX (unlimited) is written as null.
fn limit(v: u64) -> Value {
    if v == u64::MAX { Value::Null } else { json!(v) }
}

impl Machine {
    /// The facts of the machine this agent runs on.
    pub fn live() -> Machine {
        Machine {
            fixture: None,
            online: machine::online_cpus(),
            allowed: machine::allowed_cpus(),
            mem_available: machine::mem_available_bytes(),
            root: unsafe { libc::geteuid() } == 0,
            cap_sys_nice: machine::has_cap_sys_nice(),
            cap_ipc_lock: machine::has_cap_ipc_lock(),
            rlimit_rtprio: machine::rlimit_rtprio(),
            rlimit_memlock: machine::rlimit_memlock(),
            nice_floor: machine::rlimit_nice_floor(),
            rt_runtime_us: read_i64("/proc/sys/kernel/sched_rt_runtime_us"),
            rt_period_us: read_i64("/proc/sys/kernel/sched_rt_period_us"),
            cpu_group: live_cpu_group(),
        }
    }

    /// The facts recorded in a fixture (the JSON of `xtalk-agent sysinfo`, facts_version 1).
    pub fn from_fixture(path: PathBuf) -> Result<Machine, String> {
        let at = format!("{ENV_VAR}={}", path.display());
        let text = std::fs::read_to_string(&path).map_err(|e| format!("{at}: cannot read the machine fixture: {e}"))?;
        let doc: Value = serde_json::from_str(&text).map_err(|e| format!("{at}: not a machine fixture (JSON): {e}"))?;
        let fix = "; record one with `xtalk sysinfo --record FILE`";
        match doc["facts_version"].as_u64() {
            Some(FACTS_VERSION) => {}
            Some(v) => return Err(format!("{at}: facts_version {v} is not supported; this agent reads version {FACTS_VERSION}{fix}")),
            None => return Err(format!("{at}: facts_version is missing{fix}")),
        }
        let field = |p: &str| -> Result<&Value, String> {
            let v = doc.pointer(p).filter(|v| !v.is_null()).ok_or_else(|| format!("{at}: {} is missing{fix}", p.trim_start_matches('/').replace('/', ".")))?;
            Ok(v)
        };
        let str_of = |p: &str| -> Result<String, String> { field(p)?.as_str().map(String::from).ok_or_else(|| format!("{at}: {} must be a string", &p[1..])) };
        let bool_of = |p: &str| -> Result<bool, String> { field(p)?.as_bool().ok_or_else(|| format!("{at}: {} must be true or false", &p[1..])) };
        let unlimited = |p: &str| -> Result<u64, String> {
            match doc.pointer(p) {
                None | Some(Value::Null) => Ok(u64::MAX),
                Some(v) => v.as_u64().ok_or_else(|| format!("{at}: {} must be a number or null (unlimited)", &p[1..])),
            }
        };
        let online = machine::parse_cpu_list(&str_of("/cpu/online")?);
        if online.is_empty() {
            return Err(format!("{at}: cpu.online lists no CPU"));
        }
        let allowed = machine::parse_cpu_list(&str_of("/process/allowed_cpus")?);
        let mut controllers = Vec::new();
        for (key, version) in [("v1", Version::V1), ("v2", Version::V2)] {
            for m in doc["capabilities"]["cgroups"][key].as_array().into_iter().flatten() {
                for c in m["controllers"].as_array().into_iter().flatten().filter_map(|c| c.as_str()) {
                    if let (Some(name), Some(mount)) = (cgroupfs::controller_name(c), m["mount"].as_str()) {
                        controllers.push(Controller { name, version: version.clone(), mount: PathBuf::from(mount) });
                    }
                }
            }
        }
        let policies = field("/policies")?.as_object().cloned().ok_or_else(|| format!("{at}: policies must be a table"))?;
        for (k, _) in probe_policies() {
            let v = policies.get(k).and_then(|v| v.as_str()).ok_or_else(|| format!("{at}: policies.{k} is missing{fix}"))?;
            if v != "ok" && errno_code(v).is_none() {
                return Err(format!("{at}: policies.{k} = '{v}': write \"ok\" or the errno name (EPERM, EBUSY, ...)"));
            }
        }
        let cpu_group = doc.pointer("/process/cpu_cgroup/path").and_then(|p| p.as_str()).map(|p| (PathBuf::from(p), doc["process"]["cpu_cgroup"]["rt_runtime_us"].as_i64()));
        let caps = &doc["capabilities"];
        let fixture = Fixture {
            controllers,
            rt_group_files: caps["cgroups"]["rt_group_scheduling"].as_bool().unwrap_or(false),
            policies,
            countable: caps["pmu"]["countable"].as_array().into_iter().flatten().filter_map(|v| v.as_str().map(String::from)).collect(),
            tracefs: caps["tracefs"]["mount"].as_str().map(String::from),
            path,
            doc: Value::Null,
        };
        let m = Machine {
            online,
            allowed,
            mem_available: field("/process/mem_available_bytes")?.as_u64().ok_or_else(|| format!("{at}: process.mem_available_bytes must be a number"))?,
            root: field("/process/euid")?.as_u64() == Some(0),
            cap_sys_nice: bool_of("/process/cap_sys_nice")?,
            cap_ipc_lock: bool_of("/process/cap_ipc_lock")?,
            rlimit_rtprio: unlimited("/process/rlimit_rtprio")?,
            rlimit_memlock: unlimited("/process/rlimit_memlock")?,
            nice_floor: field("/process/nice_floor")?.as_i64().ok_or_else(|| format!("{at}: process.nice_floor must be a number"))? as i32,
            rt_runtime_us: doc["kernel"]["sched_rt_runtime_us"].as_i64(),
            rt_period_us: doc["kernel"]["sched_rt_period_us"].as_i64(),
            cpu_group,
            fixture: Some(Fixture { doc, ..fixture }),
        };
        Ok(m)
    }

    /// The hierarchy that offers controller `name` (v1 first, as cgroupfs::controller does).
    pub fn controller(&self, name: &'static str) -> Option<Controller> {
        match &self.fixture {
            None => cgroupfs::controller(name),
            Some(f) => {
                let of = |v: Version| f.controllers.iter().find(|c| c.name == name && c.version == v).cloned();
                of(Version::V1).or_else(|| of(Version::V2))
            }
        }
    }

    /// Does the v1 cpu controller offer RT group scheduling (cpu.rt_runtime_us)?
    pub fn rt_group_files(&self) -> bool {
        match &self.fixture {
            None => self.controller("cpu").is_some_and(|c| c.version == Version::V1 && c.mount.join("cpu.rt_runtime_us").exists()),
            Some(f) => f.rt_group_files,
        }
    }

    /// Would the kernel let a child of this process take policy `s`? Live: tried in a
    /// throwaway child (crate::preflight). Fixture: the outcome recorded for that policy.
    pub fn try_sched(&self, s: &Sched) -> Result<(), std::io::Error> {
        match (&self.fixture, policy_key(s)) {
            (None, _) => crate::sched::try_in_child(s),
            (Some(_), None) => Ok(()),
            (Some(f), Some(k)) => match f.policies.get(k).and_then(|v| v.as_str()).unwrap_or("ok") {
                "ok" => Ok(()),
                name => Err(std::io::Error::from_raw_os_error(errno_code(name).unwrap_or(libc::EPERM))),
            },
        }
    }

    /// Can `event` be counted? Err says why not.
    pub fn counter(&self, event: &str, exclude_kernel: bool) -> Result<(), String> {
        use crate::observe::perf;
        match &self.fixture {
            None => perf::probe(&perf::resolve(event)?, exclude_kernel),
            Some(f) if f.countable.iter().any(|c| c == event) => Ok(()),
            Some(f) => Err(format!("the machine fixture {} does not list it as countable", f.path.display())),
        }
    }

    /// The generic and software events this machine counts.
    pub fn countable(&self, exclude_kernel: bool) -> Vec<String> {
        match &self.fixture {
            None => crate::observe::perf::available(exclude_kernel).into_iter().map(String::from).collect(),
            Some(f) => f.countable.clone(),
        }
    }

    /// Can a trace of `events` be taken? Err: (field, message). A fixture records where
    /// tracefs is mounted, not every event: names are checked for form only.
    pub fn trace_events(&self, events: &[String]) -> Result<(), (String, String)> {
        use crate::observe::trace;
        if !self.root {
            return Err(("trace".into(), "kernel tracing needs root (tracefs); run as root or leave trace out".into()));
        }
        if let Some(f) = &self.fixture {
            return match &f.tracefs {
                Some(_) => Ok(()),
                None => Err(("trace".into(), format!("tracefs is not mounted on the machine of {}; leave trace out", f.path.display()))),
            };
        }
        trace::with_tracefs(|root| {
            for (i, ev) in events.iter().enumerate() {
                if let Err(why) = trace::event_dir(root, ev) {
                    return Err(format!("trace.events[{i}]: {why}; this kernel offers {}", trace::offered(root)));
                }
            }
            Ok(())
        })
        .map_err(|m| match m.split_once(": ") {
            Some((f, rest)) if f.starts_with("trace.events[") => (f.into(), rest.into()),
            _ => ("trace".into(), m),
        })
    }

    /// Share of each CPU that SCHED_DEADLINE may reserve (sched_rt_runtime / sched_rt_period).
    pub fn dl_bandwidth_limit(&self) -> f64 {
        match (self.rt_runtime_us, self.rt_period_us) {
            (Some(r), _) if r < 0 => 1.0,
            (Some(r), Some(p)) if p > 0 => r as f64 / p as f64,
            _ => 0.95,
        }
    }

    /// The facts a fixture needs beyond the environment document: this process's view (CPUs
    /// it may use, memory, privileges, limits, its cpu cgroup) and each policy tried for real.
    fn recorded(&self) -> Value {
        let policies: serde_json::Map<String, Value> = probe_policies()
            .iter()
            .map(|(k, s)| (k.to_string(), json!(match crate::sched::try_in_child(s) { Ok(()) => "ok".to_string(), Err(e) => errno_name(e.raw_os_error().unwrap_or(libc::EPERM)) })))
            .collect();
        json!({
            "process": {
                "allowed_cpus": machine::cpu_list(&self.allowed),
                "mem_available_bytes": self.mem_available,
                "euid": unsafe { libc::geteuid() },
                "cap_sys_nice": self.cap_sys_nice,
                "cap_ipc_lock": self.cap_ipc_lock,
                "rlimit_rtprio": limit(self.rlimit_rtprio),
                "rlimit_memlock": limit(self.rlimit_memlock),
                "nice_floor": self.nice_floor,
                "cpu_cgroup": self.cpu_group.as_ref().map(|(p, rt)| json!({"path": p, "rt_runtime_us": rt})),
            },
            "policies": policies,
        })
    }
}

/// What `xtalk-agent sysinfo` prints: the environment, and the facts a fixture records
/// (`facts_version`, `process`, `policies`); with a fixture, the fixture itself.
pub fn sysinfo(m: &Machine) -> Value {
    if let Some(f) = &m.fixture {
        return f.doc.clone();
    }
    let mut doc = crate::observe::env::collect();
    doc["facts_version"] = json!(FACTS_VERSION);
    if let (Value::Object(d), Value::Object(r)) = (&mut doc, m.recorded()) {
        d.extend(r);
    }
    doc
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(name: &str, doc: &Value) -> PathBuf {
        let p = std::env::temp_dir().join(format!("xtalk-facts-{}-{name}.json", std::process::id()));
        std::fs::write(&p, serde_json::to_string(doc).unwrap()).unwrap();
        p
    }

    #[test]
    fn live_sysinfo_is_a_fixture_that_reads_back_the_same_facts() {
        let live = Machine::live();
        let p = write("roundtrip", &sysinfo(&live));
        let m = Machine::from_fixture(p.clone()).unwrap();
        std::fs::remove_file(p).unwrap();
        assert_eq!(m.online, live.online);
        assert_eq!(m.allowed, live.allowed);
        assert_eq!((m.cap_sys_nice, m.rt_runtime_us, m.cpu_group.clone()), (live.cap_sys_nice, live.rt_runtime_us, live.cpu_group.clone()));
        assert_eq!(m.controller("cpu").map(|c| c.mount), live.controller("cpu").map(|c| c.mount));
        // The recorded outcome of FIFO is the live one.
        let fifo = Sched::Fifo { priority: 1 };
        assert_eq!(m.try_sched(&fifo).is_ok(), live.try_sched(&fifo).is_ok());
    }

    #[test]
    fn a_fixture_refuses_what_it_recorded_and_names_what_is_missing() {
        let mut doc = sysinfo(&Machine::live());
        doc["policies"]["fifo"] = json!("EPERM");
        let p = write("eperm", &doc);
        let m = Machine::from_fixture(p.clone()).unwrap();
        assert_eq!(m.try_sched(&Sched::Fifo { priority: 90 }).unwrap_err().raw_os_error(), Some(libc::EPERM));
        assert!(m.try_sched(&Sched::Other { nice: 0 }).is_ok());
        doc["process"].as_object_mut().unwrap().remove("allowed_cpus");
        std::fs::write(&p, doc.to_string()).unwrap();
        let e = Machine::from_fixture(p.clone()).err().unwrap();
        doc["facts_version"] = json!(99);
        std::fs::write(&p, doc.to_string()).unwrap();
        let v = Machine::from_fixture(p.clone()).err().unwrap();
        std::fs::remove_file(p).unwrap();
        assert!(e.contains("process.allowed_cpus is missing") && !e.contains('\n'), "{e}");
        assert!(v.contains("facts_version 99"), "{v}");
    }
}
