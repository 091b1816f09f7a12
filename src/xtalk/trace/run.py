"""The trace of one run directory, with the run's own names for its processes."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from .culprits import per_job
from .parse import parse_file


def labels(meta: dict) -> dict[int, str]:
    """pid -> xtalk name ("victim", "enemy read@0") from run.json."""
    pids = meta.get("pids") or {}
    out = {}
    if pids.get("victim"):
        out[int(pids["victim"])] = "victim"
    for name, pid in (pids.get("enemies") or {}).items():
        out[int(pid)] = f"enemy {name}"
    return out


def analyze(run_dir: Path, jobs: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame] | None:
    """(per-job trace metrics, culprits) for a run that has a trace, else None."""
    path = Path(run_dir) / "trace.txt"
    if not path.exists() or jobs.empty:
        return None
    meta = json.loads((Path(run_dir) / "run.json").read_text())
    victim = (meta.get("pids") or {}).get("victim")
    if not victim:
        return None
    return per_job(parse_file(path), jobs, int(victim), labels(meta))
