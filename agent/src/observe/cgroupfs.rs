//! Cgroup discovery: which hierarchy offers a controller (v1 mount or v2 unified), the
//! mounts, the calling process's own v2 group, whether the kernel has deadline group
//! servers. Only reads; making and undoing groups is launch/cgroups.rs, which, like the
//! machine facts and the pre-flight, finds its hierarchies here.

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

/// The calling process's cgroup v2 group when the cpu controller governs it (its parent
/// enabled it: the group has cpu.max) and it is below a group the run created (`xtalk-`):
/// there, a kernel with RT group scheduling refuses real-time policies.
pub fn own_v2_cpu_group() -> Option<PathBuf> {
    let own = fs::read_to_string("/proc/self/cgroup").ok()?;
    let rel = own.lines().find_map(|l| l.strip_prefix("0::"))?.trim().trim_start_matches('/').to_string();
    if !rel.contains("xtalk-") {
        return None;
    }
    mounts().iter().filter(|(_, t, _)| t == "cgroup2").map(|(m, _, _)| Path::new(m).join(&rel)).find(|d| d.join("cpu.max").exists())
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
