"""`xtalk summary RESULTS --view tasks`: per-task metrics of a `taskset` victim (seed 001 §4.6): deadline-miss
ratio (missed jobs / jobs, skipped jobs counted as missed), response time (end − release)
beside the RTA bound, and release delay (start − release), per scenario and task, pooled
over runs. The table is the report's own (`victim_kinds.task_table`): one computation for
the report, the run summary and this."""

from __future__ import annotations

import pandas as pd
from rich.console import Console
from rich.table import Table

from .. import safepath
from ..store import Results
from . import victim_kinds

#: The columns printed (tasks.json has every column of the table).
COLUMNS = ["scenario", "task", "name", "jobs", "missed", "skipped", "dmr", "resp_p50_ms", "resp_max_ms", "rta_bound_ms",
           "delay_p50_ms", "delay_max_ms"]


def show(results: Results, console: Console) -> pd.DataFrame:
    """Print the table and write tasks.json in the results."""
    jobs = results.jobs()
    if jobs.empty:
        raise ValueError(f"{results.path}: no measured jobs")
    table = victim_kinds.task_table(results.runs(), jobs)
    safepath.write_text(results.path / "tasks.json", table.to_json(orient="records", indent=2))
    cols = (["configuration"] if set(table["configuration"]) - {"default"} else []) + COLUMNS
    t = Table(title=f"task set: {results.path.name} (DMR = missed / jobs; response = end − release; delay = start − release)")
    for c in cols:
        t.add_column(c, justify="left" if c in ("scenario", "configuration", "name") else "right")
    for r in table.itertuples():
        t.add_row(*(_cell(c, getattr(r, c)) for c in cols))
    console.print(t)
    return table


def _cell(column: str, value) -> str:
    if column in ("scenario", "configuration", "name", "task", "jobs", "missed", "skipped"):
        return str(value)
    return f"{value:.3f}" if column == "dmr" else f"{value:.2f}"
