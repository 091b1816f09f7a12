"""Periodic task model (seed 001 §4.1): T_i = (e_i, p_i, d_i), u_i = e_i / p_i.

Times are milliseconds (floats). TOML files hold ``[[task]]`` tables with ``name``,
``wcet``, ``period`` and optional ``deadline`` (default: the period), ``priority``
(smaller = higher; default: rate monotonic), ``jitter`` (release jitter), ``blocking``
(longest blocking by lower-priority work), ``partition`` (the VM / server that runs the
task) and ``measured`` (the enemy scenario whose measured maximum replaces ``wcet``).
Durations may carry units: ``"250us"``, ``"2ms"``, ``"1.5s"``. Optional ``[[partition]]``
tables give each partition's server (``budget``, ``period``, ``priority``, ``server``) and
optionally the ``cpu`` it runs on; an optional ``[system]`` table the scheduler, the release
overhead Δ^relEv (seed 001 §4.5) and the number of ``cpus`` (see :mod:`xtalk.sched.placement`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from fractions import Fraction
from pathlib import Path
from typing import Any, Iterable

from xtalk.sched.inputs import InputError, load_toml, parse_duration_ms

__all__ = ["Task", "Partition", "TaskSystem", "load_taskset", "taskset_from_dict", "hyperperiod", "rm_order"]


@dataclass(frozen=True)
class Task:
    """A periodic (or sporadic) task; times in ms."""

    name: str
    wcet: float
    period: float
    deadline: float | None = None
    priority: int | None = None
    jitter: float = 0.0
    blocking: float = 0.0
    partition: str | None = None
    measured: str | None = None

    @property
    def d(self) -> float:
        """Relative deadline (the period when not given: implicit deadline)."""
        return self.period if self.deadline is None else self.deadline

    @property
    def utilization(self) -> float:
        """u_i = e_i / p_i (seed 001 §4.1)."""
        return self.wcet / self.period

    def with_wcet(self, wcet: float) -> "Task":
        """Same task with another WCET (overhead inflation, measured WCET)."""
        return replace(self, wcet=wcet)


@dataclass(frozen=True)
class Partition:
    """A partition / VM served by a periodic resource Γ = (Θ = budget, Π = period)."""

    name: str
    budget: float
    period: float
    priority: int | None = None
    server: str = "periodic"  # periodic | deferrable | cbs
    cpu: int | None = None  # None: placed first-fit by bandwidth (sched.placement)

    @property
    def bandwidth(self) -> float:
        """Θ / Π: the share of one CPU the server reserves."""
        return self.budget / self.period


@dataclass
class TaskSystem:
    """Tasks, optional partitions and system-wide settings of one TOML file."""

    tasks: list[Task]
    partitions: list[Partition] = field(default_factory=list)
    scheduler: str = "rm"
    overhead_ms: float = 0.0
    cpus: int | None = None  # None: as many CPUs as the placement needs (partitions) or one (tasks)

    def tasks_of(self, partition: str | None) -> list[Task]:
        """Tasks that belong to ``partition`` (``None``: tasks without a partition)."""
        return [t for t in self.tasks if t.partition == partition]


_TASK_FIELDS = {"name", "wcet", "period", "deadline", "priority", "jitter", "blocking", "partition", "measured"}
_PART_FIELDS = {"name", "budget", "period", "priority", "server", "cpu"}
_SYS_FIELDS = {"scheduler", "overhead", "cpus"}
_SCHEDULERS = ("rm", "dm", "edf", "fp")
_SERVERS = ("periodic", "deferrable", "cbs")


def _duration(d: dict, key: str, where: str, required: bool = False, positive: bool = False) -> float | None:
    if key not in d:
        if required:
            raise InputError(f"{where}.{key}", "missing", f'add {key} = <ms> or a string such as "2ms"')
        return None
    v = parse_duration_ms(d[key], f"{where}.{key}")
    if positive and v <= 0:
        raise InputError(f"{where}.{key}", f"must be > 0, got {d[key]!r}", "use a positive duration")
    return v


def _check_keys(d: Any, allowed: set[str], where: str) -> dict:
    if not isinstance(d, dict):
        raise InputError(where, "must be a table", f"write [[{where.split('[')[0]}]] with key = value lines")
    for k in d:
        if k not in allowed:
            raise InputError(f"{where}.{k}", "unknown field", f"use one of {', '.join(sorted(allowed))}")
    return d


def _named(d: dict, allowed: set, where: str, example: str) -> str:
    """A [[task]] or [[partition]] table's keys checked and its name, which it must have."""
    _check_keys(d, allowed, where)
    name = d.get("name")
    if not isinstance(name, str) or not name:
        raise InputError(f"{where}.name", "missing or not a string", f'add name = "{example}"')
    return name


