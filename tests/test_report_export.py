"""The job CSV export streamed in record batches is byte for byte the export that read each
run whole: across batch boundaries, with a counter column only some runs have, and with a
run of no jobs first."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from xtalk.report import export
from xtalk.testing.synthetic import Scenario, job_table, write_results
from xtalk.store.frames import LABELS, load_runs


def _whole_runs_export(runs, out: Path) -> None:
    """The former export: each run's table read whole, labelled, written with one header."""
    files = [(r, Path(r.dir) / "jobs.parquet") for r in runs.itertuples() if (Path(r.dir) / "jobs.parquet").exists()]
    columns = list(LABELS)
    for _, p in files:
        columns += [c for c in pq.read_schema(p).names if c not in columns]
    with open(out, "wb") as f:
        for i, (run, p) in enumerate(files):
            t = pq.read_table(p)
            lab = {"run_id": run.run_id, "scenario": run.scenario, "configuration": run.configuration,
                   "repetition": run.repetition}
            cols = [pa.repeat(pa.scalar(lab[c]), t.num_rows) if c in lab else
                    t.column(c) if c in t.column_names else pa.nulls(t.num_rows) for c in columns]
            pacsv.write_csv(pa.Table.from_arrays(cols, names=columns), f, pacsv.WriteOptions(include_header=i == 0))


def test_streamed_export_equals_the_whole_run_export(tmp_path, monkeypatch):
    root = write_results(tmp_path / "r", [Scenario("solo"), Scenario("pi", slowdown=1.3)], repetitions=2, jobs=50)
    runs = load_runs(root)
    # A counter only one run recorded, and a first run (by name) with no job at all.
    d = Path(runs["dir"].iloc[1])
    t = pq.read_table(d / "jobs.parquet")
    pq.write_table(t.append_column("ctr_cycles", pa.array(np.arange(t.num_rows, dtype=np.int64) * 7)), d / "jobs.parquet")
    first = Path(runs["dir"].iloc[0])
    pq.write_table(pa.Table.from_pandas(job_table(5), preserve_index=False).slice(0, 0), first / "jobs.parquet")

    monkeypatch.setattr(export, "BATCH_ROWS", 7)  # every run split over several batches
    rows = export.export_jobs(runs, tmp_path / "streamed.csv")
    _whole_runs_export(runs, tmp_path / "whole.csv")
    streamed, whole = (tmp_path / "streamed.csv").read_bytes(), (tmp_path / "whole.csv").read_bytes()
    assert streamed == whole
    assert rows == whole.count(b"\n") - 1 == sum(pq.read_metadata(Path(x) / "jobs.parquet").num_rows for x in runs["dir"])
    assert b"ctr_cycles" in whole.splitlines()[0]


def test_migration_table_counts_on_label_codes_as_on_strings(tmp_path):
    """results.platform.migration_table (counted on the labels' codes, kept per ReportData)
    equals a groupby of the labels as strings, in order of first appearance."""
    import pandas as pd

    from xtalk.results import platform
    from xtalk.results import tables as tb

    root = write_results(tmp_path / "r", [Scenario("solo"), Scenario("pi", slowdown=1.2)], repetitions=2, jobs=60)
    data = tb.load(root)
    m = data.measured
    rng = np.random.default_rng(1)
    m["cpu_end"] = np.where(rng.random(len(m)) < 0.1, m["cpu_start"] + 1, m["cpu_start"])  # 10 % migrated
    got = platform.migration_table(data)
    g = pd.DataFrame({"scenario": m["scenario"].astype(str), "configuration": m["configuration"].astype(str),
                      "m": platform.migrated(m)})
    want = [(sc, cf, len(x), int(x["m"].sum())) for (sc, cf), x in g.groupby(["scenario", "configuration"], sort=False)]
    assert list(got[["scenario", "configuration", "jobs", "migrated"]].itertuples(index=False, name=None)) == want
    assert got["migrated"].sum() > 0 and platform.migration_table(data) is not data.memo["_migrations"]
    # Rows in runs are counted per stretch of labels, shuffled rows per job: the same table.
    shuffled = m.sample(frac=1.0, random_state=2).reset_index(drop=True)
    g = g.sample(frac=1.0, random_state=2).reset_index(drop=True)
    want = [(sc, cf, len(x), int(x["m"].sum())) for (sc, cf), x in g.groupby(["scenario", "configuration"], sort=False)]
    assert list(platform._migration_table(shuffled)[["scenario", "configuration", "jobs", "migrated"]]
                .itertuples(index=False, name=None)) == want


