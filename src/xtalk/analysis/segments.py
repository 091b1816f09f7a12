"""The statistics of the user-defined trace segments (``seg_<name>_ns`` job columns,
trace/segments.py) per configuration × scenario: those of the execution time in
:mod:`xtalk.analysis.cells` (the median, p99 and max of the cell's pooled jobs by
``np.quantile``'s linear interpolation; the slowdown of the median and the max against the
reference scenario of the same configuration, with the same bootstrap CI over runs), over the
jobs that have the segment. ``missing`` counts the measured jobs that lack it (one of its two
events not in the job's window).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .cells import STATS, _cell_positions, _order, _runs, runs_of
from .slowdown import SOLO, slowdowns

__all__ = ["SEGMENT_COLUMNS", "segment_columns", "segment_cells"]

SEGMENT_COLUMNS = (["configuration", "scenario", "segment", "jobs", "missing", "median_ns", "p99_ns", "max_ns"]
                   + [f"slowdown_{s}{k}" for s in STATS for k in ("", "_lo", "_hi")])


def segment_columns(jobs: pd.DataFrame) -> list[str]:
    """The job table's segment columns, in order."""
    return [c for c in jobs.columns if c.startswith("seg_") and c.endswith("_ns")]


def _labelled(jobs: pd.DataFrame, cols: list[str]) -> pd.DataFrame:
    j = jobs[[c for c in ("run_id", "scenario", "configuration") if c in jobs.columns] + cols]
    j = j.assign(**{c: j[c].astype(str) for c in ("run_id", "scenario", "configuration") if c in j})
    return j if "configuration" in j else j.assign(configuration="default")


def segment_cells(jobs: pd.DataFrame, runs: pd.DataFrame, *, reference: str = SOLO, n_boot: int = 2000, seed: int = 0,
                  max_jobs: int | None = None) -> pd.DataFrame:
    """One row per configuration × scenario with a run × segment (``SEGMENT_COLUMNS``);
    ``jobs``: measured jobs with ``run_id``, ``scenario`` (``configuration``) and the
    ``seg_*_ns`` columns; ``runs``: the store's run table. Empty without segment columns."""
    cols = segment_columns(jobs)
    if not cols or jobs.empty:
        return pd.DataFrame(columns=SEGMENT_COLUMNS)
    j, r = _labelled(jobs, cols), _runs(runs)
    parts = _cell_positions(j)
    rows = []
    for c in cols:
        v = pd.to_numeric(j[c], errors="coerce").to_numpy(dtype=float)
        # Each run's values in run-id order (the bootstrap draws runs by position), NA left out.
        per = {k: [x[~np.isnan(x)] for x in (v[p] for _, p in sorted(runs_of(j["run_id"], ix), key=lambda kv: str(kv[0])))]
               for k, ix in parts.items()}
        for cfg, scen in _order(r, reference):
            ix = parts.get((cfg, scen))
            if ix is None:
                continue
            x = v[ix]
            have = np.sort(x[~np.isnan(x)])
            row = {"configuration": cfg, "scenario": scen, "segment": c.removeprefix("seg_").removesuffix("_ns"),
                   "jobs": int(have.size), "missing": int(x.size - have.size)}
            for name, q in (("median", 0.5), ("p99", 0.99), ("max", 1.0)):
                row[f"{name}_ns"] = float(np.quantile(have, q)) if have.size else np.nan
            cur, ref = per.get((cfg, scen)), per.get((cfg, reference))
            cis = {}
            if scen != reference and cur and ref and sum(map(len, cur)) and sum(map(len, ref)):
                cis = slowdowns([a for a in cur if a.size], [b for b in ref if b.size], STATS, n_boot=n_boot, seed=seed,
                                max_jobs=max_jobs)
            for stat in STATS:
                p, lo, hi = (1.0, np.nan, np.nan) if scen == reference else tuple(cis[stat]) if stat in cis else (np.nan,) * 3
                row[f"slowdown_{stat}"], row[f"slowdown_{stat}_lo"], row[f"slowdown_{stat}_hi"] = p, lo, hi
            rows.append(row)
    return pd.DataFrame(rows, columns=SEGMENT_COLUMNS)
