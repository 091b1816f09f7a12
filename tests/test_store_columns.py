"""store.columns: the report's load copies each run's job table straight into the frame's
columns; its frames are those of the former path (Arrow tables concatenated and converted
to pandas), and tables it does not take (a missing column, nulls) go the former way."""

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from xtalk import store
from xtalk.outcome import write_outcome
from xtalk.store import columns, frames
from xtalk.store.jobs import HEADER, RECORD
from xtalk.testing.synthetic import outcome


def run(root, run_id, scenario, n=6, extra=None, drop=(), **write):
    """A run of ``n`` jobs whose jobs.parquet has ``extra`` columns, lacks ``drop``, written
    with pyarrow's ``write`` options."""
    d = root / "runs" / run_id
    d.mkdir(parents=True)
    rec = np.zeros(n, RECORD)
    rec["job"] = np.arange(n)
    rec["release_ns"] = np.arange(n) * 1000 + len(run_id)
    rec["start_ns"] = rec["release_ns"] + 10
    rec["end_ns"] = rec["start_ns"] + 100 + np.arange(n)
    rec["cpu_start"] = np.arange(n) % 2
    head = np.zeros(1, HEADER)
    head["period_ns"] = 1_000_000
    head["magic"], head["version"], head["record_size"], head["capacity"], head["count"] = b"XTJOBS01", 1, 80, n, n
    (d / "jobs.bin").write_bytes(head.tobytes() + rec.tobytes())
    df = store.read_job_log(d / "jobs.bin")
    df["warmup"] = np.arange(n) < 2
    for k, v in (extra or {}).items():
        if k in df:
            df[k] = v
        else:  # where the store puts it: application after job, the others last
            df.insert(1 if k == "application" else len(df.columns), k, v)
    write_outcome(d, outcome(run_id, {"scenario": scenario, "repetition": "0"}, df))
    pq.write_table(pa.Table.from_pandas(df.drop(columns=list(drop)), preserve_index=False), d / "jobs.parquet",
                   **({"compression": "none"} | write))
    return d


def former(data):
    """The frames of the former path for the same runs and categories."""
    cats = {c: list(dict.fromkeys(data.runs[c])) for c in ("run_id", "scenario", "configuration")}
    apps = list(data.measured["application"].cat.categories)
    return frames._former_frames(data.runs, {**cats, "application": apps}, apps)


def same(a: pd.DataFrame, b: pd.DataFrame):
    pd.testing.assert_frame_equal(a, b, check_exact=True)
    assert list(a.dtypes) == list(b.dtypes)
    for c in a.columns:
        if isinstance(a[c].dtype, pd.CategoricalDtype):
            assert a[c].cat.codes.dtype == b[c].cat.codes.dtype, c
            assert a[c].cat.categories.dtype == b[c].cat.categories.dtype, c


def direct(path):
    """store.columns.direct_frames for the runs of ``path`` (None: the former path's)."""
    runs = frames.load_runs(path)
    cats = {c: list(dict.fromkeys(runs[c])) for c in ("run_id", "scenario", "configuration")}
    heads = [(r, columns.open_job_table(Path(r.dir), frames.BASE_COLUMNS)) for r in runs.itertuples()]
    heads = [(r, h) for r, h in heads if h is not None and h.rows]
    apps = []
    for _, h in heads:
        apps += [a for a in h.applications() if a not in apps]
    with ThreadPoolExecutor(2) as pool:
        return columns.direct_frames(heads, cats, apps, pool)


def test_direct_load_gives_the_former_frames_on_odd_but_uniform_runs(tmp_path):
    """Warm-up jobs leading or not, all warm-up, zero jobs, an old Snappy file, several row
    groups, applications as dictionaries or none: the direct path takes them all and its
    frames are the former path's, dtypes and categorical codes included."""
    run(tmp_path, "a", "solo")
    run(tmp_path, "b", "pi", extra={"warmup": [False, True, False, True, False, False],
                                    "application": pd.Categorical(["victim", "other", "other", "victim", "other", "x"])},
        compression="snappy")
    run(tmp_path, "c", "pi", n=4, extra={"warmup": [True] * 4})
    run(tmp_path, "d", "solo", n=0)
    run(tmp_path, "e", "pi", n=7, row_group_size=3)
    assert direct(tmp_path) is not None
    data = frames.load(tmp_path)
    m, w = former(data)
    same(data.measured, m)
    same(data.warmup, w)
    assert data.measured.groupby("run_id", observed=True)["job"].apply(list).to_dict()["b"] == [0, 2, 4, 5]
    assert list(data.measured["application"].cat.categories) == ["victim", "other", "x"]
    assert data.measured["cpu_start"].dtype == np.int64 and data.measured._mgr.nblocks == data.measured.shape[1]


def test_all_warm_up_runs_give_typed_empty_measured_jobs(tmp_path):
    run(tmp_path, "a", "solo", n=2)
    data = frames.load(tmp_path)
    assert direct(tmp_path) is not None and data.measured.empty and len(data.warmup) == 2
    same(data.measured, former(data)[0])


@pytest.mark.parametrize("odd", [
    {"drop": ["response_ns"]},  # a run without a column the other has: NaN there
    {"extra": {"ctr_task_clock": pd.array([7, None, 7, 7, 7, 7], dtype="Int64")}},  # nulls
    {"extra": {"exec_ns": np.arange(6, dtype=np.int32)}},  # another type than the other run's
])
def test_runs_the_direct_path_does_not_take_load_the_former_way(tmp_path, odd):
    run(tmp_path, "a", "solo")
    run(tmp_path, "b", "pi", **odd)
    assert direct(tmp_path) is None
    data = frames.load(tmp_path)
    m, w = former(data)
    same(data.measured, m)
    same(data.warmup, w)
    assert len(data.measured) == 8 and len(data.warmup) == 4


def test_a_cut_short_job_table_is_left_out_and_the_others_load(tmp_path):
    """A jobs.parquet cut short (its footer gone) is named among the left-out runs; the
    other runs load by the direct path, as the former path gives them."""
    run(tmp_path, "a", "solo")
    bad = run(tmp_path, "b", "pi") / "jobs.parquet"
    bad.write_bytes(bad.read_bytes()[:100])
    (bad.parent / "jobs.bin").unlink()  # no log to convert again
    with pytest.warns(Warning):
        data = frames.load(tmp_path)
    assert "b" in data.left_out and list(data.runs["run_id"]) == ["a"]
    with pytest.warns(Warning):
        assert direct(tmp_path) is not None
    m, w = former(data)
    same(data.measured, m)
    same(data.warmup, w)


def test_the_report_memory_setting_turns_numpys_huge_page_advice_off():
    # In a child: the setting is process-wide (glibc's mallopt, numpy's switch).
    code = ("from xtalk.store import frames; from xtalk.store.frames import _numpy_multiarray as m;"
            "frames.reuse_freed_memory(); print(m()._get_madvise_hugepage())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "NUMPY_MADVISE_HUGEPAGE": "1"})
    assert out.stdout.strip() == "False"
