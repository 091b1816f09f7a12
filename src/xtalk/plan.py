"""The run plan: the one contract between host and agent (version 1).

These models mirror `agent/src/plan.rs`; an enemy's load and a victim's body are made from the agent's catalog
(catalog.py), as the agent makes them from its enemies' and bodies' declarations; `xtalk plan --schema` prints the JSON Schema
generated from them, and `src/xtalk/schema/run-plan.schema.json` is that schema checked in
(a test keeps the two identical and feeds generated plans to the agent's own parser).
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Annotated, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, create_model, model_validator

from . import catalog
from .limits import MAX_ENEMIES, MAX_JOBS, MAX_PERIOD_NS, MAX_PIDS, MAX_TIMEOUT_S

PLAN_VERSION = 1

#: A measured process's name: a directory (`applications/<name>/`) and a value of the
#: results' `application` column (agent/src/check.rs `valid_name`).
NAME_PATTERN = r"^[A-Za-z0-9_.-]{1,64}$"
#: The victim's name when the plan gives none.
DEFAULT_VICTIM_NAME = "victim"
#: Most applications of one plan: agent/src/plan.rs MAX_APPLICATIONS (one control-block
#: slot each).
MAX_APPLICATIONS = 64


class _Strict(BaseModel):
    # JSON has no inf or nan: refused here rather than written as null.
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class JobsFrom(_Strict):
    """Where a command's jobs come from (config/jobs_from.py): the spans of probe `probe`
    (to the next end of `end`), woken at probe `release`, released every `period_ns` where
    declared, the first `warmup_jobs` of them warm-up; or the scheduler trace of thread `trace` ("main" or a thread name). The agent
    runs the program as one job; the host derives these jobs from the run's records."""

    probe: Optional[str] = None
    end: Optional[str] = None
    release: Optional[str] = None
    trace: Optional[str] = None
    period_ns: Optional[int] = Field(default=None, ge=1)
    warmup_jobs: int = Field(default=0, ge=0, le=MAX_JOBS)


class Task(_Strict):
    """One periodic task of a task set: a calibrated busy loop of `wcet_ns` per job."""

    name: str = Field(min_length=1)
    period_ns: int = Field(ge=100_000, le=MAX_PERIOD_NS)
    wcet_ns: int = Field(ge=1000)
    deadline_ns: Optional[int] = Field(default=None, ge=1)
    priority: Optional[int] = Field(default=None, ge=1, le=99)
    runtime_ns: Optional[int] = Field(default=None, ge=1024)


def _field(p: catalog.Param) -> tuple:
    """The pydantic field of one declared parameter (an enemy's load or a victim's body)."""
    if p.type == "json":  # a structured value: the host's model of its shape
        shape = {"map": (dict[str, str], {}), "tasks": (list[Task], {"min_length": 1, "max_length": catalog.limit("max_tasks")}),
                 "jobs_from": (JobsFrom, {})}
        typ, extra = shape[p.shape or ""]
        if p.required:
            return typ, Field(description=p.doc, **extra)
        if p.shape == "map":
            return typ, Field(default_factory=dict, description=p.doc)
        return Optional[typ], Field(default=None, description=p.doc)
    if p.type == "u64":
        typ, extra = int, {"ge": p.min if p.min is not None else 0, "le": p.max, "multiple_of": p.multiple_of}
    elif p.type == "bool":
        typ, extra = bool, {}
    elif p.type == "str":
        typ, extra = str, {"min_length": 1}
    elif p.type == "strings":
        typ, extra = list[str], {"min_length": 1}
    else:
        typ, extra = Literal[tuple(p.choices)], {}  # type: ignore[misc]
    extra = {key: v for key, v in extra.items() if v is not None}
    if p.required:
        return typ, Field(description=p.doc, **extra)
    if p.default is None:
        return Optional[typ], Field(default=None, description=p.doc, **extra)
    return typ, Field(default=p.default, description=p.doc, **extra)


def _entry_model(entry, suffix: str, base: type[BaseModel]) -> type[BaseModel]:
    """The plan's model of one catalog entry (a victim body or an enemy kind's load): `kind`
    naming it, then its declared parameters."""
    fields: dict = {"kind": (Literal[entry.name], entry.name)}  # type: ignore[valid-type]
    fields.update({p.name: _field(p) for p in entry.params})
    return create_model(f"{entry.name.capitalize()}{suffix}", __base__=base, __doc__=entry.doc, **fields)


