"""Native explorer core: every reduction checked against the unreduced explorers.

On generated models (random profiles, with classes of identical tasks so that the symmetry
reduction applies) the native core with its reductions (complete symmetry keys, counters
retired at the end of their segment, layers freed once expanded) must give the same
maxima as the native core without symmetry, the Python explorer without symmetry, and
the brute-force enumeration of every interleaving (no hashing, explicit per-task end
events) where that one is small enough.
"""

from __future__ import annotations

import numpy as np
import pytest
from typer.testing import CliRunner

from xtalk.model import native
from xtalk.model.bruteforce import enumerate_maxima
from xtalk.model.cli import app
from xtalk.model.estimate import check_budget, estimate_states
from xtalk.model.explorer import explore, replay
from xtalk.model.platform import platform_from_dict
from xtalk.model.semantics import compile_platform
from xtalk.sched.inputs import InputError

pytestmark = pytest.mark.skipif(not native.available(), reason="explorer/ not built (make setup needs cargo)")

EXAMPLE = "examples/models/seed000-example.toml"


def _model(seed: int) -> dict:
    """2–4 tasks; the first ``k`` share one profile (a symmetry class), lines 64 bytes apart
    so that they fall in the same cache set with distinct tags and distinct DRAM rows."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 5))
    k = int(rng.integers(2, n + 1)) if rng.random() < 0.7 else 1
    nseg = int(rng.integers(1, 3))
    small = n >= 4 or nseg == 2

    def profile() -> list[tuple[float, int, list[int]]]:
        segs = []
        for _ in range(nseg):
            mu = int(rng.integers(0, 2 if small else 3))
            segs.append((float(rng.choice([5, 10])), mu, [int(rng.integers(0, 2)) * 32 for _ in range(mu)]))
        return segs

    shared, shared_path = profile(), ["bus", "L2", "B"] if rng.random() < 0.85 else ["L2", "B"]
    tasks = []
    for t in range(n):
        segs, path = (shared, shared_path) if t < k else (profile(), ["bus", "L2", "B"])
        tasks.append({
            "name": f"T{t}", "core": t, "path": path,
            "segment": [{"duration": d, "max_requests": mu, "addresses": [t * 64 + a for a in addrs]}
                        for d, mu, addrs in segs],
        })
    return {
        "platform": {"cores": n},
        "transport": [{"name": "bus"}],
        "storage": [
            {"kind": "cache", "name": "L2", "sets": 2, "ways": int(rng.integers(1, 3)), "line_bytes": 32,
             "policy": str(rng.choice(["lru", "fifo"])), "interference": str(rng.choice(["outcome", "state"]))},
            {"kind": "dram", "name": "B", "row_bytes": 64, "interference": str(rng.choice(["outcome", "state"]))},
        ],
        "schedule": {"period": 20, "warm_start": bool(rng.random() < 0.5)},
        "task": tasks,
    }


def test_reductions_agree_with_unreduced_explorers_and_brute_force():
    checked_brute = 0
    reduced = 0
    for seed in range(80):
        d = _model(seed)
        p = platform_from_dict(d)
        fast = explore(p, witnesses=False, engine="native")
        full = explore(p, witnesses=False, engine="native", symmetry=False)
        ref = explore(p, witnesses=False, engine="python", symmetry=False)
        assert fast.maxima == full.maxima == ref.maxima, seed
        # without symmetry the native core explores exactly the Python explorer's states
        assert full.states == ref.states, seed
        assert fast.states <= full.states
        reduced += fast.states < full.states
        if len(d["task"]) * len(d["task"][0]["segment"]) > 3:
            continue  # the brute force's paths grow as (tasks!)^epochs x interleavings
        try:
            bf = enumerate_maxima(p, max_paths=20_000)
        except RuntimeError:
            continue  # too many interleavings for the brute force
        checked_brute += 1
        for key, v in fast.maxima.items():
            assert bf.maxima.get(key, 0) == v, (seed, key)
        for key, v in bf.maxima.items():
            assert v == 0 or fast.maxima.get(key) == v, (seed, key)
    # the generator really exercises both the reduction and the brute force
    assert reduced >= 25 and checked_brute >= 12, (reduced, checked_brute)


@pytest.mark.parametrize("seed", [1, 4, 7, 12, 23])
def test_native_witnesses_replay_to_the_maxima(seed):
    p = platform_from_dict(_model(seed))
    res = explore(p, engine="native")
    assert res.maxima == explore(p, witnesses=False, engine="native").maxima
    for key, steps in res.witnesses.items():
        assert replay(res.compiled, steps)[key] == res.maxima[key]
        task, comp, _ = key
        assert sum(n for s in steps if s.task == task for c, n in s.gains if c == comp) == res.maxima[key]


def test_statistics_and_memory_are_reported():
    res = explore(platform_from_dict(_model(3)), witnesses=False, engine="native")
    assert res.engine == "native" and res.memory_kb > 0
    assert 0 < res.stored <= res.states and res.transitions >= res.states - 1
    assert sum(res.epoch_states) == res.states


def test_python_slow_path_says_so_once(monkeypatch, capsys):
    monkeypatch.setenv("XTALK_EXPLORE", "")
    monkeypatch.setattr(native, "_warned", False)
    assert not native.available()
    p = platform_from_dict(_model(5))
    a = explore(p, witnesses=False)
    b = explore(p, witnesses=False)
    assert a.engine == b.engine == "python"
    assert capsys.readouterr().err.count("slow path") == 1
    monkeypatch.delenv("XTALK_EXPLORE")
    assert explore(p, witnesses=False).maxima == a.maxima


def test_estimate_is_exact_for_short_models_and_refuses_beyond_budget():
    cm = compile_platform(platform_from_dict(_model(2)))
    est = estimate_states(cm, 10_000_000)
    assert est.exact and est.states == explore(cm, witnesses=False).states
    with pytest.raises(InputError, match=r"model: .*over the budget of 3 states \(fix: --force"):
        check_budget(cm, 3)


def test_estimate_extrapolates_longer_models():
    d = _model(0)
    d["task"] = [
        {"name": f"T{t}", "core": t, "path": ["bus", "L2", "B"],
         "segment": [{"duration": 10, "max_requests": 2, "addresses": [t * 64, t * 64 + 32]}] * 6}
        for t in range(3)
    ]
    d["platform"]["cores"] = 3
    d["schedule"]["period"] = 60
    cm = compile_platform(platform_from_dict(d))
    est = estimate_states(cm, 10_000_000)
    real = explore(cm, witnesses=False).states
    assert not est.exact and est.probed == explore(cm, witnesses=False).epoch_states[:3]
    # saturated epochs: the extrapolation lands near the real count, never far below it
    assert real * 0.8 <= est.states <= real * 3, (est.states, real)


def test_cli_statistics_refusal_and_force():
    runner = CliRunner()
    r = runner.invoke(app, ["explore", EXAMPLE])
    assert r.exit_code == 0, r.output
    for line in ("-- States explored : 71 states", "-- States stored :", "-- Time used :", "-- Resident memory used :"):
        assert line in r.output
    r = runner.invoke(app, ["explore", EXAMPLE, "--max-states", "20"])
    assert r.exit_code == 2
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and "over the budget of 20 states" in lines[0] and "--force" in lines[0]
    r = runner.invoke(app, ["explore", EXAMPLE, "--max-states", "20", "--force"])
    assert r.exit_code == 0 and "-- States explored : 71 states" in r.output
    r = runner.invoke(app, ["explore", EXAMPLE, "--json"])
    assert r.exit_code == 0 and '"states_explored": 71' in r.output and '"memory_kib"' in r.output
    r = runner.invoke(app, ["explore", EXAMPLE, "--engine", "fast"])
    assert r.exit_code == 2 and "--engine" in r.output
