//! The cgroup v2 path against a recorded tree: a temporary directory laid out like
//! /sys/fs/cgroup on a v2-only machine (cgroup.controllers, cgroup.subtree_control, and the
//! interface files of each controller a parent enables for its children), changed through a
//! small stand-in for the kernel that keeps the rules the agent depends on: a controller
//! can be enabled only where the parent offers it, a group has a controller's files only
//! when its parent enabled it, a file that is not there cannot be written, a partition with
//! no exclusive CPUs is invalid. So every v2 write is checked where the kernel's controllers
//! are bound to v1 hierarchies (as on the development machine).
use super::*;
use crate::plan::IoMax;
use std::path::{Path, PathBuf};

/// Interface files of each controller in a non-root group, with the kernel's defaults.
const FILES: &[(&str, &[(&str, &str)])] = &[
    ("cpu", &[("cpu.max", "max 100000"), ("cpu.weight", "100")]),
    ("cpuset", &[("cpuset.cpus", ""), ("cpuset.mems", ""), ("cpuset.cpus.exclusive", ""), (PARTITION, "member")]),
    ("memory", &[("memory.max", "max"), ("memory.high", "max")]),
    ("io", &[("io.max", "")]),
    ("pids", &[("pids.max", "max")]),
];

struct Tree {
    root: PathBuf,
    /// What was done, in order, relative to the root.
    log: Vec<String>,
}

impl Tree {
    /// A v2 root offering `offered`, of which `enabled` are enabled for its children.
    fn new(t: &tempfile::TempDir, offered: &str, enabled: &str) -> Tree {
        let root = t.path().join("cgroup");
        std::fs::create_dir(&root).unwrap();
        std::fs::write(root.join("cgroup.controllers"), offered).unwrap();
        std::fs::write(root.join("cgroup.subtree_control"), enabled).unwrap();
        std::fs::write(root.join("cgroup.procs"), "1\n").unwrap();
        Tree { root, log: Vec::new() }
    }

    fn rel<'a>(&self, p: &'a Path) -> String {
        p.strip_prefix(&self.root).unwrap_or(p).display().to_string()
    }

    fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.root.join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}")).trim().to_string()
    }
}

impl Changes for Tree {
    fn cgroup(&mut self, path: &Path) -> Result<(), String> {
        std::fs::create_dir(path).map_err(|e| format!("mkdir {}: {e}", path.display()))?;
        let parent = path.parent().unwrap();
        if let Ok(schemata) = std::fs::read_to_string(parent.join("schemata")) {
            // A resctrl group: its schemata start as the default group's; tasks join through `tasks`.
            std::fs::write(path.join("schemata"), schemata).unwrap();
            std::fs::write(path.join("tasks"), "").unwrap();
            self.log.push(format!("mkdir {}", self.rel(path)));
            return Ok(());
        }
        let enabled = std::fs::read_to_string(parent.join("cgroup.subtree_control")).unwrap();
        std::fs::write(path.join("cgroup.controllers"), enabled.trim()).unwrap();
        for f in ["cgroup.subtree_control", "cgroup.procs", "cgroup.freeze", "cgroup.kill"] {
            std::fs::write(path.join(f), "").unwrap();
        }
        for c in enabled.split_whitespace() {
            for (f, default) in FILES.iter().find(|(n, _)| *n == c).map(|(_, f)| *f).unwrap_or(&[]) {
                std::fs::write(path.join(f), default).unwrap();
            }
        }
        self.log.push(format!("mkdir {}", self.rel(path)));
        Ok(())
    }

    fn write(&mut self, path: &Path, value: &str) -> Result<(), String> {
        if !path.exists() {
            return Err(format!("write {} = {value}: No such file or directory (os error 2)", path.display()));
        }
        let mut stored = value.to_string();
        if path.file_name().unwrap() == PARTITION && value != "member" {
            let excl = std::fs::read_to_string(path.with_file_name("cpuset.cpus.exclusive")).unwrap_or_default();
            if excl.trim().is_empty() {
                stored = format!("{value} invalid (Cpu list in cpuset.cpus.exclusive is empty)");
            }
        }
        std::fs::write(path, stored).unwrap();
        self.log.push(format!("write {} = {value}", self.rel(path)));
        Ok(())
    }

