"""Channel coverage of `xtalk worst` (worst/coverage.py): each tried candidate classified by
the catalog's channel of each enemy kind; a planted effect on one channel is reported as
exactly that channel slowing, the others as exercised without effect; channels outside the
space, never drawn, or whose candidates all failed say so and why."""

from __future__ import annotations

import random

from xtalk import catalog
from xtalk.worst import coverage, space

CACHES = {"l1d": 32 << 10, "l2": 1 << 20, "llc": 32 << 20}


def _tried(sp, kinds, score):
    """Each of `kinds` alone, with the score `score(kind)`."""
    return [(c, score(c.slots[0][0].kind)) for c in sp.singles() if c.slots[0][0].kind in kinds]


def test_a_planted_channel_is_the_one_that_slows_and_the_rest_say_why():
    cat = catalog.current()
    kinds = ["read", "llc", "pi", "buslock", "net"]
    sp = space.build(cat, CACHES, [0], memory_cap=1 << 30, kinds=kinds)
    # llc slows the victim 3×, read and pi do nothing, net's runs failed; buslock never drawn.
    tried = _tried(sp, ["read", "llc", "pi", "net"], lambda k: {"llc": 3.0, "net": None}.get(k, 1.02))
    net = next(c for c, _ in tried if c.slots[0][0].kind == "net")
    cov = coverage.coverage(cat, sp, kinds, tried, margin=0.10, refused={net.label(): "net.port: in use"})
    ch = cov["channels"]
    assert ch["llc"]["status"] == "exercised" and ch["llc"]["effect"] == "slows" and ch["llc"]["best_alone"] == 3.0
    assert ch["read"]["effect"] == "none measured" and ch["cpu"]["effect"] == "none measured"
    assert "loads" in ch["read"]["kinds"]  # every kind of the channel is listed, searched or not
    assert ch["read"]["searched_kinds"] == ["read"]
    assert ch["network"]["status"] == "refused" and "net.port: in use" in ch["network"]["why"]
    assert ch["network"]["refused_by_agent"] == [f"{net.label()}: net.port: in use"]
    bus = coverage.channel_of(cat, "buslock")
    assert ch[bus]["status"] == "not reached" and "no candidate" in ch[bus]["why"]
    assert ch["memory-capacity"]["status"] == "not searched" and "failure propagation" in ch["memory-capacity"]["why"]
    assert ch["write"]["status"] == "not searched" and "--kind" in ch["write"]["why"]
    assert set(cov["exercised"]) == {"llc", "read", "cpu"}
    assert set(cov["not_reached"]) == set(ch) - {"llc", "read", "cpu"}
    lines = coverage.text(cov)
    assert lines[0].startswith("channels exercised (3 of") and "llc 3.00×" in lines[0] and "read" not in lines[0]
    assert any("refused: network" in x for x in lines)


def test_every_catalog_kind_has_a_channel_and_a_combination_is_credited_to_each():
    cat = catalog.current()
    sp = space.build(cat, CACHES, [0, 1], memory_cap=1 << 30)
    every = {k for e in coverage.coverage(cat, sp, None, [], 0.1)["channels"].values() for k in e["kinds"]}
    assert every == set(cat.kinds)  # nothing dropped, undeclared kinds are their own channel
    rng = random.Random(2)
    mixed = next(c for c in (sp.sample(rng) for _ in range(500)) if len(coverage.loads(cat, c)) >= 2)
    cov = coverage.coverage(cat, sp, None, [(mixed, 2.0)], 0.1)
    for ch in coverage.loads(cat, mixed):
        assert cov["channels"][ch]["best_score"] == 2.0 and cov["channels"][ch]["best_alone"] is None
    assert all(e["status"] in ("not reached", "not searched") for c, e in cov["channels"].items()
               if c not in coverage.loads(cat, mixed))
