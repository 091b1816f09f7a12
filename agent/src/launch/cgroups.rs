//! Control groups for the run's partitions: one group per plan `groups` entry, created under
//! `xtalk-<pid>` in each controller's hierarchy, every change journalled, every process
//! attaching itself before it takes its policy. Works with cgroup v1 (one mount per
//! controller) and v2 (unified), per controller, whichever hierarchy offers it.

use super::journal::Journal;
use crate::plan::Group;
use std::fs;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, PartialEq)]
pub enum Version {
    V1,
    V2,
}

/// Where a controller lives: its hierarchy and mount.
#[derive(Debug, Clone)]
pub struct Controller {
    pub name: &'static str,
    pub version: Version,
    pub mount: PathBuf,
}

/// (mount point, type, options) of every mount.
pub fn mounts() -> Vec<(String, String, String)> {
    fs::read_to_string("/proc/mounts")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() > 3).then(|| (f[1].to_string(), f[2].to_string(), f[3].to_string()))
        })
        .collect()
}

/// The hierarchy that offers `name` (v1 mount with that option, else v2 with it enabled).
pub fn controller(name: &'static str) -> Option<Controller> {
    let ms = mounts();
    if let Some((m, _, _)) = ms.iter().find(|(_, t, o)| t == "cgroup" && o.split(',').any(|x| x == name)) {
        return Some(Controller { name, version: Version::V1, mount: PathBuf::from(m) });
    }
    ms.iter().filter(|(_, t, _)| t == "cgroup2").find_map(|(m, _, _)| {
        let ctl = fs::read_to_string(format!("{m}/cgroup.controllers")).unwrap_or_default();
        ctl.split_whitespace().any(|c| c == name).then(|| Controller { name, version: Version::V2, mount: PathBuf::from(m) })
    })
}

/// The static name of a controller known to xtalk (for facts read from a fixture).
pub fn controller_name(name: &str) -> Option<&'static str> {
    const KNOWN: &[&str] = &["cpu", "cpuacct", "cpuset", "memory", "freezer", "pids", "blkio", "io", "devices", "net_cls", "perf_event", "hugetlb", "rdma", "misc"];
    KNOWN.iter().find(|k| **k == name).copied()
}

/// (controller, file, value) settings a group needs, in the order they must be written, on
/// the machine the facts describe (live, or a fixture when a plan is only checked).
pub fn settings(g: &Group) -> Result<Vec<(&'static str, String, String)>, String> {
    let mut out = Vec::new();
    let m = crate::observe::facts::current();
    let v = |c: &'static str| m.controller(c).map(|c| c.version);
    if g.cpus.is_some() || g.exclusive {
        let ver = v("cpuset").ok_or("the cpuset controller is not mounted")?;
        let cpus = g.cpus.as_ref().map(|c| crate::observe::machine::cpu_list(c)).unwrap_or_else(|| crate::observe::machine::cpu_list(&m.online));
        out.push(("cpuset", "cpuset.cpus".into(), cpus));
        let mems = g.mems.clone().unwrap_or_else(|| "0".into());
        out.push(("cpuset", "cpuset.mems".into(), mems));
        if g.exclusive {
            match ver {
                Version::V1 => out.push(("cpuset", "cpuset.cpu_exclusive".into(), "1".into())),
                Version::V2 => out.push(("cpuset", "cpuset.cpus.partition".into(), "root".into())),
            }
        }
    }
    if let Some(q) = g.cpu_quota_us {
        let period = g.cpu_period_us.unwrap_or(100_000);
        match v("cpu").ok_or("the cpu controller is not mounted")? {
            Version::V1 => {
                out.push(("cpu", "cpu.cfs_period_us".into(), period.to_string()));
                out.push(("cpu", "cpu.cfs_quota_us".into(), q.to_string()));
            }
            Version::V2 => out.push(("cpu", "cpu.max".into(), format!("{q} {period}"))),
        }
    }
    if let Some(w) = g.cpu_weight {
        match v("cpu").ok_or("the cpu controller is not mounted")? {
            // v1 shares: the default weight 100 maps to the default 1024 shares.
            Version::V1 => out.push(("cpu", "cpu.shares".into(), (w as u64 * 1024 / 100).max(2).to_string())),
            Version::V2 => out.push(("cpu", "cpu.weight".into(), w.to_string())),
        }
    }
    if let Some(rt) = g.rt_runtime_us {
        match v("cpu") {
            Some(Version::V1) if m.rt_group_files() => {
                out.push(("cpu", "cpu.rt_period_us".into(), g.rt_period_us.unwrap_or(1_000_000).to_string()));
                out.push(("cpu", "cpu.rt_runtime_us".into(), rt.to_string()));
            }
            _ => return Err("RT group scheduling (cpu.rt_runtime_us) needs the cgroup v1 cpu controller and a kernel with CONFIG_RT_GROUP_SCHED".into()),
        }
    }
    if g.memory_max.is_some() || g.memory_high.is_some() {
        let ver = v("memory").ok_or("the memory controller is not mounted")?;
        if let Some(m) = g.memory_max {
            out.push(("memory", if ver == Version::V1 { "memory.limit_in_bytes" } else { "memory.max" }.into(), m.to_string()));
        }
        if let Some(m) = g.memory_high {
            out.push(("memory", if ver == Version::V1 { "memory.soft_limit_in_bytes" } else { "memory.high" }.into(), m.to_string()));
        }
    }
    if let Some(p) = g.pids_max {
        v("pids").ok_or("the pids controller is not mounted")?;
        out.push(("pids", "pids.max".into(), p.to_string()));
    }
    if g.freezable {
        let ver = v("freezer").or_else(|| m.controller("cpu").filter(|c| c.version == Version::V2).map(|c| c.version));
        ver.ok_or("no freezer: neither the v1 freezer controller nor cgroup v2")?;
    }
    Ok(out)
}

