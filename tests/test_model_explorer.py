"""Interference explorer: seed 000 example, brute-force cross-check, witnesses, penalties."""

from __future__ import annotations

import numpy as np
import pytest

from xtalk.model.bruteforce import enumerate_maxima
from xtalk.model.examples import SEED000_QUERY, seed000_platform
from xtalk.model.explorer import explore, replay
from xtalk.model.penalty import inflated_wcet_ns, interference_time_ns, joint_penalty_ns
from xtalk.model.platform import load_platform, platform_from_dict
from xtalk.sched.inputs import InputError

EXAMPLE = "examples/models/seed000-example.toml"


def test_example_file_matches_code():
    assert load_platform(EXAMPLE) == seed000_platform()


@pytest.mark.parametrize("warm", [True, False])
def test_seed_example_agrees_with_seed_bound(warm):
    res = explore(seed000_platform(warm_start=warm))
    task, comp, seg, bound = SEED000_QUERY
    # seed 000 §4.4: A[] not (nb_interferences_L2[0,SP0] > 3) holds
    assert res.holds(task, comp, seg, bound)
    # the exact maximum is reachable (so a tighter query fails) and at most μ = 2
    m = res.max(task, comp, seg)
    assert 1 <= m <= 2
    assert not res.holds(task, comp, seg, m - 1)
    # two requests of SP1 can each delay SP0 on the bus at most once per SP0 request
    assert res.max("SP0", "AHB", 0) == 2
    # segments where only one task sends requests see no bus interference
    assert res.max("SP0", "AHB", 1) == 0 and res.max("SP1", "AHB", 2) == 0
    assert res.seconds < 1.0


def test_warm_start_counts_the_first_access():
    cold = explore(seed000_platform(warm_start=False)).max("SP0", "L2", 0)
    warm = explore(seed000_platform(warm_start=True)).max("SP0", "L2", 0)
    assert (cold, warm) == (1, 2)


def test_witness_replays_to_the_maximum():
    res = explore(seed000_platform())
    for key, steps in res.witnesses.items():
        task, comp, seg = key
        gained = sum(n for s in steps if s.task == task for c, n in s.gains if c == comp)
        assert replay(res.compiled, steps)[key] == res.maxima[key]
        assert gained == res.maxima[key], (key, [str(s) for s in steps])


