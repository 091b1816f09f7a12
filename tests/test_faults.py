"""Faults lose nothing and leave nothing: partial jobs stay readable after a SIGKILL of the
victim or of the agent; a time-out or an interrupt ends every process; no shared memory
object is left behind."""

import json
import os
import signal
import subprocess

import pytest

from conftest import XTALK, processes_named, shm_entries, small_plan, wait_for, write_plan
from xtalk.store.jobs import read_job_log
from xtalk import store


def jobs_so_far(out):
    try:
        return len(read_job_log(out / "jobs.bin"))
    except Exception:
        return 0


def start_agent(agent, tmp_path, plan):
    out = tmp_path / "run"
    p = subprocess.Popen([agent, "run", write_plan(tmp_path, plan), "--out", out], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    return p, out


def test_victim_killed_mid_run_keeps_its_jobs(agent, tmp_path):
    shm = shm_entries()
    p, out = start_agent(agent, tmp_path, small_plan(jobs=1000, period_ns=5_000_000,
                                                     enemies=[{"name": "e", "load": {"kind": "pi"}}]))
    assert wait_for(lambda: jobs_so_far(out) >= 20, timeout=20), "victim never got going"
    (victim,) = [pid for pid, name in processes_named(("xt-victim",))]
    os.kill(victim, signal.SIGKILL)
    p.wait(timeout=30)
    meta = json.loads((out / "run.json").read_text())
    assert p.returncode == 1
    assert meta["status"] == "failed" and "signal 9" in meta["reason"]
    jobs = read_job_log(out / "jobs.bin")
    assert 20 <= len(jobs) < 1002 and meta["jobs_recorded"] == len(jobs)
    assert (jobs.end_ns > jobs.start_ns).all(), "only complete records are published"
    assert not processes_named()
    assert shm_entries() == shm


def test_agent_killed_mid_run_takes_its_children_and_leaves_readable_jobs(agent, tmp_path):
    shm = shm_entries()
    p, out = start_agent(agent, tmp_path, small_plan(jobs=1000, period_ns=5_000_000,
                                                     enemies=[{"name": "e", "load": {"kind": "read", "bytes": 1 << 20}}]))
    assert wait_for(lambda: jobs_so_far(out) >= 20, timeout=20)
    p.send_signal(signal.SIGKILL)
    p.wait(timeout=10)
    assert wait_for(lambda: not processes_named(), timeout=10), processes_named()
    n = jobs_so_far(out)
    assert 20 <= n < 1002, "readable at once, through the run directory's link to the staged file"
    # The next start moves the staged records into the run directory (journalled change).
    subprocess.run([agent, "recover"], check=True, capture_output=True)
    assert (out / "jobs.bin").is_file() and not (out / "jobs.bin").is_symlink()
    assert jobs_so_far(out) == n
    assert not any(n.startswith("xtalk-") for n in shm_entries() - shm), "the staging directory is removed"
    # The host recovers such a run: its jobs become a Parquet table like any other.
    (tmp_path / "exp" / "runs").mkdir(parents=True)
    out.rename(tmp_path / "exp" / "runs" / "r0")
    assert len(store.open(tmp_path / "exp").jobs(measured_only=False)) == n


def test_watchdog_ends_an_overrunning_victim(agent, tmp_path):
    # Each job far exceeds its period; the plan's time-out ends the run.
    plan = small_plan(jobs=100, period_ns=1_000_000)
    plan["victim"]["body"] = {"kind": "pi", "iterations": 200_000_000}
    plan["timeout_s"] = 1.5
    p, out = start_agent(agent, tmp_path, plan)
    p.wait(timeout=30)
    meta = json.loads((out / "run.json").read_text())
    assert p.returncode == 1 and meta["status"] == "timeout", meta
    assert meta["jobs_recorded"] < 102
    assert not processes_named()


EXPERIMENT = """
name = "fault"
repetitions = 3
settle = "20ms"
[victim]
body = "sum"
bytes = "256KiB"
period = "5ms"
jobs = 400
cpus = "last"
[[scenario]]
name = "pi"
enemies = [{ kind = "pi" }]
"""


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupting_xtalk_stops_everything(tmp_path, sig):
    shm = shm_entries()
    f = tmp_path / "exp.toml"
    f.write_text(EXPERIMENT)
    p = subprocess.Popen([*XTALK, "run", f, "--results", tmp_path / "res", "--skip-feasibility"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)  # the first victim seen is then a run's
    assert wait_for(lambda: processes_named(("xt-victim",)), timeout=30), "no run started"
    p.send_signal(sig)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 130, err
    assert "interrupted" in err
    assert not processes_named()
    assert shm_entries() == shm
    (res,) = (tmp_path / "res").iterdir()
    runs = store.open(res).runs()
    assert "interrupted" in set(runs.status), runs


def test_a_crashed_victim_fails_its_run_and_the_experiment_goes_on(tmp_path):
    f = tmp_path / "exp.toml"
    f.write_text(EXPERIMENT.replace("repetitions = 3", "repetitions = 1"))
    p = subprocess.Popen([*XTALK, "run", f, "--results", tmp_path / "res", "--skip-feasibility"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)  # the first victim seen is then a run's
    first = wait_for(lambda: processes_named(("xt-victim",)), timeout=30)
    assert first
    wait_for(lambda: False, timeout=0.3)
    os.kill(first[0][0], signal.SIGABRT)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 4, err  # some runs did not complete (docs/experiments.md, exit codes)
    (res,) = (tmp_path / "res").iterdir()
    runs = store.open(res).runs().set_index("run_id")
    assert sorted(runs.status) == ["completed", "failed"]
    failed = runs[runs.status == "failed"].iloc[0]
    assert "signal 6" in failed.reason
    assert 0 < failed.jobs_recorded < 410
    summary = json.loads((res / "summary.json").read_text())
    assert {row["scenario"] for row in summary} == {"solo", "pi"}
    assert not processes_named()
