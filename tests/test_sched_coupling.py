"""Measured WCETs: job tables → task WCETs → ``xtalk sched analyze --wcet-from``."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from typer.testing import CliRunner

from xtalk.sched.cli import app
from xtalk.sched.coupling import apply_measured_wcets, load_jobs, parse_wcet_from, wcet_from_jobs
from xtalk.sched.inputs import InputError
from xtalk.sched.taskset import Task

runner = CliRunner()


def _jobs(scenario: str, exec_ms: list[float], warm: int = 1) -> pd.DataFrame:
    n = len(exec_ms)
    return pd.DataFrame(
        {
            "warmup": [i < warm for i in range(n)],
            "exec_ns": pd.array([int(x * 1e6) for x in exec_ms], dtype="int64"),
            "response_ns": pd.array([int(x * 1e6) + 1000 for x in exec_ms], dtype="int64"),
            "missed": [False] * n,
            "scenario": [scenario] * n,
        }
    )


@pytest.fixture()
def results(tmp_path):
    """RESULTS/runs/<run>/{jobs.parquet, run.json}: solo and two runs under 'pi4'."""
    root = tmp_path / "results"
    runs = {"r1": ("solo", [9.0, 1.0, 1.2, 1.1]), "r2": ("pi4", [9.5, 1.6, 2.5, 1.9]), "r3": ("pi4", [1.7, 2.2])}
    for name, (scenario, ex) in runs.items():
        d = root / "runs" / name
        d.mkdir(parents=True)
        _jobs(scenario, ex).drop(columns=["scenario"]).to_parquet(d / "jobs.parquet")
        (d / "run.json").write_text(json.dumps({"scenario": scenario, "victim": "aocs"}))
    return root


def test_wcet_from_jobs_ignores_warmup_and_converts_ns_to_ms():
    jobs = pd.concat([_jobs("solo", [9.0, 1.0, 1.25]), _jobs("pi4", [7.0, 2.0, 3.5])])
    assert wcet_from_jobs(jobs, "solo") == 1.25  # the 9 ms warm-up job is left out
    assert wcet_from_jobs(jobs, "pi4") == 3.5
    assert wcet_from_jobs(jobs, "pi4", "mean") == 2.75
    with pytest.raises(InputError, match="scenario"):
        wcet_from_jobs(jobs, "loads")
    with pytest.raises(InputError, match="jobs.exec_ns"):
        wcet_from_jobs(jobs.drop(columns=["exec_ns"]), "solo")
    with pytest.raises(InputError, match="statistic"):
        wcet_from_jobs(jobs, "solo", "max2")


def test_loader_joins_run_json(results):
    jobs = load_jobs(results)
    assert set(jobs["scenario"]) == {"solo", "pi4"} and set(jobs["run"]) == {"r1", "r2", "r3"}
    assert wcet_from_jobs(jobs, "pi4") == 2.5  # max over both pi4 runs, warm-ups excluded
    assert wcet_from_jobs(jobs, "solo") == 1.2


def test_loader_errors(tmp_path):
    with pytest.raises(InputError, match="no runs"):
        load_jobs(tmp_path)
    d = tmp_path / "runs" / "x"
    d.mkdir(parents=True)
    _jobs("s", [1.0]).drop(columns=["scenario"]).to_parquet(d / "jobs.parquet")
    (d / "run.json").write_text("{}")
    with pytest.raises(InputError, match="scenario"):
        load_jobs(tmp_path)


def test_apply_measured_and_parse():
    jobs = pd.concat([_jobs("solo", [5, 1.0]), _jobs("pi4", [5, 2.0])])
    tasks = [Task("a", 0.5, 10), Task("b", 0.5, 10, measured="solo"), Task("c", 0.5, 10)]
    out = apply_measured_wcets(tasks, jobs, "pi4")
    assert [t.wcet for t in out] == [2.0, 1.0, 2.0]
    assert [t.wcet for t in apply_measured_wcets(tasks, jobs, None)] == [0.5, 1.0, 0.5]
    assert parse_wcet_from("res/dir:pi4") == (parse_wcet_from("res/dir")[0], "pi4")
    assert parse_wcet_from("res/dir")[1] is None


def test_cli_analyze_with_measured_wcet(results, tmp_path):
    f = tmp_path / "tasks.toml"
    f.write_text('[[task]]\nname = "hi"\nwcet = 1\nperiod = 4\n\n[[task]]\nname = "aocs"\nwcet = 1\nperiod = 10\n')
    r = runner.invoke(app, ["analyze", str(f), "--wcet-from", f"{results}:pi4"])
    assert r.exit_code == 0, r.output
    # both tasks take the measured 2.5 ms (no task column: one victim);
    # R(aocs) = 2.5 + ⌈7.5/4⌉·2.5 = 7.5
    rows = {ln.split("│")[1].strip(): [c.strip() for c in ln.split("│")[1:-1]] for ln in r.output.splitlines() if ln.count("│") > 5}
    assert rows["hi"][1] == "2.500" and rows["hi"][4] == "2.500"
    assert rows["aocs"][1] == "2.500" and rows["aocs"][4] == "7.500"
    assert "verdict: schedulable" in r.output
    r = runner.invoke(app, ["analyze", str(f), "--wcet-from", f"{results}:loads"])
    assert r.exit_code == 2 and "scenario" in r.output and len(r.output.strip().splitlines()) == 1


def test_cli_measured_field_needs_results(tmp_path):
    f = tmp_path / "tasks.toml"
    f.write_text('[[task]]\nname = "aocs"\nperiod = 10\nmeasured = "pi4"\n')
    r = runner.invoke(app, ["analyze", str(f)])
    assert r.exit_code == 2 and "--wcet-from" in r.output
