import numpy as np
import pandas as pd
import pytest

from xtalk.analysis.cells import summarize
from xtalk.analysis.slowdown import ratio_ci


def groups(rng, scale, k=3, n=400):
    return [rng.lognormal(np.log(scale), 0.05, n) * rng.normal(1, 0.01) for _ in range(k)]


def test_a_real_slowdown_is_bracketed_and_excludes_one():
    rng = np.random.default_rng(1)
    point, lo, hi = ratio_ci(groups(rng, 2.0), groups(rng, 1.0))
    assert 1.9 < point < 2.1 and lo < point < hi
    assert lo > 1.5 and hi < 2.6


def test_single_runs_fall_back_to_the_job_bootstrap():
    rng = np.random.default_rng(2)
    point, lo, hi = ratio_ci([rng.normal(10, 1, 500)], [rng.normal(10, 1, 500)])
    assert lo < 1 < hi and hi - lo < 0.05


def test_between_run_spread_widens_the_interval():
    """Same jobs per run, but runs that disagree: the CI must reflect the run spread."""
    rng = np.random.default_rng(3)
    tight = [rng.normal(10, 0.1, 300) for _ in range(4)]
    spread = [rng.normal(m, 0.1, 300) for m in (9, 10, 11, 12)]
    _, lo1, hi1 = ratio_ci(tight, tight)
    _, lo2, hi2 = ratio_ci(spread, tight)
    assert (hi2 - lo2) > 5 * (hi1 - lo1)


def test_bad_statistic_is_refused():
    with pytest.raises(ValueError, match="stat"):
        ratio_ci([np.ones(3)], [np.ones(3)], stat="banana")


def test_empty_scenario_gives_nan():
    assert all(np.isnan(ratio_ci([], [np.ones(5)])))


def test_summary_rows_per_scenario():
    rng = np.random.default_rng(4)
    jobs, runs = [], []
    for s, scale in (("solo", 1.0), ("read", 1.5)):
        for r in range(3):
            e = (rng.lognormal(0, 0.05, 200) * scale * 1e6).astype(np.int64)
            jobs.append(pd.DataFrame({"run_id": f"{s}{r}", "scenario": s, "exec_ns": e, "response_ns": e + 1000,
                                      "missed": e > 1.4e6, "migrated": False}))
            runs.append({"run_id": f"{s}{r}", "scenario": s, "status": "completed"})
    t = summarize(pd.concat(jobs), pd.DataFrame(runs)).set_index("scenario")
    assert list(t.index) == ["solo", "read"]
    assert t.loc["solo", "slowdown_median"] == 1.0
    assert 1.4 < t.loc["read", "slowdown_median"] < 1.6 and t.loc["read", "slowdown_median_lo"] > 1.2
    assert t.loc["read", "jobs"] == 600 and t.loc["read", "runs_ok"] == 3
    assert t.loc["read", "deadline_misses"] > t.loc["solo", "deadline_misses"]


def test_cells_point_from_a_sorted_cache_is_the_pooled_ratio():
    """cells() takes a slowdown's point from the caller's sorted values (np.median's mean of
    the two middle values, the last value for max): the same table as pooling the runs."""
    import pandas as pd

    from xtalk.analysis import cells as ce

    g = np.random.default_rng(4)
    rows = []
    for i, (scen, n) in enumerate([("solo", 301), ("pi", 300), ("solo", 300), ("pi", 299), ("solo", 301), ("pi", 300)]):  # 902 and 899 jobs: even and odd
        rows.append(pd.DataFrame({"run_id": f"r{i}", "scenario": scen, "exec_ns": g.gamma(4, 5e4, n).round(),
                                  "response_ns": g.gamma(4, 6e4, n).round()}))
    jobs = pd.concat(rows, ignore_index=True)
    runs = pd.DataFrame({"run_id": [f"r{i}" for i in range(6)], "scenario": ["solo", "pi"] * 3, "status": "completed"})

    def sorted_of(cfg, scen, m):
        return np.sort(jobs.loc[jobs["scenario"] == scen, f"{m}_ns"].to_numpy(dtype=float))

    for max_jobs in (None, 500):
        a = ce.cells(jobs, runs, n_boot=200, max_jobs=max_jobs)
        b = ce.cells(jobs, runs, n_boot=200, max_jobs=max_jobs, sorted_of=sorted_of)
        pd.testing.assert_frame_equal(a, b, check_exact=True)