/// Name of the group that holds the processes outside any plan group: every run has it (in
/// the containment hierarchy, see contain.rs) and, with a process budget (`pids_max`), in the
/// pids hierarchy too, so that every process of the run counts against `xtalk-<pid>`'s
/// pids.max. (A leaf, because cgroup v2 keeps processes out of inner groups.)
pub const RUN_GROUP: &str = "_run";

/// The run's groups: directories per controller, and the settings applied.
pub struct Groups {
    /// (group name, controller, directory)
    dirs: Vec<(String, &'static str, PathBuf)>,
    freezable: Vec<String>,
    budget: bool,
    /// The run's own group `xtalk-<pid>` in the containment hierarchy: every process of the
    /// run is below it. Err: why the run could not have one.
    run: Result<PathBuf, String>,
}

impl Groups {
    /// Create every group (parents first), journalled, and apply its settings. Every run has
    /// its own group in the containment hierarchy (contain.rs): each plan group and `_run`
    /// (the processes outside any group) get a directory there. With a run budget
    /// (`pids_max`), every group also joins the pids hierarchy, so that all of them count.
    pub fn create(groups: &[Group], pids_max: Option<u64>, journal: &mut Journal) -> Result<Groups, String> {
        let mut dirs: Vec<(String, &'static str, PathBuf)> = Vec::new();
        let pid = std::process::id();
        let run_ctl = if unsafe { libc::geteuid() } != 0 { Err("not root: the run has no cgroup of its own".to_string()) } else { super::contain::hierarchy() };
        let mut all: Vec<Group> = groups.to_vec();
        all.push(Group { name: RUN_GROUP.into(), ..Default::default() });
        // Controllers a v2 parent must enable for its children: only those some group uses
        // (the cpu controller, enabled needlessly, can refuse real-time tasks).
        let mut wanted: Vec<&'static str> = Vec::new();
        for g in &all {
            wanted.extend(settings(g)?.iter().map(|(c, _, _)| *c));
        }
        if pids_max.is_some() {
            wanted.push("pids");
        }
        let mut parents: Vec<PathBuf> = Vec::new();
        let mut budget_set = false;
        // The run's own group first; where the machine will not have it (a read-only
        // cgroup file system in a container), the run goes on without and says so.
        let run_ctl = run_ctl.and_then(|c| {
            let parent = c.mount.join(format!("xtalk-{pid}"));
            journal.cgroup(&parent).map_err(|e| format!("cannot create the run's own cgroup: {e}"))?;
            parents.push(parent.clone());
            prepare_parent(&c, &parent, groups, &wanted, journal)?;
            Ok(c)
        });
        for g in &all {
            let mut ctls: Vec<&'static str> = settings(g)?.iter().map(|(c, _, _)| *c).collect();
            if g.freezable {
                ctls.push(if controller("freezer").is_some() { "freezer" } else { "cpu" });
            }
            if pids_max.is_some() {
                ctls.push("pids");
            }
            ctls.sort();
            ctls.dedup();
            let mut hier: Vec<Controller> = Vec::new();
            for c in ctls {
                hier.push(controller(c).ok_or_else(|| format!("the {c} controller is not mounted"))?);
            }
            if let Ok(c) = &run_ctl {
                hier.push(c.clone());
            }
            for ctl in hier {
                let parent = ctl.mount.join(format!("xtalk-{pid}"));
                if !parents.contains(&parent) {
                    journal.cgroup(&parent)?;
                    parents.push(parent.clone());
                    prepare_parent(&ctl, &parent, groups, &wanted, journal)?;
                }
                if let (Some(max), "pids", false) = (pids_max, ctl.name, budget_set) {
                    journal.write(&parent.join("pids.max"), &max.to_string()).map_err(|e| format!("pids_max: {e}"))?;
                    budget_set = true;
                }
                // v2: one directory serves every controller of the unified hierarchy.
                let dir = parent.join(&g.name);
                if !dirs.iter().any(|(_, _, d)| d == &dir) {
                    journal.cgroup(&dir)?;
                }
                dirs.push((g.name.clone(), ctl.name, dir));
            }
            for (c, file, value) in settings(g)? {
                let dir = &dirs.iter().find(|(n, cc, _)| n == &g.name && *cc == c).unwrap().2;
                journal.write(&dir.join(&file), &value).map_err(|e| format!("group {}: {e}", g.name))?;
            }
        }
        let run = run_ctl.map(|c| c.mount.join(format!("xtalk-{pid}")));
        Ok(Groups { dirs, freezable: groups.iter().filter(|g| g.freezable).map(|g| g.name.clone()).collect(), budget: pids_max.is_some(), run })
    }

    /// The run's own group (every process of the run is below it), or why there is none.
    pub fn run_group(&self) -> Result<&Path, &str> {
        self.run.as_deref().map_err(|e| e.as_str())
    }

    /// Kill whatever is still in the run's group (teardown, after the children were
    /// stopped): the processes killed, as "pid (name)".
    pub fn kill_runaways(&self) -> Result<Vec<String>, String> {
        match &self.run {
            Ok(dir) => super::contain::kill_all(dir, 10_000_000_000),
            Err(_) => Ok(Vec::new()),
        }
    }

    /// Directories of one group (one per controller it uses).
    pub fn dirs_of(&self, group: &str) -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = Vec::new();
        for (_, _, d) in self.dirs.iter().filter(|(n, _, _)| n == group) {
            if !v.contains(d) {
                v.push(d.clone());
            }
        }
        v
    }

