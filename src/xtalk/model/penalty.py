"""Interference counts → time, with a penalty per interference and component.

Seed 000 left the conversion to time out of scope (§4.3.3: "delays … are never
quantified"; §8.3.1 asks for timed models calibrated from measurements). Here each
component gets a penalty in ns per interference (calibrated later from measurements,
e.g. bus occupancy of one request, L2 refill vs hit, DRAM row miss vs hit), and

    WCET_inflated(T) = WCET_alone(T) + Σ_{component c} Σ_{segment j} max_nb[c, j, T] · penalty_c

which is an upper bound because each counter is bounded separately. ``joint_penalty_ns``
computes the exact maximum of Σ count·penalty over interleavings instead (never larger).
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from xtalk.model.explorer import ExplorationResult, explore
from xtalk.model.platform import Platform
from xtalk.model.semantics import compile_platform
from xtalk.sched.inputs import InputError

__all__ = ["interference_time_ns", "inflated_wcet_ns", "joint_penalty_ns"]


def _check(components: list[str], path: tuple[str, ...], penalties_ns: Mapping[str, float], task: str) -> None:
    for name, v in penalties_ns.items():
        if name not in components:
            raise InputError(f"penalties.{name}", "unknown component", f"use one of {', '.join(components)}")
        if v < 0:
            raise InputError(f"penalties.{name}", f"negative penalty {v}", "use a value >= 0 ns")
    missing = [c for c in path if c not in penalties_ns]
    if missing:
        raise InputError(f"penalties.{missing[0]}", f"no penalty for a component on {task}'s path", "add it (ns)")


def interference_time_ns(result: ExplorationResult, penalties_ns: Mapping[str, float], task: str) -> float:
    """Σ over components and segments of (max interference count × penalty in ns)."""
    cm = result.compiled
    if task not in cm.task_names:
        raise InputError("task", f"unknown task {task!r}", f"use one of {', '.join(cm.task_names)}")
    path = cm.platform.task[cm.task_names.index(task)].path
    _check(cm.comp_names, path, penalties_ns, task)
    return float(sum(v * penalties_ns[c] for (t, c, _), v in result.maxima.items() if t == task))


def inflated_wcet_ns(
    wcet_alone_ns: float, result: ExplorationResult, penalties_ns: Mapping[str, float], task: str
) -> float:
    """Interference-inflated WCET: measured/analysed WCET alone plus the penalty bound."""
    if wcet_alone_ns < 0:
        raise InputError("wcet_alone_ns", f"negative WCET {wcet_alone_ns}", "use a value >= 0")
    return wcet_alone_ns + interference_time_ns(result, penalties_ns, task)


def joint_penalty_ns(platform: Platform, penalties_ns: Mapping[str, float], task: str) -> tuple[float, ExplorationResult]:
    """Exact max over interleavings of Σ count·penalty for ``task`` (one extra objective)."""
    cm = compile_platform(platform)
    if task not in cm.task_names:
        raise InputError("task", f"unknown task {task!r}", f"use one of {', '.join(cm.task_names)}")
    ti = cm.task_names.index(task)
    _check(cm.comp_names, platform.task[ti].path, penalties_ns, task)
    w = np.zeros((1, cm.n_counters))
    for ci, name in enumerate(cm.comp_names):
        for g in range(cm.n_gseg):
            w[0, cm.counter(ti, ci, g)] = penalties_ns.get(name, 0.0)
    res = explore(cm, witnesses=True, weights=w)
    return res.objectives[0], res
