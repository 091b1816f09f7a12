"""The results object (`xtalk.open`, xtalk/results/): every run's outcome once and typed, the
store's tables, and the cells the summary and the report read, on planted experiment and
campaign results (xtalk.testing); a damaged run is left out of the outcomes as the store
leaves it out of the runs."""

from __future__ import annotations

import warnings
from pathlib import Path

import pandas as pd
import pytest

import xtalk
from xtalk.errors import UsageError
from xtalk.outcome import RunOutcome
from xtalk.results import Results
from xtalk.results import campaign_cells as cc
from xtalk.results import tables as tb
from xtalk.testing.synthetic import Scenario, write_results
from xtalk.testing.synthetic_campaign import Family, write_campaign


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    return write_results(tmp_path_factory.mktemp("obj") / "res",
                         [Scenario("solo"), Scenario("pi", enemies=[{"kind": "pi"}], slowdown=1.5)], repetitions=2, jobs=60)


def test_open_gives_one_object_with_every_run_outcome_typed_and_the_store_tables(planted):
    res = xtalk.open(planted)
    assert isinstance(res, Results) and res.path == planted and not res.is_campaign and res.name == "synthetic"
    runs = res.runs()
    assert sorted(res.outcomes) == sorted(runs.run_id) and len(runs) == 4
    assert all(isinstance(m, RunOutcome) for m in res.outcomes.values())
    assert res.outcomes is res.outcomes  # read once
    pi = runs[runs.scenario == "pi"].run_id.iloc[0]
    assert res.outcome(pi).labels()["scenario"] == "pi" and res.outcome(pi).plan.victim.body.kind == "sum"
    with pytest.raises(UsageError, match="is not a run of"):
        res.outcome("no-such-run")
    assert len(res.jobs(measured_only=False)) == 4 * 60 and set(res.jobs().scenario) == {"solo", "pi"}
    assert res.data is res.data and res.data.outcome(pi) is not None  # the report's frames, loaded once


def test_cells_are_the_summary_cells_and_the_tables_take_the_object(planted):
    res = xtalk.open(planted)
    got = res.cells()
    want = tb.cells(tb.load(planted))
    pd.testing.assert_frame_equal(got.reset_index(drop=True), want.reset_index(drop=True))
    # A query function given the object reads its frames (no second load) and finds the planted 1.5x.
    s = tb.slowdown(res, n_boot=200).set_index(["scenario", "metric"])
    assert s.loc[("pi", "exec")].slowdown_median == pytest.approx(1.5, rel=0.05)
    assert ("slowdown", 200, 0) in res.data.memo  # computed on res.data, kept for the next table


def test_a_campaign_opens_as_the_same_object_with_its_cells(tmp_path):
    root = write_campaign(tmp_path / "camp", families=[Family("mem", "intensity", [1], ["1ms"])], configurations=("other",),
                          repetitions=2, jobs=30)
    res = xtalk.open(root)
    assert res.is_campaign and res.name == "planted" and res.experiment == {}
    assert sorted(res.outcomes) == sorted(res.runs().run_id)
    assert {"application", "criticality", "variant"} <= set(res.runs().columns)  # the campaign's labels
    want = cc.cell_table(cc.load_campaign(root)).drop(columns=["warnings"], errors="ignore")
    pd.testing.assert_frame_equal(res.cells().reset_index(drop=True), want.reset_index(drop=True))


def test_a_damaged_run_is_left_out_of_the_outcomes_and_named(tmp_path):
    root = write_results(tmp_path / "res", [Scenario("solo")], repetitions=2, jobs=20)
    bad = sorted((root / "runs").iterdir())[0]
    (bad / "run.json").write_text('{"run_id": "x", "status": ')  # cut short
    res = xtalk.open(root)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        runs = res.runs()
    assert len(runs) == 1 and list(res.outcomes) == list(runs.run_id)
    assert bad.name in res.left_out and "run.json" in res.left_out[bad.name]


def test_open_refuses_a_directory_that_holds_no_results(tmp_path):
    with pytest.raises(FileNotFoundError, match="not an xtalk results directory"):
        xtalk.open(tmp_path)


def test_the_aocs_verdicts_and_task_jobs_come_from_the_object_damaged_files_named_not_crashed(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    root = write_results(tmp_path / "res", [Scenario("solo"), Scenario("pi", enemies=[{"kind": "pi"}])], repetitions=1, jobs=20)
    res = xtalk.open(root)
    runs = res.runs().sort_values("run_id").reset_index(drop=True)
    first, second = (runs["dir"].iloc[i] for i in (0, 1))
    (Path(first) / "aocs.json").write_text('{"compared": 40, "mismatches": 2, "first_mismatch_step": 7}')
    (Path(second) / "aocs.json").write_text("[not a verdict")  # damaged: listed without counts
    a = res.aocs().set_index("run_id")
    assert a.loc[runs.run_id[0], ["compared", "mismatches", "first_mismatch_step"]].tolist() == [40, 2, 7]
    assert pd.isna(a.loc[runs.run_id[1], "compared"]) and len(a) == len(runs)
    # No task column: no task jobs; one run given a task index: its measured jobs, labelled.
    assert res.task_jobs().empty
    p = Path(first) / "jobs.parquet"
    t = pq.read_table(p)
    pq.write_table(t.append_column("task", pa.array([i % 2 for i in range(t.num_rows)], pa.int32())), p)
    tj = res.task_jobs()
    assert len(tj) == int((~t["warmup"].to_numpy(zero_copy_only=False)).sum()) and set(tj["task"]) == {0, 1}
    assert set(tj["run_id"]) == {runs.run_id[0]} and set(tj["scenario"]) == {runs.scenario[0]}
