"""Tests for xtalk.analysis.verdict: misses, serious misses, ε verdicts and spec errors."""

import re

import numpy as np
import pandas as pd
import pytest

from xtalk.analysis import verdict as V

P = 10_000_000  # 10 ms
D = 8_000_000


def _jobs(exec_ns, *, response_extra=None, run_id="r0", warmup=0):
    exec_ns = np.asarray(exec_ns, dtype=np.int64)
    n = exec_ns.size
    job = np.arange(n)
    release = 10**12 + job * P
    start = release + (0 if response_extra is None else np.asarray(response_extra, dtype=np.int64))
    end = start + exec_ns
    return pd.DataFrame({
        "run_id": run_id, "job": job, "warmup": job < warmup, "release_ns": release,
        "wakeup_ns": release, "start_ns": start, "end_ns": end, "deadline_ns": D, "period_ns": P,
        "exec_ns": exec_ns, "response_ns": end - release,
    })


def test_serious_miss_definition():
    # end − release: 5 ms ok, 9 ms missed, 19.9 ms missed (done within the next period),
    # 20 ms exactly at the end of the next period (not serious), 21 ms serious.
    df = _jobs([5_000_000, 9_000_000, 19_900_000, 20_000_000, 21_000_000])
    c = V.classify_misses(df)
    assert c["missed"].tolist() == [False, True, True, True, True]
    assert c["serious"].tolist() == [False, False, False, False, True]
    assert c["lateness_ns"].tolist()[0] == -3_000_000
    assert c["responsiveness"].iloc[0] == pytest.approx(5 / 8)


def test_deadline_misses_counts_lost_jobs_as_serious():
    df = _jobs([1_000_000] * 8 + [9_000_000, 25_000_000], warmup=2)
    df = df.drop(index=4)  # job 4 never executed
    t = V.deadline_misses(df).iloc[0]
    assert t["n_jobs"] == 7  # 10 − 2 warm-up − 1 lost
    assert t["n_missed"] == 2 and t["miss_ratio"] == pytest.approx(2 / 7)
    assert t["n_lost"] == 1 and t["n_serious"] == 2  # one late by > 2P, one lost
    assert t["serious_ratio"] == pytest.approx(2 / 8)
    assert t["max_lateness_ns"] == 25_000_000 - D
    assert t["miss_ci_low"] < 2 / 7 < t["miss_ci_high"]


def test_wilson_interval_near_zero():
    lo, hi = V._wilson(0, 1000)
    assert lo == pytest.approx(0.0, abs=1e-12) and hi == pytest.approx(0.00383, abs=1e-4)


def test_deadline_misses_per_run():
    df = pd.concat([_jobs([1_000_000] * 10, run_id="a"), _jobs([9_000_000] * 10, run_id="b")])
    t = V.deadline_misses(df)
    assert t["run_id"].tolist() == ["a", "b"] and t["n_missed"].tolist() == [0, 10]


def _normal_jobs(rng, n, mean, sd=10_000.0):
    return _jobs(np.round(rng.normal(mean, sd, n)).astype(np.int64))


def test_absolute_verdicts_holds_violated_inconclusive():
    rng = np.random.default_rng(0)
    scen = _normal_jobs(rng, 2000, 1_000_000)
    med = float(np.median(scen["exec_ns"]))
    holds = V.epsilon_verdict(None, scen, {"metric": "exec", "statistic": "median", "bound_ns": 1_010_000}, seed=1)
    viol = V.epsilon_verdict(None, scen, {"metric": "exec", "statistic": "median", "bound_ns": 990_000}, seed=1)
    inc = V.epsilon_verdict(None, scen, {"metric": "exec", "statistic": "median", "bound_ns": med}, seed=1)
    assert holds["verdict"].iloc[0] == "holds"
    assert viol["verdict"].iloc[0] == "violated"
    assert inc["verdict"].iloc[0] == "inconclusive"
    r = inc.iloc[0]
    assert r["ci_low_ns"] < r["bound_ns"] < r["ci_high_ns"] and r["observed_ns"] == med


def test_max_verdict_is_factual_for_observed_exceedance():
    rng = np.random.default_rng(1)
    scen = _normal_jobs(rng, 1000, 1_000_000)
    mx = int(scen["exec_ns"].max())
    over = V.epsilon_verdict(None, scen, V.EpsilonSpec(bound_ns=mx - 1), seed=0).iloc[0]
    assert over["verdict"] == "violated"  # one job above the bound is enough
    under = V.epsilon_verdict(None, scen, V.EpsilonSpec(bound_ns=mx), seed=0).iloc[0]
    assert under["verdict"] == "holds" and under["ci_high_ns"] == mx


