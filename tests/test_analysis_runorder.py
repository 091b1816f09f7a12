"""Rows of many runs in (run, job) order (analysis/runorder.py): the stretch-by-stretch
order where the rows come in a store's stretches, the full sort where they do not, and
never an order where a run repeats a job index."""

import numpy as np
import pytest

import pandas as pd

from xtalk.analysis.runorder import _increasing_within_runs, _stretch_order, run_codes, run_job_order


def _store_like(rng):
    """Three runs (codes 2, 0, 1 in store order), each 300 jobs with lost ones: each run's
    measured jobs (from 5 on), then each run's warm-up (0-4): six stretches."""
    runs = [2, 0, 1]
    job = {r: np.setdiff1d(np.arange(300), rng.choice(np.arange(5, 300), 7, replace=False)) for r in runs}
    parts = [(r, job[r][job[r] >= 5]) for r in runs] + [(r, job[r][job[r] < 5]) for r in runs]
    codes = np.concatenate([np.full(j.size, r) for r, j in parts])
    jobs = np.concatenate([j for _, j in parts]).astype(np.int64)
    return codes, jobs


def _want(codes, job):
    o = np.lexsort((job, codes))
    return o[codes[o] >= 0]


@pytest.mark.parametrize("layout", ["store", "shuffled", "interleaved stretches", "no run on some rows"])
def test_the_order_is_run_then_job(layout):
    rng = np.random.default_rng(7)
    codes, job = _store_like(rng)
    if layout == "shuffled":
        p = rng.permutation(codes.size)
        codes, job = codes[p], job[p]
        assert _stretch_order(codes, job) is None  # row by row: no stretches, the full sort
    elif layout == "interleaved stretches":  # run 0's even jobs, then its odd ones
        even = (codes == 0) & (job % 2 == 0)
        codes, job = np.concatenate([codes[even], codes[~even]]), np.concatenate([job[even], job[~even]])
        assert not np.array_equal(_stretch_order(codes, job), _want(codes, job))  # found wrong, then sorted
    elif layout == "no run on some rows":
        codes = codes.copy()
        codes[:40] = -1
    if layout == "store":
        assert np.array_equal(_stretch_order(codes, job), _want(codes, job))
    assert np.array_equal(run_job_order(codes, job, 3), _want(codes, job))


def test_rows_already_in_order_are_taken_as_they_are():
    codes, job = _store_like(np.random.default_rng(7))
    o = _want(codes, job)
    assert run_job_order(codes[o], job[o], 3) == slice(None)
    assert isinstance(run_job_order(codes[o][::-1], job[o][::-1], 3), np.ndarray)


def test_a_repeated_job_index_gets_no_order():
    codes = np.array([0, 0, 0, 1, 1])
    assert run_job_order(codes, np.array([0, 1, 1, 0, 1]), 2) is None
    assert run_job_order(codes, np.array([0, 1, 2, 0, 1]).astype(float), 2) is None  # not integers
    assert run_job_order(codes, np.array([0, 1, 2, 0, 1]), 2) == slice(None)  # in order already


@pytest.mark.parametrize("layout", ["store", "shuffled"])
def test_the_stretch_check_is_the_masked_one(layout):
    """Increasing job indices within each stretch of a run, checked stretch by stretch, says
    what the masked comparison of every neighbour says: a decrease planted in one stretch
    found; row by row (too many stretches) the masked comparison itself."""
    rng = np.random.default_rng(3)
    codes, job = _store_like(rng)
    o = _want(codes, job)
    p = rng.permutation(codes.size)
    c, j = (codes[o], job[o]) if layout == "store" else (codes[p], job[p])
    masked = lambda c, j: bool(np.all(j[1:][c[1:] == c[:-1]] > j[:-1][c[1:] == c[:-1]]))  # noqa: E731
    for at in (None, 1, 150, j.size - 1):
        jj = j.copy()
        if at is not None:
            jj[at] = jj[at - 1]
        assert _increasing_within_runs(c, jj) == masked(c, jj)
    assert _increasing_within_runs(c, j) == (layout == "store")


def test_a_categoricals_run_codes_order_the_runs_as_factorize():
    col = pd.Series(pd.Categorical(["b", "a", None, "b", "c"], categories=["c", "b", "unused", "a"]))
    codes, cats = run_codes(col)
    f_codes, f_uniques = pd.factorize(col, sort=True)
    assert [cats[c] if c >= 0 else None for c in codes] == [f_uniques[c] if c >= 0 else None for c in f_codes]
    assert np.array_equal(np.argsort(codes, kind="stable"), np.argsort(f_codes, kind="stable"))
    plain = pd.Series(["b", "a", "b"])
    assert [list(x) for x in run_codes(plain)] == [list(x) for x in pd.factorize(plain, sort=True)]


def test_stretch_starts_are_where_the_values_change():
    """0, then every position whose value differs from the one before (NaN differs from
    itself), as int64 positions; none for no value."""
    from xtalk.analysis.runorder import stretch_starts

    rng = np.random.default_rng(4)
    x = np.repeat(rng.integers(0, 3, 200).astype(np.int8), rng.integers(1, 50, 200))
    want = [i for i in range(x.size) if i == 0 or x[i] != x[i - 1]]
    for got, exp in ((stretch_starts(x), want), (stretch_starts(np.array([7])), [0]),
                     (stretch_starts(np.array([1.0, np.nan, np.nan, 1.0])), [0, 1, 2, 3]),
                     (stretch_starts(np.zeros(0, dtype=np.int8)), [])):
        assert got.dtype == np.int64 and got.tolist() == exp
