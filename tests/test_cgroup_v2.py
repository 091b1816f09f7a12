"""cgroup v2 parity of configurations: what a v2-only machine plans (recorded fixtures),
the `partitioned` preset's I/O limit on this machine's v1 blkio hierarchy (live), and runs
in a private mount namespace where only cgroup2 is mounted (live, as far as this machine's
v2 hierarchy offers controllers). The file writes of the v2 path are checked against a
recorded cgroup tree in the agent's own tests (launch/cgroup_tree_tests.rs)."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import capabilities
from conftest import XTALK, is_root, needs_root, processes_named, small_plan, wait_for, write_plan, xtalk
from test_isolation import CONFIGS, journals, leftover_cgroups

ROOT = Path(__file__).resolve().parents[1]
MACHINES = ROOT / "tests" / "fixtures" / "machines"
FAILURE = ROOT / "examples" / "failure_propagation.toml"
CONFIGURATIONS = ROOT / "examples" / "configurations.toml"


def shown(stdout: str) -> list[dict]:
    """The plans `xtalk plan --show` printed."""
    out, dec = [], json.JSONDecoder()
    text = stdout[stdout.index("\n{") + 1:]
    while text.strip():
        p, end = dec.raw_decode(text)
        out.append(p)
        text = text[end:].lstrip()
    return out


def v2_host(tmp_path: Path) -> Path:
    """The recorded 16-core v2-only machine, as a host rather than a container: its process
    in the root cgroup, where real-time policies are allowed."""
    doc = json.loads((MACHINES / "xeon16-cgroup2-container.json").read_text())
    doc["policies"].update(fifo="ok", rr="ok")
    doc["process"]["cpu_cgroup"] = {"path": "/sys/fs/cgroup", "rt_runtime_us": None}
    doc["process"]["rlimit_rtprio"] = 99
    f = tmp_path / "xeon16-cgroup2-host.json"
    f.write_text(json.dumps(doc))
    return f


def test_failure_propagation_plans_on_v2_with_the_partition_bounded_there(tmp_path):
    r = xtalk("plan", "--machine", v2_host(tmp_path), FAILURE, "--show", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    parts = [p for p in shown(r.stdout) if p["labels"]["configuration"] == "partitioned"]
    assert parts
    for p in parts:
        (g,) = p["groups"]
        assert g["name"] == "faults" and all(e["group"] == "faults" for e in p["enemies"])
        assert g["pids_max"] == 16 and g["memory_max"] == 192 << 20
        assert g["cpus"] == list(range(15)), "the CPUs other than the victim's (the last)"
        # No v1 cpu controller: no CFS quota (it would put the FIFO victim under the v2 cpu
        # controller) and no RT group runtime.
        assert g["cpu_quota_us"] is None and g["rt_runtime_us"] is None
        assert g["io_max"]["rbps"] == g["io_max"]["wbps"] == 16 << 20
    disk = next(p for p in parts if p["labels"]["scenario"] == "diskfill")
    assert disk["groups"][0]["io_max"]["paths"] == ["/tmp"], "the disk holding diskfill's file"


def test_failure_propagation_plans_on_v1_with_quota_rt_runtime_and_blkio(tmp_path):
    r = xtalk("plan", "--machine", MACHINES / "dev-2vcpu-amd.json", FAILURE, "--show", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    (g,) = next(p for p in shown(r.stdout) if p["labels"]["configuration"] == "partitioned")["groups"]
    assert g["cpu_quota_us"] == 5000 and g["cpu_period_us"] == 10000
    assert g["rt_runtime_us"] == 100_000 and g["rt_period_us"] == 1_000_000
    assert g["cpus"] == [0] and g["io_max"]["wbps"] == 16 << 20


def test_rr_cgroups_on_v2_is_unavailable_with_its_nearest_equivalent(tmp_path):
    r = xtalk("plan", "--machine", v2_host(tmp_path), CONFIGURATIONS, cwd=tmp_path)
    err = " ".join(r.stderr.split())
    assert r.returncode == 2
    assert "'rr+cgroups'" in err and "per-task SCHED_DEADLINE with the same bandwidth" in err, r.stderr
    r = xtalk("plan", "--machine", v2_host(tmp_path), CONFIGURATIONS, "--skip-unavailable", cwd=tmp_path)
    out = " ".join(r.stdout.split())  # the console wraps long lines
    assert r.returncode == 0, r.stderr
    assert "configuration rr+cgroups skipped" in out and "configuration deadline+cgroups skipped" in out, out
    # The alternative, spelt out as settings: the victim's 8 ms of RT runtime per 10 ms
    # (its reservation) reserved per task over its own 10 ms period, the enemies' 1.5 ms.
    assert 'victim = { policy = "deadline", runtime = "8000us", unpinned = true }' in out, out
    assert 'enemies = { policy = "deadline", runtime = "1500us", unpinned = true }' in out, out


def test_v2_groups_cpu_max_weight_partition_memory_io_pids_plan(tmp_path):
    exp = tmp_path / "g.toml"
    exp.write_text(CONFIGS.split("[[configuration]]")[0] + """
