"""What a command application's jobs are, for the summary and the report: the sentence that
says where its jobs come from (a probe's spans, with or without releases), the whole process's
own time per cell (available, never the headline), and its probes per cell for summary.json.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ..store import run_outcomes
from ..store.probe_jobs import TIMING_EXECUTION, timing, whole_process


def _ms(ns: int | None) -> str:
    return f"{ns / 1e6:g} ms" if ns else "?"


def jobs_from_of(runs: pd.DataFrame) -> dict[str, object]:
    """Each measured process's `jobs_from` (plan.JobsFrom) by name, from the runs' plans
    (the victim's and every application's), for those that declare one."""
    out: dict[str, object] = {}
    for meta in run_outcomes(runs):
        if meta is None or meta.plan is None:
            continue
        for proc in [meta.plan.victim, *meta.plan.applications]:
            jf = getattr(proc.body, "jobs_from", None)
            if jf is not None:
                out.setdefault(proc.name, jf)
    return out


def jobs_sentence(jf) -> str | None:
    """One line on the victim's jobs when they are declared (None for a built-in body)."""
    if jf is None:
        return None
    if jf.trace is not None:
        return f"jobs: the activations of thread {jf.trace!r} in the scheduler trace"
    what = f"the spans of probe {jf.probe!r}" + (f" to probe {jf.end!r}" if jf.end else "")
    if timing(jf) == TIMING_EXECUTION:
        return (f"jobs: {what}; execution only (no release probe and no declared period: response time, lateness and "
                "deadline misses are not measured; add jobs_from.release or a period)")
    rel = f"a {_ms(jf.period_ns)} grid" if jf.period_ns else "its wake-ups"
    via = f" through probe {jf.release!r}" if jf.release else " from their starts"
    return f"jobs: {what}, released on {rel}{via}"


def process_times(runs: pd.DataFrame) -> pd.DataFrame:
    """Per configuration and scenario, the median whole-process time (ms, the program's life
    from exec to exit) and CPU time (ms) over the runs of a declared command; empty otherwise."""
    rows = []
    for r in runs.itertuples():
        p = whole_process(Path(r.dir))
        if p is None or p.empty:
            continue
        rows.append({"configuration": r.configuration, "scenario": r.scenario,
                     "process_ms": float(p["end_ns"].iloc[0] - p["start_ns"].iloc[0]) / 1e6,
                     "process_cpu_ms": float(p["cpu_time_ns"].iloc[0]) / 1e6})
    if not rows:
        return pd.DataFrame(columns=["configuration", "scenario", "process_ms", "process_cpu_ms"])
    return pd.DataFrame(rows).groupby(["configuration", "scenario"], sort=False).median().reset_index()


def probe_records(st: pd.DataFrame) -> dict[tuple[str, str], list[dict]]:
    """portfolio.probe_statistics rows as summary.json's per-cell `probes` lists."""
    out: dict[tuple[str, str], list[dict]] = {}
    for r in st.itertuples():
        rec = {"probe": int(r.probe), "name": r.name, "kind": r.kind, "n": int(r.n), "median_us": r.median_us,
               "p99_us": r.p99_us, "worst_us": r.worst_us}
        if not np.isnan(r.slowdown_median):
            rec |= {"slowdown_median": r.slowdown_median, "slowdown_median_lo": r.slowdown_median_lo,
                    "slowdown_median_hi": r.slowdown_median_hi}
        out.setdefault((r.configuration, r.scenario), []).append(rec)
    return out
