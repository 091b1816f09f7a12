"""`xtalk latency RESULTS`: the timer-latency view of a `latency` victim (cyclictest's
measurement, seed 001 §3.3): per scenario, every measured sample's wake-up minus release,
min / avg / max and percentiles in µs, and the 1 µs histogram (latency-histogram.csv)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from rich.console import Console
from rich.table import Table

from ..store import Results

COLUMNS = ["scenario", "runs", "samples", "min_us", "avg_us", "p50_us", "p99_us", "p999_us", "max_us"]


def latency_table(jobs: pd.DataFrame) -> pd.DataFrame:
    """min / avg / percentiles / max of wake-up latency (µs) per scenario."""
    rows = []
    for scenario, g in jobs.groupby("scenario", sort=False):
        us = g.wakeup_latency_ns.to_numpy() / 1e3
        rows.append({"scenario": scenario, "runs": g.run_id.nunique(), "samples": len(us), "min_us": us.min(), "avg_us": us.mean(),
                     "p50_us": np.percentile(us, 50), "p99_us": np.percentile(us, 99), "p999_us": np.percentile(us, 99.9),
                     "max_us": us.max()})
    return pd.DataFrame(rows, columns=COLUMNS)


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
    histogram(jobs).to_csv(results.path / "latency-histogram.csv")
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(str(r.scenario) if c == "scenario" else str(getattr(r, c)) if c in ("runs", "samples")
                                 else f"{getattr(r, c):.1f}" for c in COLUMNS) + " |" for r in table.itertuples()]
    (results.path / "latency.md").write_text(f"# Timer latency: {results.path.name}\n\n" + "\n".join(lines) + "\n")
    t = Table(title=f"timer latency (wake-up − release), µs: {results.path.name}")
    for c in COLUMNS:
        t.add_column(c, justify="left" if c == "scenario" else "right")
    for r in table.itertuples():
        t.add_row(r.scenario, str(r.runs), str(r.samples), *(f"{getattr(r, c):.1f}" for c in COLUMNS[3:]))
    console.print(t)
    console.print(f"1 µs histogram: {results.path / 'latency-histogram.csv'}")
    return table