[[configuration]]
name = "v2"
victim = { group = "crit" }
enemies = { group = "rest" }
groups = [
  { name = "crit", cpus = [15], isolated = true },
  { name = "rest", cpus = "0-14", cpu_max = "20ms 100ms", cpu_weight = 50, memory_max = "1GiB", pids_max = 64, io_max = { devices = ["8:0"], wbps = "8MiB/s", riops = 100 } },
]
""")
    r = xtalk("plan", "--machine", v2_host(tmp_path), exp, "--show", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    crit, rest = shown(r.stdout)[0]["groups"]
    assert crit["isolated"] and crit["exclusive"] and crit["cpus"] == [15]
    assert rest["cpu_quota_us"] == 20_000 and rest["cpu_weight"] == 50
    assert rest["io_max"] == {"paths": [], "devices": ["8:0"], "rbps": None, "wbps": 8 << 20, "riops": 100, "wiops": None}


@pytest.mark.parametrize("io, needle", [
    ('{ wbps = "1MiB/s" }', "io_max: name the disks"),
    ('{ devices = ["8:0"] }', "io_max: give a limit"),
    ('{ devices = ["8:0"], wbps = "1MiB" }', "io_max.wbps: write a rate"),
])
def test_bad_io_limits_are_one_line_naming_the_field(tmp_path, io, needle):
    exp = tmp_path / "g.toml"
    exp.write_text(CONFIGS.split("[[configuration]]")[0] + f"""
[[configuration]]
name = "io"
enemies = {{ group = "rest" }}
groups = [{{ name = "rest", io_max = {io} }}]
""")
    r = xtalk("plan", "--machine", v2_host(tmp_path), exp, cwd=tmp_path)
    assert r.returncode == 2 and needle in r.stderr and "\n" not in r.stderr.strip(), r.stderr


def disk_of(path: str) -> str | None:
    """The whole disk holding `path` ("MAJ:MIN"), as the agent finds it."""
    st = os.stat(path)
    dev = Path(f"/sys/dev/block/{os.major(st.st_dev)}:{os.minor(st.st_dev)}")
    if not dev.exists():
        return None
    return (dev.resolve().parent / "dev").read_text().strip() if (dev / "partition").exists() else f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}"


BLKIO = Path("/sys/fs/cgroup/blkio")


def diskfill_plan(tmp_path: Path, jobs: int) -> tuple[dict, int]:
    wbps = 4 << 20
    plan = small_plan(jobs=jobs, period_ns=5_000_000)
    plan["groups"] = [{"name": "faults", "pids_max": 16, "io_max": {"paths": [str(tmp_path)], "wbps": wbps}}]
    plan["enemies"] = [{"name": "d", "load": {"kind": "diskfill", "dir": str(tmp_path), "bytes": 8 << 20}, "group": "faults"}]
    return plan, wbps


def needs_blkio_disk(tmp_path: Path) -> str:
    if not (BLKIO / "blkio.throttle.write_bps_device").exists():
        pytest.skip("no v1 blkio hierarchy here (the v2 io path is checked against a recorded tree in the agent's tests)")
    disk = disk_of(str(tmp_path))
    if disk is None:
        pytest.skip(f"{tmp_path} is on a file system without a block device: no disk to limit")
    return disk


@needs_root
def test_io_limit_holds_diskfill_to_its_rate(agent, tmp_path):
    """Live on a v1 blkio hierarchy (this machine): the group's write limit is on the disk of
    diskfill's directory while it runs, and what diskfill wrote is bounded by it: the limit
    over the run, plus the one file it writes into the page cache before its first sync."""
    disk = needs_blkio_disk(tmp_path)
    plan, wbps = diskfill_plan(tmp_path, jobs=800)
    out = tmp_path / "run"
    p = subprocess.Popen([agent, "run", write_plan(tmp_path, plan), "--out", out])
    limit = BLKIO / f"xtalk-{p.pid}" / "faults" / "blkio.throttle.write_bps_device"
    try:
        assert wait_for(lambda: limit.exists() and limit.read_text().strip(), timeout=20), "the group never had its limit"
        assert limit.read_text().split() == [disk, str(wbps)]
    finally:
        assert p.wait(timeout=60) == 0
    meta = json.loads((out / "run.json").read_text())
    e = meta["enemies"][0]
    seconds = e["ops"] / e["rate"]
    assert e["ops"] > 0 and e["ops"] <= wbps * seconds + (8 << 20), f"{e['ops']} bytes in {seconds:.1f} s under {wbps} B/s"
    assert meta["configuration"]["restored"] and not leftover_cgroups() and not journals()


@needs_root
def test_io_limited_group_of_a_killed_agent_is_recovered(agent, tmp_path):
    """A SIGKILLed agent's limited group is undone by `xtalk-agent recover`."""
    needs_blkio_disk(tmp_path)
    plan, _ = diskfill_plan(tmp_path, jobs=2000)
    p = subprocess.Popen([agent, "run", write_plan(tmp_path, plan), "--out", tmp_path / "run"])
    try:
        enemy = wait_for(lambda: processes_named(("xt-enemy-0",)), timeout=20)
        assert enemy and f"blkio:/xtalk-{p.pid}/faults" in Path(f"/proc/{enemy[0][0]}/cgroup").read_text()
    finally:
        p.kill()
        p.wait()
    assert leftover_cgroups(), "a killed agent cannot undo its changes"
    rec = subprocess.run([agent, "recover"], capture_output=True, text=True, timeout=60)
    assert rec.returncode == 0, rec.stderr
    assert f"removed cgroup {BLKIO}/xtalk-{p.pid}/faults" in rec.stdout, rec.stdout
    assert not leftover_cgroups() and not journals()
    assert wait_for(lambda: not processes_named(), timeout=10), processes_named()


