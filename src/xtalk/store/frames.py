"""Everything the report reads from a results directory, loaded once: the store's fast
loader (the report renders what analysis computes from it; it reads nothing itself).

The job tables are read per run with pyarrow, only the columns the report uses, and the
run's labels are added as categoricals: at 10^7 jobs that is a few hundred MB where
`Results.jobs()` (every column, labels as strings) would need several GB.
"""

from __future__ import annotations

import ctypes
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..errors import UsageError
from ..outcome import RunOutcome, read_outcome
from . import Results, columns
from .check import experiment_doc
from .jobs import DEFAULT_APPLICATION, JobLogError, convert_run

SOLO = "solo"
#: Job-table columns the report uses (ctr_*, trace_* and seg_* columns are added when present).
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
    #: Runs the store left out, damaged: run directory name -> what is wrong (store/check.py).
    left_out: dict = field(default_factory=dict)
    #: run_id -> the run's outcome (run.json, typed), read once when the data is loaded:
    #: what the report knows of each run beyond its jobs (plan, environment, enemies...).
    outcomes: dict = field(default_factory=dict, repr=False)

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

    def outcome(self, run_id: str) -> RunOutcome | None:
        """The outcome (run.json) of run ``run_id``; None for a run without one."""
        return self.outcomes.get(str(run_id))

    def metas(self) -> list[RunOutcome]:
        """The outcome of every run that has one, in the run table's order."""
        return [m for m in (self.outcomes.get(str(r)) for r in self.runs["run_id"]) if m is not None] if len(self.runs) else []

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


_fresh = columns.fresh
_job_table_ready = columns.job_table_ready  # (measured_jobs' parameter `columns` hides the module)


def _read_job_table(run_dir: Path) -> pa.Table | None:
    """The report's columns of a run's job table (converted first when stale), or None."""
    if not _job_table_ready(run_dir):
        return None
    path = run_dir / "jobs.parquet"
    names = pq.read_schema(path).names
    return pq.read_table(path, columns=[c for c in names if c in BASE_COLUMNS or c.startswith(("ctr_", "trace_", "seg_"))])


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
    runs.attrs["left_out"] = dict(results.left_out)  # damaged runs, for the report to list
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
        if not _job_table_ready(d):
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
    """Read a results directory (``runs``: its run table, when already read).

    Each run's job table is decoded by pyarrow (in threads: Parquet decoding releases the
    GIL) and copied once into columns allocated for every run's jobs (store/columns.py), the
    labels written as categorical codes: no second copy of every job in Arrow buffers, no
    conversion to pandas. Tables that do not fit that (a run without a column the others
    have, nulls, other types) take the former path: Arrow tables labelled with dictionary
    columns, cut into warm-up and measured jobs and converted to pandas once."""
    path = Path(path)
    runs = load_runs(path) if runs is None else runs
    _system_memory_pool()
    params = []
    cats = {c: list(dict.fromkeys(runs[c])) for c in ("run_id", "scenario", "configuration")}
    with ThreadPoolExecutor(max_workers=_workers()) as pool:
        heads = list(pool.map(lambda d: columns.open_job_table(Path(d), BASE_COLUMNS), runs["dir"]))
        apps: list[str] = []  # every application name met, in order of appearance
        outcomes = {}
        opened = []
        for r, h in zip(runs.itertuples(), heads):
            meta = read_outcome(Path(r.dir))
            if meta is not None:
                outcomes[str(r.run_id)] = meta
            extra = {k: v for k, v in (meta.labels() if meta else {}).items() if k not in LABELS}
            if extra:
                params.append({"run_id": r.run_id, **extra})
            if h is None or h.rows == 0:
                continue
            apps += [a for a in h.applications() if a not in apps]
            opened.append((r, h))
        experiment = experiment_doc(path) if not (path / "campaign.json").is_file() else {}
        frames = columns.direct_frames(opened, cats, apps, pool) if opened else None
    del heads, opened
    cats["application"] = apps
    if frames is None:
        measured, warm = _former_frames(runs, cats, apps)
    else:
        measured, warm = frames
    data = ReportData(path, runs, measured, warm, experiment, _numeric_where_possible(pd.DataFrame(params)),
                      left_out=dict(runs.attrs.get("left_out", {})), outcomes=outcomes)
    _return_freed_memory()
    return data


def _workers() -> int:
    return min(4, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 2)


