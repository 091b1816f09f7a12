"""Summaries of the measured release overheads (seed 001 §4.5): per scenario and
configuration, count, mean, p99 and max of Δevent, Δrel, Δsched, Δcxs and Δ^relEv in µs,
and how many jobs could not be decomposed and why.

Input: the per-job table of :func:`xtalk.store.overheads.collect` (``*_ns`` columns, NaN
where a Δ is unknown, ``unmatched`` the reason). Each Δ is summarised over the jobs where it
is known; Δ^relEv over the jobs decomposed completely, so that its row is, job by job, the
sum of the four above it (and equals those jobs' measured wake-up latency).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..trace.overheads import DELTAS, NAMES

#: Rows of the summary, in order along the release (then the sum).
OVERHEADS = DELTAS + ["relev"]
SUMMARY_COLUMNS = ["scenario", "configuration", "overhead", "count", "mean_us", "p99_us", "max_us"]
COVERAGE_COLUMNS = ["scenario", "configuration", "runs", "jobs", "matched", "unmatched", "lost_events"]
STATS = ("max", "p99", "mean")


def _stat(us: np.ndarray, stat: str) -> float:
    if us.size == 0:
        return float("nan")
    if stat == "max":
        return float(us.max())
    if stat == "p99":
        return float(np.percentile(us, 99))
    if stat == "mean":
        return float(us.mean())
    raise ValueError(f"unknown statistic {stat!r}: use {', '.join(STATS)}")


def _cells(jobs: pd.DataFrame):
    """(scenario, configuration) groups, solo first within each configuration."""
    keys = list(dict.fromkeys(zip(jobs["scenario"].astype(str), jobs["configuration"].astype(str))))
    keys.sort(key=lambda k: (k[1], k[0] != "solo"))
    for sc, cf in keys:
        yield sc, cf, jobs[(jobs["scenario"].astype(str) == sc) & (jobs["configuration"].astype(str) == cf)]


def summary(jobs: pd.DataFrame) -> pd.DataFrame:
    """One row per scenario × configuration × overhead (``SUMMARY_COLUMNS``), µs."""
    rows = []
    for sc, cf, g in _cells(jobs):
        complete = g["unmatched"] == ""
        for o in OVERHEADS:
            x = g.loc[complete, f"{o}_ns"] if o == "relev" else g[f"{o}_ns"]
            us = x.dropna().to_numpy(dtype=float) / 1e3
            rows.append({"scenario": sc, "configuration": cf, "overhead": NAMES[o], "count": int(us.size),
                         "mean_us": _stat(us, "mean"), "p99_us": _stat(us, "p99"), "max_us": _stat(us, "max")})
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS)


def coverage(jobs: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """Per scenario × configuration: runs, jobs, completely decomposed, the others by
    reason ("late 12, no switch 3"), and the trace events lost to buffer overruns."""
    rows = []
    for sc, cf, g in _cells(jobs):
        reasons = g.loc[g["unmatched"] != "", "unmatched"].value_counts()
        r = runs[(runs["scenario"].astype(str) == sc) & (runs["configuration"].astype(str) == cf)]
        lost = pd.to_numeric(r["lost_events"], errors="coerce")
        rows.append({"scenario": sc, "configuration": cf, "runs": int(g["run_id"].nunique()), "jobs": len(g),
                     "matched": int((g["unmatched"] == "").sum()),
                     "unmatched": ", ".join(f"{k} {v}" for k, v in reasons.items()) or "0",
                     "lost_events": int(lost.sum()) if lost.notna().any() else None})
    return pd.DataFrame(rows, columns=COVERAGE_COLUMNS)


def breakdown(jobs: pd.DataFrame, stat: str = "max", scenario: str | None = None) -> dict[str, float]:
    """Each Δ's ``stat`` (max, p99, mean) in µs over the jobs of ``scenario`` (every
    scenario when None) where it is known: the measured stand-in for seed 001's constants.
    Summing per-Δ maxima is pessimistic (they need not come from one job), as the seed's
    385 µs is a sum of worst cases."""
    if scenario is not None:
        jobs = jobs[jobs["scenario"].astype(str) == scenario]
    return {o: _stat(jobs[f"{o}_ns"].dropna().to_numpy(dtype=float) / 1e3, stat) for o in DELTAS}
