"""CSV exports, as METRICS gave them: one row per job and one row per probe sample, every
row carrying its run's labels; plus every report table as its own CSV.

Job and probe files are streamed in record batches through pyarrow (no whole-experiment
DataFrame, no whole run in memory), so the export costs little memory at any size.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from .. import safepath
from ..store.frames import LABELS, ReportData


#: Rows per record batch of the streamed export: memory stays at a few MB per batch whatever
#: the size of a run (a run of 10^7 jobs was once read whole).
BATCH_ROWS = 1 << 16


def _labelled(batch: pa.RecordBatch, run, columns: list[str]) -> pa.Table:
    n = batch.num_rows
    lab = {"run_id": run.run_id, "scenario": run.scenario, "configuration": run.configuration, "repetition": run.repetition}
    names = batch.schema.names
    cols = []
    for c in columns:
        if c in lab:
            cols.append(pa.repeat(pa.scalar(lab[c]), n))  # built in C: no Python list, no GIL held
        elif c in names:
            cols.append(batch.column(names.index(c)))
        else:
            cols.append(pa.nulls(n))  # a column another run has (a counter it recorded)
    return pa.Table.from_arrays(cols, names=columns)


def _stream(data: ReportData | pd.DataFrame, filename: str, out: Path) -> int:
    """Concatenate RUN/<filename> of every run (``data``: a ReportData or its run table) into
    one CSV at ``out``; rows written."""
    runs = data.runs if isinstance(data, ReportData) else data
    files = [(r, Path(r.dir) / filename) for r in runs.itertuples() if (Path(r.dir) / filename).exists()]
    if not files:
        return 0
    columns = list(LABELS)
    for _, p in files:
        columns += [c for c in pq.read_schema(p).names if c not in columns]
    safepath.makedirs(out.parent)
    rows = 0
    header = True
    with safepath.replace(out, "wb") as f:
        for run, p in files:
            pf = pq.ParquetFile(p)
            # An empty run still writes the header when it comes first, as a whole table did.
            batches = pf.iter_batches(batch_size=BATCH_ROWS) if pf.metadata.num_rows else [pf.schema_arrow.empty_table()]
            for b in batches:
                t = _labelled(b, run, columns)
                pacsv.write_csv(t, f, pacsv.WriteOptions(include_header=header))
                header = False
                rows += t.num_rows
    return rows


def export_jobs(data: ReportData | pd.DataFrame, out: Path) -> int:
    """One row per job (warm-up included, flagged) with run labels; rows written."""
    return _stream(data, "jobs.parquet", out)


def export_probes(data: ReportData | pd.DataFrame, out: Path) -> int:
    """One row per probe sample (probes.parquet of runs with probes); 0 when none."""
    return _stream(data, "probes.parquet", out)


def export_tables(tables: dict[str, pd.DataFrame], out_dir: Path) -> list[Path]:
    """Every non-empty table as OUT_DIR/<name>.csv."""
    safepath.makedirs(out_dir)
    paths = []
    for name, df in tables.items():
        if df is None or df.empty:
            continue
        p = out_dir / f"{name}.csv"
        text = _numbers_csv(df) if isinstance(df.index, pd.RangeIndex) else None
        if text is not None:
            safepath.write_bytes(p, text.encode())
        else:
            safepath.write_csv(df, p, index=not isinstance(df.index, pd.RangeIndex))
        paths.append(p)
    return paths


#: Tables of fewer rows go to pandas' writer whatever their columns (it costs them little).
NUMBERS_CSV_MIN_ROWS = 4096


def _numbers_csv(df: pd.DataFrame) -> str | None:
    """``df.to_csv(index=False)``'s text, byte for byte, for a long table of integer columns
    and float columns of integers and halves (a per-job reference: its job, min, max and
    run counts, the median of an even number of runs): the numbers converted to text by
    numpy's StringDType in C, the floats as their integer and ".0" or ".5" (what repr gives
    below 10^15), instead of pandas' float repr of each and its csv writer (about a third
    of the time of each table of 10^5 rows). None for any other table: then pandas."""
    if len(df) < NUMBERS_CSV_MIN_ROWS or not hasattr(np.dtypes, "StringDType") or df.columns.has_duplicates:
        return None
    if not all(isinstance(c, str) and c.isascii() and c.isidentifier() for c in df.columns):  # never quoted
        return None
    text_dt = np.dtypes.StringDType()
    line = None
    for c in df.columns:
        v = df[c].to_numpy()
        if v.dtype.kind in "iu":
            t = v.astype(text_dt)
        elif v.dtype == np.float64:
            if not bool(((v >= 0) & (v < 1e15)).all()) or np.signbit(v).any():  # NaN, inf, negative, -0.0, long
                return None
            twice = (v * 2).astype(np.int64)
            if not np.array_equal(twice, v * 2):
                return None
            t = np.strings.add((twice // 2).astype(text_dt), np.where(twice % 2 == 1, ".5", ".0").astype(text_dt))
        else:
            return None
        line = t if line is None else np.strings.add(np.strings.add(line, ","), t)
    return ",".join(df.columns) + "\n" + "\n".join(line.tolist()) + "\n"