def test_migrated_jobs_from_integer_cpu_columns_as_from_coerced_ones():
    """results.platform.migrated reads the loader's integer CPU columns as they are and
    other columns coerced: the same mask, an unread CPU (-1, None, text) never migrated."""
    import pandas as pd

    from xtalk.results import platform

    start = np.array([0, 1, 1, -1, 2, 3, 0], dtype=np.int64)
    end = np.array([0, 0, -1, 1, 3, 3, 1], dtype=np.int64)
    want = [False, True, False, False, True, False, True]
    ints = pd.DataFrame({"cpu_start": start, "cpu_end": end})
    assert platform.migrated(ints).tolist() == want
    assert platform.migrated(ints.astype(np.int32)).tolist() == want
    odd = pd.DataFrame({"cpu_start": [0, 1, None, "x", 2, 3, 0], "cpu_end": [0, 0, 1, 1, 3, 3, 1]}, dtype=object)
    assert platform.migrated(odd).tolist() == [False, True, False, False, True, False, True]
    assert platform.migrated(pd.DataFrame({"cpu_start": [1]})).tolist() == [False]


def test_tables_of_numbers_written_as_pandas_writes_them(tmp_path):
    """Long tables of integers and of floats that are integers or halves (a per-job reference)
    are written without pandas' writer, byte for byte its CSV; any other table (NaN, -0.0, a
    third, 10^15, a string, a quoted name, a short table, an index) keeps pandas' writer."""
    import pandas as pd

    rng = np.random.default_rng(3)
    n = export.NUMBERS_CSV_MIN_ROWS + 7
    ref = pd.DataFrame({"job": np.arange(10, n + 10), "min_ns": rng.integers(-(10**6), 10**12, n),
                        "median_ns": rng.integers(0, 2 * 10**14, n) / 2, "max_ns": rng.integers(0, 9, n).astype(np.int32),
                        "n_runs": np.full(n, 50, dtype=np.uint16)})
    ref.loc[:3, "median_ns"] = [0.0, 0.5, 1.0, 999_999_999_999_999.5]
    ref.loc[:5, "min_ns"] = [0, -1, -10, 9, -(2**63) + 1, 2**63 - 1]  # zero, signs, one digit, the ends
    others = {
        "nan": ref.assign(median_ns=ref["median_ns"].where(ref.index != 5)),
        "minus_zero": ref.assign(median_ns=ref["median_ns"].where(ref.index != 5, -0.0)),
        "third": ref.assign(median_ns=ref["median_ns"] + (ref.index == 9) / 3),
        "e15": ref.assign(median_ns=ref["median_ns"].where(ref.index != 5, 1e15)),
        "negative": ref.assign(median_ns=-ref["median_ns"]),
        "text": ref.assign(job=ref["job"].astype(str)),
        "quoted": ref.rename(columns={"job": "job, index"}),
        "short": ref.head(50),
        "int64_min": ref.assign(min_ns=ref["min_ns"].where(ref.index != 7, -(2**63))),
        "uint64_top": ref.assign(n_runs=ref["n_runs"].astype(np.uint64).where(ref.index != 7, 2**63)),
    }
    more = {"negatives": ref.assign(job=-ref["job"], max_ns=ref["max_ns"] - 4),
            "bytes": ref.assign(n_runs=ref["n_runs"].astype(np.int8), job=ref["job"].astype(np.uint32))}
    for name, df in {"ref": ref, **more}.items():
        assert export._numbers_csv(df) is not None, name
    for name, df in others.items():
        assert export._numbers_csv(df) is None, name
    tables = {"ref": ref, **more, **others, "indexed": ref.set_index("job")}
    paths = export.export_tables(tables, tmp_path / "t")
    for p in paths:
        df = tables[p.stem]
        assert p.read_text() == df.to_csv(index=not isinstance(df.index, pd.RangeIndex)), p.stem