def v2_namespace_ok() -> str | None:
    """Why this test cannot make a cgroup2-only mount namespace here, or None."""
    if not is_root():
        return "needs root (a private mount namespace and mounts)"
    if not shutil.which("unshare"):
        return "no unshare(1) here (util-linux)"
    if "cgroup2" not in Path("/proc/filesystems").read_text():
        return "this kernel has no cgroup2 file system"
    return None


def in_v2_namespace(cmd: str, timeout: int = 900) -> subprocess.CompletedProcess:
    """Run a shell command in a private mount namespace where /sys/fs/cgroup holds only the
    cgroup2 hierarchy (the v1 mounts are gone from it, as on a v2-only machine)."""
    script = ("set -e; mount --make-rprivate /; umount -R /sys/fs/cgroup 2>/dev/null || umount -l /sys/fs/cgroup; "
              "mount -t cgroup2 none /sys/fs/cgroup; "
              "if grep -q '^cgroup ' /proc/mounts; then echo 'v1 still mounted' >&2; exit 99; fi; " + cmd)
    return subprocess.run(["unshare", "-m", "--", "sh", "-c", script], capture_output=True, text=True, timeout=timeout, cwd=ROOT)


def v2_leftovers() -> list[str]:
    """Dead agents' groups in the cgroup2 hierarchy (mounted at /sys/fs/cgroup/unified here)."""
    for m in (Path("/sys/fs/cgroup/unified"), Path("/sys/fs/cgroup")):
        if (m / "cgroup.controllers").exists():
            return [str(d) for d in m.glob("xtalk-*") if not Path(f"/proc/{d.name[6:]}").exists()]
    return []


