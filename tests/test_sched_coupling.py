"""Measured WCETs: job tables → task WCETs → ``xtalk sched analyze --wcet-from``."""

from __future__ import annotations


import pandas as pd
import pytest
from typer.testing import CliRunner

from xtalk.outcome import write_outcome
from xtalk.testing.synthetic import outcome
from xtalk.sched.cli import app
from xtalk.sched.coupling import apply_measured_wcets, load_jobs, measure_tasks, parse_wcet_from, wcet_from_jobs
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


MS = 1_000_000


def _job_table(exec_ms: list[float], warm: int = 1, task: int = 0, cpu_ms: list[float] | None = None,
               resp_ms: list[float] | None = None, period_ms: float = 10) -> pd.DataFrame:
    """A job table as `xtalk.store.jobs.read_job_log` writes it (the columns the host reads)."""
    n = len(exec_ms)
    release = [int(i * period_ms * MS) for i in range(n)]
    resp = resp_ms or [x + 0.001 for x in exec_ms]
    end = [r + int(x * MS) for r, x in zip(release, resp)]
    start = [e - int(x * MS) for e, x in zip(end, exec_ms)]
    cpu = cpu_ms or exec_ms
    return pd.DataFrame({
        "job": range(n), "task": [task] * n, "warmup": [i < warm for i in range(n)], "release_ns": release,
        "wakeup_ns": release, "start_ns": start, "end_ns": end, "cpu_time_ns": [int(x * MS) for x in cpu],
        "cpu_start": [1] * n, "cpu_end": [1] * n, "migrated": [False] * n, "nvcsw": [0] * n, "nivcsw": [0] * n,
        "missed": [False] * n, "failed": [False] * n, "period_ns": int(period_ms * MS), "deadline_ns": int(period_ms * MS),
        "exec_ns": [e - s for e, s in zip(end, start)], "response_ns": [e - r for e, r in zip(end, release)],
        "wakeup_latency_ns": [0] * n,
    })


def _plant_run(root, run_id: str, scenario: str, jobs: pd.DataFrame, body: dict, configuration: str = "default"):
    """RESULTS/runs/<run_id>/{run.json, jobs.parquet} as `xtalk run` leaves them: the scenario
    is only in the plan's labels."""
    d = root / "runs" / run_id
    d.mkdir(parents=True)
    jobs.to_parquet(d / "jobs.parquet")
    labels = {"scenario": scenario, "configuration": configuration, "repetition": "0"}
    write_outcome(d, outcome(run_id, labels, victim={"body": body}))


@pytest.fixture()
def results(tmp_path):
    """A single-victim experiment: solo and two runs under 'pi4'."""
    root = tmp_path / "results"
    runs = {"r1": ("solo", [9.0, 1.0, 1.2, 1.1]), "r2": ("pi4", [9.5, 1.6, 2.5, 1.9]), "r3": ("pi4", [1.7, 2.2])}
    for name, (scenario, ex) in runs.items():
        _plant_run(root, name, scenario, _job_table(ex), {"kind": "sum", "bytes": 262144})
    return root


TASKSET = {"kind": "taskset", "policy": "rm", "tasks": [{"name": "fast", "period_ns": 10 * MS, "wcet_ns": 2 * MS},
                                                         {"name": "slow", "period_ns": 20 * MS, "wcet_ns": 4 * MS}]}


@pytest.fixture()
def taskset_results(tmp_path):
    """A task-set experiment (two tasks) under solo and pi; known CPU times and responses.
    Under pi: fast runs ≤ 2.5 ms of CPU and responds in ≤ 3.0 ms, slow ≤ 4 ms and ≤ 6 ms; the
    slow task's wall time (7.5 ms) holds the fast task's preemption and must not be its WCET."""
    root = tmp_path / "res"
    for rid, scenario, k in (("0001", "solo", 1.0), ("0002", "pi", 1.25)):
        fast = _job_table([2.0 * k] * 3 + [1.9], task=0, cpu_ms=[2.0 * k] * 4,
                          resp_ms=[9.0, 2.0 * k, 3.0 if k > 1 else 2.0, 2.0])  # job 0: warm-up, 9 ms
        slow = _job_table([7.5, 6.0], warm=0, task=1, cpu_ms=[3.2 * k, 3.0 * k], resp_ms=[6.0 if k > 1 else 5.0, 4.0],
                          period_ms=20)
        skipped = _job_table([0.0], warm=0, task=1).assign(cpu_start=-1, cpu_time_ns=0, missed=True,
                                                           response_ns=50 * MS)  # never ran
        _plant_run(root, rid, scenario, pd.concat([fast, slow, skipped], ignore_index=True), TASKSET)
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


