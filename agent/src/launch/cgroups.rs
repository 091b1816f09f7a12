//! Control groups for the run's partitions: one group per plan `groups` entry, created under
//! `xtalk-<pid>` in each controller's hierarchy, every change journalled, every process
//! attaching itself before it takes its policy. Works with cgroup v1 (one mount per
//! controller) and v2 (unified), per controller, whichever hierarchy offers it.

use super::journal::Journal;
use crate::observe::cgroupfs::{self, Controller, Version};
use crate::plan::Group;
use std::fs;
use std::path::{Path, PathBuf};

/// Which hierarchy offers a controller (the live mounts, a fixture, or a recorded tree).
pub type Lookup<'a> = &'a dyn Fn(&'static str) -> Option<Controller>;

/// (controller, file, value) settings a group needs, in the order they must be written, on
/// the machine the facts describe (live, or a fixture when a plan is only checked).
pub fn settings(g: &Group) -> Result<Vec<(&'static str, String, String)>, String> {
    let m = crate::observe::facts::current();
    let lookup = |c: &'static str| m.controller(c);
    // A fixture describes another machine: its paths mean nothing here.
    let disks = |p: &Path| if m.fixture.is_some() { Ok(None) } else { super::blockdev::disk_of(p) };
    settings_with(g, &lookup, m.rt_group_files(), &m.online, &disks)
}

/// `settings` against given facts: where each controller lives, whether the v1 cpu
/// controller has RT group files, the online CPUs, and how a path maps to its disk.
pub fn settings_with(
    g: &Group,
    lookup: Lookup,
    rt_group_files: bool,
    online: &[usize],
    disks: &dyn Fn(&Path) -> Result<Option<String>, String>,
) -> Result<Vec<(&'static str, String, String)>, String> {
    let mut out = Vec::new();
    let v = |c: &'static str| lookup(c).map(|c| c.version);
    if g.cpus.is_some() || g.exclusive || g.isolated {
        let ver = v("cpuset").ok_or("the cpuset controller is not mounted")?;
        let cpus = crate::observe::machine::cpu_list(g.cpus.as_deref().unwrap_or(online));
        out.push(("cpuset", "cpuset.cpus".into(), cpus.clone()));
        let mems = g.mems.clone().unwrap_or_else(|| "0".into());
        out.push(("cpuset", "cpuset.mems".into(), mems));
        if g.exclusive || g.isolated {
            match ver {
                Version::V1 => {
                    out.push(("cpuset", "cpuset.cpu_exclusive".into(), "1".into()));
                    if g.isolated {
                        // The v1 way to keep the scheduler from balancing load across them.
                        out.push(("cpuset", "cpuset.sched_load_balance".into(), "0".into()));
                    }
                }
                Version::V2 => {
                    // A partition below the run's group (not a child of a partition root) is
                    // a remote partition: its CPUs are claimed through cpuset.cpus.exclusive
                    // at every level (Linux 6.7), the parent's written by prepare_parent.
                    out.push(("cpuset", "cpuset.cpus.exclusive".into(), cpus));
                    out.push(("cpuset", PARTITION.into(), if g.isolated { "isolated" } else { "root" }.into()));
                }
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
            Some(Version::V1) if rt_group_files => {
                out.push(("cpu", "cpu.rt_period_us".into(), g.rt_period_us.unwrap_or(1_000_000).to_string()));
                out.push(("cpu", "cpu.rt_runtime_us".into(), rt.to_string()));
            }
            _ => return Err(format!("RT group scheduling (cpu.rt_runtime_us) needs the cgroup v1 cpu controller and a kernel with CONFIG_RT_GROUP_SCHED; {RT_ALTERNATIVE}")),
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
    if let Some(io) = &g.io_max {
        out.extend(io_settings(io, lookup, disks)?);
    }
    if let Some(p) = g.pids_max {
        v("pids").ok_or("the pids controller is not mounted")?;
        out.push(("pids", "pids.max".into(), p.to_string()));
    }
    if g.freezable {
        let ver = v("freezer").or_else(|| lookup("cpu").filter(|c| c.version == Version::V2).map(|c| c.version));
        ver.ok_or("no freezer: neither the v1 freezer controller nor cgroup v2")?;
    }
    Ok(out)
}

/// The v2 cpuset file that makes a group a partition (root or isolated).
pub const PARTITION: &str = "cpuset.cpus.partition";

/// What to use where RT group scheduling is missing (cgroup v2 has no per-group RT
/// bandwidth): the same bandwidth, reserved per task.
pub const RT_ALTERNATIVE: &str = "the nearest equivalent is per-task SCHED_DEADLINE with the same bandwidth (policy = \"deadline\", runtime = the group's RT runtime scaled to the task's period)";

/// The disks an I/O limit applies to: its devices, then the disks holding its paths
/// (deduplicated; a path with no disk is left out, see `io_unlimited`).
pub fn io_disks(io: &crate::plan::IoMax, disks: &dyn Fn(&Path) -> Result<Option<String>, String>) -> Result<Vec<String>, String> {
    let mut out: Vec<String> = Vec::new();
    for d in &io.devices {
        if !super::blockdev::is_dev_number(d) {
            return Err(format!("io_max.devices: '{d}' is not a device number; write \"MAJ:MIN\" (lsblk shows them)"));
        }
        if !out.contains(d) {
            out.push(d.clone());
        }
    }
    for p in &io.paths {
        if let Some(d) = disks(Path::new(p)).map_err(|e| format!("io_max.paths: {e}"))? {
            if !out.contains(&d) {
                out.push(d);
            }
        }
    }
    Ok(out)
}

/// The paths of an I/O limit whose file system has no disk to limit (tmpfs, overlay): a
/// note for run.json, since their files are memory (memory_max bounds them).
pub fn io_unlimited(io: &crate::plan::IoMax) -> Vec<String> {
    io.paths.iter().filter(|p| matches!(super::blockdev::disk_of(Path::new(p)), Ok(None))).cloned().collect()
}

/// The I/O settings of a group: v2 io.max ("MAJ:MIN rbps=.. wbps=.."), one line per disk;
/// v1 the four blkio throttle files ("MAJ:MIN VALUE"), one write per disk and limit.
fn io_settings(io: &crate::plan::IoMax, lookup: Lookup, disks: &dyn Fn(&Path) -> Result<Option<String>, String>) -> Result<Vec<(&'static str, String, String)>, String> {
    let limits = [("rbps", io.rbps, "blkio.throttle.read_bps_device"), ("wbps", io.wbps, "blkio.throttle.write_bps_device"),
                  ("riops", io.riops, "blkio.throttle.read_iops_device"), ("wiops", io.wiops, "blkio.throttle.write_iops_device")];
    let ver = match (lookup("blkio"), lookup("io")) {
        (Some(c), _) if c.version == Version::V1 => Version::V1,
        (_, Some(c)) if c.version == Version::V2 => Version::V2,
        _ => return Err("I/O limits need the v2 io controller or the v1 blkio controller; neither is available".into()),
    };
    let mut out = Vec::new();
    for d in io_disks(io, disks)? {
        match ver {
            Version::V2 => {
                let set: Vec<String> = limits.iter().filter_map(|(k, n, _)| n.map(|n| format!("{k}={n}"))).collect();
                out.push(("io", "io.max".into(), format!("{d} {}", set.join(" "))));
            }
            Version::V1 => {
                for (_, n, file) in limits {
                    if let Some(n) = n {
                        out.push(("blkio", file.into(), format!("{d} {n}")));
                    }
                }
            }
        }
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

/// The changes creating groups makes, journalled when live (the `Journal`), recorded by a
/// test against a recorded cgroup tree.
pub trait Changes {
    /// Create a cgroup directory.
    fn cgroup(&mut self, path: &Path) -> Result<(), String>;
    /// Write a cgroup file, to be restored.
    fn write(&mut self, path: &Path, value: &str) -> Result<(), String>;
    /// Enable a controller for a v2 group's children ("+cpu" into its cgroup.subtree_control):
    /// only ever in a group the run created, so it goes with the group, unjournalled.
    fn enable(&mut self, parent: &Path, controller: &str) -> Result<(), String> {
        fs::write(parent.join("cgroup.subtree_control"), format!("+{controller}")).map_err(|e| format!("enable {controller} in {}: {e}", parent.display()))
    }
}

impl Changes for Journal {
    fn cgroup(&mut self, path: &Path) -> Result<(), String> {
        Journal::cgroup(self, path)
    }
    fn write(&mut self, path: &Path, value: &str) -> Result<(), String> {
        Journal::write(self, path, value)
    }
}

/// The machine the groups are made on: where each controller lives, the containment
/// hierarchy, and what settings need (`settings_with`).
pub struct Machine<'a> {
    pub lookup: Lookup<'a>,
    /// The containment hierarchy (contain.rs), or why the run has none.
    pub run: Result<Controller, String>,
    pub pid: u32,
    pub rt_group_files: bool,
    pub online: Vec<usize>,
    pub disks: &'a dyn Fn(&Path) -> Result<Option<String>, String>,
    /// Where resctrl is mounted, if it is.
    pub resctrl: Option<PathBuf>,
}

impl Groups {
    /// Create every group (parents first), journalled, and apply its settings. Every run has
    /// its own group in the containment hierarchy (contain.rs): each plan group and `_run`
    /// (the processes outside any group) get a directory there. With a run budget
    /// (`pids_max`), every group also joins the pids hierarchy, so that all of them count.
    pub fn create(groups: &[Group], pids_max: Option<u64>, journal: &mut Journal) -> Result<Groups, String> {
        let facts = crate::observe::facts::current();
        let lookup = |c: &'static str| cgroupfs::controller(c);
        let disks = |p: &Path| super::blockdev::disk_of(p);
        let run = if unsafe { libc::geteuid() } != 0 { Err("not root: the run has no cgroup of its own".to_string()) } else { super::contain::hierarchy() };
        let m = Machine { lookup: &lookup, run, pid: std::process::id(), rt_group_files: facts.rt_group_files(), online: facts.online.clone(), disks: &disks,
                        resctrl: super::resctrl::mount() };
        Groups::create_on(&m, groups, pids_max, journal)
    }

    /// `create` on a given machine, through `changes`.
    pub fn create_on(m: &Machine, groups: &[Group], pids_max: Option<u64>, changes: &mut dyn Changes) -> Result<Groups, String> {
        let mut dirs: Vec<(String, &'static str, PathBuf)> = Vec::new();
        let pid = m.pid;
        let settings = |g: &Group| settings_with(g, m.lookup, m.rt_group_files, &m.online, m.disks);
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
        // Preparing it, once made, is no longer optional: the plan's groups live below it.
        let run_ctl = match m.run.clone() {
            Err(e) => Err(e),
            Ok(c) => {
                let parent = c.mount.join(format!("xtalk-{pid}"));
                match changes.cgroup(&parent) {
                    Err(e) => Err(format!("cannot create the run's own cgroup: {e}")),
                    Ok(()) => {
                        parents.push(parent.clone());
                        prepare_parent(&c, &parent, groups, &wanted, changes)?;
                        Ok(c)
                    }
                }
            }
        };
        for g in &all {
            let mut ctls: Vec<&'static str> = settings(g)?.iter().map(|(c, _, _)| *c).collect();
            if g.freezable {
                ctls.push(if (m.lookup)("freezer").is_some() { "freezer" } else { "cpu" });
            }
            if pids_max.is_some() {
                ctls.push("pids");
            }
            ctls.sort();
            ctls.dedup();
            let mut hier: Vec<Controller> = Vec::new();
            for c in ctls {
                hier.push((m.lookup)(c).ok_or_else(|| format!("the {c} controller is not mounted"))?);
            }
            if let Ok(c) = &run_ctl {
                hier.push(c.clone());
            }
            for ctl in hier {
                let parent = ctl.mount.join(format!("xtalk-{pid}"));
                if !parents.contains(&parent) {
                    changes.cgroup(&parent)?;
                    parents.push(parent.clone());
                    prepare_parent(&ctl, &parent, groups, &wanted, changes)?;
                }
                if let (Some(max), "pids", false) = (pids_max, ctl.name, budget_set) {
                    changes.write(&parent.join("pids.max"), &max.to_string()).map_err(|e| format!("pids_max: {e}"))?;
                    budget_set = true;
                }
                // v2: one directory serves every controller of the unified hierarchy.
                let dir = parent.join(&g.name);
                if !dirs.iter().any(|(_, _, d)| d == &dir) {
                    changes.cgroup(&dir)?;
                }
                dirs.push((g.name.clone(), ctl.name, dir));
            }
            for (c, file, value) in settings(g)? {
                let dir = &dirs.iter().find(|(n, cc, _)| n == &g.name && *cc == c).unwrap().2;
                changes.write(&dir.join(&file), &value).map_err(|e| format!("group {}: {e}", g.name))?;
                if file == PARTITION {
                    // The kernel takes any partition request and says afterwards whether it
                    // holds ("isolated invalid (reason)"): an invalid one isolates nothing.
                    let state = fs::read_to_string(dir.join(PARTITION)).unwrap_or_default();
                    if state.contains("invalid") {
                        return Err(format!("group {}: the kernel refused the partition: {} = {}", g.name, dir.join(PARTITION).display(), state.trim()));
                    }
                }
            }
            if super::resctrl::wanted(g) {
                let root = m.resctrl.as_ref().ok_or_else(|| format!("group {}: {}", g.name, super::resctrl::unavailable(g, None, true).unwrap_or_default()))?;
                let lines = super::resctrl::schemata(root, g).map_err(|e| format!("group {}: {e}", g.name))?;
                let dir = super::resctrl::group_dir(root, pid, &g.name);
                changes.cgroup(&dir)?;
                for l in lines {
                    changes.write(&dir.join("schemata"), &l).map_err(|e| format!("group {}: {e}", g.name))?;
                }
                dirs.push((g.name.clone(), "resctrl", dir));
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
    pub fn budget_report(&self) -> Option<crate::outcome::ProcessBudget> {
        use crate::outcome::{GroupForks, ProcessBudget};
        if !self.budget {
            return None;
        }
        // The budget is `_run`'s parent in the pids hierarchy.
        let dir = self.dirs.iter().find(|(n, c, _)| n == RUN_GROUP && *c == "pids")?.2.parent()?;
        let read = |p: PathBuf| fs::read_to_string(p).ok().map(|s| s.trim().to_string());
        let refused = |d: &Path| read(d.join("pids.events")).and_then(|t| t.lines().find_map(|l| l.strip_prefix("max ").and_then(|n| n.trim().parse::<u64>().ok())));
        let groups = self.dirs.iter().filter(|(_, c, _)| *c == "pids")
            .map(|(n, _, d)| GroupForks { group: n.clone(), refused_forks: refused(d) })
            .collect();
        Some(ProcessBudget {
            pids_max: read(dir.join("pids.max")),
            peak: read(dir.join("pids.peak")),
            refused_forks: refused(dir),
            groups,
        })
    }

    /// The directory through which `group` is frozen, with its kind.
    pub fn freezer_of(&self, group: &str) -> Option<(PathBuf, Version)> {
        if !self.freezable.iter().any(|g| g == group) {
            return None;
        }
        self.dirs.iter().find(|(n, c, _)| n == group && (*c == "freezer" || cgroupfs::controller(c).map(|x| x.version) == Some(Version::V2))).map(|(_, c, d)| {
            (d.clone(), if *c == "freezer" { Version::V1 } else { Version::V2 })
        })
    }
}

/// A parent needs what its children will use: cpuset cpus/mems, RT runtime for RT groups,
/// and (v2) the controllers enabled for its children and the CPUs of its partitions.
fn prepare_parent(ctl: &Controller, parent: &Path, groups: &[Group], wanted: &[&str], changes: &mut dyn Changes) -> Result<(), String> {
    match (ctl.name, &ctl.version) {
        ("cpuset", Version::V1) => {
            for f in ["cpuset.cpus", "cpuset.mems"] {
                let v = fs::read_to_string(ctl.mount.join(f)).map_err(|e| format!("{f}: {e}"))?;
                changes.write(&parent.join(f), v.trim())?;
            }
            if groups.iter().any(|g| g.exclusive || g.isolated) {
                changes.write(&parent.join("cpuset.cpu_exclusive"), "1")?;
            }
        }
        ("cpu", Version::V1) if groups.iter().any(|g| g.rt_runtime_us.is_some()) => {
            // The parent's RT bandwidth must cover its children's (per CPU).
            let period = 1_000_000u64;
            let share: f64 = groups.iter().filter_map(|g| g.rt_runtime_us.map(|r| r as f64 / g.rt_period_us.unwrap_or(1_000_000) as f64)).sum();
            changes.write(&parent.join("cpu.rt_period_us"), &period.to_string())?;
            let runtime = ((share * period as f64).round() as u64).to_string();
            // A group removed just before (the previous run's) gives its RT bandwidth back to
            // the root only after an RCU grace period: until then the kernel refuses (EINVAL)
            // what it will accept a moment later. Retry for up to a second.
            let mut tries = 0;
            loop {
                match changes.write(&parent.join("cpu.rt_runtime_us"), &runtime) {
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
            // What the unified hierarchy offers, and what the run's group may enable: a
            // controller its parent did not enable for its children is not there to have.
            let offered = fs::read_to_string(ctl.mount.join("cgroup.controllers")).unwrap_or_default();
            let here = fs::read_to_string(parent.join("cgroup.controllers")).unwrap_or_default();
            let mut done: Vec<&str> = Vec::new();
            for c in wanted.iter().filter(|c| offered.split_whitespace().any(|a| a == **c)) {
                if done.contains(c) {
                    continue;
                }
                done.push(c);
                if !here.split_whitespace().any(|a| a == *c) {
                    return Err(format!("the {c} controller is not enabled for the children of {} (echo +{c} > {}/cgroup.subtree_control)",
                        ctl.mount.display(), ctl.mount.display()));
                }
                changes.enable(parent, c)?;
            }
            // Partitions below the run's group claim their CPUs through every level.
            let parts: Vec<usize> = groups.iter().filter(|g| g.exclusive || g.isolated).flat_map(|g| g.cpus.clone().unwrap_or_default()).collect();
            if done.contains(&"cpuset") && groups.iter().any(|g| g.exclusive || g.isolated) {
                if !parent.join("cpuset.cpus.exclusive").exists() {
                    return Err("cpuset partitions below the run's group need cpuset.cpus.exclusive (Linux 6.7)".into());
                }
                let mut parts = parts;
                parts.sort();
                parts.dedup();
                let list = if parts.is_empty() { String::new() } else { crate::observe::machine::cpu_list(&parts) };
                changes.write(&parent.join("cpuset.cpus.exclusive"), &list)?;
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
        // A resctrl group takes tasks (the process's only thread, this early) through `tasks`.
        let file = if d.join("cgroup.procs").exists() { "cgroup.procs" } else { "tasks" };
        fs::write(d.join(file), &me).map_err(|e| format!("attach to {}: {e}", d.display()))?;
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

#[cfg(test)]
#[path = "cgroup_tree_tests.rs"]
mod tree_tests;
