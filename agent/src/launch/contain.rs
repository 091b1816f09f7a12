//! Nothing survives a run: every run has a cgroup of its own (`xtalk-<pid>` in one
//! containment hierarchy), every process the agent forks joins it before it runs anything
//! else, and teardown kills everything still below it, whatever the plan configures: a
//! command victim's children, an enemy's helper that called setsid, a child that made
//! itself SCHED_FIFO 99. The hierarchy: cgroup v2 where the kernel has `cgroup.kill`
//! (5.14), else the v1 freezer (freeze, kill, thaw), else v1 pids, else v2 without kill.
//! `XTALK_RUN_CGROUP=v2|freezer|pids` picks one by hand.

use crate::observe::cgroupfs::{Controller, Version};
use crate::safefs::{self, Dir};
use std::path::{Path, PathBuf};

/// The key the run hierarchy's directories carry when it is v2 (no controller needed).
pub const UNIFIED: &str = "unified";

fn kernel_at_least(major: u32, minor: u32) -> bool {
    let r = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mut it = r.trim().split(|c: char| !c.is_ascii_digit()).filter_map(|x| x.parse::<u32>().ok());
    (it.next().unwrap_or(0), it.next().unwrap_or(0)) >= (major, minor)
}

/// Pick the hierarchy in which the run's own group lives, from the mounts listed as
/// (mount point, type, options).
pub fn choose(mounts: &[(String, String, String)], choice: &str, has_kill: bool) -> Result<Controller, String> {
    let v1 = |name: &'static str| {
        mounts.iter().find(|(_, t, o)| t == "cgroup" && o.split(',').any(|x| x == name)).map(|(m, _, _)| Controller { name, version: Version::V1, mount: PathBuf::from(m) })
    };
    let v2 = mounts.iter().find(|(_, t, _)| t == "cgroup2").map(|(m, _, _)| Controller { name: UNIFIED, version: Version::V2, mount: PathBuf::from(m) });
    let none = "no cgroup hierarchy to contain the run (neither cgroup2 nor the v1 freezer or pids controller is mounted)";
    match choice {
        "" | "auto" => if has_kill { v2.clone() } else { None }.or_else(|| v1("freezer")).or_else(|| v1("pids")).or(v2).ok_or_else(|| none.into()),
        "v2" => v2.ok_or_else(|| "XTALK_RUN_CGROUP=v2: no cgroup2 file system is mounted".into()),
        "freezer" => v1("freezer").ok_or_else(|| "XTALK_RUN_CGROUP=freezer: the v1 freezer controller is not mounted".into()),
        "pids" => v1("pids").ok_or_else(|| "XTALK_RUN_CGROUP=pids: the v1 pids controller is not mounted".into()),
        other => Err(format!("XTALK_RUN_CGROUP='{other}': use v2, freezer, pids or auto")),
    }
}

/// The containment hierarchy on this machine.
pub fn hierarchy() -> Result<Controller, String> {
    let choice = std::env::var("XTALK_RUN_CGROUP").unwrap_or_default();
    choose(&crate::observe::cgroupfs::mounts(), choice.trim(), kernel_at_least(5, 14))
}

/// Every process in `dir` and the groups below it.
fn procs_below(dir: &Dir) -> Vec<i32> {
    let mut pids: Vec<i32> = dir.read("cgroup.procs").unwrap_or_default().split_whitespace().filter_map(|p| p.parse().ok()).collect();
    for name in dir.names().unwrap_or_default() {
        // Child groups only: directories on the same cgroup file system, never a symlink.
        if let Ok(sub) = safefs::is_cgroup_dir(&dir.path.join(&name)) {
            pids.extend(procs_below(&sub));
        }
    }
    pids
}

fn comm(pid: i32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm")).map(|s| s.trim().to_string()).unwrap_or_else(|_| "?".into())
}

/// How long processes left in the run's group may take to end by themselves.
const EXITING_GRACE_NS: i64 = 200_000_000;

/// Freeze (or thaw) a group and everything below it, where the hierarchy can.
fn freeze(dir: &Dir, frozen: bool) {
    let _ = dir.write("freezer.state", if frozen { "FROZEN" } else { "THAWED" });
    let _ = dir.write("cgroup.freeze", if frozen { "1" } else { "0" });
}

