"""Tests for xtalk.analysis.wakeup: rel(k), Δw(k), drift, period quantisation."""

import numpy as np
import pandas as pd
import pytest

from xtalk.analysis import wakeup as W

P = 125_000_000  # 125 ms, the seed's AOCS period


def _jobs_from_wakeups(w, period=P, run_id="r0", t0=None):
    w = np.asarray(w, dtype=np.int64)
    n = w.size
    t0 = w[0] if t0 is None else t0
    job = np.arange(n)
    return pd.DataFrame({
        "run_id": run_id,
        "job": job,
        "warmup": job < 3,
        "release_ns": t0 + job * period,
        "wakeup_ns": w,
        "period_ns": period,
    })


def test_rel_and_delta_definitions():
    w = np.array([1_000, 1_000 + P + 5, 1_000 + 2 * P - 3, 1_000 + 3 * P + 10])
    s = W.wakeup_series(_jobs_from_wakeups(w))
    assert s["latency_ns"].tolist() == [0, 5, -3, 10]
    # rel(k): lateness minus the median over idle measured jobs (jobs 0-2 are warm-up).
    assert s["rel_ns"].tolist() == [-10, -5, -13, 0]
    assert s["dw_ns"].tolist()[1:] == [5, -8, 13]
    assert np.isnan(s["dw_ns"].iloc[0])
    assert s["interval_ns"].tolist()[1:] == [P + 5, P - 8, P + 13]


def test_gap_in_jobs_is_handled():
    df = _jobs_from_wakeups(np.array([0, P, 2 * P, 3 * P + 7]))
    df = df.drop(index=2)  # job 2 lost
    s = W.wakeup_series(df)
    assert s["k"].tolist() == [0, 1, 3]
    assert s["dw_ns"].iloc[2] == 7  # w(3) − w(1) − 2P
    assert np.isnan(s["interval_ns"].iloc[2])


def _drifting_wakeups(n, slope, rng, jitter=1_000.0):
    k = np.arange(n)
    w = 10**12 + k * P + np.round(slope * k + rng.normal(0, jitter, n)).astype(np.int64)
    # Seed 002 Fig. 12: a late wake-up (+8 µs) followed by a catch-up (−6.5 µs), periodically.
    peaks = np.arange(61, n - 1, 250)
    w[peaks] += 8_000
    w[peaks + 1] -= 6_500 - 8_000  # the next one is 6.5 µs early relative to its predecessor
    return w


def test_drift_recovered_with_ci():
    rng = np.random.default_rng(0)
    slope = -40_000 / 15_000  # the seed: 40 µs early after 15 000 steps
    df = _drifting_wakeups(16_000, slope, rng)
    d = W.drift(_jobs_from_wakeups(df))
    row = d.iloc[0]
    assert row["ci_low"] <= slope <= row["ci_high"]
    assert row["ci_high"] < 0  # the drift is significant
    assert row["ppm"] == pytest.approx(slope / P * 1e6, rel=0.05)
    assert row["total_ns"] == pytest.approx(slope * 15_999, rel=0.05)
    assert row["n_outliers"] >= 60  # the planted peaks were set aside


def test_no_drift_ci_contains_zero():
    rng = np.random.default_rng(1)
    w = _drifting_wakeups(5_000, 0.0, rng)
    d = W.fit_drift(np.arange(w.size), w - w[0] - np.arange(w.size) * P, P)
    assert d.ci_low <= 0.0 <= d.ci_high


def test_drift_per_run():
    rng = np.random.default_rng(2)
    a = _jobs_from_wakeups(_drifting_wakeups(3_000, 2.0, rng), run_id="a")
    b = _jobs_from_wakeups(_drifting_wakeups(3_000, -2.0, rng), run_id="b")
    d = W.drift(pd.concat([a, b]))
    assert d["run_id"].tolist() == ["a", "b"]
    assert d["slope_ns_per_job"].iloc[0] == pytest.approx(2.0, abs=0.3)
    assert d["slope_ns_per_job"].iloc[1] == pytest.approx(-2.0, abs=0.3)


