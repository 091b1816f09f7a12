"""The worked example of seed 000 §4.2–4.4 (Fig. 4.3–4.4), built in code.

``examples/models/seed000-example.toml`` holds the same platform; a test checks that the
two agree. Values the seed's text does not give (Fig. 4.4 is an image) are assumptions
listed in docs/models.md.
"""

from __future__ import annotations

from xtalk.model.platform import Platform, platform_from_dict

__all__ = ["SEED000_QUERY", "seed000_platform"]

#: The seed's query (seed 000 §4.4): no more than 3 interferences on L2 for SP0 in the
#: first segment, as (task, component, segment, bound).
SEED000_QUERY = ("SP0", "L2", 0, 3)

_LINE_250 = 250 * 32  # seed 000 §4.4: "task 1 requests data stored in line 250"
_L2_SPAN = 16384 * 32  # one way of the direct-mapped L2: same set, different tag


def seed000_platform(warm_start: bool = True, periods: int = 1) -> Platform:
    """Two cores, AHB bus, direct-mapped L2, one DRAM bank; SP0/SP1, period 30, 3 segments."""
    a0, a1 = _LINE_250, _LINE_250 + _L2_SPAN

    def seg(n: int, addrs: list[int] | None = None) -> dict:
        d: dict = {"duration": 10, "max_requests": n}
        if addrs is not None:
            d["addresses"] = addrs
        return d

    data = {
        "platform": {"name": "seed000-fig4.3", "cores": 2},
        "l1": [{"core": c, "size_bytes": 32768, "ways": 4, "line_bytes": 64} for c in (0, 1)],
        "transport": [{"name": "AHB"}],
        "storage": [
            {"kind": "cache", "name": "L2", "sets": 16384, "ways": 1, "line_bytes": 32, "policy": "lru"},
            {"kind": "dram", "name": "B", "row_bytes": 2048},
        ],
        "schedule": {"period": 30, "periods": periods, "warm_start": warm_start},
        "task": [
            {
                "name": "SP0",
                "core": 0,
                "path": ["AHB", "L2", "B"],
                "segment": [seg(2, [a0, a0]), seg(3, [a0, a0 + 32, a0]), seg(0)],
            },
            {
                "name": "SP1",
                "core": 1,
                "path": ["AHB", "L2", "B"],
                "segment": [seg(2, [a1, a1]), seg(0), seg(3, [a1, a1 + 32, a1])],
            },
        ],
    }
    return platform_from_dict(data)