def _former_frames(runs: pd.DataFrame, cats: dict[str, list], apps: list[str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(measured, warm-up) jobs by way of Arrow tables converted to pandas: for job tables
    the direct path does not take (``cats``: the labels' categories, application included)."""
    labels = {c: cats[c] for c in ("run_id", "scenario", "configuration")}
    with ThreadPoolExecutor(max_workers=_workers()) as pool:
        tables = list(pool.map(lambda d: _read_job_table(Path(d)), runs["dir"]))
    read = [(r, t) for r, t in zip(runs.itertuples(), tables) if t is not None and t.num_rows]
    cut = [_cut(_labelled(t, r, labels, apps)) for r, t in read]
    measured, warmup = [m for m, _ in cut], [w for _, w in cut]
    del tables, read, cut  # only the cut tables hold the buffers now: the conversion frees them
    # The warm-up slices first: the measured ones share their buffers, which the measured
    # conversion can then free column by column.
    warm = _frame(warmup, cats)
    return _frame(measured, cats), warm


#: glibc's mallopt parameters (malloc.h): M_TRIM_THRESHOLD, M_MMAP_MAX.
_M_TRIM_THRESHOLD, _M_MMAP_MAX = -1, -4


def reuse_freed_memory() -> None:
    """Keep freed memory for the next allocation instead of handing it back to the system
    (process-wide; the report calls it as it starts, its forked child inherits it): glibc
    gives an allocation over its mmap threshold (dynamic, at most 32 MB) its own mapping,
    unmapped when freed, so each of the report's arrays of 10^7 jobs was fresh memory,
    faulted in and zeroed by the kernel (at 10^7 jobs the report's system time 8.0 -> 5.1 s,
    docs/results.md). Without mmap they come from the heap, whose freed blocks are reused;
    its top is returned only past 1 GiB (and by malloc_trim after the load).
    Nothing where the C library has no mallopt.

    Also stops numpy advising the kernel to back its arrays of 4 MB and more with transparent
    huge pages (what NUMPY_MADVISE_HUGEPAGE=0 does at start-up): the report walks its arrays
    once or twice, so fewer TLB misses gain it nothing measurable, while a huge page is fresh
    memory zeroed 2 MB at a time: at 10^7 jobs on the development VM the report's system time
    was 2.2-3.0 s with them, 1.1-1.2 s without, user time the same (docs/results.md)."""
    try:
        libc = ctypes.CDLL(None)
        libc.mallopt(_M_TRIM_THRESHOLD, 1 << 30)
        libc.mallopt(_M_MMAP_MAX, 0)
    except (OSError, AttributeError):
        pass
    advise = getattr(_numpy_multiarray(), "_set_madvise_hugepage", None)
    if advise is not None:
        advise(False)


def _numpy_multiarray():
    """numpy's multiarray module, where its huge-page switch lives (numpy._core from 2.0,
    numpy.core before)."""
    try:
        from numpy._core import multiarray
    except ImportError:  # numpy 1.x
        from numpy.core import multiarray
    return multiarray


def _return_freed_memory() -> None:
    """Hand the C library's freed heap back to the system (glibc's malloc_trim): the Parquet
    pages decoded above, about 1 GB at 10^7 jobs, stay in its arenas otherwise, and the
    report's peak memory with them. Nothing where the C library has no malloc_trim."""
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):
        pass


def _system_memory_pool() -> None:
    """Arrow's allocations from the C library's allocator, unless ARROW_DEFAULT_MEMORY_POOL
    says otherwise: pyarrow's default (mimalloc) took 3–4 s of system time to read 10^7 jobs
    on the development VM (fresh memory on huge pages), the system allocator about 1 s."""
    if "ARROW_DEFAULT_MEMORY_POOL" not in os.environ:
        pa.set_memory_pool(pa.system_memory_pool())


def _labelled(t: pa.Table, r, cats: dict[str, list], apps: list[str]) -> pa.Table:
    """Run table ``t`` with its ``application`` coded over every run's names and the run's
    labels (dictionary columns of one code) and repetition appended."""
    n = t.num_rows
    dictionary = pa.array(apps, pa.string())
    if "application" not in t.column_names:  # where store.jobs.with_application puts it
        at = t.column_names.index("job") + 1 if "job" in t.column_names else 0
        t = t.add_column(at, "application", _constant(n, apps.index(DEFAULT_APPLICATION), dictionary))
    else:
        col = t["application"]
        chunks = []
        for c in col.chunks:
            if pa.types.is_dictionary(c.type):  # its own codes mapped to the codes among every run's names
                remap = pa.array([apps.index(str(v)) for v in c.dictionary.to_pylist()], pa.int32())
                codes = pc.take(remap, c.indices)
            else:
                codes = pc.index_in(c.cast(pa.string()), value_set=dictionary)
            chunks.append(pa.DictionaryArray.from_arrays(codes.cast(pa.int32()), dictionary))
        t = t.set_column(t.column_names.index("application"), "application", pa.chunked_array(chunks, pa.dictionary(pa.int32(), pa.string())))
    for col, cat in cats.items():
        t = t.append_column(col, _constant(n, cat.index(getattr(r, col)), pa.array(cat, pa.string())))
    return t.append_column("repetition", pa.array(np.full(n, r.repetition, dtype=np.int32)))


def _constant(n: int, code: int, dictionary: pa.Array) -> pa.DictionaryArray:
    return pa.DictionaryArray.from_arrays(pa.array(np.full(n, code, dtype=np.int32)), dictionary)


def _cut(t: pa.Table) -> tuple[pa.Table, pa.Table]:
    """(measured jobs, warm-up jobs) of a run's table: slices where the warm-up jobs lead."""
    lead = _leading_warmup(t["warmup"])
    if lead is not None:
        return t.slice(lead), t.slice(0, lead)
    w = pc.fill_null(t["warmup"], False)
    return t.filter(pc.invert(w)), t.filter(w)


def _leading_warmup(w: pa.ChunkedArray) -> int | None:
    """How many warm-up jobs lead the run when every warm-up job comes before every measured
    one (the agent's order), else None."""
    if w.null_count:
        return None
    flags = w.to_numpy(zero_copy_only=False)
    lead = int(np.argmin(flags)) if not flags.all() else flags.size
    return lead if not flags[lead:].any() else None


def _frame(parts: list[pa.Table], cats: dict[str, list]) -> pd.DataFrame:
    """One frame of the runs' tables (their label columns share dictionaries, so they become
    categoricals, and measured and warm-up jobs concatenate and compare cleanly)."""
    if not parts:
        empty = pd.DataFrame({c: pd.Series(dtype=float) for c in LABELS + BASE_COLUMNS}).astype({"warmup": bool})
        for col, cat in cats.items():
            empty[col] = pd.Categorical([], categories=cat)
        return empty
    table = pa.concat_tables(parts, promote_options="permissive")
    parts.clear()
    # One block per column (a consolidated block, columns × rows, is slow to take columns
    # from), each column's Arrow buffers freed once converted where nothing else holds them.
    jobs = table.to_pandas(split_blocks=True, self_destruct=True)
    del table
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
