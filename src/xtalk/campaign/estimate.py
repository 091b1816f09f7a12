"""How long a campaign takes: before it runs (from the plans) and while it runs (from the
journal, which records every finished run's measured wall time).

A run costs its measured part (settle + every job's period) plus a fixed overhead (agent
start, fork, buffer set-up, teardown, Parquet conversion, journal fsyncs) and the time to
touch its buffers. The overhead was measured on this project's 2-core development machine
(`tests/test_campaign_estimate.py` keeps the estimate within 20 % of a real campaign); once
runs have finished, the ETA scales the remaining estimate by the observed ratio.
"""

from __future__ import annotations

import os

from ..plan import Plan
from ..plan import run_seconds as plan_run_seconds

#: Fixed cost of one run beyond its measured window, seconds (local target).
RUN_OVERHEAD_S = {"local": 0.06, "ssh": 0.6, "dask": 0.25}
#: Fixed cost of a campaign (loading Python, asking the agent about the target, checks) when
#: it cannot be measured; `startup_seconds` measures it on the spot.
STARTUP_S = 1.2


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
#: Rate at which the agent touches (and the victim warms) buffers, bytes per second.
TOUCH_BYTES_PER_S = 2e9


def measured_seconds(plan: Plan) -> float:
    """Settle plus the victim's run (plan.run_seconds: the one run-length rule)."""
    return plan_run_seconds(plan)


def buffer_bytes(plan: Plan) -> int:
    n = getattr(plan.victim.body, "bytes", 0) or 0
    for e in plan.enemies:
        load = e.load
        n += getattr(load, "bytes", 0) or (getattr(load, "elements", 0) or 0) * (getattr(load, "element_bytes", 0) or 0)
    return n


def run_seconds(plan: Plan, kind: str = "local") -> float:
    """Expected wall time of one run on a target of `kind`."""
    return measured_seconds(plan) + RUN_OVERHEAD_S.get(kind, RUN_OVERHEAD_S["local"]) + buffer_bytes(plan) / TOUCH_BYTES_PER_S


def campaign_seconds(plans: list[Plan], kind: str = "local", targets: int = 1, startup: float | None = None) -> float:
    """Expected wall time of a whole campaign on `targets` targets working in parallel."""
    return (STARTUP_S if startup is None else startup) + sum(run_seconds(p, kind) for p in plans) / max(1, targets)


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
