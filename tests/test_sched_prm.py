"""Periodic resource model (seed 001 §2.3.4, Shin & Lee 2003)."""

from __future__ import annotations

import numpy as np
import pytest

from xtalk.sched.generate import generate_taskset
from xtalk.sched.prm import (
    PeriodicResource,
    interface_overhead,
    minimal_budget,
    prm_response_times,
    prm_schedulable,
    rbf,
    sbf,
    sbf_inverse,
    shin_lee_capacity,
)
from xtalk.sched.taskset import Task
from xtalk.sched.uniproc import response_time_analysis

TABLE41 = [Task("T1", 1, 4), Task("T2", 1, 5), Task("T3", 3, 9), Task("T4", 3, 18)]


def test_sbf_values():
    g = PeriodicResource(5, 2)  # blackout 2(Π − Θ) = 6
    assert [sbf(g, t) for t in (0, 2, 3, 6, 7, 8, 12, 13, 16)] == [0, 0, 0, 0, 1, 2, 3, 4, 4]
    assert sbf(PeriodicResource(5, 5), 7.5) == 7.5  # dedicated resource


def _supply(pattern_starts, theta, a, b):
    return sum(max(0.0, min(b, s + theta) - max(a, s)) for s in pattern_starts)


@pytest.mark.parametrize("pi,theta", [(5, 2), (10, 7), (4, 1)])
def test_sbf_is_the_worst_case_supply(pi, theta):
    rng = np.random.default_rng(1)
    # worst pattern: budget early in period 0, late afterwards; the window starts at Θ
    worst = [0] + [k * pi + pi - theta for k in range(1, 40)]
    for t in np.linspace(0, 8 * pi, 97):
        assert sbf(PeriodicResource(pi, theta), t) == pytest.approx(_supply(worst, theta, theta, theta + t))
    # any placement of the budget inside each period supplies at least sbf
    for _ in range(50):
        starts = [k * pi + rng.uniform(0, pi - theta) for k in range(40)]
        a = rng.uniform(0, 5 * pi)
        t = rng.uniform(0, 10 * pi)
        assert _supply(starts, theta, a, a + t) + 1e-9 >= sbf(PeriodicResource(pi, theta), t)


def test_sbf_inverse():
    g = PeriodicResource(5, 2)
    for w in (0.5, 1, 2, 3, 4, 7):
        t = sbf_inverse(g, w)
        assert sbf(g, t) == pytest.approx(w) and sbf(g, t - 1e-6) < w


def test_rbf_and_lemma21():
    assert rbf(TABLE41, 2, 9) == 3 * 1 + 2 * 1 + 3  # ⌈9/4⌉·1 + ⌈9/5⌉·1 + ⌈9/9⌉·3
    g = PeriodicResource(1, 1)
    ok, wit = prm_schedulable(TABLE41, g)
    assert ok
    for i, (t, task) in enumerate(zip(wit, TABLE41)):
        assert t <= task.d and sbf(g, t) >= rbf(TABLE41, i, t)
    # T4 has no slack: only t = 18 works, t = 16 (multiple of 4) is not enough
    assert sbf(g, 16) < rbf(TABLE41, 3, 16)
    assert not prm_schedulable(TABLE41, PeriodicResource(2, 1.5))[0]


def test_shin_lee_capacity_is_sufficient_and_minimal_budget_below():
    rng = np.random.default_rng(7)
    for _ in range(60):
        tasks = generate_taskset(rng, k=3, total=float(rng.uniform(0.2, 0.6)))
        pi = float(rng.uniform(2, 10))
        cap = shin_lee_capacity(tasks, pi)
        theta = minimal_budget(tasks, pi)
        if cap <= pi:
            assert prm_schedulable(tasks, PeriodicResource(pi, cap))[0]
            assert theta is not None and theta <= cap + 1e-6
        if theta is not None:
            assert prm_schedulable(tasks, PeriodicResource(pi, theta))[0]
            assert theta < 1e-5 or not prm_schedulable(tasks, PeriodicResource(pi, theta - 1e-3))[0]


def test_bandwidth_and_interface_overhead():
    g = PeriodicResource(200, 160)
    vm1 = [Task("T1", 300, 1500), Task("T2", 500, 2000)]
    assert g.bandwidth == 0.8
    assert interface_overhead(vm1, g) == pytest.approx(0.8 - 0.45)
    with pytest.raises(ValueError):
        PeriodicResource(10, 11)


def test_prm_response_times_match_rta_on_dedicated_resource():
    rt = [r for _, r in prm_response_times(TABLE41, PeriodicResource(3, 3))]
    assert rt == [r.response for r in response_time_analysis(TABLE41)]
    # table 4.3, VM1 on Γ(200, 160): blackout 80 then 160 per 200
    vm1 = [Task("T1", 300, 1500), Task("T2", 500, 2000)]
    assert [r for _, r in prm_response_times(vm1, PeriodicResource(200, 160))] == pytest.approx([420, 1040])