    fn enable(&mut self, parent: &Path, controller: &str) -> Result<(), String> {
        let offered = std::fs::read_to_string(parent.join("cgroup.controllers")).unwrap();
        if !offered.split_whitespace().any(|c| c == controller) {
            return Err(format!("enable {controller} in {}: No such file or directory (os error 2)", parent.display()));
        }
        let f = parent.join("cgroup.subtree_control");
        let now = std::fs::read_to_string(&f).unwrap();
        std::fs::write(&f, format!("{} {controller}", now.trim()).trim()).unwrap();
        self.log.push(format!("enable {} +{controller}", self.rel(parent)));
        Ok(())
    }
}

/// The machine of a v2-only system whose unified hierarchy is mounted at `root`.
fn v2_machine<'a>(root: &Path, lookup: Lookup<'a>, disks: &'a dyn Fn(&Path) -> Result<Option<String>, String>) -> Machine<'a> {
    Machine {
        lookup,
        run: Ok(Controller { name: crate::launch::contain::UNIFIED, version: Version::V2, mount: root.to_path_buf() }),
        pid: 4242,
        rt_group_files: false,
        online: vec![0, 1, 2, 3],
        disks,
        resctrl: None,
    }
}

fn v2_lookup(root: PathBuf) -> impl Fn(&'static str) -> Option<Controller> {
    move |name| ["cpu", "cpuset", "memory", "io", "pids"].contains(&name).then(|| Controller { name, version: Version::V2, mount: root.clone() })
}

fn groups() -> Vec<Group> {
    vec![
        Group { name: "crit".into(), cpus: Some(vec![3]), isolated: true, ..Default::default() },
        Group {
            name: "faults".into(),
            cpus: Some(vec![0, 1, 2]),
            cpu_quota_us: Some(5000),
            cpu_period_us: Some(10000),
            cpu_weight: Some(50),
            memory_max: Some(192 << 20),
            memory_high: Some(160 << 20),
            pids_max: Some(16),
            io_max: Some(IoMax { paths: vec!["/scratch".into()], devices: vec!["8:16".into()], wbps: Some(16 << 20), riops: Some(500), ..Default::default() }),
            freezable: true,
            ..Default::default()
        },
    ]
}

#[test]
fn every_v2_setting_lands_in_its_file() {
    let t = tempfile::tempdir().unwrap();
    let mut tree = Tree::new(&t, "cpuset cpu io memory hugetlb pids", "cpuset cpu io memory hugetlb pids");
    let lookup = v2_lookup(tree.root.clone());
    // /scratch lives on a partition of the disk 8:0.
    let disks = |p: &Path| Ok((p == Path::new("/scratch")).then(|| "8:0".to_string()));
    let m = v2_machine(&tree.root.clone(), &lookup, &disks);
    let g = Groups::create_on(&m, &groups(), Some(64), &mut tree).unwrap();

    assert_eq!(tree.read("xtalk-4242/pids.max"), "64", "the run's process budget on its own group");
    assert_eq!(tree.read("xtalk-4242/cgroup.subtree_control"), "cpuset cpu memory io pids", "only what some group uses: {:?}", tree.log);
    assert_eq!(tree.read("xtalk-4242/cpuset.cpus.exclusive"), "3", "the parent claims its partitions' CPUs");
    assert_eq!(tree.read("xtalk-4242/crit/cpuset.cpus"), "3");
    assert_eq!(tree.read("xtalk-4242/crit/cpuset.cpus.exclusive"), "3");
    assert_eq!(tree.read("xtalk-4242/crit/cpuset.cpus.partition"), "isolated");
    assert_eq!(tree.read("xtalk-4242/faults/cpuset.cpus"), "0-2");
    assert_eq!(tree.read("xtalk-4242/faults/cpuset.cpus.partition"), "member", "not a partition unless asked");
    assert_eq!(tree.read("xtalk-4242/faults/cpu.max"), "5000 10000");
    assert_eq!(tree.read("xtalk-4242/faults/cpu.weight"), "50");
    assert_eq!(tree.read("xtalk-4242/faults/memory.max"), (192u64 << 20).to_string());
    assert_eq!(tree.read("xtalk-4242/faults/memory.high"), (160u64 << 20).to_string());
    assert_eq!(tree.read("xtalk-4242/faults/pids.max"), "16");
    // One io.max line per disk, the devices named first, then the disks of the paths.
    let io: Vec<String> = tree.log.iter().filter(|l| l.contains("io.max")).cloned().collect();
    assert_eq!(io, ["write xtalk-4242/faults/io.max = 8:16 wbps=16777216 riops=500", "write xtalk-4242/faults/io.max = 8:0 wbps=16777216 riops=500"]);
    // Every group, `_run` too, is one directory of the unified hierarchy.
    for name in ["crit", "faults", RUN_GROUP] {
        assert_eq!(g.dirs_of(name), vec![tree.root.join("xtalk-4242").join(name)], "{name}");
    }
    assert_eq!(g.run_group().unwrap(), tree.root.join("xtalk-4242"));
    // The parent enables the controllers before any child exists, and a partition's
    // exclusive CPUs come before the partition.
    let pos = |s: &str| tree.log.iter().position(|l| l == s).unwrap_or_else(|| panic!("{s} not in {:?}", tree.log));
    assert!(pos("enable xtalk-4242 +cpu") < pos("mkdir xtalk-4242/crit"));
    assert!(pos("write xtalk-4242/crit/cpuset.cpus.exclusive = 3") < pos("write xtalk-4242/crit/cpuset.cpus.partition = isolated"));
}