#: The model of every victim body of the catalog, by body.
BODY_MODELS: dict[str, type[BaseModel]] = {b.name: _entry_model(b, "Body", _Strict) for b in catalog.current().bodies.values()}

Body = Annotated[Union[tuple(BODY_MODELS.values())], Field(discriminator="kind")]  # type: ignore[valid-type]


def body_model(name: str) -> type[BaseModel]:
    """The plan model of the body named `name` (KeyError when the catalog has none)."""
    return BODY_MODELS[name]


class _DeferredStrict(_Strict):
    # A load's own validator is built on first use: plans validate loads through `Enemy`'s,
    # and 34 validators built at import were a third of `xtalk plan`'s start-up.
    model_config = ConfigDict(defer_build=True)


#: The load model of every kind of the catalog, by kind.
LOAD_MODELS: dict[str, type[BaseModel]] = {k.name: _entry_model(k, "Load", _DeferredStrict)
                                           for k in catalog.current().kinds.values()}

Load = Annotated[Union[tuple(LOAD_MODELS.values())], Field(discriminator="kind")]  # type: ignore[valid-type]


class Placement(_Strict):
    """Pinned CPU list, or unpinned when `cpus` is null."""

    cpus: Optional[list[int]] = None


class OtherSched(_Strict):
    policy: Literal["other"] = "other"
    nice: int = Field(default=0, ge=-20, le=19)


class FifoSched(_Strict):
    policy: Literal["fifo"] = "fifo"
    priority: int = Field(ge=1, le=99)


class RrSched(_Strict):
    policy: Literal["rr"] = "rr"
    priority: int = Field(ge=1, le=99)


class DeadlineSched(_Strict):
    """SCHED_DEADLINE reservation: runtime <= deadline <= period (ns)."""

    policy: Literal["deadline"] = "deadline"
    runtime_ns: int = Field(ge=1024)
    deadline_ns: int = Field(ge=1024)
    period_ns: int = Field(ge=1024)


Sched = Annotated[Union[OtherSched, FifoSched, RrSched, DeadlineSched], Field(discriminator="policy")]


class Counter(_Strict):
    """A counter read around every job: a perf event name, a raw code r<hex> or a sysfs alias."""

    event: str = Field(min_length=1)
    optional: bool = False


class IoMax(_Strict):
    """I/O limits per second on block devices: those named "MAJ:MIN" and the disks holding
    `paths` (resolved on the target; a path with no block device, tmpfs say, has none)."""

    paths: list[str] = []
    devices: list[Annotated[str, Field(pattern=r"^[0-9]+:[0-9]+$")]] = []
    rbps: Optional[int] = Field(default=None, ge=1)
    wbps: Optional[int] = Field(default=None, ge=1)
    riops: Optional[int] = Field(default=None, ge=1)
    wiops: Optional[int] = Field(default=None, ge=1)


class Group(_Strict):
    """A control group (partition): cpuset (exclusive, isolated), CPU bandwidth, RT group
    bandwidth, memory, I/O, pids."""

    name: str = Field(pattern=r"^[A-Za-z0-9_-]+$")
    cpus: Optional[list[int]] = None
    mems: Optional[str] = None
    exclusive: bool = False
    isolated: bool = False
    cpu_quota_us: Optional[int] = Field(default=None, ge=1)
    cpu_period_us: Optional[int] = Field(default=None, ge=1000, le=1_000_000)
    cpu_weight: Optional[int] = Field(default=None, ge=1, le=10000)
    rt_runtime_us: Optional[int] = Field(default=None, ge=1)
    rt_period_us: Optional[int] = Field(default=None, ge=1)
    memory_max: Optional[int] = Field(default=None, ge=4 << 20)
    memory_high: Optional[int] = Field(default=None, ge=1)
    pids_max: Optional[int] = Field(default=None, ge=1, le=MAX_PIDS)
    freezable: bool = False
    io_max: Optional[IoMax] = None
    cache_ways: Optional[list[Annotated[int, Field(ge=0, le=63)]]] = Field(default=None, min_length=1)
    mb_percent: Optional[int] = Field(default=None, ge=1, le=100)


class Regulator(_Strict):
    """Memory-bandwidth regulator: budget bytes per period per enemy, or feedback on the
    victim's job time (target_exec_ns)."""

    period_us: int = Field(ge=1000, le=100_000)
    budget_bytes: Optional[int] = Field(default=None, ge=1)
    target_exec_ns: Optional[int] = Field(default=None, ge=1)
    enemies: list[str] = []
    throttle: Literal["signal", "freeze"] = "signal"
    priority: int = Field(default=95, ge=1, le=99)
    source: Literal["cooperative", "hardware"] = "cooperative"
    event: str = "LLC-load-misses"
    bytes_per_event: int = Field(default=64, ge=1)


