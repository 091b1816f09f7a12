//! What this machine offers for measurement and isolation: hardware PMU and its events,
//! rdpmc, tracefs, cgroup hierarchies and controllers, RT group scheduling, SCHED_DEADLINE,
//! resctrl. `xtalk sysinfo` shows it; runs record it.
use super::perf;
use serde_json::{json, Value};
use std::fs;

fn read_trim(path: &str) -> Option<String> {
    fs::read_to_string(path).ok().map(|s| s.trim().to_string())
}

/// Mount points of a filesystem type from /proc/mounts: (mount point, options).
fn mounts(fstype: &str) -> Vec<(String, String)> {
    fs::read_to_string("/proc/mounts")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() > 3 && f[2] == fstype).then(|| (f[1].to_string(), f[3].to_string()))
        })
        .collect()
}

/// Where tracefs is mounted, if anywhere.
pub fn tracefs_root() -> Option<String> {
    mounts("tracefs").into_iter().map(|(m, _)| m).find(|m| fs::metadata(format!("{m}/instances")).is_ok())
}

fn pmu() -> Value {
    let core = perf::core_pmu();
    let events = core.as_ref().and_then(|p| fs::read_dir(format!("/sys/bus/event_source/devices/{p}/events")).ok()).map(|d| {
        let mut v: Vec<String> = d.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
        v.sort();
        v
    });
    json!({
        "core_pmu": core,
        "sysfs_events": events,
        "rdpmc": core.as_ref().and_then(|p| read_trim(&format!("/sys/bus/event_source/devices/{p}/rdpmc"))),
        "perf_event_paranoid": read_trim("/proc/sys/kernel/perf_event_paranoid").and_then(|s| s.parse::<i64>().ok()),
        "countable": countable(),
    })
}

/// Where `countable` keeps what it probed, in the agent's own directory (root's alone).
pub const COUNTABLE_CACHE: &str = "countable.json";

/// `perf::available(false)`, probed once per boot, perf_event_paranoid setting and core PMU
/// and kept in AGENT_DIR: every run records the list, and opening the first perf event on a
/// machine where none is open can take milliseconds (measured 8–13 ms on a KVM guest), which
/// a campaign paid between every two runs. Without the directory (not root) it is probed.
fn countable() -> Value {
    let key = format!(
        "{} {} {}",
        read_trim("/proc/sys/kernel/random/boot_id").unwrap_or_default(),
        read_trim("/proc/sys/kernel/perf_event_paranoid").unwrap_or_default(),
        perf::core_pmu().unwrap_or_default()
    );
    let dir = crate::safefs::own_dir(std::path::Path::new(crate::safefs::AGENT_DIR)).ok();
    if let Some(d) = &dir {
        if let Ok(v) = d.read(COUNTABLE_CACHE).map_err(|e| e.to_string()).and_then(|s| serde_json::from_str::<Value>(&s).map_err(|e| e.to_string())) {
            if v["key"].as_str() == Some(key.as_str()) && v["events"].is_array() {
                return v["events"].clone();
            }
        }
    }
    let events = json!(perf::available(false));
    if let Some(d) = &dir {
        // Written whole under a private name, then linked in place: a reader never sees half.
        let tmp = crate::safefs::random_name("countable-");
        if let Ok(mut f) = d.create(&tmp, 0o600) {
            use std::io::Write;
            if f.write_all(json!({"key": key, "events": events}).to_string().as_bytes()).is_ok() {
                let _ = d.unlink(COUNTABLE_CACHE);
                let _ = d.link(&tmp, COUNTABLE_CACHE);
            }
            let _ = d.unlink(&tmp);
        }
    }
    events
}

fn cgroups() -> Value {
    let v1: Vec<Value> = mounts("cgroup")
        .into_iter()
        .map(|(m, opts)| {
            let known = ["cpu", "cpuacct", "cpuset", "memory", "freezer", "pids", "blkio", "devices", "net_cls", "perf_event", "hugetlb"];
            let ctl: Vec<&str> = opts.split(',').filter(|o| known.contains(o)).collect();
            json!({"mount": m, "controllers": ctl})
        })
        .collect();
    let v2: Vec<Value> = mounts("cgroup2")
        .into_iter()
        .map(|(m, _)| {
            let ctl = read_trim(&format!("{m}/cgroup.controllers")).unwrap_or_default();
            json!({"mount": m, "controllers": ctl.split_whitespace().collect::<Vec<_>>()})
        })
        .collect();
    let rt_group = mounts("cgroup").iter().any(|(m, o)| o.split(',').any(|x| x == "cpu") && fs::metadata(format!("{m}/cpu.rt_runtime_us")).is_ok());
    json!({"v1": v1, "v2": v2, "rt_group_scheduling": rt_group})
}

pub fn collect() -> Value {
    let tracefs = tracefs_root();
    json!({
        "pmu": pmu(),
        "tracefs": {
            "mount": tracefs,
            "events": tracefs.as_ref().map(|t| fs::metadata(format!("{t}/events/sched/sched_switch")).is_ok()),
        },
        "cgroups": cgroups(),
        // SCHED_DEADLINE exists since Linux 3.14; its admission limit follows RT throttling.
        "sched_deadline": fs::metadata("/proc/sys/kernel/sched_rt_runtime_us").is_ok(),
        "deadline_group_servers": match super::cgroupfs::deadline_groups() {
            Ok(()) => json!({"available": true}),
            Err(why) => json!({"available": false, "reason": why}),
        },
        "resctrl": {
            "supported": fs::read_to_string("/proc/filesystems").map(|s| s.contains("resctrl")).unwrap_or(false),
            "mount": mounts("resctrl").into_iter().map(|(m, _)| m).next(),
        },
    })
}
