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
    # The summary says it too: on the terminal and in summary.md.
    code, out, tb = damage.run_command(["summary", str(tmp_path / "r")])
    assert tb is None and code == 0, out
    assert f"xtalk: warning: left out run {run.name}: jobs.bin: header counts 42 records" in out
    md = (tmp_path / "r" / "summary.md").read_text()
    assert "## Runs left out" in md and f"`{run.name}`: jobs.bin: header counts 42" in md, md


#: Every results file, each damage against one reading command, and both outcomes: the run
#: left out and said (exit 0), or the damage named in one line (exit 2).
SUBSET = [("jobs.bin truncated to half", "summary"), ("jobs.bin count below run.json's", "query"),
          ("jobs.bin emptied", "blame"), ("jobs.parquet truncated to half", "query"),
          ("jobs.parquet footer bit-flipped", "blame"), ("counters.bin truncated to half", "query"),
          ("run.json truncated", "summary"), ("run.json status a number", "blame"), ("run.json a list", "query"),
          ("experiment.json truncated", "summary"), ("culprits.parquet truncated", "blame"),
          ("a run directory deleted", "query"), ("every run directory deleted", "summary"),
          ("jobs.bin and jobs.parquet deleted", "query"), ("an empty run directory", "query")]


def test_damaged_results_are_named_never_crashed_on(base, tmp_path):
    root, tasks = base
    kinds = {k.name: k for k in damage.KINDS}
    assert all(k in kinds for k, _ in SUBSET)
    outcomes = []
    for kind, command in SUBSET:
        if ("culprits" in kind and capabilities.tracefs()) or \
                ("counters" in kind and not (damage._victim_run(root) / "counters.bin").exists()):
            continue  # the machine recorded no trace, or no counters
        outcomes += damage.fuzz(root, tmp_path, tasks, "write", kinds=[kinds[kind]], names=[command])
    bad = [o for o in outcomes if o.verdict != "ok"]
    assert not bad, "; ".join(f"{o.kind} × {o.command}: {o.verdict} (exit {o.code})" for o in bad) + "\n" + \
        "\n".join(o.output[-1500:] for o in bad)
    # Both ways of coping happen: a run left out and said, the damage named with exit 2.
    assert {o.code for o in outcomes} == {0, 2}
    said = next(o for o in outcomes if o.kind == "jobs.bin truncated to half")
    assert "left out run" in said.output and "cut short" in said.output, said.output
