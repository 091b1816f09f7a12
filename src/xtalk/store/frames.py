"""Everything the report reads from a results directory, loaded once: the store's fast
loader (the report renders what analysis computes from it; it reads nothing itself).

The job tables are read per run with pyarrow, only the columns the report uses, and the
run's labels are added as categoricals: at 10^7 jobs that is a few hundred MB where
`Results.jobs()` (every column, labels as strings) would need several GB.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from ..errors import UsageError
from ..outcome import read_outcome
from . import Results
from .jobs import JobLogError, convert_run, with_application

SOLO = "solo"
#: Job-table columns the report uses (ctr_* and trace_* columns are added when present).
#: (``missed`` is the agent's per-job flag, which analysis.cells counts; the CSV export has every column.)
#: ``application``: the measured process a job belongs to (the victim's name, "victim" unless
#: the plan names it, or an application's); a categorical.
BASE_COLUMNS = ["job", "application", "warmup", "release_ns", "wakeup_ns", "start_ns", "end_ns", "cpu_start", "cpu_end",
                "period_ns", "deadline_ns", "exec_ns", "response_ns", "missed"]
LABELS = ["run_id", "scenario", "configuration", "repetition"]


@dataclass
class ReportData:
    """A results directory in memory: runs, measured jobs, warm-up jobs, the experiment.

    Measured and warm-up jobs are kept apart so that no statistic has to filter (copy) the
    whole table; ``jobs`` joins them for callers that want everything.
    """

    path: Path
    runs: pd.DataFrame
    measured: pd.DataFrame
    warmup: pd.DataFrame
    experiment: dict = field(default_factory=dict)
    #: One row per run with the labels beyond the four standard ones (campaign parameters).
    parameters: pd.DataFrame = field(default_factory=pd.DataFrame)
    #: Tables already computed (several sections use the same one).
    memo: dict = field(default_factory=dict, repr=False)

    @property
    def jobs(self) -> pd.DataFrame:
        """Every job, warm-up included (flagged by ``warmup``), in run then job order."""
        return pd.concat([self.warmup, self.measured]).sort_values(["run_id", "job"], kind="stable")

    @property
    def scenarios(self) -> list[str]:
        """Scenario names, solo first, then in the order the experiment lists them."""
        seen = list(dict.fromkeys(self.runs["scenario"])) if len(self.runs) else []
        return sorted(seen, key=lambda s: s != SOLO)

    @property
    def counters(self) -> list[str]:
        return [c for c in self.measured.columns if c.startswith("ctr_") and c not in ("ctr_enabled_ns", "ctr_running_ns")]

    def run_dir(self, run_id: str) -> Path:
        return Path(self.runs.set_index("run_id").loc[run_id, "dir"])

    def application_specs(self) -> dict[str, dict]:
        """Application name -> what the experiment file declared of it (criticality, epsilon
        as a table or None, faults, body...), in declaration order; {} for a [victim] file."""
        exp = self.experiment.get("experiment") or {}
        return {a["name"]: a for a in exp.get("application") or [] if a.get("name")}

    def scenario_specs(self) -> dict[str, list]:
        """Scenario name -> its enemy list as the experiment file gave it (solo: [])."""
        exp = self.experiment.get("experiment") or {}
        out = {SOLO: []}
        for s in exp.get("scenario") or []:
            out[s.get("name")] = s.get("enemies") or []
        return out


def _fresh(run_dir: Path) -> bool:
    src, dst = run_dir / "jobs.bin", run_dir / "jobs.parquet"
    return dst.exists() and (not src.exists() or dst.stat().st_mtime >= src.stat().st_mtime)


def _read_jobs(run_dir: Path) -> pd.DataFrame | None:
    if not _fresh(run_dir):
        try:
            if convert_run(run_dir) is None:
                return None
        except JobLogError:
            return None  # an unreadable log: the run is listed, without jobs
    path = run_dir / "jobs.parquet"
    names = pq.read_schema(path).names
    cols = [c for c in names if c in BASE_COLUMNS or c.startswith(("ctr_", "trace_"))]
    return with_application(pq.read_table(path, columns=cols).to_pandas())


def load_runs(path) -> pd.DataFrame:
    """The run table of a results directory; a path that is not one is a UsageError."""
    path = Path(path)
    try:
        results = Results(path)
    except FileNotFoundError:
        raise UsageError(f"{path}: not an xtalk results directory (no runs/); give the directory "
                         "`xtalk run` printed, RESULTS/<experiment>-<date>") from None
    runs = results.runs()
    if runs.empty:
        raise UsageError(f"{path}: no run with a run.json under runs/; run the experiment first")
    return runs


def convert_stale(runs: pd.DataFrame) -> None:
    """Write jobs.parquet for every run whose job log is newer (a run never converted, e.g.
    after a crash), so that readers of the Parquet files see every run."""
    for d in runs["dir"]:
        if not _fresh(Path(d)) and (Path(d) / "jobs.bin").exists():
            try:
                convert_run(Path(d))
            except JobLogError:
                pass  # unreadable: listed without jobs, as load() does


def measured_jobs(runs: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """The measured jobs of every run of ``runs`` (the store's run table), only ``columns`` of
    the job table (NaN where a run lacks one) with run_id, scenario and configuration as
    categoricals, in run-id then job order as ``Results.jobs()`` gives them: what a summary
    needs at a fraction of the memory of every column with string labels (10^7 jobs: a few
    hundred MB instead of several GB). Runs without a readable job table are left out."""
    parts = []
    for r in runs.itertuples():
        d = Path(r.dir)
        if not _fresh(d):
            try:
                if convert_run(d) is None:
                    continue
            except JobLogError:
                continue
        names = pq.read_schema(d / "jobs.parquet").names
        t = pq.read_table(d / "jobs.parquet", columns=[c for c in dict.fromkeys(["warmup", *columns]) if c in names])
        df = t.to_pandas()
        df = df[~df["warmup"].to_numpy(dtype=bool)]
        parts.append((r, df[[c for c in columns if c in df.columns]].reindex(columns=columns)))
    labels = {c: sorted({str(getattr(r, c)) for r, _ in parts}) for c in ("run_id", "scenario", "configuration")}
    out = []
    for r, df in sorted(parts, key=lambda p: str(p[0].run_id)):
        for col, cat in labels.items():
            df.insert(len(df.columns), col, pd.Categorical.from_codes(
                np.full(len(df), cat.index(str(getattr(r, col))), dtype=np.int32), categories=cat))
        out.append(df)
    if not out:
        return pd.DataFrame(columns=[*columns, *labels])
    jobs = pd.concat(out, ignore_index=True)
    jobs["run_id"] = jobs["run_id"].cat.remove_unused_categories()  # no empty run group anywhere
    return jobs


def load(path, runs: pd.DataFrame | None = None) -> ReportData:
    """Read a results directory (``runs``: its run table, when already read)."""
    path = Path(path)
    runs = load_runs(path) if runs is None else runs
    measured, warmup, params = [], [], []
    # Labels as categoricals built from codes, per run: a string column of 10^7 rows would
    # cost seconds to build and again to categorise.
    cats = {c: list(dict.fromkeys(runs[c])) for c in ("run_id", "scenario", "configuration")}
    apps: list[str] = []  # every application name met, in order of appearance
    for r in runs.itertuples():
        meta = read_outcome(Path(r.dir))
        extra = {k: v for k, v in (meta.labels() if meta else {}).items() if k not in LABELS}
        if extra:
            params.append({"run_id": r.run_id, **extra})
        df = _read_jobs(Path(r.dir))
        if df is None or df.empty:
            continue
        for col, cat in cats.items():
            df[col] = pd.Categorical.from_codes(np.full(len(df), cat.index(getattr(r, col)), dtype=np.int32), categories=cat)
        df["repetition"] = np.int32(r.repetition)
        col = df["application"]
        names = col.cat.categories if isinstance(col.dtype, pd.CategoricalDtype) else col.unique()
        apps += [str(a) for a in names if str(a) not in apps]
        w = df["warmup"].to_numpy(dtype=bool)
        measured.append(df[~w])
        warmup.append(df[w])
    try:
        experiment = json.loads((path / "experiment.json").read_text())
    except (OSError, ValueError):
        experiment = {}
    cats["application"] = apps
    measured, warmup = ([_recoded(p, apps) for p in parts] for parts in (measured, warmup))
    return ReportData(path, runs, _frame(measured, cats), _frame(warmup, cats), experiment, _numeric_where_possible(pd.DataFrame(params)))


def _recoded(part: pd.DataFrame, apps: list[str]) -> pd.DataFrame:
    """`part` with its `application` column a categorical over every run's names (so the
    per-run tables concatenate as one categorical)."""
    col = part["application"]
    if isinstance(col.dtype, pd.CategoricalDtype):
        col = col.cat.set_categories(apps)
    else:
        col = pd.Categorical(col.astype(str), categories=apps)
    return part.assign(application=col)


def _frame(parts: list[pd.DataFrame], cats: dict[str, list]) -> pd.DataFrame:
    """Concatenate per-run tables (their label categoricals share categories, so they stay
    categoricals, and measured and warm-up jobs concatenate and compare cleanly)."""
    if not parts:
        empty = pd.DataFrame({c: pd.Series(dtype=float) for c in LABELS + BASE_COLUMNS}).astype({"warmup": bool})
        for col, cat in cats.items():
            empty[col] = pd.Categorical([], categories=cat)
        return empty
    jobs = pd.concat(parts, ignore_index=True)
    jobs["warmup"] = jobs["warmup"].astype(bool)
    for col in ("cpu_start", "cpu_end"):
        if col in jobs and jobs[col].dtype != np.int64:
            jobs[col] = jobs[col].astype("Int64").fillna(-1).astype(np.int64)
    return jobs


def _numeric_where_possible(params: pd.DataFrame) -> pd.DataFrame:
    """Run labels are strings in the plan; a parameter whose every value is a number is
    numeric here, so grids and axes sort 2 before 10."""
    for c in params.columns:
        if c != "run_id":
            try:
                params[c] = pd.to_numeric(params[c])
            except (ValueError, TypeError):
                pass
    return params
