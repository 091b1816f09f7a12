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
            safepath.write_bytes(p, text)
        else:
            safepath.write_csv(df, p, index=not isinstance(df.index, pd.RangeIndex))
        paths.append(p)
    return paths


#: Tables of fewer rows go to pandas' writer whatever their columns (it costs them little).
NUMBERS_CSV_MIN_ROWS = 4096


def _numbers_csv(df: pd.DataFrame) -> bytes | None:
    """``df.to_csv(index=False)``'s bytes, for a long table of integer columns and float
    columns of integers and halves (a per-job reference: its job, min, max and run counts,
    the median of an even number of runs): each number's characters written as a row of
    digits by numpy (the integer part's digits, then ".0" or ".5" for a float, which is what
    repr gives below 10^15; no leading zeros), the rows joined by dropping the padding,
    instead of pandas' float repr of each value and its csv writer (about 60 ms a table of
    10^5 rows). None for any other table: then pandas."""
    if len(df) < NUMBERS_CSV_MIN_ROWS or df.columns.has_duplicates:
        return None
    if not all(isinstance(c, str) and c.isascii() and c.isidentifier() for c in df.columns):  # never quoted
        return None
    n = len(df)
    blocks = []
    for c in df.columns:
        v = df[c].to_numpy()
        if v.dtype.kind in "iu":
            if v.dtype.itemsize == 8 and not (np.iinfo(np.int64).min < int(v.min()) and int(v.max()) <= np.iinfo(np.int64).max):
                return None  # |v| or the int64 conversion would overflow
            blocks += _integer_chars(v.astype(np.int64, copy=False))
        elif v.dtype == np.float64:
            if not bool(((v >= 0) & (v < 1e15)).all()) or np.signbit(v).any():  # NaN, inf, negative, -0.0, long
                return None
            twice = (v * 2).astype(np.int64)
            if not np.array_equal(twice, v * 2):
                return None
            blocks += _integer_chars(twice >> 1)
            frac = np.full((n, 2), ord("."), dtype=np.uint8)
            frac[:, 1] = np.where(twice & 1, ord("5"), ord("0"))
            blocks.append(frac)
        else:
            return None
        blocks.append(np.full((n, 1), ord(","), dtype=np.uint8))
    blocks[-1] = np.full((n, 1), ord("\n"), dtype=np.uint8)
    chars = np.concatenate(blocks, axis=1)
    return (",".join(df.columns) + "\n").encode() + chars[chars != 0].tobytes()


def _integer_chars(v: np.ndarray) -> list[np.ndarray]:
    """The decimal characters of int64 ``v`` as rows of bytes (a "-" column first when one is
    negative), right-aligned, 0 where a row has no character (leading places)."""
    neg = v < 0
    a = np.abs(v) if neg.any() else v
    width = len(str(int(a.max())))
    digits = np.empty((v.size, width), dtype=np.uint8)
    x = a.copy()
    for j in range(width - 1, -1, -1):
        digits[:, j] = x % 10
        x //= 10
    digits += ord("0")
    for j in range(width - 1):  # the last place is always written ("0" for zero)
        digits[a < 10 ** (width - 1 - j), j] = 0
    if not neg.any():
        return [digits]
    # The sign just before each negative number's first digit: its digits shifted right by one.
    out = np.zeros((v.size, width + 1), dtype=np.uint8)
    out[:, 1:] = digits
    rows = np.flatnonzero(neg)
    out[rows, width - np.count_nonzero(digits[rows], axis=1)] = ord("-")
    return [out]