def test_relative_verdicts_use_ratio_ci():
    rng = np.random.default_rng(2)
    solo = _normal_jobs(rng, 1500, 1_000_000, 20_000)
    slow = _normal_jobs(rng, 1500, 1_500_000, 30_000)
    same = _normal_jobs(rng, 1500, 1_200_000, 24_000)
    spec = {"metric": "exec", "statistic": "median", "relative": 1.2}
    assert V.epsilon_verdict(solo, slow, spec, seed=3)["verdict"].iloc[0] == "violated"
    assert V.epsilon_verdict(solo, slow, dict(spec, relative=2.0), seed=3)["verdict"].iloc[0] == "holds"
    r = V.epsilon_verdict(solo, same, spec, seed=3).iloc[0]
    assert r["verdict"] == "inconclusive"
    assert r["ratio_ci_low"] < 1.2 < r["ratio_ci_high"]
    assert r["bound_ns"] == pytest.approx(1.2 * r["solo_ns"]) and r["bound_kind"] == "relative"


def test_relative_max_on_response_time_with_derived_column():
    rng = np.random.default_rng(4)
    solo = _jobs(rng.integers(900_000, 1_000_000, 500), response_extra=50_000)
    scen = _jobs(rng.integers(1_800_000, 2_000_000, 500), response_extra=50_000).drop(columns="response_ns")
    v = V.epsilon_verdicts(solo, scen, [{"metric": "response", "statistic": "max", "relative": 1.2},
                                        {"metric": "response", "statistic": "max", "relative": 3.0}], seed=5)
    assert v["verdict"].tolist() == ["violated", "holds"]
    assert v["observed_ns"].iloc[0] == float((scen["end_ns"] - scen["release_ns"]).max())


@pytest.mark.parametrize(
    "spec, field",
    [
        ({"metric": "cpu", "bound_ns": 1}, "EpsilonSpec.metric"),
        ({"statistic": "p200", "bound_ns": 1}, "EpsilonSpec.statistic"),
        ({"statistic": "worst", "bound_ns": 1}, "EpsilonSpec.statistic"),
        ({"bound_ns": 1, "relative": 1.2}, "EpsilonSpec.bound_ns / EpsilonSpec.relative"),
        ({}, "EpsilonSpec.bound_ns / EpsilonSpec.relative"),
        ({"bound_ns": -5}, "EpsilonSpec.bound_ns"),
        ({"bound_ns": float("nan")}, "EpsilonSpec.bound_ns"),
        ({"relative": 0}, "EpsilonSpec.relative"),
        ({"relative": 1.2, "level": 2}, "EpsilonSpec.level"),
        ({"bound": 5}, "EpsilonSpec.bound"),
    ],
)
def test_bad_epsilon_spec_names_the_field(spec, field):
    scen = _jobs([1_000_000] * 20)
    with pytest.raises(ValueError, match=re.escape(field)):
        V.epsilon_verdict(scen, scen, spec)


def test_relative_needs_solo_and_missing_columns_are_errors():
    scen = _jobs([1_000_000] * 20)
    with pytest.raises(ValueError, match="solo"):
        V.epsilon_verdict(None, scen, {"relative": 1.2})
    with pytest.raises(ValueError, match="exec_ns"):
        V.epsilon_verdict(None, scen.drop(columns=["exec_ns", "start_ns"]), {"bound_ns": 5})
    with pytest.raises(ValueError, match="period_ns"):
        V.deadline_misses(scen.drop(columns="period_ns"))


def test_wilson_bounds_are_exact_at_the_ends():
    from xtalk.analysis.verdict import _wilson
    assert _wilson(0, 600)[0] == 0.0 and 0 < _wilson(0, 600)[1] < 0.01
    assert _wilson(600, 600)[1] == 1.0 and 0.99 < _wilson(600, 600)[0] < 1
    lo, hi = _wilson(30, 600)
    assert lo < 0.05 < hi


def test_a_relative_epsilon_is_judged_on_the_runs_like_the_slowdown_beside_it():
    """One run of three twice as slow: the jobs of a run are not independent, so the ε on the
    median ratio is inconclusive (the runs' interval straddles the bound), where a job-level
    interval would have called it held; without run ids the pooled interval is kept."""
    g = np.random.default_rng(3)

    def frame(factors):
        return pd.DataFrame({"run_id": np.repeat([f"r{i}" for i in range(len(factors))], 300),
                             "exec_ns": np.concatenate([g.normal(1e6 * f, 2e4, 300) for f in factors])})

    solo, scen = frame([1.0, 1.0, 1.0]), frame([1.0, 1.0, 2.0])
    spec = {"metric": "exec", "statistic": "median", "relative": 1.5}
    by_runs = V.epsilon_verdict(solo, scen, spec, n_boot=1000, seed=0).iloc[0]
    assert by_runs["verdict"] == V.INCONCLUSIVE, by_runs
    assert by_runs["ratio_ci_low"] < 1.5 < by_runs["ratio_ci_high"]
    pooled = V.epsilon_verdict(solo.drop(columns="run_id"), scen.drop(columns="run_id"), spec, n_boot=1000,
                                seed=0).iloc[0]
    assert pooled["verdict"] == V.HOLDS and pooled["ratio_ci_high"] < 1.5
