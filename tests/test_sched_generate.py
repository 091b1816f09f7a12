"""Task-set generation: UUniFast(-Discard), seed 001 distributions, periods, seeding."""

from __future__ import annotations

import numpy as np
import pytest

from xtalk.sched.generate import (
    DISTRIBUTIONS,
    draw_periods,
    draw_utilizations,
    generate_taskset,
    generate_until_capacity,
    uunifast,
    uunifast_discard,
)


def test_uunifast_sums_and_is_seeded():
    u = uunifast(8, 0.7, np.random.default_rng(3))
    assert u.sum() == pytest.approx(0.7) and (u >= 0).all()
    assert np.array_equal(u, uunifast(8, 0.7, np.random.default_rng(3)))
    assert not np.array_equal(u, uunifast(8, 0.7, np.random.default_rng(4)))


def test_uunifast_is_uniform_on_the_simplex():
    # for n = 2 the first share is uniform on [0, U]
    rng = np.random.default_rng(0)
    first = np.array([uunifast(2, 1.0, rng)[0] for _ in range(4000)])
    assert abs(first.mean() - 0.5) < 0.02 and abs(np.median(first) - 0.5) < 0.03


def test_uunifast_discard_caps_each_task():
    u = uunifast_discard(4, 2.5, np.random.default_rng(1))
    assert u.sum() == pytest.approx(2.5) and (u <= 1).all()
    with pytest.raises(RuntimeError):
        uunifast_discard(2, 2.5, np.random.default_rng(1), max_tries=20)


@pytest.mark.parametrize(
    "dist, lo, hi, mean",
    [("uni-light", 0.001, 0.1, 0.0505), ("uni-medium", 0.1, 0.4, 0.25), ("exp-light", 0, 1, 0.10),
     ("bimo-light", 0.001, 0.9, (8 / 9) * 0.2505 + (1 / 9) * 0.7),
     ("bimo-medium", 0.001, 0.9, (6 / 9) * 0.2505 + (3 / 9) * 0.7)],
)
def test_distributions(dist, lo, hi, mean):
    u = draw_utilizations(20000, dist, np.random.default_rng(11))
    assert u.min() >= lo and u.max() <= hi
    assert u.mean() == pytest.approx(mean, rel=0.03)


def test_bimodal_shares():
    u = draw_utilizations(18000, "bimo-medium", np.random.default_rng(5))
    assert (u >= 0.5).mean() == pytest.approx(3 / 9, abs=0.015)
    with pytest.raises(ValueError):
        draw_utilizations(1, "heavy", np.random.default_rng(0))
    assert set(DISTRIBUTIONS) == {"uni-light", "uni-medium", "exp-light", "bimo-light", "bimo-medium"}


def test_periods():
    rng = np.random.default_rng(2)
    p = draw_periods(5000, rng)
    assert p.min() >= 10 and p.max() <= 100 and np.all(p == np.round(p))
    lp = draw_periods(5000, rng, "log-uniform", integer=False)
    assert lp.min() >= 10 and lp.max() <= 100
    # log-uniform: the geometric middle splits the mass
    assert (lp < np.sqrt(10 * 100)).mean() == pytest.approx(0.5, abs=0.03)
    assert set(draw_periods(200, rng, "choice", choices=[10, 20])) == {10.0, 20.0}
    with pytest.raises(ValueError):
        draw_periods(3, rng, "gaussian")


def test_generate_taskset_shapes():
    ts = generate_taskset(np.random.default_rng(9), m=2, k=3, dist="uni-light")
    assert len(ts) == 6 and all(0 < t.wcet <= 0.1 * t.period + 1e-9 for t in ts)
    ts = generate_taskset(np.random.default_rng(9), k=4, total=0.8)
    assert sum(t.utilization for t in ts) == pytest.approx(0.8)
    cap = generate_until_capacity(np.random.default_rng(1), 2.0, "uni-medium")
    assert sum(t.utilization for t in cap) <= 2.0 and len(cap) >= 4
