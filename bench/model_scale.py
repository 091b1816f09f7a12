"""Scale of the interference explorer (seed 000 ch. 4 model).

Run: ``PYTHONPATH=src python bench/model_scale.py``. Prints explored states, transitions
and time for the seed 000 example and for a 4-core platform with 8 segments of at most 4
requests per task, and the brute-force enumerator measured in the same run where it
finishes (the larger case is out of its reach: it is reported as such).
Goals: seed example < 0.1 s, 4 × 8 × 4 < 10 s.
"""

from __future__ import annotations

import sys
import time

from xtalk.model.bruteforce import enumerate_maxima
from xtalk.model.examples import seed000_platform
from xtalk.model.explorer import explore
from xtalk.model.platform import Platform, platform_from_dict


def large_platform(cores: int = 4, segments: int = 8, requests: int = 4) -> Platform:
    """cores tasks, segments segments of 10, μ = requests in every segment, shared L2/DRAM.

    Each task reads lines of its own that map to the same L2 sets as the other tasks'
    lines (stride 0x8000 = sets × line), so every task can evict every other task's data.
    """
    tasks = []
    for t in range(cores):
        segs = []
        for j in range(segments):
            addrs = [t * 0x8000 + ((j + k) % 2) * 32 for k in range(requests)]
            segs.append({"duration": 10, "max_requests": requests, "addresses": addrs})
        tasks.append({"name": f"T{t}", "core": t, "path": ["bus", "L2", "B"], "segment": segs})
    return platform_from_dict(
        {
            "platform": {"name": f"{cores}x{segments}x{requests}", "cores": cores},
            "transport": [{"name": "bus"}],
            "storage": [
                {"kind": "cache", "name": "L2", "sets": 1024, "ways": 2, "line_bytes": 32},
                {"kind": "dram", "name": "B", "row_bytes": 2048},
            ],
            "schedule": {"period": 10 * segments, "warm_start": True},
            "task": tasks,
        }
    )


def measure(name: str, platform: Platform, brute: bool, witnesses: bool = True) -> None:
    # wall time and CPU time: on a shared machine the CPU time is the stabler figure
    c0 = time.process_time()
    res = explore(platform, witnesses=witnesses)
    cpu = time.process_time() - c0
    line = (
        f"{name:24s} explorer: {res.states:>9d} states {res.transitions:>10d} transitions "
        f"{res.seconds:8.3f} s wall {cpu:8.3f} s cpu"
    )
    if brute:
        c0 = time.process_time()
        bf = enumerate_maxima(platform)
        bcpu = time.process_time() - c0
        same = all(bf.maxima.get(k, 0) == v for k, v in res.maxima.items())
        line += f" | brute force: {bf.paths} paths {bcpu:.3f} s cpu, ratio {bcpu / max(cpu, 1e-9):.0f}x, agree={same}"
    else:
        line += " | brute force: not run (too many interleavings)"
    print(line, flush=True)


def main() -> int:
    measure("seed 000 example", seed000_platform(), brute=True)
    measure("2 cores x 2 seg x 2 req", large_platform(2, 2, 2), brute=True)
    measure("3 cores x 1 seg x 2 req", large_platform(3, 1, 2), brute=True)
    measure("4 cores x 8 seg x 4 req", large_platform(4, 8, 4), brute=False)
    measure("  same, no witnesses", large_platform(4, 8, 4), brute=False, witnesses=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