class Victim(_Strict):
    """A measured process: the victim (named "victim" unless given a name)."""

    name: str = Field(default=DEFAULT_VICTIM_NAME, pattern=NAME_PATTERN)
    body: Body
    period_ns: int = Field(ge=10_000, le=MAX_PERIOD_NS)
    deadline_ns: Optional[int] = Field(default=None, ge=1, le=MAX_PERIOD_NS)
    jobs: int = Field(ge=1, le=MAX_JOBS)
    warmup_jobs: int = Field(default=0, ge=0, le=MAX_JOBS)
    placement: Placement = Placement()
    sched: Sched = OtherSched()
    lock_memory: bool = False
    huge_pages: bool = False
    group: Optional[str] = None
    counters: list[Counter] = []
    counters_exclude_kernel: bool = False


class Application(Victim):
    """A further measured process beside the victim: the victim's fields, a required name,
    and `may_fail` (its death is recorded and the run goes on; otherwise it ends the run)."""

    name: str = Field(pattern=NAME_PATTERN)
    may_fail: bool = False


class Enemy(_Strict):
    name: str = Field(min_length=1)
    load: Load
    placement: Placement = Placement()
    sched: Sched = OtherSched()
    lock_memory: bool = False
    huge_pages: bool = False
    intensity: float = Field(default=100.0, gt=0, le=100)
    rate: Optional[float] = Field(default=None, gt=0)
    group: Optional[str] = None


# "subsystem:event" (or a bare event): the agent builds tracefs paths from these names, so
# nothing that could leave tracefs ("..", "/") is a name.
TRACE_EVENT_PATTERN = r"^[A-Za-z0-9_-]{1,128}(:[A-Za-z0-9_-]{1,128})?$"
TraceEvent = Annotated[str, Field(pattern=TRACE_EVENT_PATTERN)]


#: A segment's name: its job-table column is `seg_<name>_ns`.
SEGMENT_NAME_PATTERN = r"^[a-z][a-z0-9_]{0,47}$"
#: A field of a trace event (the kernel's name, as in the event's format file).
FIELD_PATTERN = r"^[a-z_][a-z0-9_]{0,63}$"
#: A `where` value that stands for the victim's pid (its traced thread where its jobs come
#: from the trace).
VICTIM = "$victim"
#: Filters of one end of a segment.
MAX_WHERE = 8
#: Segments of one run.
MAX_SEGMENTS = 32


class SegmentEnd(_Strict):
    """One end of a segment: an event of the trace, with filters (trace/segments.py)."""

    event: TraceEvent
    victim: bool = Field(default=False, description="only events logged in the victim's own context (their pid is the victim)")
    where: dict[Annotated[str, Field(pattern=FIELD_PATTERN)], Union[int, Annotated[str, Field(max_length=256)]]] = Field(
        default={}, max_length=MAX_WHERE,
        description=f"field = value, the field as the event's format file names it (common_pid: the task that logged "
                    f"it; cpu: the CPU that logged it): only events whose field equals the value (\"{VICTIM}\": the victim's pid)")


class Segment(_Strict):
    """The time from an event `start` to an event `end` (each `end` with the latest `start`
    before it), per job of the victim: the job-table column `seg_<name>_ns` (trace/segments.py)."""

    name: Annotated[str, Field(pattern=SEGMENT_NAME_PATTERN)]
    start: SegmentEnd
    end: SegmentEnd
    occurrence: Literal["first", "last"] = Field(
        default="first", description="which pair of the job counts: its first or its last")


def segment_problem(segments: list["Segment"], events: list[str], at: str) -> str | None:
    """`field: problem; fix` for the first segment that repeats a name or names an event the
    trace does not capture, else None (the same check as agent/src/check.rs `check_trace`)."""
    seen: set[str] = set()
    short = {e.split(":")[-1] for e in events}
    for i, s in enumerate(segments):
        if s.name in seen:
            return f"{at}[{i}].name: '{s.name}' is given twice; give each segment its own name"
        seen.add(s.name)
        for end, key in ((s.start, "start"), (s.end, "end")):
            if end.event not in events and end.event.split(":")[-1] not in short:
                return (f"{at}[{i}].{key}.event: '{end.event}' is not traced; add it to trace.events "
                        f"(traced: {', '.join(events)})")
    return None


