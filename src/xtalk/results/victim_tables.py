"""The per-kind tables that read a run's own files: a task set's jobs with their task index
(jobs.parquet) and the AOCS comparer's verdict per run (aocs.json). report/victim_kinds.py
renders them; it reads no file of a run itself (tests/test_layers.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq

#: A task set's job columns the per-task table reads.
TASK_JOB_COLUMNS = ["job", "warmup", "task", "release_ns", "start_ns", "end_ns", "cpu_start", "cpu_time_ns", "missed"]
AOCS_COLUMNS = ["run_id", "scenario", "configuration", "status", "compared", "mismatches", "first_mismatch_step"]


def task_jobs(runs: pd.DataFrame) -> pd.DataFrame:
    """Measured jobs of a task-set victim with their task index and the run's labels
    (``runs``: the store's run table); runs without jobs.parquet or a task column are left out."""
    cols = TASK_JOB_COLUMNS
    parts = []
    for r in runs.itertuples():
        p = Path(r.dir) / "jobs.parquet"
        if not p.exists():
            continue
        names = pq.read_schema(p).names
        df = pq.read_table(p, columns=[c for c in cols if c in names]).to_pandas()
        if "task" not in df:
            continue
        parts.append(df[~df["warmup"].astype(bool)].assign(run_id=r.run_id, scenario=r.scenario,
                                                           configuration=r.configuration))
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=cols + ["run_id", "scenario", "configuration"])


def aocs_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Per run: the comparer's verdict from aocs.json (steps compared, mismatches, first
    mismatching step); a run without aocs.json (or an unreadable one) is listed with its
    status and no counts."""
    rows = []
    for r in runs.itertuples():
        try:
            a = json.loads((Path(r.dir) / "aocs.json").read_text())
        except (OSError, ValueError):
            a = {}
        if not isinstance(a, dict):
            a = {}
        rows.append({"run_id": r.run_id, "scenario": r.scenario, "configuration": r.configuration, "status": r.status,
                     "compared": a.get("compared"), "mismatches": a.get("mismatches"),
                     "first_mismatch_step": a.get("first_mismatch_step")})
    return pd.DataFrame(rows, columns=AOCS_COLUMNS)
