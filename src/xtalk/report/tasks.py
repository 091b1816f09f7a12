"""`xtalk tasks RESULTS`: per-task metrics of a `taskset` victim (seed 001 §4.6): deadline-miss
ratio (missed jobs / jobs, skipped jobs counted as missed), response time (end − release)
and release delay (start − release), per scenario and task, pooled over runs."""

from __future__ import annotations

import numpy as np
import pandas as pd
from rich.console import Console
from rich.table import Table

from ..store import Results
from .victim_kinds import victim_plan

COLUMNS = ["scenario", "task", "name", "jobs", "missed", "skipped", "dmr", "resp_p50_ms", "resp_max_ms", "delay_p50_ms",
           "delay_max_ms"]


def task_names(results: Results) -> dict[int, str]:
    """Task index -> name, from the first run's plan."""
    victim = victim_plan(results.runs())
    if victim is None or victim.body.kind != "taskset":
        return {}
    return {i: t.name for i, t in enumerate(victim.body.tasks)}


def task_table(jobs: pd.DataFrame, names: dict[int, str]) -> pd.DataFrame:
    """One row per scenario and task."""
    rows = []
    skipped_all = (jobs.cpu_start < 0) & (jobs.cpu_time_ns == 0)
    for (scenario, task), g in jobs.groupby(["scenario", "task"], sort=False):
        ran = g[~skipped_all[g.index]]
        resp = (ran.end_ns - ran.release_ns).to_numpy() / 1e6
        delay = (ran.start_ns - ran.release_ns).to_numpy() / 1e6
        stat = lambda a, f: float(f(a)) if len(a) else float("nan")  # noqa: E731
        rows.append({"scenario": scenario, "task": int(task), "name": names.get(int(task), str(task)), "jobs": len(g),
                     "missed": int(g.missed.sum()), "skipped": int(skipped_all[g.index].sum()), "dmr": float(g.missed.mean()),
                     "resp_p50_ms": stat(resp, np.median), "resp_max_ms": stat(resp, np.max),
                     "delay_p50_ms": stat(delay, np.median), "delay_max_ms": stat(delay, np.max)})
    return pd.DataFrame(rows, columns=COLUMNS).sort_values(["scenario", "task"]).reset_index(drop=True)


def show(results: Results, console: Console) -> pd.DataFrame:
    jobs = results.jobs()
    if jobs.empty:
        raise ValueError(f"{results.path}: no measured jobs")
    table = task_table(jobs, task_names(results))
    (results.path / "tasks.json").write_text(table.to_json(orient="records", indent=2))
    t = Table(title=f"task set: {results.path.name} (DMR = missed / jobs; response = end − release; delay = start − release)")
    for c in COLUMNS:
        t.add_column(c, justify="left" if c in ("scenario", "name") else "right")
    for r in table.itertuples():
        t.add_row(r.scenario, str(r.task), r.name, str(r.jobs), str(r.missed), str(r.skipped), f"{r.dmr:.3f}",
                  *(f"{getattr(r, c):.2f}" for c in COLUMNS[7:]))
    console.print(t)
    return table
