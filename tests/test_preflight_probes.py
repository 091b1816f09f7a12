"""Pre-flight probes for real, each refusal path made on purpose: memory locking of the
planned size without CAP_IPC_LOCK under a low RLIMIT_MEMLOCK, a hardware counter on a
machine without one, tracefs and a cgroup hierarchy mounted read-only in a private mount
namespace. Each: exit 2, one line naming the field, the cause and the fix, no run.json,
nothing started."""

import shutil
import subprocess

import pytest

from conftest import is_root, processes_named, small_plan, write_plan

pytestmark = pytest.mark.skipif(not is_root(), reason="needs root (drops capabilities, private mount namespaces)")


def _refused(p: subprocess.CompletedProcess, out, *needles: str) -> str:
    line = p.stderr.strip()
    assert p.returncode == 2 and "\n" not in line, (p.returncode, p.stderr)
    for n in needles:
        assert n in line, (n, line)
    assert not (out / "run.json").exists()
    assert not processes_named(("xt-victim", "xt-enemy"))
    return line


def _mounts(fstype: str, option: str | None = None) -> list[str]:
    with open("/proc/self/mounts") as f:
        rows = [l.split() for l in f]
    return [r[1] for r in rows if r[2] == fstype and (option is None or option in r[3].split(","))]


def _in_private_ns_read_only(mounts: list[str], cmd: list, first: str = "") -> subprocess.CompletedProcess:
    """`cmd` in a private mount namespace where `mounts` are read-only (the host keeps them;
    the read-only flag is the mount's, not the file system's), after shell commands `first`."""
    if not shutil.which("unshare"):
        pytest.skip("needs unshare (util-linux)")
    script = first + "".join(f"mount -o remount,bind,ro '{m}' || exit 99; " for m in mounts) + 'exec "$@"'
    p = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh", *map(str, cmd)],
                       capture_output=True, text=True, timeout=120)
    if p.returncode == 99:
        pytest.skip(f"cannot remount read-only in a private namespace: {p.stderr.strip()}")
    return p


def test_memory_locking_beyond_the_limit_is_refused(agent, tmp_path):
    if not (shutil.which("setpriv") and shutil.which("prlimit")):
        pytest.skip("needs setpriv and prlimit (util-linux)")
    plan = small_plan(jobs=5, lock_memory=True, body={"kind": "sum", "bytes": 32 << 20})
    out = tmp_path / "run"
    # Without CAP_IPC_LOCK, RLIMIT_MEMLOCK (1 MiB here) bounds what may be locked.
    p = subprocess.run(["prlimit", "--memlock=1048576:1048576", "--", "setpriv", "--inh-caps=-ipc_lock", "--bounding-set=-ipc_lock",
                        "--", agent, "run", write_plan(tmp_path, plan), "--out", out], capture_output=True, text=True, timeout=120)
    _refused(p, out, "victim.lock_memory", "lacks CAP_IPC_LOCK", "RLIMIT_MEMLOCK is 1024 KiB", "lock_memory = false")


def test_memory_locking_within_reach_passes(agent, tmp_path):
    """The same plan, with the capability: the probe locks 32 MiB for real and lets it run."""
    plan = small_plan(jobs=5, lock_memory=True, body={"kind": "sum", "bytes": 32 << 20})
    out = tmp_path / "run"
    p = subprocess.run([agent, "run", write_plan(tmp_path, plan), "--out", out], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr


def test_a_counter_the_machine_lacks_is_refused(agent, tmp_path, facts):
    countable = facts.environment["capabilities"]["pmu"]["countable"]
    if "instructions" in countable:
        pytest.skip("this machine has a PMU: hardware counters open")
    plan = small_plan(jobs=5, counters=[{"event": "instructions"}])
    out = tmp_path / "run"
    p = subprocess.run([agent, "run", write_plan(tmp_path, plan), "--out", out], capture_output=True, text=True, timeout=60)
    _refused(p, out, "victim.counters[0].event", "cannot be counted here", "optional = true")


def test_read_only_tracefs_is_refused(agent, tmp_path):
    import os
    roots = _mounts("tracefs")
    first = ""
    if not roots:  # mounted in the namespace only, where the agent looks first
        if not os.path.isdir("/sys/kernel/tracing"):
            pytest.skip("no /sys/kernel/tracing (a kernel without tracefs)")
        roots, first = ["/sys/kernel/tracing"], "mount -t tracefs nodev /sys/kernel/tracing || exit 99; "
    plan = small_plan(jobs=5)
    plan["trace"] = {"events": ["sched:sched_switch"], "buffer_kb": 1024}
    out = tmp_path / "run"
    p = _in_private_ns_read_only(roots, [agent, "run", write_plan(tmp_path, plan), "--out", out], first)
    _refused(p, out, "trace", "mounted read-only", "leave trace out")


def test_read_only_cgroup_hierarchy_is_refused(agent, tmp_path, facts):
    where = _mounts("cgroup", "cpuset") or _mounts("cgroup2")
    if not where:
        pytest.skip("no cgroup hierarchy offers cpuset here")
    cpu = facts.online_cpus[-1]
    plan = small_plan(jobs=5, group="part")
    plan["groups"] = [{"name": "part", "cpus": [cpu]}]
    out = tmp_path / "run"
    p = _in_private_ns_read_only(where[:1], [agent, "run", write_plan(tmp_path, plan), "--out", out])
    _refused(p, out, "groups[0]", "cpuset", "read-only")


def test_xtalk_run_is_refused_before_its_results_directory(tmp_path):
    """The same refusal through `xtalk run`: exit 2, the agent's one line, no results."""
    import os
    from conftest import XTALK
    first = ""
    roots = _mounts("tracefs")
    if not roots:
        if not os.path.isdir("/sys/kernel/tracing"):
            pytest.skip("no /sys/kernel/tracing (a kernel without tracefs)")
        roots, first = ["/sys/kernel/tracing"], "mount -t tracefs nodev /sys/kernel/tracing || exit 99; "
    f = tmp_path / "tr.toml"
    f.write_text('name = "tr"\nrepetitions = 1\nsettle = "10ms"\n[victim]\nbody = "sum"\nbytes = "64KiB"\nperiod = "2ms"\njobs = 5\n'
                 '[trace]\nevents = ["sched:sched_switch"]\n')
    p = _in_private_ns_read_only(roots, [*XTALK, "run", f, "--results", tmp_path / "res"], first)
    line = p.stderr.strip()
    assert p.returncode == 2 and "\n" not in line and "trace: tracefs at" in line and "read-only" in line, p.stdout + p.stderr
    assert not (tmp_path / "res").exists()
