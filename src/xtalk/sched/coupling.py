"""Measured WCETs for the analyses: job tables from measurement runs → task WCETs.

A results directory is read the way the rest of the host reads it (:mod:`xtalk.store`): the
jobs of every ``runs/<run>/jobs.parquet`` (converted from ``jobs.bin`` when needed), each
with the ``scenario`` and ``configuration`` of its run's plan labels. ``xtalk sched analyze
TASKS.toml --wcet-from RESULTS:SCENARIO`` replaces each task's WCET by the measured maximum
under the scenario (a task's own ``measured = "SCENARIO"`` takes precedence), so that the
schedulability analysis uses the interference-inflated execution time, and prints each
task's measured response beside its bound.

Which time is the WCET: for a task-set victim, a job's CPU time (``cpu_time_ns``), since its
wall time end − start also holds the preemptions by the set's higher-priority tasks that the
response-time analysis adds itself; for a single victim, end − start (``exec_ns``), which also
holds what the enemies took from it. Jobs that never ran (skipped) are left out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from xtalk.sched.inputs import InputError
from xtalk.sched.taskset import Task

if TYPE_CHECKING:  # pandas is loaded by the commands that read jobs, not by `xtalk sched --help`
    import pandas as pd

__all__ = [
    "REQUIRED_COLUMNS",
    "Measured",
    "wcet_from_jobs",
    "load_jobs",
    "parse_wcet_from",
    "check_statistic",
    "measure_tasks",
    "apply_measured_wcets",
]

REQUIRED_COLUMNS = ("scenario", "warmup", "exec_ns", "response_ns", "missed")
_STATISTICS = ("max", "p99", "p999", "mean", "median")


@dataclass(frozen=True)
class Measured:
    """What the measurement says about one task under one scenario (times in ms)."""

    scenario: str
    wcet: float  # the chosen statistic of the execution time
    response_max: float  # largest end − release; nan when the table has no response
    jobs: int
    source: str  # the column the WCET came from: cpu_time_ns or exec_ns


def _scenarios(jobs: pd.DataFrame) -> list[str]:
    """The scenarios of a job table, as ``--wcet-from`` accepts them."""
    if "configuration" in jobs.columns and jobs["configuration"].nunique() > 1:
        pairs = jobs[["configuration", "scenario"]].drop_duplicates().astype(str)
        return sorted(f"{c}/{s}" for c, s in zip(pairs["configuration"], pairs["scenario"]))
    return sorted(set(jobs["scenario"].astype(str)))


def _select(jobs: pd.DataFrame, scenario: str) -> pd.DataFrame:
    """Rows of ``scenario`` (``CONFIGURATION/SCENARIO`` picks one configuration); an error that
    lists the scenarios there are when none matches or several configurations would pool."""
    sel = jobs[jobs["scenario"].astype(str) == scenario]
    if sel.empty and "/" in scenario and "configuration" in jobs.columns:
        cfg, _, sc = scenario.partition("/")
        sel = jobs[(jobs["configuration"].astype(str) == cfg) & (jobs["scenario"].astype(str) == sc)]
    elif "configuration" in sel.columns and sel["configuration"].nunique() > 1:
        cfgs = sorted(set(sel["configuration"].astype(str)))
        raise InputError("--wcet-from", f"scenario {scenario!r} ran under configurations {', '.join(cfgs)}",
                         f"name one: RESULTS:{cfgs[0]}/{scenario}")
    if sel.empty:
        raise InputError("--wcet-from", f"no measured job for scenario {scenario!r}",
                         f"use one of {', '.join(_scenarios(jobs)) or '(none)'}")
    return sel


def _ran(jobs: pd.DataFrame) -> pd.DataFrame:
    """Non-warm-up jobs that ran (a skipped job has no CPU and no CPU time)."""
    sel = jobs[~jobs["warmup"].astype(bool)]
    if "cpu_start" in sel.columns and "cpu_time_ns" in sel.columns:
        sel = sel[~((sel["cpu_start"] < 0) & (sel["cpu_time_ns"] == 0))]
    return sel


def check_statistic(statistic: str) -> None:
    """InputError unless ``statistic`` is one --statistic accepts (checked whether or not
    --wcet-from is given: an option that is read nowhere is not silently ignored)."""
    if statistic not in _STATISTICS:
        raise InputError("--statistic", f"unknown statistic {statistic!r}", f"use one of {', '.join(_STATISTICS)}")


def _stat(x: pd.Series, statistic: str) -> float:
    if statistic not in _STATISTICS:
        raise InputError("--statistic", f"unknown statistic {statistic!r}", f"use one of {', '.join(_STATISTICS)}")
    x = x.astype("int64")
    return float({"max": x.max, "p99": lambda: x.quantile(0.99), "p999": lambda: x.quantile(0.999),
                  "mean": x.mean, "median": x.median}[statistic]())


def wcet_from_jobs(jobs: pd.DataFrame, scenario: str, statistic: str = "max", column: str = "exec_ns") -> float:
    """WCET in ms from the non-warm-up jobs of ``scenario``: their max ``column`` (default
    end − start) by default (``p99``, ``p999``, ``mean``, ``median`` also accepted)."""
    missing = [c for c in REQUIRED_COLUMNS if c not in jobs.columns]
    if missing:
        raise InputError(f"jobs.{missing[0]}", "column missing from the job table", f"provide {', '.join(REQUIRED_COLUMNS)}")
    import pandas as pd

    _stat(pd.Series([0]), statistic)  # unknown statistic: fail before the data is looked at
    sel = _ran(_select(jobs, scenario))
    if sel.empty:
        raise InputError("--wcet-from", f"scenario {scenario!r} has only warm-up or skipped jobs", "measure more jobs")
    return _stat(sel[column], statistic) / 1e6


def _task_names(run_dir: Path) -> dict[int, str]:
    """Task index → name of a task-set victim, from the run's plan (empty for other victims)."""
    from xtalk.store import run_outcome

    meta = run_outcome(run_dir)
    body = meta.plan.victim.body if meta is not None and meta.plan is not None else None
    if body is None or body.kind != "taskset":
        return {}
    return {i: t.name for i, t in enumerate(body.tasks)}