    /// Where a process of `group` (None: of no group) attaches itself.
    pub fn dirs_for(&self, group: Option<&str>) -> Vec<PathBuf> {
        self.dirs_of(group.unwrap_or(RUN_GROUP))
    }

    /// The run's process budget at the end: its limit, the most processes seen at once where
    /// the kernel keeps it (pids.peak), and the forks refused under it (pids.events "max",
    /// summed over the run's pids groups: kernels count a refusal in the forking process's
    /// group, newer ones also in the group whose limit was hit).
    pub fn budget_report(&self) -> Option<serde_json::Value> {
        if !self.budget {
            return None;
        }
        // The budget is `_run`'s parent in the pids hierarchy.
        let dir = self.dirs.iter().find(|(n, c, _)| n == RUN_GROUP && *c == "pids")?.2.parent()?;
        let read = |p: PathBuf| fs::read_to_string(p).ok().map(|s| s.trim().to_string());
        let refused = |d: &Path| read(d.join("pids.events")).and_then(|t| t.lines().find_map(|l| l.strip_prefix("max ").and_then(|n| n.trim().parse::<u64>().ok())));
        let groups: Vec<serde_json::Value> = self.dirs.iter().filter(|(_, c, _)| *c == "pids")
            .map(|(n, _, d)| serde_json::json!({"group": n, "refused_forks": refused(d)}))
            .collect();
        Some(serde_json::json!({
            "pids_max": read(dir.join("pids.max")),
            "peak": read(dir.join("pids.peak")),
            "refused_forks": refused(dir),
            "groups": groups,
        }))
    }