def test_loader_reads_the_scenario_from_the_plan_labels(results):
    jobs = load_jobs(results)
    assert set(jobs["scenario"]) == {"solo", "pi4"} and set(jobs["run_id"]) == {"r1", "r2", "r3"}
    assert wcet_from_jobs(jobs, "pi4") == 2.5  # max over both pi4 runs, warm-ups excluded
    assert wcet_from_jobs(jobs, "solo") == 1.2
    assert "task_name" not in jobs.columns  # a single victim: no per-task rows


def test_loader_errors(tmp_path):
    with pytest.raises(InputError, match="not a results directory"):
        load_jobs(tmp_path)
    (tmp_path / "runs").mkdir()
    with pytest.raises(InputError, match="no recorded job"):
        load_jobs(tmp_path)


def test_absent_scenario_names_the_available_ones(results):
    with pytest.raises(InputError) as e:
        wcet_from_jobs(load_jobs(results), "loads")
    assert e.value.field == "--wcet-from" and "'loads'" in e.value.problem and "use one of pi4, solo" in e.value.fix


def test_taskset_measurements_per_task_cpu_time_and_response(taskset_results):
    jobs = load_jobs(taskset_results)
    assert set(jobs["task_name"]) == {"fast", "slow"}
    m = measure_tasks([Task("fast", 2, 10), Task("slow", 4, 20)], jobs, "pi")
    assert m["fast"].wcet == 2.5 and m["fast"].response_max == 3.0 and m["fast"].jobs == 3
    # slow: CPU time 4.0 (not its 7.5 ms wall time); the skipped job (50 ms) is left out
    assert m["slow"].wcet == 4.0 and m["slow"].response_max == 6.0 and m["slow"].source == "cpu_time_ns"


def test_cli_prints_measured_responses_beside_the_bounds(taskset_results, tmp_path):
    f = tmp_path / "ts.toml"
    f.write_text('[[task]]\nname = "fast"\nwcet = "2ms"\nperiod = "10ms"\n\n'
                 '[[task]]\nname = "slow"\nwcet = "4ms"\nperiod = "20ms"\n')
    r = runner.invoke(app, ["analyze", str(f), "--wcet-from", f"{taskset_results}:pi"])
    assert r.exit_code == 0, r.output
    rows = {ln.split("│")[1].strip(): [c.strip() for c in ln.split("│")[1:-1]] for ln in r.output.splitlines() if ln.count("│") > 5}
    head = [ln.split("┃")[1:-1] for ln in r.output.splitlines() if ln.count("┃") > 5]
    header = [" ".join(c.strip() for c in col).strip() for col in zip(*head)]
    assert header[:5] == ["task", "wcet (ms)", "period (ms)", "deadline (ms)", "bound (ms)"]
    assert header[7:] == ["measured max response (ms)", "within bound"]
    # fast: WCET 2.5, bound 2.5, measured 3.0 > bound; slow: R = 4 + ⌈6.5/10⌉·2.5 = 6.5, measured 6.0
    assert rows["fast"][1] == "2.500" and rows["fast"][4] == "2.500" and rows["fast"][7] == "3.000"
    assert rows["fast"][8].startswith("NO")
    assert rows["slow"][1] == "4.000" and rows["slow"][4] == "6.500" and rows["slow"][7] == "6.000" and rows["slow"][8] == "yes"
    assert "measured max of cpu_time_ns under 'pi' (3 jobs)" in r.output
    r = runner.invoke(app, ["analyze", str(f), "--wcet-from", f"{taskset_results}:loads"])
    assert r.exit_code == 2 and len(r.output.strip().splitlines()) == 1
    assert "--wcet-from" in r.output and "use one of pi, solo" in r.output


def test_cli_model_of_other_tasks_is_refused(taskset_results):
    r = runner.invoke(app, ["analyze", "examples/models/seed001-table41.toml", "--wcet-from", f"{taskset_results}:pi"])
    assert r.exit_code == 2 and len(r.output.strip().splitlines()) == 1
    assert "measured tasks: fast, slow" in r.output


def test_scenario_under_several_configurations(tmp_path):
    root = tmp_path / "res"
    _plant_run(root, "a", "pi", _job_table([5, 1.0]), {"kind": "sum", "bytes": 262144}, configuration="own")
    _plant_run(root, "b", "pi", _job_table([5, 3.0]), {"kind": "sum", "bytes": 262144}, configuration="shared")
    jobs = load_jobs(root)
    with pytest.raises(InputError, match="configurations own, shared"):
        wcet_from_jobs(jobs, "pi")
    assert wcet_from_jobs(jobs, "shared/pi") == pytest.approx(3.0)
    with pytest.raises(InputError, match="own/pi, shared/pi"):
        wcet_from_jobs(jobs, "nope")


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
