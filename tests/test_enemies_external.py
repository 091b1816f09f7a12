"""External enemies: a command in its own process group, stopped with the run (nothing
survives), its declared count read from its output, an early exit recorded in run.json."""

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from conftest import TOKEN, processes_named, small_plan, write_plan


def run(agent, tmp_path, enemies, jobs=50):
    out = tmp_path / "run"
    p = subprocess.run([agent, "run", write_plan(tmp_path, small_plan(jobs=jobs, enemies=enemies)), "--out", out],
                       capture_output=True, text=True, timeout=60)
    return p, json.loads((out / "run.json").read_text())


def ours_running(word: str) -> list[int]:
    """Live processes started by this test session whose command line holds `word`."""
    pids = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            if TOKEN.encode() in (d / "environ").read_bytes() and word.encode() in (d / "cmdline").read_bytes():
                if (d / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                    pids.append(int(d.name))
        except OSError:
            continue
    return pids


def test_an_early_exit_is_noted(agent, tmp_path):
    ext = {"name": "quick", "load": {"kind": "external", "argv": ["sh", "-c", "echo bye; exit 3"]}}
    p, meta = run(agent, tmp_path, [ext])
    assert p.returncode == 0 and meta["status"] == "completed", meta
    (note,) = meta["notes"]
    assert note.startswith("enemy quick ended before it was stopped")
    assert "external command 'sh' exited with status 3" in note and "last output: bye" in note
    assert "exited with status 3" in meta["enemies"][0]["ended_early"]
    assert meta["enemies"][0]["setup_error"] is None


def test_the_whole_group_is_stopped(agent, tmp_path):
    """The command's own children die with it: SIGTERM, then SIGKILL, to the process group.
    SIGTERM is ignored here (an ignored disposition is inherited by the children), so only
    the group-wide SIGKILL after the grace period ends the background sleep."""
    ext = {"name": "stubborn", "load": {"kind": "external", "argv": ["sh", "-c", "trap '' TERM; sleep 987 & sleep 988; wait"]}}
    p, meta = run(agent, tmp_path, [ext])
    assert p.returncode == 0 and not meta["notes"], meta
    assert meta["enemies"][0]["ended_early"] is None
    assert not ours_running("sleep 98"), "a process of the external command survived the run"
    assert not processes_named()


def test_declared_count_is_read_from_the_output(agent, tmp_path):
    ext = {"name": "w", "load": {"kind": "external", "argv": ["sh", "-c", "echo 'done 1,234 widgets'; trap 'echo \"done 12,345 widgets\"; exit 0' TERM; while :; do sleep 0.01; done"],
                                 "rate_regex": r"done ([0-9,]+) widgets", "unit": "widgets"}}
    p, meta = run(agent, tmp_path, [ext])
    assert p.returncode == 0, meta
    (e,) = meta["enemies"]
    assert e["unit"] == "widgets"
    assert e["ops"] == 12345, "the last match counts: the total printed when the command stopped"
    assert abs(e["rate"] - 12345 / e["seconds"]) < 1e-6 * e["rate"]


def test_xtalk_run_says_so(tmp_path):
    from conftest import xtalk

    f = tmp_path / "exp.toml"
    f.write_text("""
name = "early"
repetitions = 1
settle = "20ms"
[victim]
body = "sum"
bytes = "64KiB"
period = "2ms"
jobs = 30
[[scenario]]
name = "ext"
enemies = [{ kind = "external", argv = ["true"] }]
""")
    out = xtalk("run", f, "--results", tmp_path / "res")
    assert out.returncode == 0, out.stderr
    assert "enemy external ended before it was stopped" in out.stdout
    assert "external command 'true' exited with status 0" in out.stdout


def _can_take(policy: str) -> str | None:
    """Why a child of this process cannot take `policy` here (None: it can): probed for
    real, since root in a cgroup without RT runtime is refused SCHED_FIFO all the same."""
    import shutil
    import sys
    if policy == "deadline":
        if not shutil.which("chrt"):
            return "needs chrt (util-linux) to probe SCHED_DEADLINE"
        p = subprocess.run(["chrt", "-d", "--sched-runtime", "1000000", "--sched-deadline", "10000000", "--sched-period", "10000000",
                            "0", "true"], capture_output=True, text=True)
        return None if p.returncode == 0 else f"this machine refuses deadline: {p.stderr.strip()}"
    code = {"fifo": "os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10))",
            "rr": "os.sched_setscheduler(0, os.SCHED_RR, os.sched_param(10))",
            "nice": "os.setpriority(os.PRIO_PROCESS, 0, -5)"}[policy]
    p = subprocess.run([sys.executable, "-c", f"import os; {code}"], capture_output=True, text=True)
    return None if p.returncode == 0 else f"this machine refuses {policy}: {p.stderr.strip().splitlines()[-1]}"


_SCHED = {"fifo": ({"policy": "fifo", "priority": 17}, os.SCHED_FIFO, 17, 18),
          "rr": ({"policy": "rr", "priority": 23}, os.SCHED_RR, 23, 24),
          "nice": ({"policy": "other", "nice": -5}, os.SCHED_OTHER, 0, 0),
          # The command holds the reservation; its watcher none (SCHED_OTHER).
          "deadline": ({"policy": "deadline", "runtime_ns": 1_000_000, "deadline_ns": 10_000_000, "period_ns": 10_000_000}, 6, 0, 0)}


@pytest.mark.parametrize("policy", sorted(_SCHED))
def test_the_command_itself_runs_under_the_planned_policy(agent, tmp_path, last_cpu, policy):
    """The enemy's policy, priority and CPUs belong to the command, read from /proc while the
    run is live: once, only the enemy process that forks it had them (SCHED_FLAG_RESET_ON_FORK
    gave the command SCHED_OTHER, nice 0). The watching enemy process runs one priority above."""
    if os.geteuid() != 0:
        pytest.skip("needs root (real-time policies, negative nice)")
    if (why := _can_take(policy)) is not None:
        pytest.skip(why)
    sched, want_policy, want_prio, watcher_prio = _SCHED[policy]
    # DEADLINE tasks may not be pinned to a subset of the root domain: unpinned, all CPUs.
    cpus = None if policy == "deadline" else [last_cpu]
    pidfile = tmp_path / "pid"
    ext = {"name": "cmd", "sched": sched, "placement": {"cpus": cpus},
           "load": {"kind": "external", "argv": ["sh", "-c", f"echo $$ > {pidfile}; exec sleep 31.5"]}}
    out = tmp_path / "run"
    proc = subprocess.Popen([agent, "run", write_plan(tmp_path, small_plan(jobs=1000, period_ns=2_000_000, enemies=[ext])), "--out", out],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 20
        seen = None
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                pid = int(pidfile.read_text())
                if b"sleep" in Path(f"/proc/{pid}/cmdline").read_bytes():
                    seen = (os.sched_getscheduler(pid) & ~os.SCHED_RESET_ON_FORK, os.sched_getparam(pid).sched_priority, os.getpriority(os.PRIO_PROCESS, pid),
                            os.sched_getaffinity(pid), _parent(pid))
                    break
            except (OSError, ValueError):
                pass
            time.sleep(0.005)
        assert seen is not None, "the command never ran"
        got_policy, got_prio, got_nice, got_cpus, watcher = seen
        assert got_policy == want_policy and got_prio == want_prio, f"command runs with policy {got_policy} priority {got_prio}"
        assert got_nice == sched.get("nice", 0), got_nice
        assert got_cpus == (os.sched_getaffinity(0) if cpus is None else set(cpus)), got_cpus
        assert os.sched_getparam(watcher).sched_priority == watcher_prio
        assert os.sched_getscheduler(watcher) & ~os.SCHED_RESET_ON_FORK == (os.SCHED_OTHER if policy == "deadline" else want_policy)
    finally:
        stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr
    meta = json.loads((out / "run.json").read_text())
    assert meta["enemies"][0]["ended_early"] is None and meta["enemies"][0]["setup_error"] is None, meta["enemies"]


def _parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