def _quantised_wakeups(n, rng, offset=1):
    # Seed 000 Fig. 5.23: 124 ms intervals with a 128 ms one every 4 steps.
    pattern = np.array([124, 124, 124, 128]) * 1_000_000
    iv = np.roll(pattern, offset)[np.arange(n - 1) % 4] + rng.normal(0, 2_000, n - 1).astype(np.int64)
    return np.concatenate([[0], np.cumsum(iv)]) + 5 * 10**11


def test_quantisation_124_128_detected():
    rng = np.random.default_rng(3)
    w = _quantised_wakeups(2_000, rng)
    w[500] += 20_000_000  # one isolated 20 ms hiccup: outlier, not a level
    q = W.period_quantisation(_jobs_from_wakeups(w))
    assert q.quantised
    assert q.levels["center_ns"].to_numpy() == pytest.approx([124e6, 128e6], abs=50_000)
    assert q.levels["fraction"].to_numpy() == pytest.approx([0.75, 0.25], abs=0.01)
    assert q.pattern_period == 4
    assert sorted(q.pattern) == pytest.approx([124e6, 124e6, 124e6, 128e6], abs=50_000)
    assert q.step_ns == pytest.approx(4e6, abs=100_000)
    assert q.mean_interval_ns == pytest.approx(125e6, abs=50_000)
    assert q.outliers >= 1


def test_jitter_alone_is_not_quantised():
    rng = np.random.default_rng(4)
    iv = P + rng.normal(0, 20_000, 1_999).astype(np.int64)
    w = np.concatenate([[0], np.cumsum(iv)])
    q = W.period_quantisation(_jobs_from_wakeups(w))
    assert not q.quantised
    assert q.pattern is None and len(q.levels) == 1


def test_missing_period_is_an_error():
    df = _jobs_from_wakeups(np.arange(10) * P).drop(columns="period_ns")
    with pytest.raises(ValueError, match="period_ns"):
        W.wakeup_series(df)
    s = W.wakeup_series(df, period_ns=P)
    assert (s["rel_ns"] == 0).all()


# --------------------------------------------------------------------------- reference, backlog (issue 15, defect 11)

PB = 1_000_000  # 1 ms victim


def _simulate(n, exec_ns, rng, slope=0.0, first_late=0, lat=15_000, jitter=500.0):
    """Job rows of a periodic victim on an otherwise idle CPU: each job wakes at its release
    + ``lat`` + ``slope``·k (timer drift) + jitter, or when the previous job ends if that is
    later (backlog); job 0 wakes ``first_late`` ns late."""
    exec_ns = np.broadcast_to(np.asarray(exec_ns, dtype=np.int64), (n,))
    t0 = 10**12
    release = t0 + np.arange(n, dtype=np.int64) * PB
    timer = release + lat + np.rint(slope * np.arange(n) + rng.normal(0, jitter, n)).astype(np.int64)
    timer[0] += first_late
    wake = np.empty(n, dtype=np.int64)
    end = np.empty(n, dtype=np.int64)
    prev_end = 0
    for k in range(n):
        wake[k] = max(timer[k], prev_end + 2_000)
        end[k] = wake[k] + 1_000 + exec_ns[k]
        prev_end = end[k]
    job = np.arange(n)
    return pd.DataFrame({"run_id": "r", "job": job, "warmup": job < 3, "release_ns": release, "wakeup_ns": wake,
                         "start_ns": wake + 1_000, "end_ns": end, "period_ns": PB})


def test_late_first_job_does_not_offset_the_curve():
    rng = np.random.default_rng(20)
    jobs = _simulate(3_000, 300_000, rng, first_late=46_000_000)
    s = W.wakeup_series(jobs)
    measured = s[~s["warmup"]]
    assert abs(measured["rel_ns"].median()) < 1_000  # around 0, not 46 ms below it
    assert s["rel_ns"].iloc[0] == pytest.approx(46_000_000, abs=5_000)
    # The jobs released while job 0 ran start late too, catching up 0.7 ms a job: backlog.
    back = s.loc[s["backlog"], "job"]
    assert back.min() == 1 and back.max() < 100 and len(back) == pytest.approx(46 / 0.7, abs=3)
    d = W.drift(jobs).iloc[0]
    assert d["ci_low"] <= 0.0 <= d["ci_high"] and abs(d["intercept_ns"]) < 1_000


