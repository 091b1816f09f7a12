"""VM-level analysis and budget synthesis (seed 001 §4.4, Example 4.4, Table 4.3)."""

from __future__ import annotations

import math

import pytest

from xtalk.sched.prm import PeriodicResource, prm_schedulable
from xtalk.sched.taskset import Task
from xtalk.sched.vm import (
    alpha,
    analyse_vms,
    check_vm,
    execution_length,
    synthesize_budget,
    synthesize_highest_priority,
    vm_response_time,
    worst_case_demand,
)

# Table 4.2 with the corrected u_2 = 2/5 (e_2 = 2, p_2 = 5)
ESC = [Task("T1", 1, 5, 2.5), Task("T2", 2, 5, 5)]
EM = [Task("T3", 1, 20, 7), Task("T4", 3, 20, 10), Task("T5", 4, 40, 40)]
VM1 = [Task("T1", 300, 1500), Task("T2", 500, 2000)]
VM2 = [Task("T3", 300, 1200), Task("T4", 400, 2400)]


def test_example_44_budget_synthesis():
    syn = synthesize_highest_priority(ESC)
    assert syn.period == 2.5  # Eq. 4.12: Π = d_min
    (step,) = syn.steps
    assert step.omega == 3  # Eq. 4.5: 1 + 2
    assert step.root == pytest.approx(1.76, abs=0.005)  # Eq. 4.15 positive root
    assert step.delta == pytest.approx(-0.52, abs=0.005)  # Eq. 4.16
    assert step.eta == 2  # Eq. 4.17
    assert step.refined == pytest.approx(1.5, abs=1e-9)
    assert syn.budget == pytest.approx(1.5)
    assert syn.check.schedulable
    # Eq. 4.6 at Θ = 1.5 holds with equality: 1·1.5 + min(1.5, 1.5) = 3
    tc = syn.check.tasks[1]
    assert (tc.k, tc.lhs) == (1, pytest.approx(3.0))
    # one notch less budget fails
    assert not check_vm("V1", PeriodicResource(2.5, 1.49), ESC, []).schedulable


def test_lower_priority_vm_budget():
    hp = [PeriodicResource(10, 2)]
    tasks = [Task("a", 1, 20), Task("b", 2, 40)]
    theta = synthesize_budget(tasks, 10, hp)
    assert theta is not None
    c = check_vm("V2", PeriodicResource(10, theta), tasks, hp)
    assert c.schedulable and c.omega == pytest.approx(theta + 2)
    assert not check_vm("V2", PeriodicResource(10, theta - 0.01), tasks, hp).schedulable


def test_example_44_em_cannot_share_what_esc_leaves():
    # EM's T4 needs ω = 4 within d = 10 while VM1 (1.5, 2.5) leaves 40 %: the
    # conservative conditions (4.4)/(4.6) admit no period for the second VM
    hp = [PeriodicResource(2.5, 1.5)]
    assert all(synthesize_budget(EM, pi, hp) is None for pi in (2, 3, 4, 5, 6, 7))


def test_table43_case_study_corrected():
    for tasks in (VM1, VM2):
        c = check_vm("VM", PeriodicResource(200, 160), tasks, [])
        assert c.schedulable  # the seed's verdict with Θ = 160, Π = 200
        assert not c.e_min_ok  # Θ = 160 < e_min = 300: the seed's setting ignores Eq. 4.3
        assert prm_schedulable(tasks, PeriodicResource(200, 160))[0]
    c1 = check_vm("VM1", PeriodicResource(200, 160), VM1, [])
    # k uses Π − Θ (§4.4.2), ω_2 = 500 + ⌈2000/1500⌉·300 = 1100 (the seed prints 8 and 800)
    assert [(t.omega, t.k) for t in c1.tasks] == [(300, 7), (1100, 9)]
    assert [t.lhs for t in c1.tasks] == [7 * 160 + 60, 9 * 160 + 160]
    # "Θ = 160 could be reduced": the smallest budget is lower
    theta = synthesize_budget(VM1, 200, require_e_min=False)
    assert theta is not None and 100 < theta < 160
    assert synthesize_budget(VM1, 200) is None  # Eq. 4.3 cannot hold: e_min = 300 > Π


def test_two_vms_on_one_cpu_overload():
    res = analyse_vms([("VM1", PeriodicResource(200, 160), VM1), ("VM2", PeriodicResource(200, 160), VM2)])
    assert res[0].schedulable and not res[1].schedulable
    assert math.isinf(res[1].omega)


def test_equations_41_42_45_48():
    hp = [PeriodicResource(4, 1)]
    assert vm_response_time(2, hp) == 3  # t = 2 + ⌈t/4⌉·1 → 3
    assert execution_length(PeriodicResource(6, 2), 3) == 7
    assert worst_case_demand(ESC, 1) == 3
    assert worst_case_demand([Task("a", 1, 4), Task("b", 2, 10)], 1) == 2 + 3
    assert alpha(2, hp, 5) == 2 and alpha(2, hp, 2.5) == 1.5 and alpha(2, hp, 0.5) == 0
    assert alpha(3, [], 1.25) == 1.25  # highest-priority VM: α(t) = t
