"""`xtalk summary RESULTS --view latency`: the timer-latency view of a `latency` victim (cyclictest's
measurement, seed 001 §3.3): per scenario (and configuration), every measured sample's
wake-up minus release, min / avg / max and percentiles in µs with p99 against solo's, and
the 1 µs histogram (latency-histogram.csv). The table is the report's own
(`victim_kinds.latency_table`): one computation for the report, the run summary and this."""

from __future__ import annotations

import numpy as np
import pandas as pd
from rich.console import Console
from rich.table import Table

from .. import safepath
from ..store import Results
from . import victim_kinds


def latency_table(jobs: pd.DataFrame) -> pd.DataFrame:
    """min / avg / percentiles / max of wake-up latency (µs) per scenario and configuration,
    p99 against solo's (the report's table, :func:`victim_kinds.latency_table`)."""
    return victim_kinds.latency_table(jobs)


def columns(table: pd.DataFrame) -> list[str]:
    """The columns shown: the configuration only where there is more than the default."""
    return [c for c in victim_kinds.LATENCY_COLUMNS
            if c != "configuration" or set(table["configuration"].astype(str)) - {"default"}]


def _cell(column: str, value) -> str:
    if column in ("scenario", "configuration", "runs", "samples"):
        return str(value)
    return f"{value:.2f}" if column == "p99_vs_solo" else f"{value:.1f}"


def histogram(jobs: pd.DataFrame) -> pd.DataFrame:
    """Samples per 1 µs bin (bin k holds latencies in [k, k+1) µs), one column per scenario,
    as cyclictest's -h output."""
    bins = (jobs.wakeup_latency_ns // 1000).astype(np.int64)
    h = pd.crosstab(bins.rename("latency_us"), jobs.scenario)
    full = pd.RangeIndex(0, int(bins.max()) + 1 if len(bins) else 0, name="latency_us")
    return h.reindex(full, fill_value=0)


def show(results: Results, console: Console) -> pd.DataFrame:
    """Print the table and write latency.md and latency-histogram.csv in the results."""
    jobs = results.jobs()
    if jobs.empty:
        raise ValueError(f"{results.path}: no measured jobs")
    table = latency_table(jobs)
    safepath.write_csv(histogram(jobs), results.path / "latency-histogram.csv")
    cols = columns(table)
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(_cell(c, getattr(r, c)) for c in cols) + " |" for r in table.itertuples()]
    safepath.write_text(results.path / "latency.md", f"# Timer latency: {results.path.name}\n\n" + "\n".join(lines) + "\n")
    t = Table(title=f"timer latency (wake-up − release), µs: {results.path.name}")
    for c in cols:
        t.add_column(c, justify="left" if c in ("scenario", "configuration") else "right")
    for r in table.itertuples():
        t.add_row(*(_cell(c, getattr(r, c)) for c in cols))
    console.print(t)
    console.print(f"1 µs histogram: {results.path / 'latency-histogram.csv'}")
    return table
