"""Measured WCETs for the analyses: job tables from measurement runs → task WCETs.

A results directory holds ``runs/<run>/jobs.parquet`` (one row per job: ``scenario``,
``warmup``, ``exec_ns`` = end − start, ``response_ns``, ``missed``) and
``runs/<run>/run.json`` (``{"scenario": ..., ...}``). ``xtalk sched analyze TASKS.toml
--wcet-from RESULTS:SCENARIO`` replaces each task's WCET by the measured maximum under the
scenario (a task's own ``measured = "SCENARIO"`` takes precedence), so that the
schedulability analysis uses the interference-inflated execution time.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from xtalk.sched.inputs import InputError
from xtalk.sched.taskset import Task

__all__ = ["REQUIRED_COLUMNS", "wcet_from_jobs", "load_jobs", "parse_wcet_from", "apply_measured_wcets"]

REQUIRED_COLUMNS = ("scenario", "warmup", "exec_ns", "response_ns", "missed")
_STATISTICS = ("max", "p99", "p999", "mean", "median")


def wcet_from_jobs(jobs: pd.DataFrame, scenario: str, statistic: str = "max") -> float:
    """WCET in ms from the non-warm-up jobs of ``scenario``: their max execution time by
    default (``p99``, ``p999``, ``mean``, ``median`` also accepted)."""
    missing = [c for c in REQUIRED_COLUMNS if c not in jobs.columns]
    if missing:
        raise InputError(f"jobs.{missing[0]}", "column missing from the job table", f"provide {', '.join(REQUIRED_COLUMNS)}")
    if statistic not in _STATISTICS:
        raise InputError("statistic", f"unknown statistic {statistic!r}", f"use one of {', '.join(_STATISTICS)}")
    sel = jobs[(jobs["scenario"] == scenario) & (~jobs["warmup"].astype(bool))]
    if sel.empty:
        known = sorted(set(jobs["scenario"].astype(str)))
        raise InputError("scenario", f"no measured job for scenario {scenario!r}", f"use one of {', '.join(known) or '(none)'}")
    x = sel["exec_ns"].astype("int64")
    value = {
        "max": x.max(),
        "p99": x.quantile(0.99),
        "p999": x.quantile(0.999),
        "mean": x.mean(),
        "median": x.median(),
    }[statistic]
    return float(value) / 1e6


def load_jobs(results: str | Path) -> pd.DataFrame:
    """Concatenate ``runs/*/jobs.parquet`` with the scenario of each ``runs/*/run.json``.

    A ``scenario`` column already in the parquet file wins; otherwise it is filled from
    run.json. A ``run`` column names the run directory."""
    root = Path(results)
    runs = sorted(p for p in (root / "runs").glob("*") if p.is_dir()) if (root / "runs").is_dir() else []
    if not runs:
        raise InputError(str(root), "no runs/*/ directory", "point --wcet-from at a results directory")
    frames = []
    for run in runs:
        jp, rp = run / "jobs.parquet", run / "run.json"
        if not jp.is_file():
            continue
        meta = {}
        if rp.is_file():
            try:
                meta = json.loads(rp.read_text())
            except json.JSONDecodeError as exc:
                raise InputError(str(rp), f"invalid JSON: {exc}", "fix or remove the file") from exc
        df = pd.read_parquet(jp)
        if "scenario" not in df.columns:
            if "scenario" not in meta:
                raise InputError(f"{rp}.scenario", "missing", 'add "scenario" to run.json')
            df["scenario"] = meta["scenario"]
        df["run"] = run.name
        frames.append(df)
    if not frames:
        raise InputError(str(root), "no runs/*/jobs.parquet file", "run a measurement campaign first")
    return pd.concat(frames, ignore_index=True)


def parse_wcet_from(spec: str) -> tuple[Path, str | None]:
    """``RESULTS_DIR:SCENARIO`` (or ``RESULTS_DIR`` alone when tasks name their scenario)."""
    path, sep, scenario = spec.rpartition(":")
    if not sep or not path:
        return Path(spec), None
    return Path(path), scenario or None


def apply_measured_wcets(tasks: list[Task], jobs: pd.DataFrame, scenario: str | None, statistic: str = "max") -> list[Task]:
    """Tasks with WCET = measured statistic under their ``measured`` scenario, else under
    ``scenario``. A ``task`` (or ``victim``) column in the job table selects each task's
    rows; without it all rows belong to one victim and every task gets its statistic."""
    out = []
    for t in tasks:
        sc = t.measured or scenario
        if sc is None:
            out.append(t)
            continue
        rows = jobs
        col = "task" if "task" in jobs.columns else ("victim" if "victim" in jobs.columns else None)
        if col is not None:
            rows = jobs[jobs[col] == t.name]
            if rows.empty:
                raise InputError("task", f"no measured job for task {t.name!r}", "name tasks as in the measurement")
        out.append(t.with_wcet(wcet_from_jobs(rows, sc, statistic)))
    return out
