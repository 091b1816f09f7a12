from collections import Counter

from xtalk.config.expand import interleave


def test_every_repetition_holds_each_scenario_once():
    order = interleave(["solo", "a", "b"], 5, seed=3)
    assert len(order) == 15
    for r in range(5):
        assert sorted(n for rep, n in order if rep == r) == ["a", "b", "solo"]


def test_order_is_seeded():
    assert interleave(["solo", "a", "b"], 4, 1) == interleave(["solo", "a", "b"], 4, 1)
    assert any(interleave(["solo", "a", "b"], 4, 1) != interleave(["solo", "a", "b"], 4, s) for s in range(2, 6))


def test_scenarios_are_not_run_as_blocks():
    """Across seeds, each scenario takes every position within a repetition."""
    pos = Counter()
    for seed in range(60):
        order = interleave(["solo", "a", "b"], 1, seed)
        pos.update((n, i) for i, (_, n) in enumerate(order))
    assert all(pos[(n, i)] > 5 for n in ("solo", "a", "b") for i in range(3))
