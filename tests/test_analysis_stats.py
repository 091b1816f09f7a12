"""Tests for xtalk.analysis.stats: bootstrap CIs, slowdown ratio, shift tests, A/A floor."""

import time

import numpy as np
import pandas as pd
import pytest

from xtalk.analysis import stats as S


def _jobs(values, warmup=0, run_id="r0"):
    n = len(values)
    return pd.DataFrame(
        {
            "run_id": run_id,
            "job": np.arange(n),
            "warmup": np.arange(n) < warmup,
            "exec_ns": np.asarray(values, dtype=np.int64),
        }
    )


def test_fast_quantile_bootstrap_matches_resampling():
    # The Beta order-statistic shortcut must give the same bootstrap distribution as
    # brute-force resampling (mean and spread), for even and odd n and interpolated q.
    rng = np.random.default_rng(0)
    for n in (10, 31):
        x = np.sort(rng.gamma(2.0, size=n))
        for q in (0.5, 0.9, 1.0):
            fast = S._boot_quantile(x, q, 100_000, rng)
            slow = np.quantile(x[rng.integers(0, n, (100_000, n))], q, axis=1)
            assert fast.mean() == pytest.approx(slow.mean(), rel=0.01)
            assert fast.std() == pytest.approx(slow.std(), rel=0.03)
            jack = S._jack_quantile(x, q)
            brute = np.array([np.quantile(np.delete(x, i), q) for i in range(n)])
            np.testing.assert_allclose(jack, brute)


def test_median_ratio_ci_coverage_on_aa_pairs():
    # 200 repetitions of two same-distribution samples: the 95 % CI of the median ratio
    # must contain 1 in at least 90 % of them.
    rng = np.random.default_rng(42)
    hits = 0
    for _ in range(200):
        a = rng.lognormal(13.0, 0.3, size=150)
        b = rng.lognormal(13.0, 0.3, size=150)
        ci = S.ratio_ci(a, b, "median", n_boot=1000, seed=rng)
        hits += ci.contains(1.0)
    assert hits >= 180, hits


def test_ratio_ci_detects_planted_slowdown():
    rng = np.random.default_rng(1)
    solo = rng.lognormal(13.0, 0.2, size=2000)
    scen = 1.3 * rng.lognormal(13.0, 0.2, size=2000)
    ci = S.ratio_ci(scen, solo, "median", seed=2)
    assert ci.method == "bca"
    assert 1.0 < ci.low < 1.3 < ci.high < 1.4


def test_percentile_and_bca_bracket_true_median():
    rng = np.random.default_rng(3)
    x = rng.exponential(1.0, size=3000)
    for method in ("bca", "percentile"):
        ci = S.bootstrap_ci(x, "median", method=method, seed=4)
        assert ci.contains(np.log(2.0)), (method, ci)
        assert ci.low < ci.estimate < ci.high


def test_max_forces_percentile_and_upper_is_sample_max():
    x = np.arange(1000.0)
    ci = S.bootstrap_ci(x, "max", seed=0)
    assert ci.method == "percentile"
    assert ci.high == 999.0 and ci.low < 999.0


def test_mean_and_callable_statistics():
    rng = np.random.default_rng(5)
    x = rng.normal(10.0, 1.0, size=500)
    ci_mean = S.bootstrap_ci(x, "mean", n_boot=1000, seed=1)
    ci_call = S.bootstrap_ci(x, np.mean, n_boot=1000, seed=1)
    assert ci_mean.contains(10.0)
    assert ci_call.statistic == "mean"
    assert ci_call.low == pytest.approx(ci_mean.low, abs=0.05)


def test_large_sample_is_fast():
    x = np.random.default_rng(6).lognormal(size=100_000)
    t = time.perf_counter()
    S.bootstrap_ci(x, "median", n_boot=10_000, seed=1)
    S.ratio_ci(x, x[::-1], "p99", n_boot=10_000, seed=1)
    S.ratio_ci(x, x[::-1], "max", n_boot=10_000, seed=1)
    assert time.perf_counter() - t < 2.0


def test_seeded_results_are_reproducible():
    x = np.random.default_rng(7).normal(size=300)
    assert S.bootstrap_ci(x, seed=11) == S.bootstrap_ci(x, seed=11)