def load_jobs(results: str | Path) -> pd.DataFrame:
    """Every job (warm-ups included) of a results directory, through :mod:`xtalk.store`: with
    ``run_id``, ``scenario`` and ``configuration`` from each run's plan labels, and a
    ``task_name`` column when the victim was a task set."""
    from xtalk.errors import UsageError
    from xtalk.store import open as open_results

    root = Path(results)
    try:
        res = open_results(root)
    except FileNotFoundError:
        raise InputError("--wcet-from", f"{root}: not a results directory (no runs/)",
                         "give the directory `xtalk run` wrote, e.g. results/<experiment>-<time>") from None
    try:
        jobs = res.jobs(measured_only=False)
    except UsageError as e:  # damaged results, named by the store
        raise InputError("--wcet-from", str(e), "re-run the damaged runs or give other results") from None
    if jobs.empty:
        raise InputError("--wcet-from", f"{root}: no recorded job in any run", "run the experiment first")
    names: dict[int, str] = {}
    for d in map(Path, res.runs()["dir"]):  # the runs the store did not leave out
        names = _task_names(d)
        if names:
            break
    if names and "task" in jobs.columns:
        jobs["task_name"] = [names.get(int(i), str(i)) for i in jobs["task"]]
    return jobs


def parse_wcet_from(spec: str, field: str = "--wcet-from") -> tuple[Path, str | None]:
    """``RESULTS_DIR:SCENARIO`` (or ``RESULTS_DIR`` alone when tasks name their scenario); a
    colon with nothing after it, or an empty directory, is refused (it measured nothing,
    silently)."""
    path, sep, scenario = spec.rpartition(":")
    if not sep:
        return Path(spec), None
    if not path or not scenario:
        raise InputError(field, f"{spec!r} names no {'results directory' if not path else 'scenario'}",
                         "write RESULTS_DIR:SCENARIO, or RESULTS_DIR alone when the tasks name their scenario")
    return Path(path), scenario


def measure_tasks(tasks: list[Task], jobs: pd.DataFrame, scenario: str | None, statistic: str = "max") -> dict[str, Measured]:
    """Task name → :class:`Measured` under its ``measured`` scenario, else ``scenario``.

    With a ``task_name`` column (task-set victim) each task takes its own rows and the WCET is
    the CPU time; a task of the file that was not measured keeps its declared WCET (and is not
    in the result), but a file none of whose tasks was measured is an error. Without it all
    rows are one victim and every task gets its statistic of end − start."""
    per_task = "task_name" in jobs.columns
    if per_task:
        measured_names = sorted(set(jobs["task_name"]))
        wanted = [t for t in tasks if (t.measured or scenario)]
        if wanted and not any(t.name in measured_names for t in wanted):
            raise InputError("task.name", f"no task of the file was measured (measured tasks: {', '.join(measured_names)})",
                             "name the tasks as in the experiment's victim.tasks")
    out: dict[str, Measured] = {}
    for t in tasks:
        sc = t.measured or scenario
        if sc is None:
            continue
        rows, column = jobs, "exec_ns"
        if per_task:
            rows, column = jobs[jobs["task_name"] == t.name], "cpu_time_ns"
            if rows.empty:
                if t.wcet > 0 and not t.measured:
                    continue  # not measured: the declared WCET stands
                raise InputError(f"task {t.name}.measured", "no measured job for this task",
                                 f"name it as one of {', '.join(sorted(set(jobs['task_name'])))}")
        wcet = wcet_from_jobs(rows, sc, statistic, column)
        ran = _ran(_select(rows, sc))
        resp = float(ran["response_ns"].max()) / 1e6 if "response_ns" in ran.columns and len(ran) else math.nan
        out[t.name] = Measured(sc, wcet, resp, len(ran), column)
    return out


def apply_measured_wcets(tasks: list[Task], jobs: pd.DataFrame, scenario: str | None, statistic: str = "max") -> list[Task]:
    """Tasks with WCET = measured statistic (see :func:`measure_tasks`); the others unchanged."""
    m = measure_tasks(tasks, jobs, scenario, statistic)
    return [t.with_wcet(m[t.name].wcet) if t.name in m else t for t in tasks]
