"""SCHED_DEADLINE admission control (Linux, seed 000 §2.4.4 and §6.7.1).

The kernel accepts a set of reservations (runtime, deadline, period) iff each satisfies
runtime ≤ deadline ≤ period and the total bandwidth fits the real-time share of the
root domain: Σ runtime_i / period_i ≤ m · sched_rt_runtime_us / sched_rt_period_us
(defaults 950 000 / 1 000 000, i.e. 95 % per CPU). Seed 000 §7.2.1 sets runtime to the
observed maximum plus a margin: :func:`reservation_from_wcet` does that.
"""

from __future__ import annotations

from dataclasses import dataclass

from xtalk.sched.inputs import InputError

__all__ = ["Reservation", "AdmissionResult", "admit", "reservation_from_wcet"]


@dataclass(frozen=True)
class Reservation:
    """One SCHED_DEADLINE task: runtime ≤ deadline ≤ period (ms)."""

    name: str
    runtime: float
    deadline: float
    period: float

    @property
    def bandwidth(self) -> float:
        """runtime / period."""
        return self.runtime / self.period


@dataclass(frozen=True)
class AdmissionResult:
    """Verdict, total bandwidth, the limit, and the first reason for a refusal."""

    admitted: bool
    total_bandwidth: float
    limit: float
    reason: str = ""


def admit(
    reservations: list[Reservation],
    cpus: int = 1,
    rt_runtime_us: int = 950_000,
    rt_period_us: int = 1_000_000,
) -> AdmissionResult:
    """Kernel admission test: per-task ordering, then Σ runtime/period ≤ m·rt_runtime/rt_period.

    ``rt_runtime_us = -1`` (no limit, as in the kernel) allows the full m CPUs."""
    if cpus < 1:
        raise InputError("cpus", f"must be >= 1, got {cpus}", "give the number of CPUs of the root domain")
    if rt_period_us <= 0:
        raise InputError("rt_period_us", "must be > 0", "use the value of /proc/sys/kernel/sched_rt_period_us")
    limit = cpus * (1.0 if rt_runtime_us < 0 else rt_runtime_us / rt_period_us)
    total = sum(r.bandwidth for r in reservations)
    for r in reservations:
        if not (0 < r.runtime <= r.deadline <= r.period):
            return AdmissionResult(False, total, limit, f"{r.name}: need 0 < runtime <= deadline <= period")
    if total > limit + 1e-12:
        return AdmissionResult(False, total, limit, f"total bandwidth {total:.4f} > {limit:.4f}")
    return AdmissionResult(True, total, limit)


def reservation_from_wcet(name: str, wcet: float, period: float, deadline: float | None = None, margin: float = 0.1) -> Reservation:
    """runtime = observed maximum × (1 + margin) (seed 000 §7.2.1); deadline defaults to the period."""
    if margin < 0:
        raise InputError("margin", f"negative margin {margin}", "use a margin >= 0, e.g. 0.1 for 10 %")
    return Reservation(name, wcet * (1 + margin), period if deadline is None else deadline, period)
