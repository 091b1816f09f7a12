"""Periodic disturbances seen through a periodic victim (issue 15, defect 5; seed 000 §5.3.2).

Planted data with a known answer: a disturber whose period is unrelated to the victim's,
Poisson spikes (no period, and never the victim's own period), the seed's two-level pattern
(big peaks every 10 small ones). Every random draw is seeded: the results are reproducible.
"""

import numpy as np
import pandas as pd
import pytest

from xtalk.analysis import spikes as S
from xtalk.analysis.periodicity import episodes, periodicity

MS = 1_000_000


def _jobs(exec_ns, period_ns, t0=10**12):
    n = len(exec_ns)
    job = np.arange(n)
    return pd.DataFrame({"run_id": "r0", "job": job, "warmup": job < 2, "release_ns": t0 + job * period_ns,
                         "exec_ns": np.asarray(exec_ns, dtype=np.int64), "period_ns": period_ns})


def _disturbed(n, victim_ns, hits_ns, amp_ns, rng):
    """Execution times of a victim whose job k runs during [k·P, (k+1)·P): a disturbance at
    time s slows the job it falls in by ``amp_ns``."""
    exec_ns = 2 * MS + rng.normal(0, 20_000, n)
    k = (np.asarray(hits_ns) // victim_ns).astype(np.int64)
    keep = k < n
    np.add.at(exec_ns, k[keep], np.broadcast_to(amp_ns, k.shape)[keep])
    return exec_ns, np.unique(k[keep])


def test_disturber_unrelated_to_the_victims_period_is_found():
    # Victim 10 ms, disturber 37.3 ms with 0.5 ms of jitter: 3.73 jobs apart, never a multiple.
    rng = np.random.default_rng(11)
    victim, n = 10 * MS, 3_000
    hits = np.arange(3.1 * MS, n * victim, 37.3 * MS) + rng.normal(0, 0.5 * MS, 805)[: len(np.arange(3.1 * MS, n * victim, 37.3 * MS))]
    exec_ns, hit_jobs = _disturbed(n, victim, hits, 600_000, rng)
    per = S.spike_periods(S.detect_spikes(_jobs(exec_ns, victim))).set_index("cls")
    assert list(per.index) == ["all"]
    row = per.loc["all"]
    assert row["periodic"] and row["confidence"] >= 0.99
    assert row["period_ns"] == pytest.approx(37.3 * MS, rel=0.001)
    assert row["period_jobs"] == pytest.approx(3.73, rel=0.001)
    # Sampling at 10 ms smears the phase by ±0.13 cycle: regular, not perfectly so.
    assert 0.7 < row["regularity"] < 0.95
    assert row["coverage"] > 0.95


@pytest.mark.parametrize("seed", range(6))
def test_poisson_spikes_have_no_period(seed):
    rng = np.random.default_rng(100 + seed)
    victim, n = 10 * MS, 3_000
    hits = np.cumsum(rng.exponential(400 * MS, 200))  # about 75 spikes, at random
    exec_ns, hit_jobs = _disturbed(n, victim, hits, 600_000, rng)
    row = S.spike_periods(S.detect_spikes(_jobs(exec_ns, victim))).set_index("cls").loc["all"]
    assert row["n_spikes"] == hit_jobs.size > 40
    assert not row["periodic"] and np.isnan(row["period_ns"]) and np.isnan(row["period_jobs"])
    assert row["reason"].startswith("no significant period")
    assert row["p_value"] >= 0.01
    # Never the victim's own period (the lattice every spike sits on) reported as regular.
    assert row["best_period_ns"] >= 2 * victim


def test_seed_two_level_pattern_nine_small_between_big():
    # Seed 000 §5.3.2: 20 peaks in 625 s at any task period; 9 small between two big. Over
    # 4 × 625 s there are 8 big peaks, enough to test the big ones' spacing on its own.
    rng = np.random.default_rng(5)
    victim = 50 * MS
    n = int(4 * 625_000 * MS / victim)
    t = np.arange(7_300 * MS, n * victim, 31_250 * MS) + rng.normal(0, 2 * MS, 80)
    amp = np.where(np.arange(t.size) % 10 == 9, 900_000, 250_000)
    exec_ns, _ = _disturbed(n, victim, t, amp, rng)
    per = S.spike_periods(S.detect_spikes(_jobs(exec_ns, victim))).set_index("cls")
    assert per.loc["all", "n_spikes"] == 80 and per.loc["big", "n_spikes"] == 8
    assert per["periodic"].all(), per[["p_value", "reason"]]
    assert per.loc["all", "period_ns"] == pytest.approx(31_250 * MS, rel=0.001)
    assert per.loc["small", "period_ns"] == pytest.approx(31_250 * MS, rel=0.001)
    assert per.loc["small", "coverage"] == pytest.approx(0.9, abs=0.03)  # every 10th is a big one
    assert per.loc["big", "period_ns"] == pytest.approx(312_500 * MS, rel=0.001)
    assert per.loc["big", "every_n"] == 10 and per.loc["big", "small_between"] == 9
    assert per.loc["big", "regularity"] == 1.0 and per.loc["big", "on_lattice"] == 1.0


def test_seed_run_of_625_s_reports_the_pattern_but_not_a_big_period():
    # One 625 s run holds only 2 big peaks: their spacing is reported, not called a period.
    victim = 125 * MS
    n = 5_000
    t = np.arange(20) * 31_250 * MS + 7_300 * MS
    amp = np.where(np.arange(20) % 10 == 9, 900_000, 250_000)
    exec_ns, _ = _disturbed(n, victim, t, amp, np.random.default_rng(6))
    per = S.spike_periods(S.detect_spikes(_jobs(exec_ns, victim))).set_index("cls")
    assert per.loc["all", "periodic"] and per.loc["all", "period_ns"] == pytest.approx(31_250 * MS, rel=0.002)
    assert per.loc["big", "every_n"] == 10 and per.loc["big", "small_between"] == 9
    assert not per.loc["big", "periodic"] and "fewer than 3" in per.loc["big", "reason"]


def test_periodic_but_random_amplitude_classes_big_spacing_not_significant():
    # Big spikes picked at random among periodic ones: the lattice is there, the spacing not.
    rng = np.random.default_rng(8)
    victim, n = 10 * MS, 6_000
    t = np.arange(5 * MS, n * victim, 200 * MS)
    amp = np.where(rng.random(t.size) < 0.15, 900_000, 250_000)
    exec_ns, _ = _disturbed(n, victim, t, amp, rng)
    per = S.spike_periods(S.detect_spikes(_jobs(exec_ns, victim))).set_index("cls")
    assert per.loc["all", "periodic"] and per.loc["all", "period_ns"] == pytest.approx(200 * MS, rel=0.001)
    assert not per.loc["big", "periodic"] and per.loc["big", "p_value"] >= 0.01


def test_periodicity_contract():
    assert episodes(np.array([3, 4, 5, 9, 11, 12])).tolist() == [3, 9, 11]
    few = periodicity([0.0, 10.0, 20.0], resolution=1.0)
    assert not few.periodic and few.reason.startswith("too few events")
    a = periodicity(np.arange(0, 1000, 7.0), resolution=1.0, seed=3)
    b = periodicity(np.arange(0, 1000, 7.0), resolution=1.0, seed=3)
    assert a == b and a.periodic and a.period == pytest.approx(7.0)
    with pytest.raises(ValueError, match="resolution"):
        periodicity([1.0], resolution=0)


def test_shared_null_gives_the_numbers_of_a_fresh_one():
    """Runs with the same span and as many episodes test against the same shuffles, drawn
    once (periodicity._NULLS): the p-values are those of a fresh draw, whatever came before."""
    from xtalk.analysis import periodicity as PM

    rng = np.random.default_rng(5)
    series = [np.sort(rng.choice(5000, 12, replace=False)).astype(float) * 1e6 for _ in range(3)]
    series.append(np.arange(12) * 400e6 + 3e6)  # periodic: the sequential test goes on to its Gumbel tail
    fresh = []
    for t in series:
        PM._NULLS.clear()
        fresh.append(periodicity(t, resolution=1e6, start=0.0, end=4999e6))
    PM._NULLS.clear()
    shared = [periodicity(t, resolution=1e6, start=0.0, end=4999e6) for t in series[::-1]][::-1]
    assert len(PM._NULLS) == 1
    assert [repr(x) for x in shared] == [repr(x) for x in fresh]  # repr: NaN fields compare equal


def _former_h_statistic(x, k, length, cand, nyq, lp, max_harmonics):
    """_h_statistic as it was: rfft's own zero padding of the counts minus their mean, the
    power of the whole spectrum."""
    from scipy import fft as sfft
    x = x - k / x.shape[1]
    spec = sfft.rfft(x, lp, axis=1)
    power = (spec.real**2 + spec.imag**2) / (k * (1.0 - k / length))
    z2 = np.zeros((x.shape[0], cand.size))
    best = np.full((x.shape[0], cand.size), -np.inf)
    best_m = np.zeros((x.shape[0], cand.size), dtype=np.int64)
    for m in range(1, max_harmonics + 1):
        q = int(np.searchsorted(cand, nyq // m, side="right"))
        if q == 0:
            break
        z2[:, :q] += 2.0 * power[:, m * cand[:q]]
        h = z2[:, :q] - (4.0 * m - 4.0)
        better = h > best[:, :q]
        np.maximum(best[:, :q], h, out=best[:, :q])
        best_m[:, :q][better] = m
    i = np.argmax(best, axis=1)
    rows = np.arange(x.shape[0])
    return best[rows, i], i, best_m[rows, i], power[:, cand]


@pytest.mark.parametrize(("length", "k", "coarse", "lo", "top"),
                         [(3000, 40, 1, 20, 900), (99990, 100, 15, 1069, 4221), (500, 7, 2, 3, 400)])
def test_the_h_statistic_of_padded_rows_is_the_former_one(length, k, coarse, lo, top):
    """Rows built padded in place and the power taken only at the bins read give the former
    numbers bit for bit (the test's p-values and periods depend on them)."""
    import xtalk.analysis.periodicity as P
    rng = np.random.default_rng(length)
    bins = -(-length // coarse)
    lp = P.sfft.next_fast_len(2 * 8 * bins)
    top = min(top, lp // 2)
    cand = np.arange(lo, top + 1, dtype=np.int64)
    rows = [rng.choice(length, k, replace=False) // coarse for _ in range(5)]
    x = np.stack([P._counts(r, bins) for r in rows])
    want = _former_h_statistic(x, k, length, cand, lp // 2, lp, 8)
    got = P._h_statistic(P._centred(rows, k, bins, lp), k, length, cand, lp // 2, 8)
    assert all(np.array_equal(a, b) for a, b in zip(got, want))
    one = P._h_statistic(P._centred(rows[:1], k, bins, lp), k, length, cand, lp // 2, 8)
    assert all(np.array_equal(a, b[:1]) for a, b in zip(one, want))


def test_the_fundamental_searched_in_a_window_is_the_full_search():
    """Consecutive candidates: the subharmonic found in a window around each target is the
    one the search among all candidates finds (ties and targets on integers included)."""
    import xtalk.analysis.periodicity as P

    def full(power, cand, i, keep=0.5):
        best = i
        for j in range(2, 64):
            target = cand[i] / j
            if target < cand[0] - 1:
                break
            near = np.flatnonzero(np.abs(cand - target) <= 1.0)
            if near.size:
                c = int(near[np.argmax(power[near])])
                if power[c] >= keep * power[i]:
                    best = c
        return best

    rng = np.random.default_rng(3)
    for lo, n in ((1, 400), (50, 3000), (1069, 3153), (7, 12)):
        cand = np.arange(lo, lo + n, dtype=np.int64)
        for _ in range(40):
            power = rng.choice([0.0, 1.0, 2.0, 5.0], size=n) if rng.random() < 0.5 else rng.exponential(size=n)
            i = int(rng.integers(n))
            assert P._fundamental(power, cand, i) == full(power, cand, i)
    gaps = np.array([3, 5, 8, 9, 20, 21, 40], dtype=np.int64)  # not consecutive: the full search
    assert P._fundamental(np.ones(7), gaps, 6) == full(np.ones(7), gaps, 6)
