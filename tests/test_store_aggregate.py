"""The DuckDB percentile path (store.aggregate, over Parquet, no job loaded) against the
pandas definition (analysis.stats.group_quantiles: np.quantile, linear interpolation) on
small tables: ties, NaN and missing values, a group with no finite value, a run of warm-up
only; and the report's distribution table both ways."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from xtalk.analysis import stats as st
from xtalk.results import tables as tb
from xtalk.testing.synthetic import Scenario, write_results
from xtalk.store import aggregate

QS = [0.0, 0.01, 0.25, 0.5, 0.75, 0.9, 0.99, 0.999, 1.0]


def _runs(tmp_path, tables: list[tuple[str, str, pd.DataFrame]]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Write each (scenario, configuration, jobs) as a run's jobs.parquet; the run table and
    every job with its labels (what the pandas path sees)."""
    rows, parts = [], []
    for i, (sc, cf, jobs) in enumerate(tables):
        d = tmp_path / "runs" / f"{i:03d}"
        d.mkdir(parents=True)
        pq.write_table(pa.Table.from_pandas(jobs, preserve_index=False), d / "jobs.parquet")
        rows.append({"run_id": d.name, "scenario": sc, "configuration": cf, "dir": str(d)})
        parts.append(jobs.assign(scenario=sc, configuration=cf))
    return pd.DataFrame(rows), pd.concat(parts, ignore_index=True)


def _jobs(values, warmup: int = 0) -> pd.DataFrame:
    v = np.asarray(values)
    return pd.DataFrame({"job": np.arange(v.size, dtype=np.int64), "warmup": np.arange(v.size) < warmup, "x": v})


def _agree(duck: pd.DataFrame, pand: pd.DataFrame) -> None:
    assert list(duck.columns) == list(pand.columns)
    assert duck[["scenario", "configuration", "n"]].values.tolist() == pand[["scenario", "configuration", "n"]].values.tolist()
    for c in duck.columns[3:]:
        a, b = duck[c].to_numpy(dtype=float), pand[c].to_numpy(dtype=float)
        assert np.array_equal(np.isnan(a), np.isnan(b)), c
        assert np.allclose(a[~np.isnan(a)], b[~np.isnan(b)], rtol=1e-12, atol=0), (c, a, b)


def test_duckdb_percentiles_equal_the_pandas_definition_with_ties_nan_and_empty_groups(tmp_path):
    rng = np.random.default_rng(7)
    ties = rng.integers(0, 5, 1001).astype(np.int64)  # five distinct values: every quantile sits on a tie
    with_nan = rng.lognormal(12, 0.4, 500)
    with_nan[::7] = np.nan
    tables = [
        ("solo", "fifo", _jobs(ties, warmup=3)),
        ("solo", "fifo", _jobs(rng.integers(0, 5, 999).astype(np.int64), warmup=3)),  # two files, one group
        ("pi", "fifo", _jobs(with_nan, warmup=10)),
        ("pi", "other", _jobs(np.full(20, np.nan), warmup=2)),  # no finite value: n 0, NaN elsewhere
        ("bw", "other", _jobs(np.arange(5, dtype=float), warmup=5)),  # warm-up only
        ("bw", "fifo", _jobs([42.0], warmup=0)),  # one value: sd NaN
        ("aa", "other", _jobs(rng.lognormal(13, 0.3, 4000), warmup=0)),
    ]
    runs, jobs = _runs(tmp_path, tables)
    duck = aggregate.group_quantiles(runs, "x", QS)
    pand = st.group_quantiles(jobs[~jobs["warmup"]], "x", QS)
    # The warm-up-only group has no measured row: pandas does not see it, DuckDB counts 0.
    assert duck.set_index(["scenario", "configuration"]).loc[("bw", "other"), "n"] == 0
    _agree(duck[~((duck["scenario"] == "bw") & (duck["configuration"] == "other"))].reset_index(drop=True), pand)
    nan_group = duck.set_index(["scenario", "configuration"]).loc[("pi", "other")]
    assert nan_group["n"] == 0 and np.isnan(nan_group["p50"]) and np.isnan(nan_group["max"])
    assert duck.set_index(["scenario", "configuration"]).loc[("pi", "fifo"), "n"] == np.isfinite(with_nan[10:]).sum()
    # Exact order statistics: the median of the ties is one of the five values; p0 and p100 are min and max.
    solo = duck.set_index(["scenario", "configuration"]).loc[("solo", "fifo")]
    assert solo["p50"] in range(5) and solo["p0"] == solo["min"] and solo["p100"] == solo["max"]
    # Warm-up included on request.
    everything = aggregate.group_quantiles(runs, "x", QS, measured_only=False)
    _agree(everything, st.group_quantiles(jobs, "x", QS))


