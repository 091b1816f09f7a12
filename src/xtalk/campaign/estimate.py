"""How long a campaign takes: before it runs (from the plans) and while it runs (from the
journal, which records every finished run's measured wall time).

A run costs its measured part (settle + every job's period) plus a fixed overhead (agent
start, fork, teardown, Parquet conversion, journal fsyncs) and the time to touch its buffers.
Every measured process and enemy touches its own buffer in its own process, at once, so the
touch takes as long as the busiest CPU's buffers at one process's rate (a chase buffer's
linking is slower than a plain touch), or all of them at the machine's aggregate rate,
whichever is longer. The rates were measured on the 2-core development guest and on a 16-CPU
Xeon guest (below); `tests/test_campaign_run.py` keeps a campaign's estimate within 20 % of
the real one. Once runs have finished, the ETA scales the remaining estimate by the observed
ratio. `xtalk run` and `xtalk characterize` estimate their runs with the same
rule (runner.estimate_seconds).
"""

from __future__ import annotations

import os

from .. import catalog
from ..plan import Plan
from ..plan import run_seconds as plan_run_seconds

#: Fixed cost of one run beyond its measured window, seconds (local target).
RUN_OVERHEAD_S = {"local": 0.06, "ssh": 0.6, "dask": 0.25}
#: Fixed cost of a campaign (loading Python, asking the agent about the target, checks) when
#: it cannot be measured; `startup_seconds` measures it on the spot.
STARTUP_S = 1.2
#: What `campaign run` does beyond `plan`'s start-up and the runs: the analysis stack's imports
#: (which `plan` no longer loads) and the verdict document (report/verdicts.py) with the cells'
#: bootstrap. A 2-cell, 6-run campaign of 250 jobs took 5.2 s on a quiet 2-vCPU guest against
#: 3.5 s of runs and 0.4 s of `plan`; a large campaign's runs dwarf it.
VERDICTS_S = 1.3