class Trace(_Strict):
    """Kernel trace of the measured window through tracefs (root only)."""

    # sched_waking: logged in the waker's own context (sched_wakeup may be logged on the
    # woken task's CPU), so it names who woke the victim (trace/wakers.py).
    events: list[TraceEvent] = Field(default=["sched:sched_switch", "sched:sched_waking", "sched:sched_wakeup",
                                              "sched:sched_migrate_task", "irq:irq_handler_entry", "irq:irq_handler_exit",
                                              "irq:softirq_entry", "irq:softirq_exit", "timer:hrtimer_expire_entry",
                                              "timer:hrtimer_expire_exit"],
                                     min_length=1)
    buffer_kb: int = Field(default=8192, ge=64, le=1 << 20)
    # Read by the host only (the agent checks and carries them): per-job segment columns.
    segments: list[Segment] = Field(default=[], max_length=MAX_SEGMENTS)

    @model_validator(mode="after")
    def _segment_events(self) -> "Trace":
        why = segment_problem(self.segments, self.events, "segments")
        if why:
            raise ValueError(why)
        return self


class Plan(_Strict):
    """Everything one run needs; the agent executes exactly this."""

    version: Literal[1] = PLAN_VERSION
    run_id: str = Field(min_length=1, max_length=200)
    timeout_s: float = Field(gt=0, le=MAX_TIMEOUT_S)
    settle_ms: float = Field(default=200.0, ge=0, le=60_000)
    victim: Victim
    applications: list[Application] = Field(default=[], max_length=MAX_APPLICATIONS)
    enemies: list[Enemy] = Field(default=[], max_length=MAX_ENEMIES)
    trace: Optional[Trace] = None
    groups: list[Group] = []
    housekeeping_cpus: Optional[list[int]] = None
    steer_irqs: bool = False
    regulator: Optional[Regulator] = None
    pids_max: Optional[int] = Field(default=None, ge=1, le=MAX_PIDS, description="the whole run's process budget (the stand-in for the machine's PID table)")
    labels: dict[str, str] = {}

    @model_validator(mode="after")
    def _unique_names(self) -> "Plan":
        seen = {self.victim.name}
        for i, a in enumerate(self.applications):
            if a.name in seen:
                raise ValueError(f"applications[{i}].name: '{a.name}' is used twice; names are unique across the victim and the applications")
            seen.add(a.name)
        return self

    def measured(self) -> list[Victim]:
        """Every measured process: the victim first, then the applications in plan order."""
        return [self.victim, *self.applications]

    def to_json(self) -> str:
        return self.model_dump_json(indent=2)


def victim_seconds(v: Victim) -> float:
    """How long the victim runs: its jobs' periods, or a task set's hyperperiods (its jobs
    count the records of every task) plus the one a late task may use to finish. The one
    rule for the host (expansion, estimates); the agent's check.rs `run_periods` agrees
    (tests/test_catalog.py)."""
    tasks = next((getattr(v.body, p.name) for p in catalog.body(v.body.kind).params if p.shape == "tasks"), None)
    if tasks:  # a task set's body
        per = sum(v.period_ns // t.period_ns for t in tasks)
        return ((v.jobs + v.warmup_jobs) // per + 1) * v.period_ns / 1e9
    return (v.jobs + v.warmup_jobs) * v.period_ns / 1e9


def run_seconds(plan: "Plan") -> float:
    """The measured part of a run: settle time plus the longest measured process's run
    (the victim's, or an application's; agent/src/plan.rs `run_seconds`)."""
    return plan.settle_ms / 1e3 + max(victim_seconds(v) for v in plan.measured())


def schema_of(model: type[BaseModel], name: str) -> dict:
    """The JSON Schema of a contract model, with its id (`name`-v1: run-plan, run-outcome)."""
    schema = model.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = f"https://xtalk.dev/schema/{name}-v1.json"
    return schema


def shipped_schema(name: str) -> dict:
    """The schema file shipped in the package (src/xtalk/schema/`name`.schema.json)."""
    return json.loads(resources.files("xtalk").joinpath(f"schema/{name}.schema.json").read_text())


def json_schema() -> dict:
    """The run plan's JSON Schema, generated from the models above."""
    return schema_of(Plan, "run-plan")


def checked_in_schema() -> dict:
    """The schema file shipped in the package (src/xtalk/schema/run-plan.schema.json)."""
    return shipped_schema("run-plan")
