"""Platform and bus-access-profile types for the interference model (seed 000 §4.2–4.3).

A platform has cores with private L1 caches, transport components (buses: seed 000
Definition 1) and storage components (shared caches and DRAM banks with a row buffer:
seed 000 Definition 2). Each task runs on one core and has a bus-access profile: a
sequence of segments with a duration ``d_{i,j}`` and at most ``μ_{i,j}`` requests leaving
the core (seed 000 §4.1, after Carle et al.), optionally with the addresses they touch.
Everything loads from TOML; see ``examples/models/seed000-example.toml``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from xtalk.sched.inputs import InputError, from_validation_error, load_toml

__all__ = [
    "L1Cache",
    "Transport",
    "CacheStorage",
    "DramBank",
    "Segment",
    "TaskProfile",
    "Schedule",
    "Platform",
    "load_platform",
    "platform_from_dict",
]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class L1Cache(_Strict):
    """Private L1 of one core. Profiles count requests that leave it (seed 000 §4.1), so it
    does not enter the exploration; it is kept to describe the platform completely."""

    core: int = Field(ge=0)
    size_bytes: int = Field(gt=0)
    ways: int = Field(default=4, gt=0)
    line_bytes: int = Field(default=64, gt=0)


class Transport(_Strict):
    """A transport component (seed 000 Definition 1), e.g. the AHB bus."""

    name: str
    arbitration: Literal["fifo"] = "fifo"


class CacheStorage(_Strict):
    """A shared set-associative cache (storage component, seed 000 Definition 2).

    ``interference = "outcome"`` counts an access as a delayed interference when it would
    hit in the task's private ("as if alone") view but misses in the actual cache;
    ``"state"`` is the seed's literal rule: the accessed set differs between the views.
    """

    kind: Literal["cache"] = "cache"
    name: str
    sets: int = Field(gt=0)
    ways: int = Field(gt=0)
    line_bytes: int = Field(gt=0)
    policy: Literal["lru", "fifo"] = "lru"
    interference: Literal["outcome", "state"] = "outcome"


class DramBank(_Strict):
    """DRAM whose banks each keep the last opened row in a row buffer (seed 000 §4.2).

    With ``banks > 1`` consecutive rows are interleaved over the banks
    (bank = row mod banks), each bank with its own row buffer."""

    kind: Literal["dram"] = "dram"
    name: str
    row_bytes: int = Field(gt=0)
    banks: int = Field(default=1, gt=0)
    interference: Literal["outcome", "state"] = "outcome"


class Segment(_Strict):
    """One segment of a bus-access profile: duration and at most ``max_requests`` requests.

    ``addresses`` (optional) lists the address of each request in order; without it each
    task touches one private line that conflicts with every other task's line (the
    adversarial default, see docs/models.md).
    """

    duration: float = Field(gt=0)
    max_requests: int = Field(ge=0)
    addresses: tuple[int, ...] | None = None

    @model_validator(mode="after")
    def _addresses_match(self) -> "Segment":
        if self.addresses is not None and len(self.addresses) != self.max_requests:
            raise ValueError(
                f"addresses has {len(self.addresses)} entries but max_requests is {self.max_requests}"
            )
        return self


class TaskProfile(_Strict):
    """A task pinned on a core, the path of its requests and its segment sequence."""

    name: str
    core: int = Field(ge=0)
    path: tuple[str, ...]
    segment: tuple[Segment, ...] = Field(min_length=1)


class Schedule(_Strict):
    """Segment schedule: the profiles repeat with ``period`` for ``periods`` periods.

    ``warm_start`` makes each task's private view start from the state it would have after
    one period alone, while the shared actual state starts empty (see docs/models.md).
    """

    period: float = Field(gt=0)
    periods: int = Field(default=1, ge=1)
    warm_start: bool = True


class Platform(_Strict):
    """The whole interference model input: hardware, task profiles and schedule."""

    name: str = "platform"
    cores: int = Field(gt=0)
    l1: tuple[L1Cache, ...] = ()
    transport: tuple[Transport, ...] = ()
    storage: tuple[CacheStorage | DramBank, ...] = ()
    task: tuple[TaskProfile, ...] = Field(min_length=1)
    schedule: Schedule

    @model_validator(mode="after")
    def _check_references(self) -> "Platform":
        names = [c.name for c in self.transport] + [s.name for s in self.storage]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"component name {sorted(dup)[0]!r} is used twice")
        tnames = [t.name for t in self.task]
        if len(set(tnames)) != len(tnames):
            raise ValueError("task names must be unique")
        transports = {c.name for c in self.transport}
        storages = {s.name for s in self.storage}
        cores_used: set[int] = set()
        for t in self.task:
            if t.core >= self.cores:
                raise ValueError(f"task {t.name!r} is on core {t.core} but the platform has {self.cores} cores")
            if t.core in cores_used:
                raise ValueError(f"task {t.name!r}: core {t.core} already hosts a task (one task per core)")
            cores_used.add(t.core)
            n_transport = 0
            seen_storage = False
            for comp in t.path:
                if comp not in transports and comp not in storages:
                    raise ValueError(f"task {t.name!r}: path names unknown component {comp!r}")
                if comp in transports:
                    n_transport += 1
                    if seen_storage:
                        raise ValueError(f"task {t.name!r}: transport {comp!r} must come before storage in path")
                else:
                    seen_storage = True
            if n_transport > 1:
                raise ValueError(f"task {t.name!r}: path crosses {n_transport} transports; at most one is modelled")
            total = sum(s.duration for s in t.segment)
            if total > self.schedule.period + 1e-9:
                raise ValueError(
                    f"task {t.name!r}: segment durations sum to {total} > period {self.schedule.period}"
                )
        return self

    @property
    def components(self) -> tuple[str, ...]:
        """Component names, transports first, in declaration order."""
        return tuple(c.name for c in self.transport) + tuple(s.name for s in self.storage)


def platform_from_dict(data: dict, source: str = "platform") -> Platform:
    """Validate a dict (parsed TOML) into a :class:`Platform`; errors name the field."""
    flat = dict(data)
    head = flat.pop("platform", {})
    if not isinstance(head, dict):
        raise InputError("platform", "must be a table", "write [platform] with cores = N")
    merged = {**head, **flat}
    try:
        return Platform.model_validate(merged)
    except ValidationError as exc:
        raise from_validation_error(exc, prefix="") from exc


def load_platform(path: str | Path) -> Platform:
    """Load a platform TOML file (see ``examples/models/seed000-example.toml``)."""
    return platform_from_dict(load_toml(path), source=str(path))
