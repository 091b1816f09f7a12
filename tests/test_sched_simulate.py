"""Simulator: seed examples, level-1 policies, and cross-checks against exact analyses."""

from __future__ import annotations

import numpy as np
import pytest

from xtalk.sched.generate import uunifast
from xtalk.sched.prm import PeriodicResource, prm_response_times, prm_schedulable
from xtalk.sched.simulate import SimPartition, gantt, simulate
from xtalk.sched.taskset import Task, hyperperiod
from xtalk.sched.uniproc import edf_demand_test, response_time_analysis
from xtalk.sched.vm import check_vm

TABLE41 = [Task("T1", 1, 4), Task("T2", 1, 5), Task("T3", 3, 9), Task("T4", 3, 18)]
VM1 = [Task("T1", 300, 1500), Task("T2", 500, 2000)]
VM2 = [Task("T3", 300, 1200), Task("T4", 400, 2400)]
PERIODS = [10, 20, 30, 40, 60, 120]  # divisors of 120: hyperperiod ≤ 120 ms


def test_table41_rm_schedule_matches_example_41():
    res = simulate([SimPartition("cpu", TABLE41)], 180)
    assert res.max_response_by_task().to_dict() == {"T1": 1, "T2": 2, "T3": 7, "T4": 18}
    assert res.deadline_miss_ratio == 0
    j41 = res.jobs[(res.jobs.task == "T4") & (res.jobs.job == 0)].iloc[0]
    assert (j41.start, j41.finish) == (7, 18)  # "J4,1 starts at 7 … completes at 18"


def test_table41_edf_switches_j31_and_j22():
    res = simulate([SimPartition("cpu", TABLE41, local="edf")], 180)
    j31 = res.jobs[(res.jobs.task == "T3") & (res.jobs.job == 0)].iloc[0]
    j22 = res.jobs[(res.jobs.task == "T2") & (res.jobs.job == 1)].iloc[0]
    assert j31.finish < j22.finish  # seed 001 Example 4.3: at 5, J3,1 (d = 9) beats J2,2 (d = 10)
    assert res.deadline_miss_ratio == 0


@pytest.mark.parametrize("policy", ["ps", "ds", "cbs"])
def test_table43_case_study_no_miss(policy):
    for tasks in (VM1, VM2):
        h = hyperperiod([t.period for t in tasks])
        res = simulate([SimPartition("VM", tasks, budget=160, period=200)], 3 * h, policy=policy)
        assert len(res.jobs) > 0 and res.deadline_miss_ratio == 0
        assert check_vm("VM", PeriodicResource(200, 160), tasks, []).schedulable
        bounds = dict((t.name, r) for t, r in prm_response_times(tasks, PeriodicResource(200, 160)))
        for name, r in res.max_response_by_task().items():
            assert r <= bounds[name] + 1e-9


def test_fifo_starves_equal_priority_vm_and_servers_isolate():
    loop = SimPartition("VM2", [Task("loop", 1000, 1000)])
    rt = SimPartition("VM1", [Task("T1", 500, 1000)])
    fifo = simulate([loop, rt], 10_000, policy="fifo")  # seed 001 Fig. 4.4
    assert fifo.miss_ratio_by_task()["T1"] == 1.0
    rr = simulate([loop, rt], 10_000, policy="rr", quantum=100)
    assert rr.miss_ratio_by_task()["T1"] == 0.0
    loop.budget, loop.period = 100, 250
    rt.budget, rt.period = 150, 250
    for policy in ("ps", "ds", "cbs"):
        iso = simulate([loop, rt], 10_000, policy=policy)
        assert iso.miss_ratio_by_task()["T1"] == 0.0, policy


def test_periodic_server_idles_but_deferrable_keeps_budget():
    hp = SimPartition("hp", [Task("h", 1, 10)], budget=2, period=10)
    lp = SimPartition("lp", [Task("l", 8, 10)], budget=8, period=10)
    ps = simulate([hp, lp], 10, policy="ps")
    idle = [iv for iv in ps.intervals if iv[0] == "hp" and iv[1] is None]
    assert idle and idle[0][3] - idle[0][2] == pytest.approx(1)  # hp burns its second unit
    ds = simulate([hp, lp], 10, policy="ds")
    assert not [iv for iv in ds.intervals if iv[1] is None]


