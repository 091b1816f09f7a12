"""Runs' job tables copied straight into the report's columns (store.frames.load's path).

Every run's Parquet table is decoded by pyarrow and each column copied once into a numpy
array allocated for every run's jobs; the labels (run, scenario, configuration, application)
are written as categorical codes. The Arrow tables of one run live only while it is copied,
so the C library's allocator reuses their memory run after run: at 10^7 jobs the former path
(every run's table held, concatenated and converted to pandas) faulted in twice the memory.

Tables this does not take (a run without a column another has, nulls, types other than
integers, floats and booleans, warm-up flags missing) are left to the former path: the
caller gets None and converts Arrow tables to pandas as before.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .jobs import DEFAULT_APPLICATION, JobLogError, convert_run

#: Columns whose values the report reads as int64 (a run's CPU numbers are stored as int32).
INT64 = ("cpu_start", "cpu_end")
PREFIXES = ("ctr_", "trace_", "seg_")


class _Odd(Exception):
    """A run's table the direct path does not take: the caller uses the former path."""


def fresh(run_dir: Path) -> bool:
    """Whether the run's jobs.parquet exists and is not older than its job log."""
    src, dst = run_dir / "jobs.bin", run_dir / "jobs.parquet"
    return dst.exists() and (not src.exists() or dst.stat().st_mtime >= src.stat().st_mtime)


@dataclass
class Head:
    """A run's opened job table: the columns to read, its warm-up flags and applications."""

    path: Path
    metadata: pq.FileMetaData
    names: list[str]
    rows: int
    warmup: pa.ChunkedArray | None
    application: pa.ChunkedArray | None

    def applications(self) -> list[str]:
        """The application names as pandas would list them: a dictionary column's whole
        dictionary (a categorical's categories), else the values in order of appearance; a
        table from before applications has the victim's default name."""
        return application_names(self.application)


def application_names(col: pa.ChunkedArray | None) -> list[str]:
    """See Head.applications (``col``: a table's application column, None when it has none)."""
    if col is None:
        return [DEFAULT_APPLICATION]
    if pa.types.is_dictionary(col.type):
        return [str(v) for v in (col.chunk(0).dictionary.to_pylist() if col.num_chunks else [])]
    return [str(v) for v in pc.unique(col).to_pylist() if v is not None]


def job_table_ready(run_dir: Path) -> bool:
    """Whether the run has a current jobs.parquet, converted first from its log when stale;
    False for a run without one or with an unreadable log (listed, without jobs)."""
    if fresh(run_dir):
        return True
    try:
        return convert_run(run_dir) is not None
    except JobLogError:
        return False


def open_job_table(run_dir: Path, base: list[str]) -> Head | None:
    """The run's job table opened (converted first when stale) with its warm-up and
    application columns read; None for a run without a readable job table."""
    if not job_table_ready(run_dir):
        return None
    path = run_dir / "jobs.parquet"
    with _open(path) as f:  # closed between the two reads: a campaign has thousands of runs
        names = [c for c in f.schema_arrow.names if c in base or c.startswith(PREFIXES)]
        head = f.read(columns=[c for c in ("warmup", "application") if c in names]) if f.metadata.num_rows else None
        col = (lambda c: head[c] if head is not None and c in head.column_names else None)
        return Head(path, f.metadata, names, f.metadata.num_rows, col("warmup"), col("application"))


def _open(path: Path, metadata: pq.FileMetaData | None = None) -> pq.ParquetFile:
    # pre_buffer (pyarrow's default) keeps the file's column chunks cached while the file is
    # open, a second copy of every run's table.
    return pq.ParquetFile(path, metadata=metadata, pre_buffer=False)