def test_slowdown_table_excludes_warmup():
    solo = _jobs([10_000] * 5 + [100] * 200, warmup=5)
    scen = _jobs([20_000] * 5 + [150] * 200, warmup=5)
    t = S.slowdown(solo, scen, seed=0)
    assert list(t["statistic"]) == ["median", "max"]
    assert t["ratio"].tolist() == pytest.approx([1.5, 1.5])
    assert (t["n_solo"] == 200).all()


def test_shift_test_effect_sizes():
    rng = np.random.default_rng(8)
    a = rng.normal(1.0, 1.0, size=800)
    b = rng.normal(0.0, 1.0, size=800)
    r = S.shift_test(a, b)
    # True P(A > B) = Phi(1/sqrt(2)) = 0.760.
    assert r.prob_superiority == pytest.approx(0.760, abs=0.03)
    assert r.cliffs_delta == pytest.approx(2 * r.prob_superiority - 1)
    assert r.magnitude == "large"
    assert r.mannwhitney_p < 1e-6 and r.brunnermunzel_p < 1e-6 and r.ks_p < 1e-6
    assert r.brunnermunzel_stat > 0
    same = S.shift_test(rng.normal(size=800), rng.normal(size=800))
    assert same.magnitude == "negligible"
    assert same.mannwhitney_p > 0.01


def test_shift_test_complete_separation_and_identical():
    r = S.shift_test(np.arange(100.0) + 1000, np.arange(100.0))
    assert r.cliffs_delta == 1.0 and r.brunnermunzel_p < 1e-6
    same = S.shift_test(np.ones(50), np.ones(50))
    assert same.cliffs_delta == 0.0 and same.brunnermunzel_p == 1.0


def test_aa_noise_floor():
    rng = np.random.default_rng(9)
    reps = [rng.lognormal(13.0, 0.3, size=400) for _ in range(3)]
    nf = S.aa_noise_floor(reps, seed=1)
    assert len(nf.pairs) == 6
    assert 0.0 < nf.floor < 0.15
    assert nf.ratio_min < 1.0 < nf.ratio_max or nf.ratio_min == pytest.approx(1.0, abs=0.05)
    # The floor grows with the noise.
    noisy = [rng.lognormal(13.0, 1.0, size=400) for _ in range(3)]
    assert S.aa_noise_floor(noisy, seed=1).floor > nf.floor


def test_markers_best_median_first_worst():
    df = _jobs([500, 120, 100, 130, 110, 400], warmup=1)
    m = S.markers(df)
    row = m.iloc[0]
    assert (row["best"], row["median"], row["first"], row["worst"]) == (100, 120, 500, 400)


@pytest.mark.parametrize(
    "call, field",
    [
        (lambda: S.bootstrap_ci([1.0], "median"), "sample"),
        (lambda: S.bootstrap_ci([1.0, 2.0], "p200"), "statistic"),
        (lambda: S.bootstrap_ci([1.0, 2.0], "median", level=1.5), "level"),
        (lambda: S.bootstrap_ci([1.0, 2.0], "median", method="bootstrap"), "method"),
        (lambda: S.ratio_ci([1.0, 2.0], [0.0, 0.0]), "solo"),
        (lambda: S.aa_noise_floor([[1.0, 2.0]]), "samples"),
        (lambda: S.slowdown(_jobs([1, 2]), _jobs([1, 2]), column="nope"), "column"),
    ],
)
def test_errors_name_the_field(call, field):
    with pytest.raises(ValueError, match=field):
        call()


def test_per_step_reference_is_the_minimum_across_runs():
    a = _jobs([100, 900, 100], run_id="a")
    b = _jobs([800, 100, 120], run_id="b")
    ref = S.per_step_reference(pd.concat([a, b]))
    assert ref["min_ns"].tolist() == [100, 100, 100]
    assert ref["max_ns"].tolist() == [800, 900, 120]
    assert ref["n_runs"].tolist() == [2, 2, 2]


def _runs_with_offsets(rng, n_runs=10, n_jobs=200):
    # Each run has its own level (placement, boot...): 5 % between runs, 1 % within.
    off = rng.normal(0.0, 0.05, n_runs)
    v = np.concatenate([1e6 * (1 + o) * (1 + rng.normal(0.0, 0.01, n_jobs)) for o in off])
    return v, np.repeat(np.arange(n_runs), n_jobs)