def _task(d: dict, i: int) -> Task:
    where = f"task[{i}]"
    name = _named(d, _TASK_FIELDS, where, "T1")
    wcet = _duration(d, "wcet", where, required="measured" not in d) or 0.0
    period = _duration(d, "period", where, required=True, positive=True)
    deadline = _duration(d, "deadline", where, positive=True)
    prio = d.get("priority")
    if prio is not None and (not isinstance(prio, int) or isinstance(prio, bool)):
        raise InputError(f"{where}.priority", f"expected an integer, got {prio!r}", "use 1 for the highest priority")
    for key in ("partition", "measured"):
        if key in d and not isinstance(d[key], str):
            raise InputError(f"{where}.{key}", f"expected a string, got {d[key]!r}", f'write {key} = "name"')
    t = Task(
        name=name,
        wcet=wcet,
        period=period,
        deadline=deadline,
        priority=prio,
        jitter=_duration(d, "jitter", where) or 0.0,
        blocking=_duration(d, "blocking", where) or 0.0,
        partition=d.get("partition"),
        measured=d.get("measured"),
    )
    if t.wcet > t.d and t.measured is None:
        raise InputError(f"{where}.wcet", f"wcet {t.wcet} ms exceeds the deadline {t.d} ms", "lower wcet or raise deadline")
    return t


def _partition(d: dict, i: int) -> Partition:
    where = f"partition[{i}]"
    name = _named(d, _PART_FIELDS, where, "VM1")
    budget = _duration(d, "budget", where, required=True, positive=True)
    period = _duration(d, "period", where, required=True, positive=True)
    if budget > period:
        raise InputError(f"{where}.budget", f"budget {budget} ms exceeds period {period} ms", "use budget <= period")
    prio = d.get("priority")
    if prio is not None and (not isinstance(prio, int) or isinstance(prio, bool)):
        raise InputError(f"{where}.priority", f"expected an integer, got {prio!r}", "use 1 for the highest priority")
    server = d.get("server", "periodic")
    if server not in _SERVERS:
        raise InputError(f"{where}.server", f"unknown server {server!r}", f"use one of {', '.join(_SERVERS)}")
    cpu = d.get("cpu")
    if cpu is not None and (not isinstance(cpu, int) or isinstance(cpu, bool) or cpu < 0):
        raise InputError(f"{where}.cpu", f"expected a CPU index >= 0, got {cpu!r}", "write cpu = 0, 1, ...")
    return Partition(name=name, budget=budget, period=period, priority=prio, server=server, cpu=cpu)


def taskset_from_dict(data: dict) -> TaskSystem:
    """Validate parsed TOML into a :class:`TaskSystem`; errors name the field."""
    _check_keys(data, {"task", "partition", "system"}, "file")
    raw = data.get("task")
    if not raw:
        raise InputError("task", "no [[task]] table", 'add [[task]] with name, wcet, period')
    if not isinstance(raw, list):
        raise InputError("task", "must be an array of tables", "write [[task]], not [task]")
    tasks = [_task(d, i) for i, d in enumerate(raw)]
    names = [t.name for t in tasks]
    for i, n in enumerate(names):
        if n in names[:i]:
            raise InputError(f"task[{i}].name", f"duplicate name {n!r}", "use unique names")
    parts = [_partition(d, i) for i, d in enumerate(data.get("partition", []))]
    pnames = {p.name for p in parts}
    for i, t in enumerate(tasks):
        if parts and t.partition is not None and t.partition not in pnames:
            raise InputError(f"task[{i}].partition", f"unknown partition {t.partition!r}", f"use one of {', '.join(sorted(pnames))}")
    system = _check_keys(data.get("system", {}), _SYS_FIELDS, "system")
    sched = system.get("scheduler", "rm")
    if sched not in _SCHEDULERS:
        raise InputError("system.scheduler", f"unknown scheduler {sched!r}", f"use one of {', '.join(_SCHEDULERS)}")
    overhead = _duration(system, "overhead", "system") or 0.0
    cpus = system.get("cpus")
    if cpus is not None and (not isinstance(cpus, int) or isinstance(cpus, bool) or cpus < 1):
        raise InputError("system.cpus", f"expected a CPU count >= 1, got {cpus!r}", "write cpus = 1, 2, ...")
    return TaskSystem(tasks=tasks, partitions=parts, scheduler=sched, overhead_ms=overhead, cpus=cpus)


def load_taskset(path: str | Path) -> TaskSystem:
    """Load a task-set TOML file (see ``examples/models/seed001-table41.toml``)."""
    return taskset_from_dict(load_toml(path))


def rm_order(tasks: Iterable[Task], by: str = "rm") -> list[Task]:
    """Tasks by decreasing priority: explicit ``priority`` first (smaller = higher), else
    rate monotonic (``by="rm"``, period) or deadline monotonic (``"dm"``); ties keep order."""
    tl = list(tasks)
    if all(t.priority is not None for t in tl):
        return sorted(tl, key=lambda t: t.priority)
    key = (lambda t: t.d) if by == "dm" else (lambda t: t.period)
    return sorted(tl, key=key)


def hyperperiod(periods: Iterable[float], resolution_ms: float = 1e-6) -> float:
    """Least common multiple of the periods (ms), computed on an integer grid of
    ``resolution_ms`` (default 1 ns) so that decimal periods work."""
    # decimal strings, not binary floats: 0.1 ms must be exactly 100 000 ns
    res = Fraction(repr(float(resolution_ms)))
    ticks = [int(round(Fraction(repr(float(p))) / res)) for p in periods]
    if any(t <= 0 for t in ticks):
        raise InputError("period", "period below the time resolution", "use periods >= 1 ns")
    return float(math.lcm(*ticks) * res)