def direct_frames(opened: list[tuple[object, Head]], cats: dict[str, list], apps: list[str], pool) -> tuple[pd.DataFrame, pd.DataFrame] | None:
    """(measured, warm-up) jobs of the ``opened`` runs (run-table row, Head; runs with jobs,
    in run-table order), labelled with ``cats`` (run_id, scenario, configuration: each
    label's categories) and ``apps``; None where a table is one the direct path does not
    take. ``pool`` decodes runs concurrently."""
    try:
        layout = _layout(opened)
        cuts = [_cut(h) for _, h in opened]
    except _Odd:
        return None
    names, types = layout
    warms = [int(lead.sum()) if isinstance(lead, np.ndarray) else lead for lead, _ in cuts]
    n_warm = sum(warms)
    n_meas = sum(h.rows for _, h in opened) - n_warm
    dtypes = {c: np.dtype(np.int64) if c in INT64 else np.dtype(bool) if c == "warmup" else
              types[c].to_pandas_dtype() for c in names if c != "application"}
    out = {}
    for part, size in (("m", n_meas), ("w", n_warm)):
        cols = {c: np.empty(size, dtypes[c]) for c in names if c != "application"}
        cols["application"] = np.empty(size, _codes_dtype(len(apps)))
        for c in cats:
            cols[c] = np.empty(size, _codes_dtype(len(cats[c])))
        cols["repetition"] = np.empty(size, np.int32)
        out[part] = cols
    starts, m, w = [], 0, 0
    for (_, h), warm in zip(opened, warms):
        starts.append((m, w))
        m, w = m + h.rows - warm, w + warm

    def copy(i: int) -> None:
        r, h = opened[i]
        lead, flags = cuts[i]
        m0, w0 = starts[i]
        with _open(h.path, h.metadata) as f:
            t = f.read(columns=[c for c in h.names if c not in ("warmup", "application")])
        if t.schema.types != [types[c] for c in t.column_names]:
            raise _Odd
        values = {c: _numpy(t[c]) for c in t.column_names}
        del t
        values["warmup"] = flags
        values["application"] = _application_codes(h.application, h.rows, apps)
        for c, v in values.items():
            _put(out, c, v, lead, m0, w0)
        m1, w1 = m0 + h.rows - warms[i], w0 + warms[i]
        for c, value in [*((c, cat.index(getattr(r, c))) for c, cat in cats.items()), ("repetition", r.repetition)]:
            out["m"][c][m0:m1] = value
            out["w"][c][w0:w1] = value

    try:
        list(pool.map(copy, range(len(opened))))
    except _Odd:
        return None
    frames = []
    for part in ("m", "w"):
        cols = out[part]
        cols["application"] = pd.Categorical.from_codes(cols["application"], dtype=pd.CategoricalDtype(apps), validate=False)
        for c, cat in cats.items():
            cols[c] = pd.Categorical.from_codes(cols[c], dtype=pd.CategoricalDtype(cat), validate=False)
        order = [*names, *cats, "repetition"]
        frames.append(pd.DataFrame({c: cols.pop(c) for c in order}, copy=False))
    return frames[0], frames[1]


def _layout(opened) -> tuple[list[str], dict[str, pa.DataType]]:
    """Every run's columns in the frame's order (application after job, where the store puts
    it) and their Arrow types; _Odd unless every run has the same."""
    names = types = None
    for _, h in opened:
        schema = h.metadata.schema.to_arrow_schema()
        cols = list(h.names)
        if "application" not in cols:
            cols.insert(cols.index("job") + 1 if "job" in cols else 0, "application")
        run_types = {c: schema.field(c).type for c in h.names if c != "application"}
        if names is None:
            names, types = cols, run_types
        elif cols != names or run_types != types:
            raise _Odd
    for c, t in types.items():
        ok = pa.types.is_boolean(t) if c == "warmup" else pa.types.is_integer(t) if c in INT64 else (
            pa.types.is_integer(t) or pa.types.is_boolean(t) or pa.types.is_float32(t) or pa.types.is_float64(t))
        if not ok:
            raise _Odd
    if "warmup" not in types:
        raise _Odd
    return names, types


def _cut(h: Head) -> tuple[int | np.ndarray, np.ndarray]:
    """(how many warm-up jobs lead the run, or the warm-up mask where they do not lead;
    the flags)."""
    if h.warmup is None or h.warmup.null_count:
        raise _Odd
    flags = h.warmup.to_numpy()
    lead = int(np.argmin(flags)) if not flags.all() else flags.size
    return (lead if not flags[lead:].any() else flags), flags


def _numpy(col: pa.ChunkedArray) -> np.ndarray:
    """A column's values without nulls as numpy (a view of a single chunk's buffer)."""
    if col.null_count:
        raise _Odd
    if col.num_chunks == 1:
        return col.chunk(0).to_numpy(zero_copy_only=not pa.types.is_boolean(col.type))
    return col.to_numpy()


def _application_codes(col: pa.ChunkedArray | None, rows: int, apps: list[str]) -> np.ndarray:
    """A run's application column as codes among every run's names ``apps``."""
    if col is None:
        return np.full(rows, apps.index(DEFAULT_APPLICATION), dtype=np.int32)
    if col.null_count:
        raise _Odd
    parts = []
    for c in col.chunks:
        if pa.types.is_dictionary(c.type):  # its own codes mapped to the codes among every run's names
            remap = np.array([apps.index(str(v)) for v in c.dictionary.to_pylist()], dtype=np.int32)
            parts.append(remap[c.indices.to_numpy(zero_copy_only=False)])
        else:
            parts.append(pc.index_in(c.cast(pa.string()), value_set=pa.array(apps, pa.string())).to_numpy(zero_copy_only=False))
    return np.concatenate(parts) if len(parts) != 1 else parts[0]


def _put(out: dict, c: str, v: np.ndarray, lead, m0: int, w0: int) -> None:
    """A run's column ``v`` into the measured and warm-up columns from rows m0 and w0."""
    if isinstance(lead, np.ndarray):
        meas, warm = v[~lead], v[lead]
    else:
        meas, warm = v[lead:], v[:lead]
    out["m"][c][m0:m0 + meas.size] = meas
    out["w"][c][w0:w0 + warm.size] = warm


def _codes_dtype(n: int) -> np.dtype:
    """The codes' type pandas gives a categorical of ``n`` categories (the smallest signed
    integer holding them, as pandas' coerce_indexer_dtype picks it)."""
    for t in (np.int8, np.int16, np.int32):
        if n < np.iinfo(t).max:
            return np.dtype(t)
    return np.dtype(np.int64)
