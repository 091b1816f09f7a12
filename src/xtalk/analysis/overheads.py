"""Summaries of the measured release overheads (seed 001 §4.5): per scenario and
configuration, count, mean, p99 and max of Δevent, Δrel, Δsched, Δcxs and Δ^relEv in µs,
and how many jobs could not be decomposed and why.

Input: the per-job table of :func:`xtalk.store.overheads.collect` (``*_ns`` columns, NaN
where a Δ is unknown, ``unmatched`` the reason). Each Δ is summarised over the jobs where it
is known, ``overrun`` over the ``late`` jobs (how far the earlier job ran past the release);
Δ^relEv over every job: its measured wake-up latency, decomposed or not. Dropping the jobs
the trace cannot decompose dropped the tail itself (the ``late`` jobs are the latency's
p99), so the coverage also says what share of the latency tail the four Δ explain, and
:func:`tail_check` compares a statistic of the four with the same statistic of the latency.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..trace.overheads import DELTAS, NAMES

#: Rows of the summary, in order along the release (then the sum).
OVERHEADS = DELTAS + ["overrun", "relev"]
SUMMARY_COLUMNS = ["scenario", "configuration", "overhead", "count", "mean_us", "p99_us", "max_us"]
COVERAGE_COLUMNS = ["scenario", "configuration", "runs", "jobs", "matched", "unmatched", "lost_events",
                    "latency_p99_us", "tail_jobs", "tail_explained", "tail_not"]
STATS = ("max", "p99", "mean")
#: The latency tail: jobs at or above this quantile of the measured latency.
TAIL_Q = 0.99


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
        for o in OVERHEADS:
            us = _latency_us(g) if o == "relev" else g[f"{o}_ns"].dropna().to_numpy(dtype=float) / 1e3
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
        tail = _tail(g)
        rows.append({"scenario": sc, "configuration": cf, "runs": int(g["run_id"].nunique()), "jobs": len(g),
                     "matched": int((g["unmatched"] == "").sum()),
                     "unmatched": ", ".join(f"{k} {v}" for k, v in reasons.items()) or "0",
                     "lost_events": int(lost.sum()) if lost.notna().any() else None, **tail})
    return pd.DataFrame(rows, columns=COVERAGE_COLUMNS)


def _latency_us(g: pd.DataFrame) -> np.ndarray:
    """Every job's measured wake-up latency, µs."""
    return (g["wakeup_ns"].to_numpy(dtype=float) - g["release_ns"].to_numpy(dtype=float)) / 1e3


def _tail(g: pd.DataFrame) -> dict:
    """The latency tail of ``g`` (jobs at or above its ``TAIL_Q`` quantile): the quantile, how
    many jobs, the share the four Δ decompose completely, the others by reason."""
    lat = _latency_us(g)
    if lat.size == 0:
        return {"latency_p99_us": float("nan"), "tail_jobs": 0, "tail_explained": float("nan"), "tail_not": ""}
    q = float(np.quantile(lat, TAIL_Q))
    t = g[lat >= q]
    why = t.loc[t["unmatched"] != "", "unmatched"].value_counts()
    return {"latency_p99_us": q, "tail_jobs": len(t), "tail_explained": float((t["unmatched"] == "").mean()),
            "tail_not": ", ".join(f"{k} {v}" for k, v in why.items())}


def tail_check(jobs: pd.DataFrame, stat: str = "max", scenario: str | None = None) -> dict:
    """What the measured breakdown covers of the latency (``scenario``, every one when None):
    ``sum_us`` the sum of each Δ's ``stat`` (:func:`breakdown`), ``latency_us`` the same
    statistic of every job's measured latency, ``below`` when the sum is under it (the
    breakdown would then add less to a WCET than the victim was measured to wait), and the
    tail's coverage (:func:`coverage`'s ``tail_*``)."""
    if scenario is not None:
        jobs = jobs[jobs["scenario"].astype(str) == scenario]
    total = float(sum(breakdown(jobs, stat).values()))
    lat = _stat(_latency_us(jobs), stat)
    return {"stat": stat, "sum_us": total, "latency_us": lat, "below": bool(total < lat), **_tail(jobs)}


def breakdown(jobs: pd.DataFrame, stat: str = "max", scenario: str | None = None) -> dict[str, float]:
    """Each Δ's ``stat`` (max, p99, mean) in µs over the jobs of ``scenario`` (every
    scenario when None) where it is known: the measured stand-in for seed 001's constants.
    Summing per-Δ maxima is pessimistic (they need not come from one job), as the seed's
    385 µs is a sum of worst cases."""
    if scenario is not None:
        jobs = jobs[jobs["scenario"].astype(str) == scenario]
    return {o: _stat(jobs[f"{o}_ns"].dropna().to_numpy(dtype=float) / 1e3, stat) for o in DELTAS}
