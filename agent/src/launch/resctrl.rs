//! Cache and memory-bandwidth allocation through resctrl (Intel RDT, AMD PQoS, Arm MPAM): a
//! plan group with `cache_ways` or `mb_percent` gets a resctrl group `xtalk-<pid>-<name>`
//! beside its cgroups, its `schemata` written with the same mask or percentage in every
//! cache domain, and its processes join it as they join their cgroups. Created and removed
//! through the change journal like a cgroup (removing a resctrl group returns its tasks to
//! the default group).
use crate::plan::Group;
use std::fs;
use std::path::{Path, PathBuf};

/// Where resctrl is mounted, if it is.
pub fn mount() -> Option<PathBuf> {
    crate::observe::cgroupfs::mounts().into_iter().find(|(_, t, _)| t == "resctrl").map(|(m, _, _)| PathBuf::from(m))
}

/// Does the group ask for resctrl?
pub fn wanted(g: &Group) -> bool {
    g.cache_ways.is_some() || g.mb_percent.is_some()
}

/// Why the machine the facts describe cannot give `g` its allocation, if it cannot.
pub fn unavailable(g: &Group, mount: Option<&Path>, supported: bool) -> Option<String> {
    if !wanted(g) || mount.is_some() {
        return None;
    }
    Some(if supported {
        "cache_ways and mb_percent need resctrl, which is not mounted (mount -t resctrl resctrl /sys/fs/resctrl)".into()
    } else {
        "cache_ways and mb_percent need resctrl (Intel RDT, AMD PQoS, Arm MPAM), which this kernel or CPU does not offer".into()
    })
}

fn read(root: &Path, rel: &str) -> Result<String, String> {
    fs::read_to_string(root.join(rel)).map(|s| s.trim().to_string()).map_err(|e| format!("{}: {e}", root.join(rel).display()))
}

/// The cache domains of resource `res` ("L3", "MB") in the default group's schemata.
fn domains(root: &Path, res: &str) -> Result<Vec<String>, String> {
    let s = read(root, "schemata")?;
    let line = s.lines().map(str::trim).find_map(|l| l.strip_prefix(&format!("{res}:")))
        .ok_or_else(|| format!("this machine's resctrl has no {res} allocation ({} lists none)", root.join("schemata").display()))?;
    Ok(line.split(';').filter_map(|d| d.split_once('=').map(|(id, _)| id.trim().to_string())).collect())
}

/// The schemata lines of `g`, checked against the resctrl tree at `root`: the L3 capacity
/// bit mask of its ways (contiguous, at least min_cbm_bits, inside cbm_mask) and the MB
/// percentage (at least min_bandwidth), each in every domain.
pub fn schemata(root: &Path, g: &Group) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    if let Some(ways) = &g.cache_ways {
        let full = u64::from_str_radix(&read(root, "info/L3/cbm_mask")?, 16).map_err(|e| format!("info/L3/cbm_mask: {e}"))?;
        let n = 64 - full.leading_zeros();
        let min = read(root, "info/L3/min_cbm_bits").ok().and_then(|s| s.parse::<usize>().ok()).unwrap_or(1);
        let mut w = ways.clone();
        w.sort();
        w.dedup();
        if let Some(bad) = w.iter().find(|x| **x >= n) {
            return Err(format!("cache_ways: way {bad} does not exist; this cache has {n} (0-{})", n - 1));
        }
        if w.len() < min || w.windows(2).any(|p| p[1] != p[0] + 1) {
            return Err(format!("cache_ways: give at least {min} contiguous ways (e.g. \"0-3\"); the hardware takes no gaps"));
        }
        let mask: u64 = w.iter().fold(0, |m, x| m | 1 << x);
        let ids = domains(root, "L3")?;
        out.push(format!("L3:{}", ids.iter().map(|id| format!("{id}={mask:x}")).collect::<Vec<_>>().join(";")));
    }
    if let Some(pc) = g.mb_percent {
        let min = read(root, "info/MB/min_bandwidth").ok().and_then(|s| s.parse::<u32>().ok()).unwrap_or(10);
        if pc < min || pc > 100 {
            return Err(format!("mb_percent: {pc} is outside {min}..=100 (info/MB/min_bandwidth)"));
        }
        let ids = domains(root, "MB")?;
        out.push(format!("MB:{}", ids.iter().map(|id| format!("{id}={pc}")).collect::<Vec<_>>().join(";")));
    }
    Ok(out)
}

/// The resctrl group of plan group `name` in the run of agent `pid`.
pub fn group_dir(root: &Path, pid: u32, name: &str) -> PathBuf {
    root.join(format!("xtalk-{pid}-{name}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A recorded resctrl tree of a two-socket machine with 11-way L3 CAT and MBA.
    fn tree() -> tempfile::TempDir {
        let t = tempfile::tempdir().unwrap();
        let r = t.path();
        fs::create_dir_all(r.join("info/L3")).unwrap();
        fs::create_dir_all(r.join("info/MB")).unwrap();
        fs::write(r.join("info/L3/cbm_mask"), "7ff\n").unwrap();
        fs::write(r.join("info/L3/min_cbm_bits"), "1\n").unwrap();
        fs::write(r.join("info/MB/min_bandwidth"), "10\n").unwrap();
        fs::write(r.join("schemata"), "    L3:0=7ff;1=7ff\n    MB:0=100;1=100\n").unwrap();
        t
    }

    #[test]
    fn ways_and_bandwidth_become_schemata_lines_for_every_domain() {
        let t = tree();
        let g = Group { name: "crit".into(), cache_ways: Some(vec![3, 0, 1, 2]), mb_percent: Some(30), ..Default::default() };
        assert_eq!(schemata(t.path(), &g).unwrap(), ["L3:0=f;1=f", "MB:0=30;1=30"]);
    }

    #[test]
    fn what_the_hardware_refuses_is_refused_first() {
        let t = tree();
        let gap = Group { name: "g".into(), cache_ways: Some(vec![0, 2]), ..Default::default() };
        assert!(schemata(t.path(), &gap).unwrap_err().contains("contiguous"));
        let far = Group { name: "g".into(), cache_ways: Some(vec![11]), ..Default::default() };
        assert!(schemata(t.path(), &far).unwrap_err().contains("has 11 (0-10)"));
        let low = Group { name: "g".into(), mb_percent: Some(5), ..Default::default() };
        assert!(schemata(t.path(), &low).unwrap_err().contains("10..=100"));
        fs::write(t.path().join("schemata"), "L3:0=7ff\n").unwrap();
        let mb = Group { name: "g".into(), mb_percent: Some(50), ..Default::default() };
        assert!(schemata(t.path(), &mb).unwrap_err().contains("no MB allocation"));
    }

    #[test]
    fn without_resctrl_the_reason_names_what_is_missing() {
        let g = Group { name: "g".into(), cache_ways: Some(vec![0]), ..Default::default() };
        assert!(unavailable(&g, None, false).unwrap().contains("Intel RDT, AMD PQoS, Arm MPAM"));
        assert!(unavailable(&g, None, true).unwrap().contains("mount -t resctrl"));
        assert_eq!(unavailable(&g, Some(Path::new("/sys/fs/resctrl")), true), None);
        assert_eq!(unavailable(&Group::default(), None, false), None);
    }
}