def test_cells_counts_from_the_columns_are_deadline_misses_per_run():
    """cells() counts a cell's misses, lost and serious jobs from the columns (row positions,
    no frame per cell): the sums of verdict.deadline_misses per run. Lost jobs, a run whose
    indices repeat and go back, a recorded flag with NA; categorical and string run ids give
    the same table (per_run counts the codes of the first)."""
    import pandas as pd

    from xtalk.analysis import cells as ce
    from xtalk.analysis import verdict as vd

    g = np.random.default_rng(9)
    rows = []
    for i, scen in enumerate(["solo", "pi", "solo", "pi"]):
        n = 200
        job = np.arange(n)
        if i == 1:
            job = np.delete(job, [5, 6, 90])  # lost
        if i == 3:
            job = np.concatenate([job[:100], job[95:150], job[10:20]])  # repeated, back
        rel = 10**9 + job * 1_000_000
        end = rel + g.integers(100_000, 2_600_000, job.size)
        missed = pd.array(np.where(g.random(job.size) < 0.1, None, end > rel + 1_000_000), dtype="boolean")
        rows.append(pd.DataFrame({"run_id": f"r{i}", "scenario": scen, "job": job, "release_ns": rel, "end_ns": end,
                                  "period_ns": 1_000_000, "missed": missed, "exec_ns": (end - rel) // 2,
                                  "response_ns": end - rel}))
    jobs = pd.concat(rows, ignore_index=True)
    runs = pd.DataFrame({"run_id": [f"r{i}" for i in range(4)], "scenario": ["solo", "pi"] * 2, "status": "completed"})
    a = ce.cells(jobs, runs, n_boot=50)
    cat = jobs.assign(run_id=pd.Categorical(jobs["run_id"], categories=["r3", "r0", "unused", "r2", "r1"]),
                      scenario=pd.Categorical(jobs["scenario"]))
    pd.testing.assert_frame_equal(a, ce.cells(cat, runs, n_boot=50), check_exact=True)
    pd.testing.assert_frame_equal(ce.per_run(jobs, runs), ce.per_run(cat, runs), check_exact=True)
    for scen in ("solo", "pi"):
        d = vd.deadline_misses(jobs[jobs["scenario"] == scen], include_warmup=True, recorded=True)
        row = a[a["scenario"] == scen].iloc[0]
        assert row["deadline_misses"] == d["n_missed"].sum() and row["lost_jobs"] == d["n_lost"].sum()
        assert row["serious_misses"] == d["n_serious"].sum()
        assert row["max_lateness_ns"] == d["max_lateness_ns"].max()
        assert row["max_responsiveness"] == d["max_responsiveness"].max()
    assert a.set_index("scenario").loc["pi", "lost_jobs"] == 3  # run 3 repeats indices but loses none


@pytest.mark.parametrize("max_jobs", [None, 2_000])
@pytest.mark.parametrize("shape", ["runs", "one run each", "nan"])
def test_both_statistics_at_once_are_a_call_each(max_jobs, shape):
    """slowdowns draws the per-run subsample and the replicates once for the median and the
    maximum: the same intervals, bit for bit, as one slowdown call per statistic (NaN values
    take the value path; one run a side, the job bootstrap)."""
    import dataclasses

    from xtalk.analysis.slowdown import slowdown, slowdowns

    g = np.random.default_rng(4)
    n = 1 if shape == "one run each" else 5
    cur = [g.gamma(4, 1e4, 900) * 1.2 for _ in range(n)]
    ref = [g.gamma(4, 1e4, 700) for _ in range(n)]
    if shape == "nan":
        cur[0][3] = np.nan
    both = slowdowns(cur, ref, ("median", "max"), n_boot=500, seed=2, max_jobs=max_jobs, points={"max": 1.5})
    for stat in ("median", "max"):
        one = slowdown(cur, ref, stat, n_boot=500, seed=2, max_jobs=max_jobs, point=1.5 if stat == "max" else None)
        np.testing.assert_equal(dataclasses.astuple(both[stat]), dataclasses.astuple(one))  # NaN equal to NaN
    assert both["max"].estimate == 1.5 and both["median"].estimate != 1.5
    assert shape == "nan" or np.isfinite([both["median"].low, both["max"].high]).all()
    with pytest.raises(ValueError, match="stat"):
        slowdowns(cur, ref, ("median", "p1000"))


@pytest.mark.parametrize("max_jobs", [None, 2_000])
def test_pairs_sharing_their_picks_are_a_call_each(max_jobs):
    """slowdowns_many draws the bootstrap picks once for pairs whose runs have the same sizes
    (a cell's execution and response times) and apart for others (other sizes, a NaN: the
    value path, no jobs): each pair's intervals are, bit for bit, those of its own
    slowdowns call; integer runs (the job table's column as it is) are the floats'."""
    import dataclasses

    from xtalk.analysis.slowdown import slowdowns, slowdowns_many

    g = np.random.default_rng(6)
    sizes_c, sizes_r = (900, 850, 870, 910), (700, 720, 690, 705)
    exec_c, exec_r = [g.gamma(4, 1e4, n).round() * 1.2 for n in sizes_c], [g.gamma(4, 1e4, n).round() for n in sizes_r]
    resp_c = [v.astype(np.int64) + g.integers(0, 5e4, v.size) for v in exec_c]  # integers, same sizes
    resp_r = [v.astype(np.int64) + g.integers(0, 5e4, v.size) for v in exec_r]
    other = ([v[:-3] for v in exec_c], exec_r)  # other sizes: its own draws
    nan = ([v.copy() for v in exec_c], exec_r)
    nan[0][1][7] = np.nan
    pairs = [(exec_c, exec_r), (resp_c, resp_r), other, nan] + ([([], exec_r)] if max_jobs is None else [])  # no jobs: NaN
    points = [{"max": 1.5}] + [None] * (len(pairs) - 1)
    many = slowdowns_many(pairs, ("median", "max"), n_boot=400, seed=3, max_jobs=max_jobs, points=points)
    for (c, r), p, got in zip(pairs, points, many):
        one = slowdowns(c, r, ("median", "max"), n_boot=400, seed=3, max_jobs=max_jobs, points=p)
        floats = slowdowns([np.asarray(v, dtype=float) for v in c], [np.asarray(v, dtype=float) for v in r],
                           ("median", "max"), n_boot=400, seed=3, max_jobs=max_jobs, points=p)
        for stat in ("median", "max"):
            np.testing.assert_equal(dataclasses.astuple(got[stat]), dataclasses.astuple(one[stat]))
            np.testing.assert_equal(dataclasses.astuple(got[stat]), dataclasses.astuple(floats[stat]))
    assert np.isfinite(many[1]["median"].low) and many[0]["max"].estimate == 1.5