    /// The directory through which `group` is frozen, with its kind.
    pub fn freezer_of(&self, group: &str) -> Option<(PathBuf, Version)> {
        if !self.freezable.iter().any(|g| g == group) {
            return None;
        }
        self.dirs.iter().find(|(n, c, _)| n == group && (*c == "freezer" || controller(c).map(|x| x.version) == Some(Version::V2))).map(|(_, c, d)| {
            (d.clone(), if *c == "freezer" { Version::V1 } else { Version::V2 })
        })
    }
}

/// A parent needs what its children will use: cpuset cpus/mems, RT runtime for RT groups,
/// and (v2) the controllers enabled for its children.
fn prepare_parent(ctl: &Controller, parent: &Path, groups: &[Group], wanted: &[&str], journal: &mut Journal) -> Result<(), String> {
    match (ctl.name, &ctl.version) {
        ("cpuset", Version::V1) => {
            for f in ["cpuset.cpus", "cpuset.mems"] {
                let v = fs::read_to_string(ctl.mount.join(f)).map_err(|e| format!("{f}: {e}"))?;
                journal.write(&parent.join(f), v.trim())?;
            }
            if groups.iter().any(|g| g.exclusive) {
                journal.write(&parent.join("cpuset.cpu_exclusive"), "1")?;
            }
        }
        ("cpu", Version::V1) if groups.iter().any(|g| g.rt_runtime_us.is_some()) => {
            // The parent's RT bandwidth must cover its children's (per CPU).
            let period = 1_000_000u64;
            let share: f64 = groups.iter().filter_map(|g| g.rt_runtime_us.map(|r| r as f64 / g.rt_period_us.unwrap_or(1_000_000) as f64)).sum();
            journal.write(&parent.join("cpu.rt_period_us"), &period.to_string())?;
            let runtime = ((share * period as f64).round() as u64).to_string();
            // A group removed just before (the previous run's) gives its RT bandwidth back to
            // the root only after an RCU grace period: until then the kernel refuses (EINVAL)
            // what it will accept a moment later. Retry for up to a second.
            let mut tries = 0;
            loop {
                match journal.write(&parent.join("cpu.rt_runtime_us"), &runtime) {
                    Ok(()) => break,
                    Err(e) if tries < 50 && e.contains("os error 22") => {
                        tries += 1;
                        std::thread::sleep(std::time::Duration::from_millis(20));
                    }
                    Err(e) => return Err(format!("{e} (the RT groups ask {:.0} % of each CPU; the system allows {} us per s)", share * 100.0,
                        fs::read_to_string("/proc/sys/kernel/sched_rt_runtime_us").unwrap_or_default().trim())),
                }
            }
        }
        (_, Version::V2) => {
            let avail = fs::read_to_string(ctl.mount.join("cgroup.controllers")).unwrap_or_default();
            let enable: Vec<String> = wanted.iter().filter(|c| avail.split_whitespace().any(|a| a == **c)).map(|c| format!("+{c}")).collect();
            for c in enable {
                let _ = fs::write(parent.join("cgroup.subtree_control"), &c);
            }
        }
        _ => {}
    }
    Ok(())
}

/// In a child: move the calling process into every directory of its group (the first thing
/// it does, so that whatever it starts is in the run's group too).
pub fn attach_self(dirs: &[PathBuf]) -> Result<(), String> {
    let me = std::process::id().to_string();
    for d in dirs {
        fs::write(d.join("cgroup.procs"), &me).map_err(|e| format!("attach to {}: {e}", d.display()))?;
    }
    Ok(())
}

/// Freeze or thaw a group (regulator, freeze mode).
pub fn set_frozen(dir: &Path, version: &Version, frozen: bool) -> std::io::Result<()> {
    match version {
        Version::V1 => fs::write(dir.join("freezer.state"), if frozen { "FROZEN" } else { "THAWED" }),
        Version::V2 => fs::write(dir.join("cgroup.freeze"), if frozen { "1" } else { "0" }),
    }
}

/// Does this kernel schedule SCHED_DEADLINE servers for groups (Abeni et al. 2019 patch,
/// hierarchical CBS)? It exposes deadline parameters in the cpu controller.
pub fn deadline_groups() -> Result<(), String> {
    let ctl = controller("cpu").ok_or("the cpu controller is not mounted")?;
    for f in ["cpu.dl_runtime_us", "cpu.dl_period_us", "cpu.dl_runtime"] {
        if ctl.mount.join(f).exists() {
            return Ok(());
        }
    }
    Err(format!("SCHED_DEADLINE group servers need the hierarchical CBS patch (Abeni et al. 2019); this kernel's cpu controller ({}) has no cpu.dl_runtime_us", ctl.mount.display()))
}
