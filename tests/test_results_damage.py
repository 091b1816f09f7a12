"""Damaged results are named, never crashed on, never read silently (issue 31): a real small
results directory (one short `xtalk run`, with counters and the kernel trace where the machine
has them), damaged in the ways tests/damage.py lists, read by the commands that read results,
in this process. The whole matrix (every kind × every reading command) is
bench/results_fuzz.py; this is a subset that touches every file and both ways of coping
(the run left out and said, or one line and exit 2)."""

from __future__ import annotations

import shutil

import pytest

import capabilities
import damage
from conftest import xtalk
from xtalk.store import Results, read_job_log
from xtalk.store.files import JobLogError

EXPERIMENT = """
name = "damage"
repetitions = 1
seed = 1
settle = "10ms"
[victim]
body = "latency"
period = "1ms"
jobs = 40
warmup_jobs = 2
cpus = "last"
counters = [{ event = "task-clock", optional = true }, { event = "context-switches", optional = true }]
[[scenario]]
name = "write"
enemies = [{ kind = "write", bytes = "64KiB", cpus = "others" }]
"""
TRACE = """
[trace]
events = ["sched:sched_wakeup", "sched:sched_switch"]
buffer_kb = 1024
"""
TASKS = """
[system]
scheduler = "rm"
[[task]]
name = "victim"
wcet = "100us"
period = "1ms"
"""


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    d = tmp_path_factory.mktemp("damage")
    f = d / "damage.toml"
    f.write_text(EXPERIMENT + ("" if capabilities.tracefs() else TRACE))
    out = xtalk("run", f, "--results", d / "res", "--skip-feasibility", timeout=300)
    assert out.returncode == 0, out.stderr
    (root,) = (d / "res").iterdir()
    (d / "tasks.toml").write_text(TASKS)
    return root, d / "tasks.toml"


def test_a_job_log_cut_short_is_never_read_as_fewer_jobs(base, tmp_path):
    root, _ = base
    shutil.copytree(root, tmp_path / "r")
    run = damage._victim_run(tmp_path / "r")
    log = run / "jobs.bin"
    assert len(read_job_log(log)) == 42
    log.write_bytes(log.read_bytes()[: 64 + 80 * 21 + 7])
    with pytest.raises(JobLogError, match=r"jobs.bin: header counts 42 records, the file holds 21 \(cut short\)"):
        read_job_log(log)
    (run / "jobs.parquet").unlink()
    with pytest.warns(UserWarning, match=f"left out run {run.name}: jobs.bin: header counts 42"):
        r = Results(tmp_path / "r")
        runs = r.runs()
    assert run.name not in set(runs["run_id"]) and len(runs) == 1
    assert set(r.left_out) == {run.name}
    assert len(r.jobs(measured_only=False)) == 42  # the other run's, whole


#: Every results file, and both outcomes: left out and said (exit 0), or named (exit 2).
SUBSET = ["jobs.bin truncated to half", "jobs.bin count below run.json's", "jobs.bin emptied",
          "jobs.parquet truncated to half", "jobs.parquet footer bit-flipped", "counters.bin truncated to half",
          "run.json truncated", "run.json status a number", "run.json a list", "experiment.json deleted",
          "culprits.parquet truncated", "a run directory deleted", "every run directory deleted",
          "jobs.bin and jobs.parquet deleted", "an empty run directory"]


def test_damaged_results_are_named_never_crashed_on(base, tmp_path):
    root, tasks = base
    kinds = [k for k in damage.KINDS if k.name in SUBSET]
    assert len(kinds) == len(SUBSET)
    if capabilities.tracefs():
        kinds = [k for k in kinds if "culprits" not in k.name]
    if not (damage._victim_run(root) / "counters.bin").exists():
        kinds = [k for k in kinds if "counters" not in k.name]
    outcomes = damage.fuzz(root, tmp_path, tasks, "write", kinds=kinds, names=["query", "summary", "blame"])
    bad = [o for o in outcomes if o.verdict != "ok"]
    assert not bad, "; ".join(f"{o.kind} × {o.command}: {o.verdict} (exit {o.code})" for o in bad) + "\n" + \
        "\n".join(o.output[-1500:] for o in bad)
    # Both ways of coping happen: a run left out and said, the damage named with exit 2.
    assert {o.code for o in outcomes} == {0, 2}
    said = [o for o in outcomes if o.kind == "jobs.bin truncated to half" and o.command == "summary"]
    assert said and "left out run" in said[0].output and "cut short" in said[0].output
