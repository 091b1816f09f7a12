"""Scale of the interference explorer (seed 000 ch. 4 model).

Run: ``PYTHONPATH=src python bench/model_scale.py [--quick]``. For each model it prints the
states explored, wall and CPU time and states per CPU second of the native core
(explorer/ crate), and its ratio against the Python explorer and the brute-force
enumerator measured in the same run where they finish in reasonable time (otherwise
the line says they were not run). Then the 8-core × 8-segment models: one explored, one
over the default budget, refused by its estimate before the exploration starts.
Goals (issue 21): ≥ 1 000 000 states/s; 4 × 8 × 4 < 0.5 s; an 8 × 8 model < 60 s or a
clear refusal with the state estimate. CPU time is printed beside wall time because the
machine may be shared (wall time then counts other processes' turns).
"""

from __future__ import annotations

import resource
import sys
import time

from xtalk.model import native
from xtalk.model.bruteforce import enumerate_maxima
from xtalk.model.estimate import DEFAULT_BUDGET, check_budget
from xtalk.model.examples import seed000_platform
from xtalk.model.explorer import explore
from xtalk.model.platform import Platform, platform_from_dict
from xtalk.model.semantics import compile_platform
from xtalk.sched.inputs import InputError


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


def _cpu() -> float:
    # this process and the native core's processes it waited for
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _rate(states: int, cpu: float) -> str:
    return f"{states / cpu:>10,.0f} states/s" if cpu > 0 else "         - states/s"


def measure(name: str, platform: Platform, python: bool, brute: bool, witnesses: bool = False) -> None:
    """One line: native core, then the peers of the same run and the ratios of CPU time."""
    res = explore(platform, witnesses=witnesses, engine="native")
    line = (
        f"{name:30s} native: {res.states:>9,d} states {res.seconds:7.3f} s wall {res.cpu_seconds:7.3f} s cpu "
        f"{_rate(res.states, res.cpu_seconds)} {res.memory_kb / 1024:6.1f} MiB"
    )
    cpu = max(res.cpu_seconds, 1e-3)  # the core's CPU time is counted in 10 ms ticks
    if python:
        py = explore(platform, witnesses=witnesses, engine="python")
        same = py.maxima == res.maxima
        line += f" | python: {py.states:,d} states {py.cpu_seconds:.3f} s cpu, ratio {py.cpu_seconds / cpu:.0f}x, agree={same}"
    else:
        line += " | python: not run (minutes)"
    if brute:
        c0 = time.process_time()
        bf = enumerate_maxima(platform)
        bcpu = time.process_time() - c0
        same = all(bf.maxima.get(k, 0) == v for k, v in res.maxima.items())
        line += f" | brute force: {bf.paths:,d} paths {bcpu:.3f} s cpu, ratio {bcpu / cpu:.0f}x, agree={same}"
    else:
        line += " | brute force: not run (too many interleavings)"
    print(line, flush=True)


def refusal(name: str, platform: Platform) -> None:
    """The CLI's estimate-and-budget check on a model over the default budget."""
    t0 = time.perf_counter()
    c0 = _cpu()
    try:
        est = check_budget(compile_platform(platform), DEFAULT_BUDGET["native"], "native")
        print(f"{name:30s} estimate: {est.describe()} (within the budget)", flush=True)
    except InputError as exc:
        print(f"{name:30s} refused after {time.perf_counter() - t0:.1f} s wall ({_cpu() - c0:.1f} s cpu): error: {exc}")


def main(argv: list[str]) -> int:
    if not native.available():
        print("bench: the native explorer is not built (make setup)", file=sys.stderr)
        return 1
    quick = "--quick" in argv
    measure("seed 000 example", seed000_platform(), python=True, brute=True, witnesses=True)
    measure("2 cores x 2 seg x 2 req", large_platform(2, 2, 2), python=True, brute=True)
    measure("3 cores x 1 seg x 2 req", large_platform(3, 1, 2), python=True, brute=True)
    measure("4 cores x 8 seg x 4 req", large_platform(4, 8, 4), python=not quick, brute=False)
    measure("  same, with witnesses", large_platform(4, 8, 4), python=False, brute=False, witnesses=True)
    if not quick:
        measure("8 cores x 8 seg x 2 req", large_platform(8, 8, 2), python=False, brute=False)
    refusal("8 cores x 8 seg x 4 req", large_platform(8, 8, 4))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
