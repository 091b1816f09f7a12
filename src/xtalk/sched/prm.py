"""Periodic resource model Γ = (Π, Θ) (seed 001 §2.3.4, after Shin & Lee 2003).

* Supply bound function (seed 001 Eq. 2.4 with Shin & Lee's y; the thesis prints y
  as ⌊(t − Π − Θ)/Π⌋, Shin & Lee 2003 is authoritative):
  sbf(t) = y·Θ + max(0, t − x − y·Π) for t ≥ Π − Θ, else 0,
  x = 2(Π − Θ), y = ⌊(t − (Π − Θ)) / Π⌋.
* Request bound function under RM (seed 001 Eq. 2.5, indices fixed):
  rbf_i(t) = Σ_{k ≤ i} ⌈t / p_k⌉ · e_k.
* Schedulability (seed 001 Lemma 2.1): ∀i ∃t ∈ (0, d_i]: sbf(t) ≥ rbf_i(t).
* Shin–Lee periodic capacity for RM (seed 001 Theorem 2.1, Eq. 2.2–2.3).
* Bandwidth Θ/Π and interface overhead bw(Γ) − U (seed 001 §2.3.4, Eq. 2.9).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xtalk.sched.taskset import Task, rm_order
from xtalk.sched.uniproc import EPS, utilization

__all__ = [
    "PeriodicResource",
    "sbf",
    "rbf",
    "prm_schedulable",
    "shin_lee_capacity",
    "minimal_budget",
    "interface_overhead",
    "sbf_inverse",
    "prm_response_times",
]


@dataclass(frozen=True)
class PeriodicResource:
    """Γ = (Π, Θ): Θ time units every Π (ms)."""

    period: float
    budget: float

    def __post_init__(self) -> None:
        if self.period <= 0 or self.budget < 0 or self.budget > self.period + EPS:
            raise ValueError(f"need 0 <= budget <= period, got Θ={self.budget}, Π={self.period}")

    @property
    def bandwidth(self) -> float:
        """bw(Γ) = Θ / Π."""
        return self.budget / self.period


def sbf(res: PeriodicResource, t: float) -> float:
    """Minimum supply of Γ in any interval of length t (Shin & Lee 2003, seed 001 Eq. 2.4)."""
    pi, theta = res.period, res.budget
    blackout = pi - theta
    if t < blackout:
        return 0.0
    y = math.floor((t - blackout) / pi + 1e-12)
    x = 2 * blackout
    return y * theta + max(0.0, t - x - y * pi)


def rbf(tasks: list[Task], i: int, t: float) -> float:
    """rbf_i(t) = Σ_{k≤i} ⌈t/p_k⌉ e_k with tasks in RM order (seed 001 Eq. 2.5)."""
    return sum(math.ceil(t / k.period - 1e-12) * k.wcet for k in tasks[: i + 1])


def _check_points(ordered: list[Task], i: int) -> list[float]:
    # rbf_i is constant on (k·p_j, next step]; sbf is non-decreasing: the right end of each
    # constant piece (a multiple of some p_j, or d_i) is the best point to test.
    horizon = ordered[i].d
    pts = {horizon}
    for k in ordered[: i + 1]:
        m = 1
        while m * k.period < horizon - EPS:
            pts.add(m * k.period)
            m += 1
    return sorted(pts)


def prm_schedulable(tasks: list[Task], res: PeriodicResource, order: str = "rm") -> tuple[bool, list[float | None]]:
    """Seed 001 Lemma 2.1: schedulable under RM on Γ iff ∀i ∃t ∈ (0, d_i]: sbf(t) ≥ rbf_i(t).

    Returns the verdict and, per task in priority order, the first witness t (or None)."""
    ordered = rm_order(tasks, by=order)
    witnesses: list[float | None] = []
    for i in range(len(ordered)):
        found = None
        for t in _check_points(ordered, i):
            if sbf(res, t) + EPS >= rbf(ordered, i, t):
                found = t
                break
        witnesses.append(found)
    return all(w is not None for w in witnesses), witnesses


def shin_lee_capacity(tasks: list[Task], period: float) -> float:
    """Θ for a given Π under RM (seed 001 Theorem 2.1, Eq. 2.2–2.3):
    Θ = max_i [−(p_i − 2Π) + √((p_i − 2Π)² + 8Π·I_i)] / 4, I_i = e_i + Σ_{hp} ⌈p_i/p_k⌉ e_k."""
    ordered = rm_order(tasks)
    best = 0.0
    for i, t in enumerate(ordered):
        load = t.wcet + sum(math.ceil(t.period / k.period - 1e-12) * k.wcet for k in ordered[:i])
        b = t.period - 2 * period
        best = max(best, (-b + math.sqrt(b * b + 8 * period * load)) / 4)
    return best


def minimal_budget(tasks: list[Task], period: float, order: str = "rm", tol: float = 1e-6) -> float | None:
    """Smallest Θ ≤ Π passing :func:`prm_schedulable` (bisection: sbf grows with Θ);
    None when even Θ = Π fails."""
    if not prm_schedulable(tasks, PeriodicResource(period, period), order)[0]:
        return None
    lo, hi = 0.0, period
    while hi - lo > tol:
        mid = (lo + hi) / 2
        if prm_schedulable(tasks, PeriodicResource(period, mid), order)[0]:
            hi = mid
        else:
            lo = mid
    return hi


def interface_overhead(tasks: list[Task], res: PeriodicResource) -> float:
    """bw(Γ) − bw(W) (seed 001 §2.3.4 "resource interface overhead", Eq. 2.9)."""
    return res.bandwidth - utilization(tasks)


def sbf_inverse(res: PeriodicResource, demand: float) -> float:
    """Smallest t with sbf(t) ≥ demand: 2(Π − Θ) + yΠ + (demand − yΘ), y = ⌈demand/Θ⌉ − 1
    (inverse of seed 001 Eq. 2.4); inf when Θ = 0 and demand > 0."""
    if demand <= EPS:
        return 0.0
    if res.budget <= 0:
        return math.inf
    y = math.ceil(demand / res.budget - 1e-12) - 1
    return 2 * (res.period - res.budget) + y * res.period + (demand - y * res.budget)


def prm_response_times(tasks: list[Task], res: PeriodicResource, order: str = "rm") -> list[tuple[Task, float]]:
    """Response-time bounds under RM on Γ: R_i = sbf⁻¹(e_i + Σ_{hp} ⌈R_i/p_k⌉ e_k), the
    fixed point of the RTA (seed 001 Theorem 4.2) with the supply of Eq. 2.4 (the PRM
    response-time form of Almeida & Pedreiras 2004). inf past the deadline."""
    ordered = rm_order(tasks, by=order)
    out = []
    for i, t in enumerate(ordered):
        r = sbf_inverse(res, t.wcet)
        while True:
            nxt = sbf_inverse(res, t.wcet + sum(math.ceil(r / h.period - 1e-9) * h.wcet for h in ordered[:i]))
            if nxt > t.d + EPS:
                out.append((t, math.inf))
                break
            if abs(nxt - r) <= EPS:
                out.append((t, nxt))
                break
            r = nxt
    return out
