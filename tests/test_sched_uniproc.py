"""Uniprocessor tests of seed 001 §4.2 and §4.5."""

from __future__ import annotations

import math

import pytest

from xtalk.sched.taskset import Task
from xtalk.sched.uniproc import (
    SEED001_OVERHEAD,
    ReleaseOverhead,
    demand_bound,
    edf_demand_test,
    edf_utilization_test,
    inflate,
    liu_layland_bound,
    response_time_analysis,
    rm_utilization_test,
    utilization,
)

TABLE41 = [Task("T1", 1, 4), Task("T2", 1, 5), Task("T3", 3, 9), Task("T4", 3, 18)]


def test_table41_rta_gives_seed_response_times():
    res = response_time_analysis(TABLE41)
    assert [r.response for r in res] == [1, 2, 7, 18]  # seed 001 Example 4.2
    assert all(r.schedulable for r in res)
    assert res[-1].slack == 0


def test_table41_utilisation_tests():
    assert utilization(TABLE41) == pytest.approx(171 / 180)
    assert liu_layland_bound(4) == pytest.approx(0.7568, abs=1e-4)  # seed: ≈ 0.76
    assert not rm_utilization_test(TABLE41)  # seed: the bound is only sufficient
    assert edf_utilization_test(TABLE41)
    assert edf_demand_test(TABLE41) == (True, None)
    assert liu_layland_bound(1000) == pytest.approx(math.log(2), abs=1e-3)


def test_rta_detects_a_miss():
    tasks = [Task("a", 2, 4), Task("b", 3, 6)]  # U = 1, b misses under RM
    res = response_time_analysis(tasks)
    assert res[0].schedulable and not res[1].schedulable and math.isinf(res[1].response)


def test_rta_with_blocking_and_jitter():
    hi = Task("hi", 1, 4, jitter=1)
    lo = Task("lo", 2, 10, blocking=1)
    r_hi, r_lo = response_time_analysis([hi, lo])
    assert r_hi.response == 2  # e + J
    assert r_lo.response == 5  # 2 + 1 + ⌈(R+1)/4⌉·1 converges at 5
    assert response_time_analysis([Task("x", 2, 10, blocking=9)])[0].schedulable is False


def test_explicit_priorities_and_deadline_monotonic():
    a, b = Task("a", 1, 10, deadline=3), Task("b", 2, 5)
    assert [r.task.name for r in response_time_analysis([a, b], order="dm")] == ["a", "b"]
    assert [r.task.name for r in response_time_analysis([a, b], order="rm")] == ["b", "a"]
    pa, pb = Task("a", 1, 10, priority=2), Task("b", 1, 5, priority=1)
    assert [r.task.name for r in response_time_analysis([pa, pb])] == ["b", "a"]


def test_edf_demand_constrained_deadlines():
    tasks = [Task("a", 2, 4, deadline=2), Task("b", 2, 5, deadline=3)]
    assert demand_bound(tasks, 3) == 4
    ok, t = edf_demand_test(tasks)
    assert not ok and t == 3
    assert edf_demand_test([Task("a", 2, 4), Task("b", 3, 5)]) == (False, None)  # U > 1


def test_overhead_inflation_seed_values():
    assert SEED001_OVERHEAD.total == pytest.approx(0.385)  # 250 + 40 + 75 + 20 µs
    inflated = inflate(TABLE41, SEED001_OVERHEAD)
    assert [t.wcet for t in inflated] == pytest.approx([1.385, 1.385, 3.385, 3.385])
    assert inflate(TABLE41, 0.5)[0].wcet == 1.5
    with pytest.raises(ValueError):
        inflate(TABLE41, -1)
    assert ReleaseOverhead(1, 2, 3, 4).total == 10
    # inflation can break schedulability: T4 had zero slack
    assert not response_time_analysis(inflated)[-1].schedulable


def test_edf_demand_with_jitter_and_blocking():
    base = [Task("a", 2, 5), Task("b", 2, 10)]
    assert edf_demand_test(base)[0]
    # jitter moves a's first deadline earlier within the window: dbf(3) = 2 ≤ 3 still fine
    assert demand_bound([Task("a", 2, 5, jitter=2)], 3) == 2
    assert edf_demand_test([Task("a", 2, 5, jitter=2), Task("b", 2, 10)])[0]
    # blocking of 2.5 on a (d = 5): 2 + 2.5 ≤ 5 but with b's demand at 10: 6 + 2.5 ≤ 10
    assert edf_demand_test([Task("a", 2, 5, blocking=2.5), Task("b", 2, 10)])[0]
    ok, t = edf_demand_test([Task("a", 2, 5, blocking=3.5), Task("b", 2, 10)])
    assert not ok and t == 5