def test_cluster_bootstrap_keeps_between_run_variance():
    # Same-distribution A/A pairs: resampling runs covers 1, pooling jobs mostly does not.
    rng = np.random.default_rng(7)
    cluster_hits = pooled_hits = 0
    for _ in range(30):
        a, ga = _runs_with_offsets(rng)
        b, gb = _runs_with_offsets(rng)
        ci = S.cluster_ratio_ci(a, ga, b, gb, n_boot=400, seed=rng)
        assert ci.method == "cluster-percentile"
        cluster_hits += ci.contains(1.0)
        pooled_hits += S.ratio_ci(a, b, n_boot=1000, seed=rng).contains(1.0)
    assert cluster_hits >= 26, cluster_hits
    assert pooled_hits <= 15, pooled_hits


def test_slowdown_with_cluster_column_and_too_few_runs():
    rng = np.random.default_rng(8)
    a, ga = _runs_with_offsets(rng, n_runs=6, n_jobs=50)
    b, gb = _runs_with_offsets(rng, n_runs=6, n_jobs=50)
    solo = pd.DataFrame({"run_id": gb, "job": np.tile(np.arange(50), 6), "exec_ns": b})
    scen = pd.DataFrame({"run_id": ga, "job": np.tile(np.arange(50), 6), "exec_ns": 1.5 * a})
    t = S.slowdown(solo, scen, statistics=("median",), cluster="run_id", n_boot=300, seed=1)
    assert t["method"].iloc[0] == "cluster-percentile"
    assert t["ci_low"].iloc[0] < 1.5 * np.median(a) / np.median(b) < t["ci_high"].iloc[0]
    with pytest.raises(ValueError, match="scenario_groups"):
        S.cluster_ratio_ci(a[:100], ga[:100], b, gb)