def _small(seed: int) -> dict:
    """A random small platform: 2–3 tasks, a bus, a 2-set 1–2-way cache, a DRAM bank."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 4))
    ways = int(rng.integers(1, 3))
    nseg = int(rng.integers(1, 3))
    tasks = []
    for t in range(n):
        segs = []
        for _ in range(nseg):
            # keep the brute force small: up to 2 requests only with 2 tasks and 1 segment
            mu = int(rng.integers(0, 3 if n == 2 and nseg == 1 else 2))
            addrs = [int(rng.integers(0, 8)) * 32 for _ in range(mu)]
            segs.append({"duration": float(rng.choice([5, 10])), "max_requests": mu, "addresses": addrs})
        path = ["bus", "L2", "B"] if rng.random() < 0.8 else ["L2", "B"]
        tasks.append({"name": f"T{t}", "core": t, "path": path, "segment": segs})
    return {
        "platform": {"cores": n},
        "transport": [{"name": "bus"}],
        "storage": [
            {"kind": "cache", "name": "L2", "sets": 2, "ways": ways, "line_bytes": 32,
             "policy": str(rng.choice(["lru", "fifo"])),
             "interference": str(rng.choice(["outcome", "state"]))},
            {"kind": "dram", "name": "B", "row_bytes": 64},
        ],
        "schedule": {"period": 20, "periods": 1, "warm_start": bool(rng.random() < 0.5)},
        "task": tasks,
    }


@pytest.mark.parametrize("seed", range(40))
def test_explorer_equals_bruteforce(seed):
    p = platform_from_dict(_small(seed))
    res = explore(p)
    bf = enumerate_maxima(p)
    for key, v in res.maxima.items():
        assert bf.maxima.get(key, 0) == v, key
    # the brute force finds nothing the explorer does not report
    for key, v in bf.maxima.items():
        assert v == 0 or res.maxima.get(key) == v, key
    # hashing + reduction never explores more states than there are complete paths × depth
    assert res.states >= 1


def test_bruteforce_on_seed_example():
    p = seed000_platform()
    res = explore(p)
    bf = enumerate_maxima(p)
    assert bf.paths > res.states  # the reduction really reduces
    assert all(bf.maxima[k] == v for k, v in res.maxima.items())


def test_unaligned_segments_share_epochs():
    d = _small(3)
    d["task"][0]["segment"] = [{"duration": 15, "max_requests": 2, "addresses": [0, 0]}]
    d["task"][1]["segment"] = [{"duration": 5, "max_requests": 1, "addresses": [64]},
                               {"duration": 10, "max_requests": 1, "addresses": [64]}]
    d["task"] = d["task"][:2]
    d["platform"]["cores"] = 2
    p = platform_from_dict(d)
    res = explore(p)
    bf = enumerate_maxima(p)
    assert len(res.compiled.epoch_bounds) == 4  # 0, 5, 15, 20
    for key, v in res.maxima.items():
        assert bf.maxima.get(key, 0) == v


def test_penalties_and_inflated_wcet():
    p = seed000_platform()
    res = explore(p)
    pen = {"AHB": 40.0, "L2": 20.0, "B": 60.0}
    t = interference_time_ns(res, pen, "SP0")
    expected = sum(v * pen[c] for (task, c, _), v in res.maxima.items() if task == "SP0")
    assert t == expected and t > 0
    assert inflated_wcet_ns(1000.0, res, pen, "SP0") == 1000.0 + t
    joint, jres = joint_penalty_ns(p, pen, "SP0")
    assert 0 < joint <= t  # the joint maximum never exceeds the sum of separate maxima
    assert jres.objective_witnesses and jres.objective_witnesses[0]


def test_penalty_errors_name_the_component():
    res = explore(seed000_platform())
    with pytest.raises(InputError, match="penalties.XBAR"):
        interference_time_ns(res, {"XBAR": 1.0, "AHB": 1, "L2": 1, "B": 1}, "SP0")
    with pytest.raises(InputError, match="penalties.B"):
        interference_time_ns(res, {"AHB": 1.0, "L2": 1.0}, "SP0")
    with pytest.raises(InputError, match="task"):
        interference_time_ns(res, {"AHB": 1.0, "L2": 1.0, "B": 1.0}, "NOPE")


def _symmetric(n: int, nseg: int, mu: int) -> dict:
    """n identical tasks whose lines collide in a 1-way cache: fully symmetric."""
    tasks = []
    for t in range(n):
        segs = [{"duration": 10, "max_requests": mu, "addresses": [t * 64 + (k % 2) * 32 for k in range(mu)]}
                for _ in range(nseg)]
        tasks.append({"name": f"T{t}", "core": t, "path": ["bus", "L2", "B"], "segment": segs})
    return {
        "platform": {"cores": n},
        "transport": [{"name": "bus"}],
        "storage": [{"kind": "cache", "name": "L2", "sets": 2, "ways": 1, "line_bytes": 32},
                    {"kind": "dram", "name": "B", "row_bytes": 64}],
        "schedule": {"period": 10 * nseg},
        "task": tasks,
    }


@pytest.mark.parametrize("n,nseg,mu", [(2, 2, 2), (3, 1, 2), (2, 1, 3)])
def test_symmetry_reduction_is_exact(n, nseg, mu):
    p = platform_from_dict(_symmetric(n, nseg, mu))
    full = explore(p, symmetry=False)
    red = explore(p, symmetry=True)
    assert red.compiled.sym_classes == [list(range(n))]
    assert red.maxima == full.maxima
    assert red.states < full.states
    if n * nseg * mu <= 4:  # the brute force grows too fast beyond this
        bf = enumerate_maxima(p)
        assert all(bf.maxima.get(k, 0) == v for k, v in red.maxima.items())
    # every witness, told with real task names, reaches the maximum of its own task
    for (task, comp, seg), steps in red.witnesses.items():
        got = sum(k for s in steps if s.task == task for c, k in s.gains if c == comp)
        assert got == red.maxima[(task, comp, seg)]
        assert replay(red.compiled, steps)[(task, comp, seg)] == red.maxima[(task, comp, seg)]


@pytest.mark.parametrize("warm, expected", [(False, 1), (True, 2)])
def test_default_addresses_are_adversarial(warm, expected):
    """Without addresses each task owns one line that conflicts with the others' lines:
    every access after another task's access is a delayed interference."""
    d = _symmetric(2, 1, 2)
    for t in d["task"]:
        for s in t["segment"]:
            del s["addresses"]
    d["storage"][1]["banks"] = 2
    d["schedule"]["warm_start"] = warm
    p = platform_from_dict(d)
    res = explore(p)
    assert res.max("T0", "L2", 0) == expected and res.max("T1", "L2", 0) == expected
    bf = enumerate_maxima(p)
    assert all(bf.maxima.get(k, 0) == v for k, v in res.maxima.items())


def test_quad_core_example():
    p = load_platform("examples/models/quad-core.toml")
    res = explore(p)
    assert res.compiled.sym_classes == [[0, 1, 2]]
    # each of T0's 2 requests in S2 can wait behind the 3 other tasks' requests
    assert res.max("T0", "bus", 2) == 6
    # T3 (4 requests in its busy segment) can be delayed on every L2 access
    assert res.max("T3", "L2", 1) == 4
    for comp in ("bus", "L2", "DDR"):
        for seg in range(3):
            assert res.max("T0", comp, seg) == res.max("T1", comp, seg) == res.max("T2", comp, seg)
    t0 = res.witnesses[("T1", "bus", 2)]
    assert replay(res.compiled, t0)[("T1", "bus", 2)] == 6
