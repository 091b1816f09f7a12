"""The store's `application` column (whose job a row is) through the Python API, the DuckDB
views of `xtalk query` and the report's frames: applications' rows by name, tables from before
applications read as the victim's, a campaign's application label on its victim's rows."""

import json

import pandas as pd

from conftest import xtalk
from xtalk import store
from xtalk.outcome import write_outcome
from xtalk.testing.synthetic import job_table, outcome
from xtalk.store.files import write_parquet_atomic
from xtalk.store.frames import load


def _run(root, run_id, scenario, apps, labels=None):
    """A run whose jobs.parquet holds 10 jobs of each name of `apps` (None: a table from
    before applications, without the column)."""
    d = root / "runs" / run_id
    d.mkdir(parents=True)
    write_outcome(d, outcome(run_id, {"scenario": scenario, "repetition": "0", **(labels or {})}))
    parts = []
    for i, name in enumerate(apps or [None]):
        jobs = job_table(10, exec_ns=100_000 * (i + 1), seed=i)
        if name is not None:
            jobs["application"] = name
        parts.append(jobs)
    write_parquet_atomic(pd.concat(parts, ignore_index=True), d / "jobs.parquet")


def _experiment(tmp_path):
    _run(tmp_path, "0-alone_a-r0", "alone:a", ["a"], {"applications": "a"})
    _run(tmp_path, "1-pair_a+b-r0", "pair:a+b", ["a", "b"], {"applications": "a,b"})
    _run(tmp_path, "2-fault_b_pi-r0", "fault:b:pi", ["a", "b"], {"applications": "a,b", "faulty": "b", "fault": "pi"})
    (tmp_path / "experiment.json").write_text(json.dumps({"experiment": {"name": "e", "victim": None, "application": [
        {"name": "a", "criticality": "A", "epsilon": {"metric": "response", "statistic": "p99", "bound": None, "relative": 1.5}},
        {"name": "b", "criticality": "D", "epsilon": None}]}, "order": []}))
    return tmp_path


def test_jobs_carry_their_application(tmp_path):
    res = store.open(_experiment(tmp_path))
    jobs = res.jobs()
    assert jobs.groupby("scenario").application.apply(lambda s: sorted(set(s))).to_dict() == {
        "alone:a": ["a"], "pair:a+b": ["a", "b"], "fault:b:pi": ["a", "b"]}
    assert len(jobs) == 5 * 8  # five tables of 10 jobs, 2 of each warm-up
    runs = res.runs().set_index("scenario")
    assert runs.loc["pair:a+b", "applications"] == "a,b"
    assert (runs.loc["fault:b:pi", "faulty"], runs.loc["fault:b:pi", "fault"]) == ("b", "pi")
    assert runs.loc["alone:a", "faulty"] == ""


def test_query_filters_on_application(tmp_path):
    _experiment(tmp_path)
    out = xtalk("query", tmp_path, "SELECT scenario, application, count(*) AS n FROM jobs "
                "WHERE application = 'b' GROUP BY ALL ORDER BY ALL", "--csv")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["scenario,application,n", "fault:b:pi,b,10", "pair:a+b,b,10"]
    out = xtalk("query", tmp_path, "SELECT DISTINCT faulty, fault FROM runs WHERE faulty <> ''", "--csv")
    assert out.stdout.splitlines() == ["faulty,fault", "b,pi"], out.stderr


def test_report_frames_and_declared_applications(tmp_path):
    data = load(_experiment(tmp_path))
    assert isinstance(data.measured["application"].dtype, pd.CategoricalDtype)
    assert data.measured.groupby("run_id", observed=True).application.nunique().to_dict() == {
        "0-alone_a-r0": 1, "1-pair_a+b-r0": 2, "2-fault_b_pi-r0": 2}
    specs = data.application_specs()
    assert list(specs) == ["a", "b"] and specs["a"]["criticality"] == "A" and specs["a"]["epsilon"]["relative"] == 1.5


def test_tables_from_before_applications_are_the_victims(tmp_path):
    _run(tmp_path, "0-solo-r0", "solo", None)
    assert set(store.open(tmp_path).jobs().application) == {"victim"}
    assert set(load(tmp_path).measured.application) == {"victim"}
    assert load(tmp_path).application_specs() == {}


def test_a_campaign_label_names_its_victims_rows(tmp_path):
    """A campaign's runs carry an `application` label (the campaign application): the jobs
    view gives it to the victim's rows, old tables or new."""
    _run(tmp_path, "0-solo-r0", "solo", None)
    _run(tmp_path, "1-solo-r0", "solo", ["victim"])
    con = store.Results(tmp_path)
    con._label_columns = lambda labels: {"application": "aocs"}  # as CampaignResults does
    got = con.connect().execute("SELECT DISTINCT application FROM jobs").fetchall()
    assert got == [("aocs",)]