def startup_seconds() -> float:
    """How long this process has existed: `plan` calls it after doing what `run` does before
    its first run (start Python, import, expand, check every plan), so the estimate carries
    this machine's start-up cost under its present load. STARTUP_S where /proc cannot say."""
    try:
        stat = open("/proc/self/stat").read()
        start_ticks = int(stat[stat.rindex(")") + 2:].split()[19])
        uptime = float(open("/proc/uptime").read().split()[0])
        return max(0.0, uptime - start_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return STARTUP_S
#: Rate at which one process sets up its buffer (the agent for an enemy, the victim before its
#: first job), bytes per second: a 1.2 GB `read` buffer took 0.6 s on the 2-vCPU development
#: guest (2.0 GB/s) and 0.75 s on a 16-CPU Xeon guest (1.6 GB/s).
TOUCH_BYTES_PER_S = 2e9
#: A chase buffer links its nodes first: in linear order 1.2 GB took 1.0 s, in random order
#: (a shuffled cycle written node by node) 1.75 s, on the development guest.
CHASE_LINEAR_BYTES_PER_S = 1.2e9
CHASE_RANDOM_BYTES_PER_S = 0.7e9
#: Rate at which many processes set up their buffers together, bytes per second: what memory
#: gives all CPUs at once. 15 `read` enemies of 1.2 GB, one per CPU, took 1.33 s more per
#: run than none on the 16-CPU guest (13.5 GB/s once the guest's memory had been touched
#: once; the very first such run took 4.6 s).
AGGREGATE_TOUCH_BYTES_PER_S = 12e9
#: Seconds the host spends on a traced run's kernel trace per second of run (parsing it, each
#: job's culprits): 6.2 s after each 10.4 s run of examples/quickstart-observed.toml on the
#: 2-vCPU development guest. It grows with the events, so with the CPUs traced.
TRACE_S_PER_S = 0.6


def measured_seconds(plan: Plan) -> float:
    """Settle plus the victim's run (plan.run_seconds: the one run-length rule)."""
    return plan_run_seconds(plan)


def _load_bytes(load) -> int:
    """An enemy's memory, as the agent's catalog declares its footprint."""
    kind = catalog.current().kinds.get(load.kind)
    if kind is None or not kind.footprint_params:
        return 0
    return kind.footprint(load.model_dump())


def _rate(body_or_load) -> float:
    """How fast a process sets up this buffer (bytes per second)."""
    if getattr(body_or_load, "kind", None) == "chase":
        return CHASE_RANDOM_BYTES_PER_S if getattr(body_or_load, "order", "random") == "random" else CHASE_LINEAR_BYTES_PER_S
    return TOUCH_BYTES_PER_S


def _processes(plan: Plan) -> list[tuple[object, int, float]]:
    """Every process of a run that sets up a buffer: (its CPU lane, bytes, seconds alone).
    A process pinned on one CPU shares that CPU's lane; any other has a lane of its own."""
    out = []
    for i, v in enumerate(plan.measured()):
        cpus = v.placement.cpus
        n = getattr(v.body, "bytes", 0) or 0
        out.append((cpus[0] if cpus and len(cpus) == 1 else ("measured", i), n, n / _rate(v.body)))
    for i, e in enumerate(plan.enemies):
        cpus = e.placement.cpus
        n = _load_bytes(e.load)
        out.append((cpus[0] if cpus and len(cpus) == 1 else ("enemy", i), n, n / _rate(e.load)))
    return out


def process_buffers(plan: Plan) -> list[int]:
    """The buffer of each process of a run: every measured process (victim, applications),
    then every enemy; 0 for a process with none."""
    return [n for _, n, _ in _processes(plan)]


def buffer_bytes(plan: Plan) -> int:
    """Every byte a run's processes touch before the measured window."""
    return sum(process_buffers(plan))


def touch_seconds(plan: Plan) -> float:
    """How long a run's processes take to set up their buffers, all at once: the busiest CPU
    (the processes pinned there one after another, each at its own rate), or every byte at
    the aggregate rate, whichever is longer."""
    lanes: dict = {}
    total = 0
    for lane, n, seconds in _processes(plan):
        lanes[lane] = lanes.get(lane, 0.0) + seconds
        total += n
    if not lanes:
        return 0.0
    return max(max(lanes.values()), total / AGGREGATE_TOUCH_BYTES_PER_S)


def solo_touch_seconds(plan: Plan) -> float:
    """The same for the run's measured processes alone (a solo pass: calibration, feasibility)."""
    return touch_seconds(plan.model_copy(update={"enemies": []}))


def trace_seconds(plan: Plan) -> float:
    """The host's analysis of a run's kernel trace (every job's culprits), after the run."""
    return TRACE_S_PER_S * measured_seconds(plan) if plan.trace is not None else 0.0


def run_seconds(plan: Plan, kind: str = "local") -> float:
    """Expected wall time of one run on a target of `kind`."""
    return (measured_seconds(plan) + RUN_OVERHEAD_S.get(kind, RUN_OVERHEAD_S["local"]) + touch_seconds(plan)
            + trace_seconds(plan))


def campaign_seconds(plans: list[Plan], kind: str = "local", targets: int = 1, startup: float | None = None) -> float:
    """Expected wall time of a whole campaign on `targets` targets working in parallel, its
    verdict document included."""
    return (STARTUP_S if startup is None else startup) + VERDICTS_S + sum(run_seconds(p, kind) for p in plans) / max(1, targets)


def observed_ratio(finished: list[dict]) -> float:
    """Actual / estimated wall time over finished runs (journal events with `seconds` and
    `expected`); 1 when nothing has finished yet."""
    actual = sum(e.get("seconds", 0.0) for e in finished if e.get("expected"))
    expected = sum(e["expected"] for e in finished if e.get("expected"))
    return actual / expected if expected > 0 and actual > 0 else 1.0


def eta_seconds(remaining: list[Plan], finished: list[dict], kind: str = "local", targets: int = 1) -> float:
    """Time left: the remaining runs' estimate corrected by what finished runs took."""
    return sum(run_seconds(p, kind) for p in remaining) * observed_ratio(finished) / max(1, targets)


def human(seconds: float) -> str:
    """`1 h 02 min`, `3 min 05 s`, `12.3 s`."""
    s = max(0.0, seconds)
    if s < 60:
        return f"{s:.1f} s"
    m, s = divmod(int(round(s)), 60)
    if m < 60:
        return f"{m} min {s:02d} s"
    h, m = divmod(m, 60)
    if h < 48:
        return f"{h} h {m:02d} min"
    d, h = divmod(h, 24)
    return f"{d} d {h:02d} h"
