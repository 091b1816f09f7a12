"""CSV exports, as METRICS gave them: one row per job and one row per probe sample, every
row carrying its run's labels; plus every report table as its own CSV.

Job and probe files are streamed in record batches through pyarrow (no whole-experiment
DataFrame, no whole run in memory), so the export costs little memory at any size.
"""

from __future__ import annotations

from pathlib import Path

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
        safepath.write_csv(df, p, index=not isinstance(df.index, pd.RangeIndex))
        paths.append(p)
    return paths
