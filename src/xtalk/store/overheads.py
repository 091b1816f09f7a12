"""The per-job release overheads of every traced run of a results directory.

Each run's decomposition (:func:`xtalk.trace.overheads.decompose` over its measured victim
jobs) is kept beside its trace as ``overheads.parquet``, rebuilt when the trace or the job
table is newer: a trace takes a second or more to parse, and the report, `xtalk compare`
and `xtalk overheads` each read it. A results directory that cannot be written (another
machine's, read-only) is decomposed again each time.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..outcome import load_outcome, read_outcome
from ..trace.overheads import COLUMNS, for_run
from ..trace.parse import trace_file
from .files import parquet_damage, write_parquet_atomic
from .jobs import victim_jobs

CACHE = "overheads.parquet"
#: Per run: its labels, the events the trace lost to buffer overruns, jobs, matched.
RUN_COLUMNS = ["run_id", "scenario", "configuration", "lost_events", "jobs", "matched"]


def _fresh(run_dir: Path) -> bool:
    cache = run_dir / CACHE
    if not cache.exists():
        return False
    t = cache.stat().st_mtime
    return all(not p.exists() or p.stat().st_mtime <= t for p in (run_dir / "trace.dat", run_dir / "trace.txt", run_dir / "jobs.parquet", run_dir / "jobs.bin"))


def run_overheads(run_dir: Path) -> pd.DataFrame | None:
    """One run's per-job decomposition (``trace.overheads.COLUMNS``), None without a trace."""
    run_dir = Path(run_dir)
    if trace_file(run_dir) is None:
        return None
    if _fresh(run_dir) and parquet_damage(run_dir / CACHE) is None:  # a damaged cache: decompose again
        cached = pd.read_parquet(run_dir / CACHE)
        if list(cached.columns) == COLUMNS:  # else written by another version: decompose again
            return cached
    jobs = victim_jobs(run_dir)
    if jobs is None:
        return None
    out = for_run(run_dir, load_outcome(run_dir), jobs[~jobs["warmup"].astype(bool)])
    if out is None:
        return None
    try:
        write_parquet_atomic(out, run_dir / CACHE)
    except OSError:
        pass  # not ours to write: recomputed next time
    return out


def collect(runs: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(jobs, runs) of the runs of a results directory (``Results.runs()`` or the report's
    run table: ``run_id``, ``scenario``, ``configuration``, ``dir``): every traced run's
    per-job decomposition with those labels; and per traced run ``RUN_COLUMNS``. Both empty
    when no run has a trace."""
    parts, out = [], []
    for r in runs.itertuples():
        o = run_overheads(Path(r.dir))
        if o is None:
            continue
        labels = {"run_id": str(r.run_id), "scenario": str(r.scenario), "configuration": str(r.configuration)}
        parts.append(o.assign(**labels))
        meta = read_outcome(Path(r.dir))
        lost = getattr(getattr(meta, "trace", None), "lost_events", None)
        out.append({**labels, "lost_events": lost, "jobs": len(o), "matched": int((o["unmatched"] == "").sum())})
    jobs = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=COLUMNS + RUN_COLUMNS[:3])
    return jobs, pd.DataFrame(out, columns=RUN_COLUMNS)