#[test]
fn a_controller_the_host_keeps_from_children_is_named_with_the_fix() {
    let t = tempfile::tempdir().unwrap();
    // io exists, but the host's root does not enable it for its children.
    let mut tree = Tree::new(&t, "cpuset cpu io memory pids", "cpuset cpu memory pids");
    let lookup = v2_lookup(tree.root.clone());
    let disks = |_: &Path| Ok(Some("8:0".to_string()));
    let m = v2_machine(&tree.root.clone(), &lookup, &disks);
    let e = Groups::create_on(&m, &groups(), None, &mut tree).err().unwrap();
    assert!(e.contains("the io controller is not enabled") && e.contains("echo +io >"), "{e}");
}

#[test]
fn an_invalid_partition_is_an_error_not_a_silent_member() {
    let t = tempfile::tempdir().unwrap();
    let mut tree = Tree::new(&t, "cpuset", "cpuset");
    let lookup = v2_lookup(tree.root.clone());
    let disks = |_: &Path| Ok(None);
    let m = v2_machine(&tree.root.clone(), &lookup, &disks);
    // An empty CPU list for the partition: the kernel marks it invalid.
    let g = Group { name: "crit".into(), cpus: Some(vec![]), exclusive: true, ..Default::default() };
    let e = Groups::create_on(&m, &[g], None, &mut tree).err().unwrap();
    assert!(e.contains("refused the partition") && e.contains("root invalid"), "{e}");
}

#[test]
fn rt_group_bandwidth_on_v2_names_the_nearest_equivalent() {
    let root = PathBuf::from("/sys/fs/cgroup");
    let lookup = v2_lookup(root);
    let g = Group { name: "rt".into(), rt_runtime_us: Some(1000), rt_period_us: Some(10000), ..Default::default() };
    let e = settings_with(&g, &lookup, false, &[0, 1], &|_| Ok(None)).unwrap_err();
    assert!(e.contains("CONFIG_RT_GROUP_SCHED") && e.contains("SCHED_DEADLINE with the same bandwidth"), "{e}");
}