def test_overhead_injection_and_random_execution():
    base = simulate([SimPartition("cpu", TABLE41)], 36)
    oh = simulate([SimPartition("cpu", TABLE41)], 36, overhead=0.385)
    assert oh.max_response_by_task()["T1"] == pytest.approx(1.385)
    assert oh.deadline_miss_ratio > base.deadline_miss_ratio  # T4 had no slack
    a = simulate([SimPartition("cpu", TABLE41)], 36, exec_fraction=(0.5, 1), rng=np.random.default_rng(1))
    b = simulate([SimPartition("cpu", TABLE41)], 36, exec_fraction=(0.5, 1), rng=np.random.default_rng(1))
    assert a.jobs.equals(b.jobs) and a.max_response_by_task()["T4"] < 18


def test_bad_arguments():
    with pytest.raises(ValueError, match="policy"):
        simulate([SimPartition("cpu", TABLE41)], 10, policy="lottery")
    with pytest.raises(ValueError, match="budget"):
        simulate([SimPartition("cpu", TABLE41)], 10, policy="cbs")
    with pytest.raises(ValueError, match="dedicated"):
        simulate([SimPartition("a", TABLE41), SimPartition("b", TABLE41)], 10)


def test_gantt_png(tmp_path):
    res = simulate([SimPartition("VM1", VM1, budget=160, period=200)], 6000, policy="cbs")
    out = tmp_path / "g.png"
    gantt(res, str(out))
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _random_set(rng: np.random.Generator, constrained: bool) -> list[Task]:
    n = int(rng.integers(2, 6))
    utils = uunifast(n, float(rng.uniform(0.5, 1.05)), rng)
    tasks = []
    for i, u in enumerate(utils):
        p = float(rng.choice(PERIODS))
        e = max(0.001, round(u * p, 3))  # on the simulator's 1 µs grid
        d = p
        if constrained and rng.random() < 0.5:
            d = round(float(rng.uniform(min(e * 1.5, p), p)), 3)
        tasks.append(Task(f"t{i}", e, p, deadline=max(d, e)))
    return tasks


def test_rta_and_edf_demand_agree_with_simulation_on_1200_sets():
    """Synchronous release over the hyperperiod: RTA (constrained deadlines, FP) and the
    processor-demand test (EDF) are exact, so the simulator must agree both ways."""
    rng = np.random.default_rng(2024)
    agree_fp = agree_edf = 0
    n_sched = {"fp": 0, "edf": 0}
    for k in range(1200):
        tasks = _random_set(rng, constrained=True)
        h = hyperperiod([t.period for t in tasks])
        if k % 2 == 0:
            rta = response_time_analysis(tasks)
            ok = all(r.schedulable for r in rta)
            res = simulate([SimPartition("cpu", tasks)], h)
            first = res.jobs[res.jobs.job == 0].set_index("task")
            missed = bool(first["missed"].any())  # the critical instant is the first job
            assert ok == (not missed), [(t.wcet, t.period, t.d) for t in tasks]
            if ok:
                for r in rta:
                    assert first.loc[r.task.name, "response"] == pytest.approx(r.response, abs=1e-6)
                assert not res.jobs["missed"].any()
            agree_fp += 1
            n_sched["fp"] += ok
        else:
            ok, _ = edf_demand_test(tasks)
            res = simulate([SimPartition("cpu", tasks, local="edf")], h + max(t.d for t in tasks))
            assert ok == (not res.jobs["missed"].any()), [(t.wcet, t.period, t.d) for t in tasks]
            agree_edf += 1
            n_sched["edf"] += ok
    assert agree_fp + agree_edf == 1200
    # both verdicts occur often enough for the check to mean something
    assert 100 < n_sched["fp"] < 550 and 100 < n_sched["edf"] < 550


def test_prm_lemma_is_safe_for_servers_on_random_sets():
    rng = np.random.default_rng(99)
    checked = 0
    for _ in range(200):
        tasks = _random_set(rng, constrained=False)
        pi = float(rng.choice([2, 5, 10]))
        theta = round(float(rng.uniform(0.3, 1.0)) * pi, 3)
        g = PeriodicResource(pi, theta)
        if not prm_schedulable(tasks, g)[0]:
            continue
        checked += 1
        bounds = dict((t.name, r) for t, r in prm_response_times(tasks, g))
        for policy in ("ps", "ds", "cbs"):
            res = simulate([SimPartition("vm", tasks, budget=theta, period=pi)], 2 * hyperperiod([t.period for t in tasks]), policy=policy)
            assert not res.jobs["missed"].any()
            for name, r in res.max_response_by_task().items():
                assert r <= bounds[name] + 1e-6
    assert checked > 20