/// Kill every process in the cgroup `path` and below: `cgroup.kill` where the kernel has it,
/// else freeze, SIGKILL each one, thaw, until the group is empty (at most `limit_ns`).
/// `path` must be a real directory on a cgroup file system: anything else is refused.
/// Returns the processes killed ("pid (name)") or why it could not finish.
pub fn kill_all(path: &Path, limit_ns: i64) -> Result<Vec<String>, String> {
    let dir = safefs::is_cgroup_dir(path)?;
    let me = std::process::id() as i32;
    // Helpers of a child just reaped (an AOCS instance's reader and comparer) are already on
    // their way out (PR_SET_PDEATHSIG, a closed pipe): they get a moment before they count
    // as runaways.
    let grace = crate::observe::clock::mono_ns() + EXITING_GRACE_NS;
    while crate::observe::clock::mono_ns() < grace && procs_below(&dir).iter().any(|p| *p != me) {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let until = crate::observe::clock::mono_ns() + limit_ns;
    let mut killed: Vec<(i32, String)> = Vec::new();
    loop {
        let pids: Vec<i32> = procs_below(&dir).into_iter().filter(|p| *p != me).collect();
        if pids.is_empty() {
            freeze(&dir, false);
            return Ok(killed.into_iter().map(|(p, c)| format!("{p} ({c})")).collect());
        }
        if crate::observe::clock::mono_ns() > until {
            freeze(&dir, false);
            return Err(format!("{} still holds {} process(es) after SIGKILL: {:?}", path.display(), pids.len(), pids));
        }
        for &p in &pids {
            if !killed.iter().any(|(k, _)| *k == p) {
                killed.push((p, comm(p)));
            }
        }
        // v2: one write ends the whole subtree. Else stop every process first, so none forks
        // or respawns between the read and the kills, then kill and thaw (a v1 frozen task
        // dies only once thawed).
        if dir.write("cgroup.kill", "1").is_err() {
            freeze(&dir, true);
            for &p in &pids {
                unsafe { libc::kill(p, libc::SIGKILL) };
            }
            freeze(&dir, false);
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(list: &[(&str, &str, &str)]) -> Vec<(String, String, String)> {
        list.iter().map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string())).collect()
    }

    #[test]
    fn v2_only_machines_use_the_unified_hierarchy() {
        let ms = m(&[("/sys/fs/cgroup", "cgroup2", "rw,nsdelegate")]);
        let c = choose(&ms, "", true).unwrap();
        assert_eq!((c.name, c.version, c.mount), (UNIFIED, Version::V2, PathBuf::from("/sys/fs/cgroup")));
        // An old v2 kernel without cgroup.kill: still v2 (kill loop), there is nothing else.
        assert_eq!(choose(&ms, "", false).unwrap().version, Version::V2);
        assert!(choose(&ms, "freezer", true).is_err());
    }

    #[test]
    fn hybrid_machines_prefer_cgroup_kill_then_the_v1_freezer() {
        let ms = m(&[("/sys/fs/cgroup/pids", "cgroup", "rw,pids"), ("/sys/fs/cgroup/freezer", "cgroup", "rw,freezer"), ("/sys/fs/cgroup/unified", "cgroup2", "rw")]);
        assert_eq!(choose(&ms, "auto", true).unwrap().version, Version::V2);
        let old = choose(&ms, "", false).unwrap();
        assert_eq!((old.name, old.mount), ("freezer", PathBuf::from("/sys/fs/cgroup/freezer")));
        assert_eq!(choose(&ms, "pids", true).unwrap().name, "pids");
        assert!(choose(&ms, "bogus", true).unwrap_err().contains("XTALK_RUN_CGROUP"));
        assert!(choose(&m(&[]), "", true).is_err());
    }

    #[test]
    fn kill_all_refuses_what_is_not_a_cgroup() {
        let t = tempfile::tempdir().unwrap();
        std::fs::write(t.path().join("cgroup.procs"), "1\n").unwrap();
        assert!(kill_all(t.path(), 1_000_000).unwrap_err().contains("not on a cgroup file system"));
    }

    #[test]
    fn kernel_versions_compare_numerically() {
        assert!(kernel_at_least(2, 6));
        assert!(!kernel_at_least(999, 0));
    }
}