def test_overload_backlog_is_not_drift():
    rng = np.random.default_rng(21)
    n = 4_000
    exec_ns = np.full(n, 300_000)
    exec_ns[1_000:2_000] = 1_300_000  # overload: 1.3 ms of work every 1 ms
    jobs = _simulate(n, exec_ns, rng)
    s = W.wakeup_series(jobs)
    # The backlog builds for 1000 jobs (0.3 ms each) and drains at 0.7 ms per job.
    assert s["backlog"].sum() > 1_000 and s["backlog_ns"].max() > 250 * PB
    d = W.drift(jobs).iloc[0]
    assert d["n_backlog"] == s["backlog"].sum() and "backlogged" in d["note"]
    assert abs(d["ppm"]) < 0.05  # the backlog ramp alone is 300 000 ppm
    # Sustained overload: no idle wake-up, so no drift at all, and the note says why.
    full = W.drift(_simulate(500, 1_200_000, rng)).iloc[0]
    assert np.isnan(full["ppm"]) and "waited on the previous job" in full["note"]


def test_real_drift_recovered_despite_late_start_and_backlog():
    rng = np.random.default_rng(22)
    n = 6_000
    exec_ns = np.full(n, 200_000)
    exec_ns[3_000:3_050] = 1_500_000  # a short overload in the middle
    slope = 3.0  # ns per 1 ms job: 3 ppm
    jobs = _simulate(n, exec_ns, rng, slope=slope, first_late=46_000_000)
    d = W.drift(jobs).iloc[0]
    assert d["ci_low"] <= slope <= d["ci_high"] and d["ci_low"] > 0
    assert d["ppm"] == pytest.approx(3.0, rel=0.05)
    assert d["n_backlog"] >= 50