#[test]
fn v1_settings_use_the_v1_files() {
    let lookup = |name: &'static str| -> Option<Controller> {
        Some(Controller { name, version: Version::V1, mount: PathBuf::from(format!("/sys/fs/cgroup/{name}")) })
    };
    let g = Group {
        name: "faults".into(),
        cpus: Some(vec![0]),
        isolated: true,
        cpu_quota_us: Some(5000),
        cpu_period_us: Some(10000),
        io_max: Some(IoMax { devices: vec!["254:0".into()], rbps: Some(1000), wbps: Some(2000), ..Default::default() }),
        ..Default::default()
    };
    let s = settings_with(&g, &lookup, true, &[0, 1], &|_| Ok(None)).unwrap();
    let files: Vec<(&str, &str)> = s.iter().map(|(_, f, v)| (f.as_str(), v.as_str())).collect();
    for want in [("cpuset.cpu_exclusive", "1"), ("cpuset.sched_load_balance", "0"), ("cpu.cfs_quota_us", "5000"),
                 ("blkio.throttle.read_bps_device", "254:0 1000"), ("blkio.throttle.write_bps_device", "254:0 2000")] {
        assert!(files.contains(&want), "{want:?} not in {files:?}");
    }
    assert!(!files.iter().any(|(f, _)| f.contains("iops")), "no limit asked, none written: {files:?}");
}

#[test]
fn io_limits_without_a_controller_are_refused() {
    let lookup = |_: &'static str| -> Option<Controller> { None };
    let g = Group { name: "g".into(), io_max: Some(IoMax { devices: vec!["8:0".into()], wbps: Some(1), ..Default::default() }), ..Default::default() };
    let e = settings_with(&g, &lookup, false, &[0], &|_| Ok(None)).unwrap_err();
    assert!(e.contains("io controller") && e.contains("blkio"), "{e}");
    let bad = Group { name: "g".into(), io_max: Some(IoMax { devices: vec!["sda".into()], wbps: Some(1), ..Default::default() }), ..Default::default() };
    let lookup = v2_lookup(PathBuf::from("/x"));
    assert!(settings_with(&bad, &lookup, false, &[0], &|_| Ok(None)).unwrap_err().contains("MAJ:MIN"));
}

#[test]
fn cache_ways_and_bandwidth_get_a_resctrl_group_of_their_own() {
    let t = tempfile::tempdir().unwrap();
    let mut tree = Tree::new(&t, "cpuset", "cpuset");
    // A recorded resctrl tree: 11-way L3 CAT and MBA on two cache domains.
    let rd = t.path().join("resctrl");
    std::fs::create_dir_all(rd.join("info/L3")).unwrap();
    std::fs::create_dir_all(rd.join("info/MB")).unwrap();
    std::fs::write(rd.join("info/L3/cbm_mask"), "7ff").unwrap();
    std::fs::write(rd.join("info/MB/min_bandwidth"), "10").unwrap();
    std::fs::write(rd.join("schemata"), "L3:0=7ff;1=7ff\nMB:0=100;1=100\n").unwrap();
    let lookup = v2_lookup(tree.root.clone());
    let disks = |_: &Path| Ok(None);
    let mut m = v2_machine(&tree.root.clone(), &lookup, &disks);
    m.resctrl = Some(rd.clone());
    let g = Group { name: "crit".into(), cpus: Some(vec![3]), cache_ways: Some(vec![0, 1, 2, 3]), mb_percent: Some(40), ..Default::default() };
    let groups = Groups::create_on(&m, &[g.clone()], None, &mut tree).unwrap();
    assert!(tree.log.contains(&format!("write {}/xtalk-4242-crit/schemata = L3:0=f;1=f", rd.display())), "{:?}", tree.log);
    assert!(tree.log.contains(&format!("write {}/xtalk-4242-crit/schemata = MB:0=40;1=40", rd.display())), "{:?}", tree.log);
    // Its processes join it with their cgroups.
    assert_eq!(groups.dirs_of("crit"), vec![tree.root.join("xtalk-4242/crit"), rd.join("xtalk-4242-crit")]);
    // No resctrl here: the run stops before anything starts, naming what is missing.
    let t2 = tempfile::tempdir().unwrap();
    let mut none = Tree::new(&t2, "cpuset", "cpuset");
    let lookup2 = v2_lookup(none.root.clone());
    let m2 = v2_machine(&none.root.clone(), &lookup2, &disks);
    let e = Groups::create_on(&m2, &[g], None, &mut none).err().unwrap();
    assert!(e.contains("resctrl"), "{e}");
}
