"""The residual of `xtalk worst` (worst/residual.py): a finalist split into its channel parts,
and the slowdown its channels do not explain, with a CI. Synthetic job times with planted
effects: parts that add up give a residual whose CI holds 0; a planted interaction gives one
above 0, parts that compete one below; a one-channel finalist is not split. Pure, seconds."""

from __future__ import annotations

import numpy as np
import pytest

from xtalk import catalog
from xtalk.worst import driver, residual
from xtalk.worst.space import Candidate, Enemy

READ = Enemy("read", (("bytes", "4*llc"),))
LLC = Enemy("llc", (("bytes", "llc"),))
READ2 = Enemy("read", (("bytes", "llc/2"),), 50.0)


def _runs(rng, factor: float, runs: int = 6, jobs: int = 40) -> list[np.ndarray]:
    """Job times of a victim slowed by `factor`: log-normal noise of 5 % around 1 ms."""
    return [1e6 * factor * rng.lognormal(0.0, 0.05, jobs) for _ in range(runs)]


def test_a_finalist_is_split_by_the_channel_of_each_enemy_keeping_its_cpus():
    cat = catalog.current()
    mixed = Candidate((0, 1), ((READ, LLC), (READ2,)))
    got = residual.parts(cat, mixed)
    assert set(got) == {"read", "llc"}
    assert got["read"] == Candidate((0, 1), ((READ,), (READ2,)))
    assert got["llc"] == Candidate((0,), ((LLC,),))  # CPU 1 had no llc enemy: not in the part
    assert residual.parts(cat, Candidate((0, 1), ((READ,), (READ2,)))) == {}  # one channel: nothing to separate
    assert residual.part_name("bus-lock") == "part-bus-lock" and residual.part_name("(buslock)") == "part-buslock"


@pytest.mark.parametrize("finalist, reading, sign", [
    (1.8, "explained by its channels", 0),   # 1 + 0.5 + 0.3: additive
    (3.0, "more than its channels add up to", 1),   # a planted interaction: +1.2
    (1.4, "less than its channels add up to", -1),  # parts that compete: -0.4
])
def test_the_residual_is_the_finalist_against_its_parts_added(finalist, reading, sign):
    rng = np.random.default_rng(7)
    samples = {"finalist-1": _runs(rng, finalist), "part-read": _runs(rng, 1.5), "part-llc": _runs(rng, 1.3)}
    solo = _runs(rng, 1.0)
    doc = residual.residual(samples, solo, "finalist-1", {"read": "part-read", "llc": "part-llc"}, "median", n_boot=1000)
    r = doc["residual"]
    assert doc["explained"]["estimate"] == pytest.approx(1.8, abs=0.05)
    assert r["estimate"] == pytest.approx(finalist - 1.8, abs=0.06)
    assert r["low"] <= r["estimate"] <= r["high"] and r["high"] - r["low"] < 0.3
    assert reading in doc["reading"]
    assert (r["low"] > 0) if sign > 0 else (r["high"] < 0) if sign < 0 else (r["low"] <= 0 <= r["high"])
    line = residual.text(doc)
    assert line.startswith(f"unknown channels: finalist-1 {doc['slowdown']['estimate']:.2f}× against 1.")
    assert "from its channels alone (read 1.5" in line and f"residual {r['estimate']:+.2f}×" in line


def test_p99_and_missing_runs():
    rng = np.random.default_rng(3)
    samples = {"f": _runs(rng, 2.0), "a": _runs(rng, 2.0)}
    doc = residual.residual(samples, _runs(rng, 1.0), "f", {"x": "a", "y": "b"}, "p99", n_boot=200)
    assert doc is None  # part b has no runs: no residual, the driver says why
    doc = residual.residual({**samples, "b": _runs(rng, 1.0)}, _runs(rng, 1.0), "f", {"x": "a", "y": "b"}, "p99", n_boot=500)
    assert doc["residual"]["low"] <= 0 <= doc["residual"]["high"]
    assert residual.residual(samples, [], "f", {"x": "a"}, "median") is None


class _Arm:
    def __init__(self, item):
        self.item = item


def test_the_driver_splits_the_best_finalist_only_when_it_can():
    one = {"finalist-1": _Arm(Candidate((0,), ((READ,),))), "finalist-2": _Arm(Candidate((0,), ((LLC,),)))}
    assert "each finalist loads one channel (finalist-1 read; finalist-2 llc)" in driver._split(one, 100.0, 1.0)["why"]
    # The search's best finalist that loads several channels is split, not just the first.
    two = {"finalist-1": _Arm(Candidate((0,), ((LLC,),))), "finalist-2": _Arm(Candidate((0,), ((READ, LLC),)))}
    got = driver._split(two, 100.0, 1.0)
    assert got["finalist"] == "finalist-2" and set(got["scenarios"]) == {"part-read", "part-llc"}
    assert got["scenarios"]["part-llc"] == ("llc", Candidate((0,), ((LLC,),)))
    # Three runs each of two parts need 3 × 2 × 1 s beside the confirmation's own: 5 s is short.
    assert "no time left" in driver._split(two, 5.0, 1.0)["why"] and "scenarios" in driver._split(two, 6.0, 1.0)
    many = Candidate((0, 1), ((READ, LLC), (Enemy("pi"), Enemy("buslock"))))
    why = driver._split({"finalist-1": _Arm(many)}, 1e6, 1.0)["why"]
    assert why == "finalist-1 loads 4 channels, more than the 3 the confirmation splits"
    assert driver._split({}, 100.0, 1.0) == {}