def _resample_by_value(groups, stat, n_boot, rng):
    """The per-run resampling as first written: every replicate's values gathered, then
    np.median or max of them."""
    sizes = np.array([len(g) for g in groups])
    m, k, flat = int(np.median(sizes)), len(groups), np.concatenate(groups)
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    out = np.empty(n_boot)
    step = max(1, int(4e6 // max(1, k * m)))
    for lo in range(0, n_boot, step):
        b = min(step, n_boot - lo)
        runs = rng.integers(0, k, size=(b, k))
        pick = (rng.random((b, k, m)) * sizes[runs][:, :, None]).astype(np.int64) + offsets[runs][:, :, None]
        sample = flat[pick.reshape(b, k * m)]
        out[lo:lo + b] = np.median(sample, axis=1) if stat == "median" else sample.max(axis=1)
    return out


@pytest.mark.parametrize("shape", ["report", "ties", "one", "two", "wide", "inf", "nan"])
@pytest.mark.parametrize("stat", ["median", "max"])
def test_resample_by_rank_is_resample_by_value(shape, stat):
    """The replicates selected among ranks are the replicates selected among values, draw for
    draw: equal sizes (the report's subsample), ties, odd and even counts, one value, more
    pooled values than int16 ranks hold, infinities; NaN takes the value path."""
    g = np.random.default_rng(7)
    groups = {"report": lambda: [g.normal(2e5, 1e4, 200).round() for _ in range(50)],
              "ties": lambda: [g.integers(0, 5, s).astype(float) for s in (3, 7, 4, 10, 1)],
              "one": lambda: [g.normal(0, 1, 1)],
              "two": lambda: [g.normal(0, 1, 2), g.normal(0, 1, 2)],
              "wide": lambda: [g.exponential(1, 40_000), g.exponential(1, 3_000)],
              "inf": lambda: [np.array([1.0, np.inf, 3.0]), np.array([2.0, -np.inf])],
              "nan": lambda: [np.array([1.0, np.nan, 3.0, 4.0]), np.array([2.0, 5.0])]}[shape]()
    for n_boot in (2000, 7):
        a = S._resample_runs(groups, stat, n_boot, np.random.default_rng(3))
        b = _resample_by_value(groups, stat, n_boot, np.random.default_rng(3))
        np.testing.assert_array_equal(a, b)


def test_noise_floor_of_sorted_samples_is_the_same():
    """aa_noise_floor sorts each sample once for all its pairs: the same floor as unsorted input."""
    g = np.random.default_rng(2)
    samples = [g.gamma(3, 1e4, 3000) for _ in range(4)]
    for stat in ("median", "max", "p99"):
        a = S.aa_noise_floor(samples, stat, n_boot=300, seed=1)
        b = S.aa_noise_floor([np.sort(s) for s in samples], stat, n_boot=300, seed=1)
        assert a.floor == b.floor
        pd.testing.assert_frame_equal(a.pairs, b.pairs, check_exact=True)


def _per_step_by_groupby(jobs):
    fast = S._per_step_dense
    S._per_step_dense = lambda *a: None
    try:
        return S.per_step_reference(jobs)
    finally:
        S._per_step_dense = fast


def test_per_step_reference_dense_is_the_groupby():
    """Every run with every job once: the runs × jobs matrix gives the groupby's table (odd
    and even run counts, run codes and job indices with gaps); otherwise the groupby decides."""
    g = np.random.default_rng(1)
    for runs in (3, 4):
        jobs = pd.DataFrame({"run_id": np.repeat(np.arange(runs) * 3 + 2, 50).astype(np.int8),
                             "job": np.tile(np.arange(50) * 7 + 11, runs),
                             "exec_ns": g.integers(1000, 5000, 50 * runs)}).sample(frac=1.0, random_state=2)
        assert S._per_step_dense(jobs, "exec_ns", "run_id") is not None
        pd.testing.assert_frame_equal(S.per_step_reference(jobs), _per_step_by_groupby(jobs), check_exact=True)
        gap = jobs.iloc[1:]
        assert S._per_step_dense(gap, "exec_ns", "run_id") is None
        pd.testing.assert_frame_equal(S.per_step_reference(gap), _per_step_by_groupby(gap), check_exact=True)
        twice = pd.concat([jobs.iloc[1:], jobs.iloc[2:3]])
        assert S._per_step_dense(twice, "exec_ns", "run_id") is None


def test_a_quantile_over_runs_is_the_quantile_of_the_same_draws():
    """pNN over per-run samples (the rank path) gives, replicate for replicate, np.quantile of
    the values the generic path draws with the same generator calls; median and max unchanged."""
    from xtalk.analysis.stats import _resample_runs_many

    rng = np.random.default_rng(5)
    groups = [np.round(rng.lognormal(0, 0.4, n) * 1e3) for n in (300, 280, 310)]
    got = _resample_runs_many(groups, ("median", "p99", "max", "p90"), 64, np.random.default_rng(9))
    draw = np.random.default_rng(9)
    sizes = np.array([len(g) for g in groups])
    m, k, flat = int(np.median(sizes)), len(groups), np.concatenate(groups)
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    runs = draw.integers(0, k, size=(64, k))
    pick = (draw.random((64, k, m)) * sizes[runs][:, :, None]).astype(np.int64) + offsets[runs][:, :, None]
    sample = flat[pick.reshape(64, k * m)]
    assert np.array_equal(got["median"], np.median(sample, axis=1))
    assert np.array_equal(got["max"], sample.max(axis=1))
    assert np.allclose(got["p99"], np.quantile(sample, 0.99, axis=1), rtol=0, atol=1e-9)
    assert np.allclose(got["p90"], np.quantile(sample, 0.90, axis=1), rtol=0, atol=1e-9)
    ci = S.ratio_ci([g * 1.5 for g in groups], groups, "p99")
    assert ci.estimate == pytest.approx(1.5) and ci.low <= 1.5 <= ci.high


def test_ranks_drawn_in_blocks_for_many_samples_are_each_samples_own():
    """_resample_runs_shared draws the picks once (in cache-sized blocks of replicates, over
    several chunks) for samples of the same run sizes: each sample's replicates are those of
    its own _resample_runs_many from the same generator state, and both are the value path's
    (16-bit ranks sorted; more pooled values than int16 holds, partitioned)."""
    g = np.random.default_rng(11)
    for sizes in ((200,) * 50, (3000, 2900, 3100) * 4):
        samples = [[g.normal(2e5, 1e4, n).round() for n in sizes] for _ in range(3)]
        shared = S._resample_runs_shared(samples, ("median", "max"), 900, np.random.default_rng(4))
        for groups, got in zip(samples, shared):
            own = S._resample_runs_many(groups, ("median", "max"), 900, np.random.default_rng(4))
            for stat in ("median", "max"):
                np.testing.assert_array_equal(got[stat], own[stat])
                np.testing.assert_array_equal(own[stat], _resample_by_value(groups, stat, 900, np.random.default_rng(4)))


def test_a_quantile_of_sorted_values_is_numpys():
    """quantile_of_sorted reads np.quantile's two neighbours and interpolates as numpy does:
    the same float for the report's levels and others, one or two values, ties, infinities;
    NaN (sorted last) is numpy's own."""
    g = np.random.default_rng(12)
    for trial in range(3000):
        n = int(g.integers(1, 12)) if trial % 2 else int(g.integers(1, 4000))
        v = [g.normal(0, 1, n), g.integers(0, 50, n).astype(float), g.lognormal(12, 2, n)][trial % 3]
        if trial % 7 == 0:
            v[g.integers(0, n)] = np.inf
        v.sort()
        for q in (0.0, 0.5, 0.99, 0.999, 1.0, float(g.random())):
            with np.errstate(invalid="ignore"):
                want, got = float(np.quantile(v, q)), S.quantile_of_sorted(v, q)
            assert got == want or (np.isnan(got) and np.isnan(want)), (n, q)
    v = np.array([1.0, 2.0, np.nan])
    assert np.isnan(S.quantile_of_sorted(v, 0.5))


def test_aa_floor_with_each_samples_statistic_once_is_a_ratio_ci_per_pair():
    """aa_noise_floor computes each sample's statistic once for the pairs it is in: the
    pairs' ratios and intervals are those of a ratio_ci call per pair (the former path)."""
    g = np.random.default_rng(13)
    samples = [g.gamma(3, 1e4, 2000 + 100 * i).round() for i in range(4)]
    for stat in ("median", "max", "p99", "mean"):
        got = S.aa_noise_floor(samples, stat, n_boot=300, seed=5)
        rng = np.random.default_rng(5)
        arrs = [np.sort(s) for s in samples] if stat != "mean" else samples
        rows = [(i, j, S.ratio_ci(arrs[i], arrs[j], stat, level=0.95, n_boot=300, method="percentile", seed=rng))
                for i in range(4) for j in range(4) if i != j]
        want = pd.DataFrame([{"i": i, "j": j, "ratio": c.estimate, "ci_low": c.low, "ci_high": c.high} for i, j, c in rows])
        pd.testing.assert_frame_equal(got.pairs, want, check_exact=True)


@pytest.mark.parametrize("runs", [1, 3, 4])
def test_per_step_reference_of_rows_in_run_order_is_the_groupby(runs):
    """Rows run after run, each with the same increasing job indices (a store's scenario):
    the matrix is the column itself, each job's runs sorted as integers for the median; the
    groupby's table, odd and even run counts. A run out of order, or one with another job
    sequence, takes the general path, which agrees too."""
    g = np.random.default_rng(14)
    jobs = pd.DataFrame({"run_id": np.repeat(np.arange(runs) * 2 + 1, 60).astype(np.int8),
                         "job": np.tile(np.arange(60) * 3 + 5, runs),
                         "exec_ns": g.integers(1000, 1100, 60 * runs)})  # ties across runs
    assert S._run_major(jobs["job"].to_numpy(), jobs["run_id"].to_numpy()) is not None
    before = jobs.copy()
    pd.testing.assert_frame_equal(S.per_step_reference(jobs), _per_step_by_groupby(jobs), check_exact=True)
    pd.testing.assert_frame_equal(jobs, before)  # the rows are read, not sorted in place
    if runs == 1:
        return
    for other in (jobs.iloc[np.r_[60:120, 0:60, 120:60 * runs]],  # runs not in key order
                  jobs.assign(job=np.concatenate([np.arange(60)[::-1] * 3 + 5, np.tile(np.arange(60) * 3 + 5, runs - 1)]))):
        assert S._run_major(other["job"].to_numpy(), other["run_id"].to_numpy()) is None
        pd.testing.assert_frame_equal(S.per_step_reference(other).reset_index(drop=True),
                                      _per_step_by_groupby(other).reset_index(drop=True), check_exact=True)
