"""The trace of one run directory, with the run's own names for its processes."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..outcome import RunOutcome, load_outcome
from .culprits import per_job
from .parse import parse_file


def labels(meta: RunOutcome) -> dict[int, str]:
    """pid -> xtalk name ("victim", "enemy read@0") from the run's outcome."""
    out = {}
    if meta.pids is None:
        return out
    if meta.pids.victim:
        out[meta.pids.victim] = "victim"
    for name, pid in meta.pids.enemies.items():
        out[pid] = f"enemy {name}"
    return out


def analyze(run_dir: Path, jobs: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame] | None:
    """(per-job trace metrics, culprits) for a run that has a trace, else None."""
    path = Path(run_dir) / "trace.txt"
    if not path.exists() or jobs.empty:
        return None
    meta = load_outcome(Path(run_dir))
    victim = meta.pids.victim if meta.pids else None
    if not victim:
        return None
    return per_job(parse_file(path), jobs, victim, labels(meta))
