"""The results store: runs with different observations (counters, trace) in one experiment
read as one table; a run without jobs.parquet (a killed host) is converted on open."""


import numpy as np
import pandas as pd

from xtalk import store
from xtalk.outcome import write_outcome
from xtalk.testing.synthetic import outcome
from xtalk.store.jobs import HEADER, RECORD, write_parquet_atomic


def fake_run(root, run_id, scenario, extra=None, parquet=True):
    d = root / "runs" / run_id
    d.mkdir(parents=True)
    write_outcome(d, outcome(run_id, {"scenario": scenario, "repetition": "0"}))
    n = 5
    rec = np.zeros(n, RECORD)
    rec["job"] = np.arange(n)
    rec["release_ns"] = np.arange(n) * 1000
    rec["start_ns"] = rec["release_ns"] + 10
    rec["end_ns"] = rec["start_ns"] + 100
    head = np.zeros(1, HEADER)
    head["magic"], head["version"], head["record_size"], head["capacity"], head["count"] = b"XTJOBS01", 1, 80, n, n
    (d / "jobs.bin").write_bytes(head.tobytes() + rec.tobytes())
    if parquet:
        df = store.read_job_log(d / "jobs.bin")
        for k, v in (extra or {}).items():
            df[k] = v
        write_parquet_atomic(df, d / "jobs.parquet")
    return d


def test_runs_with_different_columns_read_as_one_table(tmp_path):
    fake_run(tmp_path, "a", "solo")
    fake_run(tmp_path, "b", "traced", {"trace_preemptions": 1})
    fake_run(tmp_path, "c", "counted", {"ctr_task_clock": pd.array([7] * 5, dtype="Int64")})
    jobs = store.open(tmp_path).jobs()
    assert len(jobs) == 15
    assert jobs.set_index("run_id").loc["b", "trace_preemptions"].eq(1).all()
    assert jobs.set_index("run_id").loc["a", "trace_preemptions"].isna().all(), "absent, not zero"


def test_unconverted_run_is_converted_on_open(tmp_path):
    d = fake_run(tmp_path, "k", "solo", parquet=False)
    jobs = store.open(tmp_path).jobs()
    assert len(jobs) == 5 and (d / "jobs.parquet").exists()
    assert (jobs.exec_ns == 100).all() and (jobs.response_ns == 110).all()


def test_a_campaign_converts_its_published_runs_after_the_last_one(tmp_path):
    """campaign.execute.convert_published: the runs a campaign published without jobs.parquet
    (the conversion is not done between two runs) get one; converted runs are left alone."""
    from xtalk.campaign.execute import convert_published

    a = fake_run(tmp_path, "a", "solo", parquet=False)
    b = fake_run(tmp_path, "b", "solo", parquet=False)
    c = fake_run(tmp_path, "c", "solo")
    before = c.joinpath("jobs.parquet").stat().st_mtime_ns
    assert convert_published(tmp_path) == 2
    assert all((d / "jobs.parquet").exists() for d in (a, b))
    assert c.joinpath("jobs.parquet").stat().st_mtime_ns == before
    assert convert_published(tmp_path) == 0
    assert len(store.open(tmp_path).jobs()) == 15


def test_the_report_load_cuts_warm_up_jobs_wherever_they_are(tmp_path):
    """store.frames.load: warm-up jobs leading a run (the agent's order) are cut off as
    slices, anywhere else picked out one by one; both give the frames a per-run pandas
    split gives, with the labels as categoricals over every run and applications unified."""
    from xtalk.store.frames import load

    fake_run(tmp_path, "a", "solo", {"warmup": [True, True, False, False, False]})
    fake_run(tmp_path, "b", "pi", {"warmup": [False, True, False, True, False],
                                   "application": pd.Categorical(["victim", "other", "other", "victim", "other"])})
    fake_run(tmp_path, "c", "pi", {"warmup": [False] * 5, "ctr_task_clock": pd.array([7] * 5, dtype="Int64")})
    data = load(tmp_path)
    by_run = {r: g for r, g in data.measured.groupby("run_id", observed=True)}
    assert by_run["a"]["job"].tolist() == [2, 3, 4]
    assert by_run["b"]["job"].tolist() == [0, 2, 4] and by_run["b"]["application"].tolist() == ["victim", "other", "other"]
    assert by_run["c"]["job"].tolist() == [0, 1, 2, 3, 4]
    assert data.warmup.groupby("run_id", observed=True)["job"].apply(list).to_dict() == {"a": [0, 1], "b": [1, 3]}
    assert not data.measured["warmup"].any() and data.warmup["warmup"].all()
    for col in ("run_id", "scenario", "configuration", "application"):
        assert isinstance(data.measured[col].dtype, pd.CategoricalDtype), col
    assert list(data.measured["run_id"].cat.categories) == ["a", "b", "c"]
    assert list(data.measured["application"].cat.categories) == ["victim", "other"]
    assert data.measured["ctr_task_clock"].isna().sum() == 6 and (data.measured["ctr_task_clock"].dropna() == 7).all()