def test_empty_run_table_and_bad_levels(tmp_path):
    runs, _ = _runs(tmp_path, [("solo", "default", _jobs([1.0, 2.0]))])
    assert aggregate.group_quantiles(runs.iloc[0:0], "x", [0.5]).empty
    with pytest.raises(ValueError, match="qs"):
        aggregate.group_quantiles(runs, "x", [1.5])


def test_report_distribution_from_parquet_equals_the_loaded_one(tmp_path):
    root = write_results(tmp_path / "r", [Scenario("solo"), Scenario("pi", slowdown=1.3, spike_every=50)],
                         repetitions=3, jobs=300)
    fast = tb.distribution(root, "exec_ns")
    loaded = tb.distribution(tb.load(root), "exec_ns")
    assert list(fast.columns) == list(loaded.columns)
    assert fast[["scenario", "configuration", "column", "n"]].values.tolist() == \
        loaded[["scenario", "configuration", "column", "n"]].values.tolist()
    num = [c for c in fast.columns if c not in ("scenario", "configuration", "column", "n")]
    assert np.allclose(fast[num].to_numpy(dtype=float), loaded[num].to_numpy(dtype=float), rtol=1e-12)


def test_summary_from_narrow_jobs_equals_the_summary_of_every_column(tmp_path):
    """summary_table reads only the columns it needs (store.frames.measured_jobs, labels as
    categoricals): the same table as summarize over Results.jobs() (every column, string labels)."""
    from xtalk.analysis.cells import summarize
    from xtalk.report.summary import summary_table
    from xtalk.store import open as open_results
    from xtalk.store.frames import measured_jobs

    root = write_results(tmp_path / "r", [Scenario("solo"), Scenario("pi", slowdown=1.3, spike_every=40)],
                         repetitions=3, jobs=200, miss_jobs=(5, 9))
    res = open_results(root)
    runs = res.runs()
    narrow = measured_jobs(runs, ["job", "exec_ns", "response_ns", "missed", "migrated"])
    full = res.jobs()
    assert len(narrow) == len(full) and narrow["run_id"].astype(str).tolist() == full["run_id"].tolist()
    assert narrow["job"].tolist() == full["job"].tolist()
    expect = summarize(full, runs)
    got = summary_table(res).drop(columns=["enemy_rate", "warnings"])
    got = got[expect.columns]
    pd.testing.assert_frame_equal(got.reset_index(drop=True), expect.reset_index(drop=True), check_dtype=False)
    assert expect["deadline_misses"].sum() > 0  # the planted misses are counted both ways


def test_quantiles_without_moments_are_the_same(tmp_path):
    rng = np.random.default_rng(3)
    runs, _ = _runs(tmp_path, [("solo", "a", _jobs(rng.integers(0, 1000, 500), warmup=5)),
                               ("pi", "a", _jobs(rng.integers(0, 1000, 300), warmup=5))])
    full = aggregate.group_quantiles(runs, "x", QS)
    bare = aggregate.group_quantiles(runs, "x", QS, moments=False)
    names = [st.quantile_name(q) for q in QS]
    assert bare[["scenario", "configuration", "n", *names]].equals(full[["scenario", "configuration", "n", *names]])
    assert bare[["min", "max", "mean", "sd"]].isna().all().all()