def _runs_of_jobs(runs, n, lost, rng):
    """Job tables of ``runs`` ((run id, period, lateness added from job 101), r3's jobs
    overloaded: ends one or two periods on), ``n`` jobs each with ``lost`` ones dropped, the
    first five warm-up."""
    parts = []
    for r, period, late in runs:
        job = np.arange(n)
        release = 10**12 + job * period
        w = release + rng.integers(-5_000, 50_000, n) + (job > 100) * late
        end = w + (rng.integers(1, 3, n) * period if r == "r3" else rng.integers(1_000, period // 3, n))
        d = pd.DataFrame({"run_id": r, "job": job, "warmup": job < 5, "release_ns": release, "wakeup_ns": w,
                          "end_ns": end, "period_ns": period})
        parts.append(d.drop(index=lost))
    return parts


def _loop_series(jobs, **kw):
    """wakeup_series by its loop over runs (the at-once path switched off)."""
    fast = W._series_at_once
    W._series_at_once = lambda *a: None
    try:
        return W.wakeup_series(jobs, **kw)
    finally:
        W._series_at_once = fast


@pytest.mark.parametrize("layout", ["shuffled", "stretches", "overlapping"])
@pytest.mark.parametrize("categorical", [False, True])
def test_series_at_once_is_the_loop_over_runs(categorical, layout):
    """All runs at once (the columns in run, job order) give the loop's table row for row:
    warm-up and measured jobs, lost jobs, backlog, runs with other periods, an overloaded
    run with no idle job, run ids out of order (and a categorical's order); rows shuffled,
    in a store's stretches (each run's measured jobs, then each run's warm-up: ordered
    stretch by stretch) or in stretches whose job ranges interleave (the full sort then)."""
    rng = np.random.default_rng(3)
    parts = _runs_of_jobs((("r10", P, 0), ("r2", P // 2, 0), ("r1", P, 0), ("r3", P, 0)), 400, [50, 51, 200], rng)
    if layout == "shuffled":
        jobs = pd.concat(parts).sample(frac=1.0, random_state=1).reset_index(drop=True)
    elif layout == "stretches":
        jobs = pd.concat([p[~p["warmup"]] for p in parts] + [p[p["warmup"]] for p in parts], ignore_index=True)
    else:  # a run's even jobs, then its odd ones: each stretch increasing, together not
        jobs = pd.concat([p[p["job"] % 2 == e] for p in parts for e in (0, 1)], ignore_index=True)
    if categorical:
        jobs["run_id"] = pd.Categorical(jobs["run_id"], categories=["r3", "r10", "r1", "r2", "unused"])
    for kw in ({}, {"include_warmup": False}, {"period_ns": 1000}):
        a = W.wakeup_series(jobs, **kw)
        assert W._series_at_once(jobs, kw.get("period_ns"), kw.get("include_warmup", True)) is not None
        pd.testing.assert_frame_equal(a, _loop_series(jobs, **kw), check_exact=True)
        got = [(k, g.index[0], len(g)) for k, g in W.runs_of_series(a)]
        assert got == [(k, g.index[0], len(g)) for k, g in a.groupby("run_id", sort=True)]
    # Without release or end times, and with a repeated index (the loop decides then).
    for drop in (["release_ns"], ["end_ns"], ["release_ns", "end_ns", "warmup"]):
        pd.testing.assert_frame_equal(W.wakeup_series(jobs.drop(columns=drop)), _loop_series(jobs.drop(columns=drop)),
                                      check_exact=True)
    dup = pd.concat([jobs, jobs.iloc[:3]], ignore_index=True)
    assert W._series_at_once(dup, None, True) is None
    pd.testing.assert_frame_equal(W.wakeup_series(dup), _loop_series(dup), check_exact=True)


def _runs_given(jobs):
    """The runs of ``jobs`` as series_of_runs takes them: (code, columns) in code order,
    each run's rows in job order."""
    cat = pd.Categorical(jobs["run_id"])
    out = []
    for code in range(len(cat.categories)):
        g = jobs[cat.codes == code].sort_values("job")
        out.append((code, {c: g[c].to_numpy() for c in g.columns if c != "run_id"}))
    return out, cat.categories


@pytest.mark.parametrize("drop", [[], ["release_ns"], ["end_ns"], ["release_ns", "end_ns", "warmup"]])
def test_series_run_by_run_is_wakeup_series(drop):
    """series_of_runs, fed run by run, gives wakeup_series' table row for row (run_id a
    Categorical of the same ids): warm-up, lost jobs, backlog, an overloaded run, runs of
    other periods; without release, end or warm-up columns. A run whose indices do not
    increase, a run given twice or out of order, or runs with other columns: None."""
    rng = np.random.default_rng(5)
    parts = _runs_of_jobs((("r10", P, 0), ("r2", P // 2, 0), ("r3", P, 0)), 300, [40, 41, 150], rng)
    jobs = pd.concat(parts, ignore_index=True).drop(columns=drop)
    runs, cats = _runs_given(jobs)
    got = W.series_of_runs(runs, cats)
    assert isinstance(got["run_id"].dtype, pd.CategoricalDtype)
    want = W.wakeup_series(jobs)
    pd.testing.assert_frame_equal(got.assign(run_id=got["run_id"].astype(str)), want, check_exact=True)
    got_runs = [(k, g.index[0], len(g)) for k, g in W.runs_of_series(got)]
    assert got_runs == [(k, g.index[0], len(g)) for k, g in got.groupby("run_id", sort=True, observed=True)]
    # The drift of each run is the same from either table.
    for (ka, a), (kb, b) in zip(W.runs_of_series(got), W.runs_of_series(want)):
        assert ka == kb and W.run_drift(a) == pytest.approx(W.run_drift(b), nan_ok=True)
    bad = [(c, dict(r)) for c, r in runs]
    bad[1][1]["job"] = bad[1][1]["job"][::-1].copy()
    assert W.series_of_runs(bad, cats) is None
    assert W.series_of_runs([runs[1], runs[0]], cats) is None
    assert W.series_of_runs([runs[0], runs[0]], cats) is None
    assert W.series_of_runs([runs[0], (runs[1][0], {"job": runs[1][1]["job"]})], cats) is None
    assert W.series_of_runs([], cats) is None


@pytest.mark.parametrize("drop", [[], ["release_ns"], ["end_ns", "warmup"]])
def test_series_of_some_columns_narrowed_is_the_full_ones(drop):
    """series_of_runs with ``columns`` holds just those of the full table, in its order, the
    same values; ``narrow`` makes k, rel_ns, period_ns and backlog_ns int32 while they fit
    and int64 once a run's do not (a run far behind its release, a long backlog): the same
    values either way, and each run's drift is the one of the full table."""
    rng = np.random.default_rng(7)
    # r2: 3 s late from job 101
    parts = _runs_of_jobs((("r1", P, 0), ("r2", P, 3 * 10**9), ("r3", P // 2, 0)), 300, [40, 41, 150], rng)
    jobs = pd.concat(parts, ignore_index=True).drop(columns=drop)
    runs, cats = _runs_given(jobs)
    full = W.series_of_runs(runs, cats)
    cols = ["run_id", "k", "rel_ns", "dw_ns", "interval_ns", "period_ns", "warmup", "backlog_ns", "backlog"]
    for narrow in (False, True):
        got = W.series_of_runs(runs, cats, columns=cols[::-1], narrow=narrow)
        assert list(got.columns) == cols
        pd.testing.assert_frame_equal(got, full[cols], check_exact=True, check_dtype=False)
        assert got["k"].dtype == (np.int32 if narrow else np.int64)
        assert got["rel_ns"].dtype == np.int64  # r2's rel_ns passes 2^31 ns: widened from that run on
        for (_, a), (_, b) in zip(W.runs_of_series(got), W.runs_of_series(full)):
            assert W.run_drift(a) == W.run_drift(b) or pd.isna(W.run_drift(a)["slope_ns_per_job"])
        q = W.period_quantisation(None, series=got)
        assert q.levels.equals(W.period_quantisation(None, series=full).levels)
    small = W.series_of_runs(runs[:1], cats, columns=cols, narrow=True)
    assert small["rel_ns"].dtype == np.int32 and small["period_ns"].dtype == np.int32
    pd.testing.assert_frame_equal(small, W.series_of_runs(runs[:1], cats)[cols], check_exact=True, check_dtype=False)


@pytest.mark.parametrize("n", [4096, 4097, 100_000, 100_001])
def test_median_of_a_bracket_is_numpys(n):
    """The drift fit's median, from the values between two sample quantiles, is np.median's
    bit for bit: odd and even sizes, ties (few distinct values, all equal, a majority of
    one value), heavy tails, sorted input; NaN gives NaN; small arrays go to np.median."""
    rng = np.random.default_rng(11)
    cases = [rng.normal(size=n), rng.integers(0, 3, n).astype(float), np.abs(rng.standard_cauchy(n)),
             np.sort(rng.normal(size=n))[::-1].copy(), np.zeros(n),
             np.r_[np.full(n // 2 + 5, 1.0), rng.normal(size=n - n // 2 - 5)]]
    for a in cases:
        assert np.float64(W._median(a)).tobytes() == np.median(a).tobytes()
    a = cases[0].copy()
    a[7] = np.nan
    assert np.isnan(W._median(a))
    assert W._median(np.array([3.0, 1.0, 2.0])) == 2.0


def test_newey_west_in_one_buffer_is_the_former_sum():
    """The HAC standard error with the lag products written into one buffer is the former
    one (a fresh product array per lag), bit for bit."""
    rng = np.random.default_rng(2)
    k = np.arange(50_000, dtype=float)
    resid = np.convolve(rng.normal(size=50_010), np.ones(10) / 10, mode="valid")[:50_000] * 1e3

    def former(k, resid):
        n = k.size
        xc = k - k.mean()
        sxx = np.sum(xc**2)
        u = xc * resid
        lag = int(np.floor(4.0 * (n / 100.0) ** (2.0 / 9.0)))
        s = float((u * u).sum())
        for l in range(1, min(lag, n - 1) + 1):
            s += 2.0 * (1.0 - l / (lag + 1.0)) * float((u[l:] * u[:-l]).sum())
        return float(np.sqrt(max(s, 0.0)) / sxx)

    for m in (50_000, 12, 3):
        assert W._newey_west_se(k[:m], resid[:m]) == former(k[:m], resid[:m])


def test_drift_of_integers_is_the_drift_of_their_floats():
    """Integer k and rel(k) (no finiteness check: every value is finite) fit the drift their
    float copies fit; a NaN among floats is still left out."""
    rng = np.random.default_rng(4)
    k = np.arange(20_000, dtype=np.int32)
    y = (k * -3 + rng.integers(-2_000, 2_000, k.size) + (k % 97 == 0) * 90_000).astype(np.int32)
    assert W.fit_drift(k, y, P) == W.fit_drift(k.astype(float), y.astype(float), P)
    yf = y.astype(float)
    yf[5] = np.nan
    assert W.fit_drift(k, yf, P).n == k.size - 1


def test_quantisation_from_a_series_is_the_same():
    w = 10**9 + np.cumsum(np.tile([P - 1_000_000, P - 1_000_000, P - 1_000_000, P + 3_000_000], 100))
    jobs = _jobs_from_wakeups(w)
    a = W.period_quantisation(jobs)
    b = W.period_quantisation(None, series=W.wakeup_series(jobs))
    assert (a.pattern, a.pattern_period, a.step_ns, a.outliers) == (b.pattern, b.pattern_period, b.step_ns, b.outliers)
    pd.testing.assert_frame_equal(a.levels, b.levels)


def test_clusters_from_sorted_values_are_the_argsorts():
    """Labels from a search among the clusters' first values are those of the stable
    argsort's running count of gaps: ties, gaps exactly min_gap wide, one cluster, none."""
    def by_argsort(values, gap):
        order = np.argsort(values, kind="stable")
        labels = np.empty(values.size, dtype=np.int64)
        labels[order] = np.concatenate([[0], np.cumsum(np.diff(values[order]) > gap)])
        return labels

    rng = np.random.default_rng(2)
    v = np.concatenate([rng.choice([124e6, 128e6, 124e6 + 10], 500), rng.normal(125e6, 3e6, 50), [130e6, 130e6 + 5]])
    rng.shuffle(v)
    for gap in (5.0, 10.0, 0.5e6, 1e9, 0.0, -1.0):
        assert np.array_equal(W._cluster_1d(v, gap), by_argsort(v, gap))
    assert np.array_equal(W._cluster_1d(np.array([3.0]), 1.0), [0])
    assert np.array_equal(W._cluster_1d(np.array([np.nan, 1.0, 5.0]), 1.0), by_argsort(np.array([np.nan, 1.0, 5.0]), 1.0))


def test_clusters_of_counted_integer_intervals_are_the_sorts():
    """Long arrays of integer intervals take their distinct values from a count, not a sort:
    the same labels as the sorted values', with ties, gaps exactly min_gap wide, negative
    values, a half among integers and a span too wide (both sorted)."""
    rng = np.random.default_rng(5)
    n = 20_000
    base = 1_000_000 + rng.choice([0, 0, 0, 4_000, 4_001, 9_000], n) + rng.integers(-50, 50, n)
    cases = {"levels": base.astype(float), "negative": (base - 1_010_000).astype(float),
             "half": np.append(base.astype(float), 1_002_000.5), "wide": np.append(base.astype(float), 9e12),
             "short": base[:100].astype(float)}
    for name, v in cases.items():
        distinct = W._distinct_integers(v)
        assert (distinct is None) == (name in ("half", "wide", "short")), name
        if distinct is not None:
            assert np.array_equal(distinct, np.unique(v)), name
        for gap in (0.0, 1.0, 50.0, 0.005 * 1e6, 1e9):
            sv = np.sort(v)
            want = np.searchsorted(sv[1:][np.diff(sv) > gap], v, side="right")
            assert np.array_equal(W._cluster_1d(v, gap), want), (name, gap)
