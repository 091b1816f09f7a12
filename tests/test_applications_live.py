"""Measured applications on the agent, end to end (`xtalk run` of [[application]] files):
a planted pair found in the right cell, and a fault of a D application that reaches an A
application on a shared CPU and is contained by a partition. Every effect is built by
construction (priorities, duty cycles, placements) and asserted as a ratio with wide margins,
never as a time of this machine."""

import json
from pathlib import Path

import pytest

import capabilities
from conftest import needs_root, needs_two_cpus, processes_named, xtalk
from xtalk import store


def _run(tmp_path, text: str, timeout: int = 240):
    f = tmp_path / "exp.toml"
    f.write_text(text)
    out = xtalk("run", f, "--results", tmp_path / "res", "--skip-feasibility", timeout=timeout)
    assert out.returncode == 0, out.stderr + out.stdout
    (res,) = (tmp_path / "res").iterdir()
    return res


def _medians(res, column: str = "response_ns") -> dict:
    """(configuration, scenario, application) -> median of `column` over the measured jobs,
    through the store's Python API (its `application` column)."""
    jobs = store.open(res).jobs()
    assert "application" in jobs.columns
    return jobs.groupby(["configuration", "scenario", "application"], observed=True)[column].median().to_dict()


PAIR = """
name = "planted-pair"
repetitions = 1
settle = "50ms"
application_scenarios = ["alone", "pairs"]

# X: five times Y's work, at a higher SCHED_FIFO priority on Y's CPU, released with Y: every
# job of Y waits for X's, and Y can never delay X.
[[application]]
name = "x"
criticality = "B"
body = "pi"
iterations = 500000
period = "10ms"
jobs = 100
warmup_jobs = 5
cpus = "last"
policy = "fifo"
priority = 60

[[application]]
name = "y"
criticality = "A"
body = "pi"
iterations = 100000
period = "10ms"
jobs = 100
warmup_jobs = 5
cpus = "last"
policy = "fifo"
priority = 40
"""


@needs_root
def test_a_planted_pair_is_found_in_the_right_cell(tmp_path, needs_fifo):
    res = _run(tmp_path, PAIR)
    m = _medians(res)
    cfg = "default"
    y_slowed = m[(cfg, "pair:x+y", "y")] / m[(cfg, "alone:y", "y")]
    x_slowed = m[(cfg, "pair:x+y", "x")] / m[(cfg, "alone:x", "x")]
    # Y beside X waits for X's whole job (5× its own) every period; X beside Y is untouched.
    assert y_slowed > 2.0, (y_slowed, m)
    assert x_slowed < 1.5, (x_slowed, m)
    # The same cell through `xtalk query` (SQL on the application column).
    out = xtalk("query", res, "SELECT application, count(*) AS n FROM jobs WHERE NOT warmup "
                "AND scenario = 'pair:x+y' GROUP BY application ORDER BY application", "--csv")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["application,n", "x,100", "y,100"]
    runs = store.open(res).runs().set_index("scenario")
    assert runs.loc["pair:x+y", "applications"] == "x,y" and runs.loc["alone:y", "applications"] == "y"
    assert not processes_named()


FAULT = """
name = "fault-reach"
repetitions = 1
settle = "50ms"
application_scenarios = ["alone", "faults"]

# A: a short SCHED_FIFO job on the last CPU, every 10.3 ms: its releases fall at every phase
# of the fault's millisecond duty cycle, never always in its idle part.
[[application]]
name = "ctl"
criticality = "A"
body = "pi"
iterations = 100000
period = "10300us"
jobs = 100
warmup_jobs = 5
cpus = "last"
policy = "fifo"
priority = 50

# D: a light best-effort job; its fault, a CPU hog at RT priority 99 busy 90 % of every
# millisecond (below RT throttling's 95 %), runs inside it: on its CPUs, in its group.
[[application]]
name = "log"
criticality = "D"
body = "pi"
iterations = 50000
period = "10ms"
jobs = 100
warmup_jobs = 5
cpus = "last"
faults = [{ kind = "pi", policy = "fifo", priority = 99, intensity = 90 }]

[[configuration]]
name = "shared"

[[configuration]]
name = "partitioned"
groups = [{ name = "high", cpus = "last" }, { name = "low", cpus = "first" }]
applications = { ctl = { group = "high" }, log = { group = "low", cpus = "first" } }
"""


@needs_root
@needs_two_cpus
def test_a_d_fault_reaches_a_on_a_shared_cpu_and_a_partition_contains_it(tmp_path, needs_fifo):
    v1, v2 = capabilities.cgroup_v1("cpuset"), capabilities.cgroup_v2("cpuset")
    if v1 and v2:
        pytest.skip(f"needs a cpuset cgroup controller: {v1}; {v2}")
    res = _run(tmp_path, FAULT)
    m = _medians(res)
    scenario = "fault:log:pi"
    shared = m[("shared", scenario, "ctl")] / m[("shared", "alone:ctl", "ctl")]
    partitioned = m[("partitioned", scenario, "ctl")] / m[("partitioned", "alone:ctl", "ctl")]
    # Shared: the hog owns the CPU 90 % of every millisecond, above A's priority: a job of A
    # waits for the idle tenths of a millisecond (several times its own length).
    assert shared > 2.0, (shared, m)
    # Partitioned: the hog is held on the other CPU with its application.
    assert partitioned < 1.5, (partitioned, m)
    runs = store.open(res).runs()
    fault_runs = runs[runs.scenario == scenario]
    assert set(fault_runs.faulty) == {"log"} and set(fault_runs.fault) == {"pi"}
    assert (fault_runs.status == "completed").all(), fault_runs[["run_id", "status", "reason"]]
    # The criticality and ε of each application are kept with the results for the verdicts.
    doc = json.loads((res / "experiment.json").read_text())
    assert [(a["name"], a["criticality"]) for a in doc["experiment"]["application"]] == [("ctl", "A"), ("log", "D")]
    for r in fault_runs.itertuples():
        plan = json.loads((Path(r.dir) / "plan.json").read_text())
        (e,) = plan["enemies"]
        assert e["name"] == "log:pi"
        log = next(a for a in plan["applications"] if a["name"] == "log")
        assert log["may_fail"] and e["placement"]["cpus"] == log["placement"]["cpus"]
    assert not processes_named()