@pytest.mark.skipif(v2_namespace_ok() is not None, reason=str(v2_namespace_ok()))
def test_configurations_run_in_a_cgroup2_only_namespace(tmp_path):
    """The configurations v2 can provide run; rr+cgroups is named with its alternative."""
    exp = tmp_path / "c.toml"
    exp.write_text(CONFIGS)
    py = " ".join(XTALK)
    r = in_v2_namespace(f"{sys.executable} -m xtalk.cli sysinfo --json > {tmp_path}/sysinfo.json; "
                        f"{py} run {exp} --results {tmp_path}/res --skip-unavailable")
    assert r.returncode == 0, r.stdout + r.stderr
    caps = json.loads((tmp_path / "sysinfo.json").read_text())["capabilities"]["cgroups"]
    assert caps["v1"] == [] and caps["v2"], "the namespace shows cgroup2 only"
    (res,) = (tmp_path / "res").iterdir()
    table = json.loads((res / "summary.json").read_text())
    got = {r["configuration"] for r in table}
    skipped = {s["configuration"]: s["reason"] for s in json.loads((res / "experiment.json").read_text())["skipped_configurations"]}
    # In a cgroup with no real-time runtime (a container) the FIFO and RR configurations are
    # skipped with the reason, and DEADLINE still runs.
    rt_refused = capabilities.policy("fifo")
    assert ({"dl"} if rt_refused else {"own", "rr", "dl"}) <= got and all(r["runs_ok"] == r["runs"] for r in table), table
    if rt_refused:
        assert {"own", "rr"} <= set(skipped) and "refused" in skipped["own"], skipped
        assert "deadline" in skipped["rrcg"].lower(), skipped
    else:
        assert "per-task SCHED_DEADLINE with the same bandwidth" in skipped["rrcg"], skipped
    # Every run was contained in its own v2 group (cgroup.kill), and left nothing.
    run = json.loads(next(res.glob("runs/*/run.json")).read_text())
    assert run["configuration"]["run_group"]["dir"].startswith("/sys/fs/cgroup/xtalk-"), run["configuration"]["run_group"]
    assert not v2_leftovers() and not leftover_cgroups() and not journals()


@pytest.mark.skipif(v2_namespace_ok() is not None, reason=str(v2_namespace_ok()))
def test_failure_propagation_in_a_cgroup2_only_namespace(tmp_path):
    """Plans where this machine's v2 hierarchy offers the controllers the example needs; where
    it does not (here they are bound to v1 hierarchies, which a namespace cannot release),
    the refusal names the controller (the plan on a v2 machine is checked above, against
    its fixture)."""
    r = in_v2_namespace(f"cat /sys/fs/cgroup/cgroup.controllers; {sys.executable} -m xtalk.cli plan {FAILURE}")
    offered = set(r.stdout.splitlines()[0].split()) if r.stdout else set()
    if capabilities.policy("fifo"):
        # The example's victim is SCHED_FIFO: refused where this cgroup has no real-time
        # runtime, in one line that names the way out.
        assert r.returncode == 2 and "SCHED_FIFO refused" in r.stderr and "deadline" in r.stderr, r.stdout + r.stderr
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    elif {"pids", "memory"} <= offered:
        assert r.returncode == 0, r.stderr
    else:
        # The other path, checked rather than skipped: one line naming the missing controller.
        assert r.returncode == 2 and "controller is not mounted" in r.stderr, r.stdout + r.stderr
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr


RESCTRL_CONFIG = """
[[configuration]]
name = "own"

[[configuration]]
name = "rdt"
victim = { group = "crit" }
groups = [{ name = "crit", cpus = [15], cache_ways = "0-3", memory_bandwidth = "40%" }]
"""


def test_cache_ways_and_bandwidth_need_resctrl_and_say_so(tmp_path):
    exp = tmp_path / "r.toml"
    exp.write_text(CONFIGS.split("[[configuration]]")[0] + RESCTRL_CONFIG)
    r = xtalk("plan", "--machine", v2_host(tmp_path), exp, cwd=tmp_path)
    err = " ".join(r.stderr.split())
    assert r.returncode == 2 and "need resctrl (Intel RDT, AMD PQoS, Arm MPAM)" in err and "--skip-unavailable" in err, r.stderr
    r = xtalk("plan", "--machine", v2_host(tmp_path), exp, "--skip-unavailable", cwd=tmp_path)
    assert r.returncode == 0 and "configuration rdt skipped" in " ".join(r.stdout.split()), r.stdout + r.stderr


def test_cache_ways_and_bandwidth_plan_where_resctrl_is_mounted(tmp_path):
    """The same machine with resctrl mounted (recorded as Intel RDT shows it): the group's
    ways and share reach the plan; the schemata written from them are checked against a
    recorded resctrl tree in the agent's tests (launch/resctrl.rs)."""
    f = v2_host(tmp_path)
    doc = json.loads(f.read_text())
    doc["capabilities"]["resctrl"] = {"supported": True, "mount": "/sys/fs/resctrl"}
    f.write_text(json.dumps(doc))
    exp = tmp_path / "r.toml"
    exp.write_text(CONFIGS.split("[[configuration]]")[0] + RESCTRL_CONFIG)
    r = xtalk("plan", "--machine", f, exp, "--show", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    (g,) = next(p for p in shown(r.stdout) if p["labels"]["configuration"] == "rdt")["groups"]
    assert g["cache_ways"] == [0, 1, 2, 3] and g["mb_percent"] == 40
