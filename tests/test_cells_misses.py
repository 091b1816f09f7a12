"""A cell's misses (analysis.cells._cell_misses) computed stretch by stretch equal the
definitions applied to the cell's rows at once (verdict.classify_misses's columns), whether
the rows come in runs or interleaved, with a zero deadline (infinite responsiveness) and a
job of no time (NaN)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from xtalk.analysis import cells as ce


def _jobs(order: str) -> pd.DataFrame:
    rng = np.random.default_rng(7)
    n = 3 * 400
    rel = np.arange(n, dtype=np.int64) % 400 * 1_000_000
    per = np.full(n, 1_000_000, dtype=np.int64)
    end = rel + rng.integers(100_000, 2_600_000, n)
    j = pd.DataFrame({"run_id": np.repeat(["a", "b", "c"], 400), "scenario": np.repeat(["solo", "pi", "pi"], 400),
                      "job": np.tile(np.arange(400), 3), "release_ns": rel, "end_ns": end, "period_ns": per,
                      "deadline_ns": per.copy(), "missed": end > rel + per})
    j.loc[5, "deadline_ns"] = 0                      # zero deadline: infinite responsiveness
    j.loc[6, ["deadline_ns", "end_ns"]] = [0, j.loc[6, "release_ns"]]  # 0 / 0: NaN, left out of the maximum
    j = j.drop(index=[450, 451])                     # two lost jobs in run b
    if order == "interleaved":
        j = j.iloc[np.argsort(np.tile(np.arange(len(j) // 2 + 1), 2)[:len(j)], kind="stable")]
    return j.reset_index(drop=True)


@pytest.mark.parametrize("order", ["runs", "interleaved"])
def test_misses_stretch_by_stretch_equal_the_whole_cells(order):
    j = _jobs(order)
    miss = ce._miss_columns(j)
    rel, end, per, dl = (j[c].to_numpy() for c in ("release_ns", "end_ns", "period_ns", "deadline_ns"))
    for scen in ("solo", "pi"):
        ix = np.flatnonzero(j["scenario"].to_numpy() == scen)
        got = ce._cell_misses(j, ix, miss)
        with np.errstate(divide="ignore", invalid="ignore"):
            resp = pd.Series(((end - rel) / dl)[ix]).max()
        lost = 2 if scen == "pi" else 0
        want = (int(j["missed"].to_numpy()[ix].sum()), lost, int((end > rel + 2 * per)[ix].sum()) + lost,
                int((end - (rel + dl))[ix].max()), float(resp))
        assert got == want
    assert ce._cell_misses(j, np.flatnonzero(j["scenario"].to_numpy() == "solo"), miss)[4] == np.inf


def _frame(layout: str) -> pd.DataFrame:
    """Jobs of 6 runs in 2 configurations × 2 scenarios: each run one stretch ("runs"), run
    "r1" cut in two stretches with another run between, or every row interleaved; a job
    without a run id; categorical labels (the report's loader) with an unused category."""
    rng = np.random.default_rng(3)
    parts = []
    for i, (cfg, scen) in enumerate([("a", "solo"), ("a", "pi"), ("b", "solo"), ("b", "pi"), ("a", "solo"), ("a", "pi")]):
        n = 250 + 7 * i  # above the bootstrap's 200-job run subsample
        rel = np.arange(n, dtype=np.int64) * 1_000_000
        end = rel + rng.integers(100_000, 2_600_000, n)
        parts.append(pd.DataFrame({"run_id": f"r{i}", "configuration": cfg, "scenario": scen, "job": np.arange(n),
                                   "release_ns": rel, "end_ns": end, "period_ns": np.int64(1_000_000),
                                   "deadline_ns": np.int64(1_000_000), "missed": end > rel + 1_000_000,
                                   "exec_ns": rng.integers(200_000, 900_000, n), "response_ns": end - rel,
                                   "cpu_start": rng.integers(-1, 3, n), "cpu_end": rng.integers(-1, 3, n)}))
    j = pd.concat(parts, ignore_index=True)
    j = j.drop(index=[30, 31])  # lost jobs in r0
    if layout == "split":  # r1's second half after r2
        r1 = j.index[j["run_id"] == "r1"]
        j = pd.concat([j.loc[j["run_id"] == "r0"], j.loc[r1[:60]], j.loc[j["run_id"] == "r2"], j.loc[r1[60:]],
                       j.loc[~j["run_id"].isin(["r0", "r1", "r2"])]])
    elif layout == "interleaved":
        j = j.iloc[np.argsort(j.groupby("run_id").cumcount().to_numpy(), kind="stable")]  # row by row
    j = j.reset_index(drop=True)
    j.loc[(j["run_id"] == "r0") & (j["job"] == 5), "run_id"] = None
    for c in ("run_id", "configuration", "scenario"):
        j[c] = pd.Categorical(j[c], categories=sorted(set(j[c].dropna())) + ["unused"])
    return j


_RUNS = pd.DataFrame({"run_id": [f"r{i}" for i in range(6)], "configuration": ["a", "a", "b", "b", "a", "a"],
                      "scenario": ["solo", "pi", "solo", "pi", "solo", "pi"], "status": "completed"})


@pytest.mark.parametrize("layout", ["runs", "split", "interleaved"])
@pytest.mark.parametrize("max_jobs", [None, 300])
def test_cells_from_stretches_are_the_cells_from_positions(monkeypatch, layout, max_jobs):
    """The cells and the run table computed from the rows' stretches (slices of the columns,
    int64 values handed to the bootstrap as they are) equal those from row positions (the
    former path, float copies), bit for bit: one stretch per run, a run in two stretches, a
    job without a run id, lost jobs, capped and uncapped bootstraps. Interleaved rows take
    the positions."""
    j = _frame(layout)
    assert (ce._layout(ce._labels(j)) is None) == (layout == "interleaved")
    fast, fast_runs = ce.cells(j, _RUNS, n_boot=300, max_jobs=max_jobs), ce.per_run(j, _RUNS)
    monkeypatch.setattr(ce, "_layout", lambda _: None)
    pd.testing.assert_frame_equal(fast, ce.cells(j, _RUNS, n_boot=300, max_jobs=max_jobs), check_exact=True)
    pd.testing.assert_frame_equal(fast_runs, ce.per_run(j, _RUNS), check_exact=True)
    # r0 lost jobs 30 and 31, and job 5 is in no run (no run id): three gaps in its indices.
    assert fast.set_index(["configuration", "scenario"]).loc[("a", "solo"), "lost_jobs"] == 3


@pytest.mark.parametrize("layout", ["runs", "split", "interleaved"])
def test_runs_of_stretches_are_the_sorted_groups(layout):
    """runs_of from the stretches of the codes (views of the positions) gives each run's
    positions as the stable sort of the codes did, for any positions given."""
    j = _frame(layout)
    for ix in (np.arange(len(j)), np.flatnonzero(j["scenario"].to_numpy() == "pi"), np.arange(len(j))[::-1]):
        codes = j["run_id"].cat.codes.to_numpy()[ix]
        order = np.argsort(codes, kind="stable")
        want = [(j["run_id"].cat.categories[c], ix[order[codes[order] == c]]) for c in np.unique(codes) if c >= 0]
        got = ce.runs_of(j["run_id"], ix)
        assert [k for k, _ in got] == [k for k, _ in want]
        assert all(np.array_equal(a, b) for (_, a), (_, b) in zip(got, want))


@pytest.mark.parametrize("deadline", ["none", "constant", "varying"])
def test_misses_of_runs_with_one_deadline_equal_the_definitions(deadline):
    """Runs with one deadline and one period take their numbers from the response times'
    maximum: the same as the definitions on every row, with no deadline column (the period
    then), a deadline other than the period, and a deadline that varies within a run."""
    j = _jobs("runs").drop(index=[5, 6]).reset_index(drop=True)  # (two more lost jobs, in run a)
    if deadline == "none":
        j = j.drop(columns="deadline_ns")
    elif deadline == "constant":
        j["deadline_ns"] = 1_700_000
    else:
        j.loc[::7, "deadline_ns"] = 900_001
    miss = ce._miss_columns(j)
    rel, end, per = (j[c].to_numpy() for c in ("release_ns", "end_ns", "period_ns"))
    dl = j["deadline_ns"].to_numpy() if "deadline_ns" in j.columns else per
    for scen in ("solo", "pi"):
        ix = np.flatnonzero(j["scenario"].to_numpy() == scen)
        lost = 2
        want = (int(j["missed"].to_numpy()[ix].sum()), lost, int((end > rel + 2 * per)[ix].sum()) + lost,
                int((end - (rel + dl))[ix].max()), float(((end - rel) / dl)[ix].max()))
        assert ce._cell_misses(j, ix, miss) == want
