"""Uniprocessor schedulability tests (seed 001 §4.2, §4.5).

* Liu–Layland bound for RM (seed 001 Theorem 4.1): U ≤ n(2^{1/n} − 1).
* EDF utilisation test (seed 001 Theorem 4.3): U ≤ 1 (implicit deadlines).
* EDF processor-demand test (Baruah, Rosier & Howell 1990; the exact test for
  constrained deadlines that seed 001 §4.2.2 does not spell out): dbf(t) ≤ t at every
  absolute deadline t up to the synchronous busy period.
* Response-time analysis (seed 001 Theorem 4.2, Joseph & Pandya 1986), extended with
  blocking B_i and release jitter J_i (Audsley et al. 1993; Tindell):
  R_i = e_i + B_i + Σ_{h ∈ hp(i)} ⌈(R_i + J_h) / p_h⌉ · e_h, response = R_i + J_i.
* Overhead inflation (seed 001 §4.5): e'_i = e_i + Δ^relEv with
  Δ^relEv = Δ^event + Δ^rel + Δ^sched + Δ^cxs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xtalk.sched.taskset import Task, hyperperiod, rm_order

__all__ = [
    "EPS",
    "utilization",
    "liu_layland_bound",
    "rm_utilization_test",
    "edf_utilization_test",
    "demand_bound",
    "edf_demand_test",
    "RtaResult",
    "response_time_analysis",
    "ReleaseOverhead",
    "SEED001_OVERHEAD",
    "inflate",
]

#: Tolerance (ms) for float comparisons: 1 ns.
EPS = 1e-6


def utilization(tasks: list[Task]) -> float:
    """u_sum = Σ e_i / p_i (seed 001 §4.1)."""
    return sum(t.utilization for t in tasks)


def liu_layland_bound(n: int) -> float:
    """n(2^{1/n} − 1) (seed 001 Theorem 4.1); tends to ln 2."""
    if n <= 0:
        raise ValueError("n must be >= 1")
    return n * (2 ** (1 / n) - 1)


def rm_utilization_test(tasks: list[Task]) -> bool:
    """Sufficient RM test, implicit deadlines (seed 001 Theorem 4.1)."""
    return utilization(tasks) <= liu_layland_bound(len(tasks)) + 1e-12


def edf_utilization_test(tasks: list[Task]) -> bool:
    """EDF test U ≤ 1 (seed 001 Theorem 4.3); exact for implicit deadlines. With
    constrained deadlines it uses the density Σ e_i / min(d_i, p_i) (sufficient only)."""
    return sum(t.wcet / min(t.d, t.period) for t in tasks) <= 1 + 1e-12


def demand_bound(tasks: list[Task], t: float) -> float:
    """dbf(t) = Σ max(0, ⌊(t + J_i − d_i)/p_i⌋ + 1) · e_i (Baruah et al. 1990; release
    jitter J_i as in Spuri 1996: a jittered job may have its deadline J_i earlier relative
    to the window)."""
    total = 0.0
    for k in tasks:
        if t + k.jitter + EPS >= k.d:
            total += (math.floor((t + k.jitter - k.d) / k.period + 1e-9) + 1) * k.wcet
    return total


def _blocking(tasks: list[Task], t: float) -> float:
    # B(t): the largest blocking that a job with a deadline within t can suffer (SRP-style)
    return max((k.blocking for k in tasks if k.d - k.jitter <= t + EPS), default=0.0)


def _busy_period(tasks: list[Task]) -> float:
    # synchronous busy period L = B + Σ ⌈(L + J_i)/p_i⌉ e_i (fixed point from B + Σ e_i)
    block = max((k.blocking for k in tasks), default=0.0)
    length = block + sum(k.wcet for k in tasks)
    for _ in range(100_000):
        nxt = block + sum(math.ceil((length + k.jitter) / k.period - 1e-9) * k.wcet for k in tasks)
        if abs(nxt - length) <= EPS:
            return nxt
        length = nxt
    return math.inf


def edf_demand_test(tasks: list[Task]) -> tuple[bool, float | None]:
    """Processor-demand test for EDF (exact for synchronous periodic/sporadic tasks without
    jitter or blocking, sufficient with them): schedulable iff dbf(t) + B(t) ≤ t at every
    absolute deadline t ≤ L, L = min(busy period, hyperperiod + max d + max J).
    Returns (verdict, first failing t)."""
    if utilization(tasks) > 1 + 1e-12:
        return False, None
    horizon = _busy_period(tasks)
    if utilization(tasks) < 1 - 1e-12 or math.isinf(horizon):
        horizon = min(
            horizon, hyperperiod([k.period for k in tasks]) + max(k.d for k in tasks) + max(k.jitter for k in tasks)
        )
    points = set()
    for k in tasks:
        j = 0
        while True:
            t = max(0.0, k.d - k.jitter) + j * k.period
            if t > horizon + EPS:
                break
            points.add(round(t, 9))
            j += 1
    for t in sorted(points):
        if demand_bound(tasks, t) + _blocking(tasks, t) > t + EPS:
            return False, t
    return True, None


@dataclass(frozen=True)
class RtaResult:
    """Worst-case response time of one task under fixed priorities."""

    task: Task
    response: float  # R_i + J_i (ms); math.inf when it exceeds the deadline
    schedulable: bool

    @property
    def slack(self) -> float:
        """d_i − response (negative or −inf when the deadline can be missed)."""
        return self.task.d - self.response


def response_time_analysis(tasks: list[Task], order: str = "rm") -> list[RtaResult]:
    """Fixed-priority RTA with blocking and release jitter (seed 001 Theorem 4.2 when
    B = J = 0). ``order``: "rm", "dm", or explicit priorities when every task has one.
    Results are in priority order; iteration stops once the deadline is exceeded."""
    ordered = rm_order(tasks, by=order)
    out: list[RtaResult] = []
    for i, task in enumerate(ordered):
        hp = ordered[:i]
        r = task.wcet + task.blocking
        limit = task.d - task.jitter
        while True:
            nxt = task.wcet + task.blocking + sum(math.ceil((r + h.jitter) / h.period - 1e-9) * h.wcet for h in hp)
            if nxt > limit + EPS:
                out.append(RtaResult(task, math.inf, False))
                break
            if abs(nxt - r) <= EPS:
                resp = nxt + task.jitter
                out.append(RtaResult(task, resp, resp <= task.d + EPS))
                break
            r = nxt
    return out


@dataclass(frozen=True)
class ReleaseOverhead:
    """Δ^relEv = Δ^event + Δ^rel + Δ^sched + Δ^cxs in ms (seed 001 §4.5, Fig. 4.10)."""

    event: float
    release: float
    sched: float
    cxs: float

    @property
    def total(self) -> float:
        """Δ^relEv."""
        return self.event + self.release + self.sched + self.cxs


#: Seed 001 §4.5: worst observed with 20 tasks per processor: 250 + 40 + 75 + 20 = 385 µs.
SEED001_OVERHEAD = ReleaseOverhead(event=0.250, release=0.040, sched=0.075, cxs=0.020)


def inflate(tasks: list[Task], overhead: ReleaseOverhead | float) -> list[Task]:
    """e'_i = e_i + Δ^relEv for every task (seed 001 §4.5, Lemma 4.1 after Phan et al.)."""
    delta = overhead.total if isinstance(overhead, ReleaseOverhead) else float(overhead)
    if delta < 0:
        raise ValueError("overhead must be >= 0")
    return [t.with_wcet(t.wcet + delta) for t in tasks]
