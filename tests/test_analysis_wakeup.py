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
    assert s["rel_ns"].tolist() == [0, 5, -3, 10]
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
