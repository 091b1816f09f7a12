"""The experiment file (TOML): one victim, enemy scenarios, placement, policy, repetitions.

Parsing is strict: an unknown key, a wrong type or a missing field is reported as one line
`FILE: field: problem; fix`. See examples/quickstart.toml and docs/experiments.md.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Annotated, ClassVar, Literal, Optional, Union

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PrivateAttr, ValidationError, field_validator, model_validator

from ..errors import UsageError
from .. import catalog
from ..plan import FIELD_PATTERN, MAX_SEGMENTS, SEGMENT_NAME_PATTERN, TRACE_EVENT_PATTERN, Segment, Trace, segment_problem
from .. import limits
from .configuration import ConfigurationSpec
from . import deprecations
from .epsilon import ApplicationEpsilon, VictimEpsilon
from .jobs_from import JobsFromSpec, check_jobs_from, check_probe_names
from .suggest import did_you_mean, keys_at, quoted_choices
from .tomlfile import read_toml


def _finite(value):
    """Refuse inf and nan in a duration or size before the union tries each type (its
    errors would be three lines about int, float and str)."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{value} is not a finite number; write e.g. \"10ms\" or \"8MiB\"")
    return value


Duration = Annotated[Union[int, float, str], BeforeValidator(_finite)]
Size = Annotated[Union[int, float, str], BeforeValidator(_finite)]
Cpus = Union[int, str, list[int]]
Name = Annotated[str, Field(min_length=1, max_length=limits.MAX_NAME, pattern=r"^[A-Za-z0-9_.+-]+$")]


#: The victim bodies of the agent's catalog (catalog.py); an unknown body is refused.
BodyName = Literal[tuple(catalog.body_names())]  # type: ignore[valid-type]


class _Strict(BaseModel):
    # inf and nan are refused in every number (TOML has both).
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class Reservation(_Strict):
    """SCHED_DEADLINE parameters; deadline and period default to the victim's period. Under
    another policy, `runtime` is the budget configuration presets give the victim (its
    observed maximum plus a margin, seed 000 §7.2.1)."""

    runtime: Duration
    deadline: Optional[Duration] = None
    period: Optional[Duration] = None


class SchedSpec(_Strict):
    """Placement and scheduling of one process."""

    cpus: Optional[Cpus] = None
    policy: Literal["other", "fifo", "rr", "deadline"] = "other"
    priority: Optional[int] = Field(default=None, ge=1, le=99)
    nice: int = Field(default=0, ge=-20, le=19)
    reservation: Optional[Reservation] = None
    lock_memory: bool = False
    huge_pages: bool = Field(default=False, description="back buffers with transparent huge pages")

    @model_validator(mode="after")
    def _policy_fields(self):
        if self.policy in ("fifo", "rr") and self.priority is None:
            raise ValueError(f"policy '{self.policy}' needs 'priority' (1..99)")
        if self.policy == "deadline" and self.reservation is None:
            raise ValueError("policy 'deadline' needs a 'reservation' table with runtime (and optionally deadline, period)")
        return self


#: A perf event name, raw code or sysfs alias (the longest are about 100 characters).
EventName = Annotated[str, Field(min_length=1, max_length=256)]


class CounterSpec(_Strict):
    event: EventName
    optional: bool = False


class TaskSpec(_Strict):
    """One periodic task of a `taskset` victim."""

    name: str = Field(min_length=1, max_length=limits.MAX_NAME)
    period: Duration
    wcet: Duration = Field(description="busy-loop CPU time per job")
    deadline: Optional[Duration] = None
    priority: Optional[int] = Field(default=None, ge=1, le=99, description="task_policy 'rm': fixed priority (default: rate-monotonic)")
    runtime: Optional[Duration] = Field(default=None, description="task_policy 'deadline': reservation budget (default: wcet + 5 % + 50 us)")


class VictimSpec(SchedSpec):
    body: BodyName
    bytes: Optional[Size] = None
    order: Literal["random", "linear"] = "random"
    accesses: Optional[int] = Field(default=None, ge=1)
    iterations: Optional[int] = Field(default=None, ge=1)
    calls: Optional[int] = Field(default=None, ge=1, description="syscall: system calls per job")
    utilization: Optional[Union[float, str]] = Field(
        default=None, description="chase, pi, syscall: the work per job that takes this share of the period solo "
                                  "(\"30%\"), calibrated on the target before the runs")
    seed: int = Field(default=0, ge=0)
    argv: Optional[list[str]] = Field(default=None, description="command: the program and its arguments")
    env: dict[str, str] = {}
    preload: Optional[str] = Field(default=None, description="command: a library to LD_PRELOAD (syscall probes)")
    probe_capacity: int = Field(default=1 << 18, ge=1, le=1 << 26)
    probes: dict[str, str] = Field(default={}, description="command: names of the program's probe ids, e.g. { 1 = \"step\" }")
    jobs_from: Optional[JobsFromSpec] = Field(
        default=None, description="command: the program's jobs are a probe's spans ({ probe = \"step\" }, optional end, "
                                  "release) or the scheduler trace of a thread ({ trace = \"main\" }); config/jobs_from.py")
    pid: Optional[int] = Field(default=None, ge=2, le=2**31 - 1, description="attach: the running process to measure")
    duration: Optional[Duration] = Field(default=None, description="attach: how long each run watches it (e.g. \"2s\")")
    data: str = Field(default="aocs-data", description="aocs: directory of aocs-input.bin / aocs-expected.bin (generated when absent)")
    data_seed: int = Field(default=0, ge=0, description="aocs: sensor-noise seed used when generating the data")
    first_step: int = Field(default=0, ge=0, description="aocs: scenario step of the first job (e.g. 3000)")
    steps_per_job: int = Field(default=1, ge=1, le=100_000,
                               description="aocs: consecutive scenario steps per job (a step costs µs on a PC, ms on the "
                                           "seed's flight processor)")
    repeat_step: Optional[int] = Field(default=None, ge=1, le=1_000_000,
                                       description="aocs: each step computed this many times (all but the last on a "
                                                   "scratch copy): the work of a processor that many times slower, the "
                                                   "same outputs (default 1, or calibrated from `utilization`)")
    tasks: Optional[list[TaskSpec]] = Field(default=None, max_length=64, description="taskset: the periodic tasks")
    task_policy: Literal["rm", "deadline"] = "rm"
    hyperperiods: Optional[int] = Field(default=None, ge=1, le=limits.MAX_JOBS, description="taskset: measured hyperperiods")
    warmup_hyperperiods: int = Field(default=1, ge=0, le=limits.MAX_JOBS)
    period: Optional[Duration] = None
    deadline: Optional[Duration] = None
    jobs: Optional[int] = Field(default=None, ge=1, le=limits.MAX_JOBS)
    warmup_jobs: int = Field(default=10, ge=0, le=limits.MAX_JOBS)
    counters: list[Union[EventName, CounterSpec]] = Field(default=[], max_length=64, description="events read around every job")
    counters_exclude_kernel: bool = False
    epsilon: Optional[VictimEpsilon] = Field(default=None, description="the victim's ε: { metric, statistic, bound } (config/epsilon.py)")
    #: A command's period where the file declares none: a placeholder until the pilot run
    #: measures the program (pilot.py; the victim only: applications keep a long one).
    COMMAND_PERIOD: ClassVar[str] = "1s"
    #: Whether the file gave `period` (a command's default is filled in below).
    _period_declared: bool = PrivateAttr(default=True)
    #: A command's `warmup_jobs` as the file gave it (None: not given), for its declared jobs.
    _warmup_declared: Optional[int] = PrivateAttr(default=None)

    def warmup_declared(self) -> Optional[int]:
        """A command's warm-up jobs as the file gave them (None: the default)."""
        return self._warmup_declared

    def period_declared(self) -> bool:
        """Whether the file declared the period (for a command: releases follow from it)."""
        return self._period_declared

    def _attach_fields(self) -> None:
        """body 'attach': a PID and a duration; jobs from the trace (its main thread unless named)."""
        if self.pid is None:
            raise ValueError("body 'attach' needs 'pid', the running process to measure (e.g. pid = 1234)")
        if self.duration is None:
            raise ValueError("body 'attach' needs 'duration', how long each run watches it (e.g. \"2s\")")
        if self.argv is not None or self.preload is not None or self.env or self.probes:
            raise ValueError("an attached process is already running: 'argv', 'env', 'preload' and 'probes' are for "
                             "body 'command'; remove them")
        moves = [k for k in ("cpus", "policy", "priority", "nice", "reservation", "lock_memory", "huge_pages", "counters")
                 if k in self.model_fields_set]
        if moves:
            raise ValueError(f"'{moves[0]}': xtalk never moves, re-prioritises or reads counters of a process it attaches to; "
                             "remove it (place the enemies instead)")
        if self.jobs_from is None:
            self.jobs_from = JobsFromSpec(trace="main")

    @model_validator(mode="after")
    def _body_fields(self):
        body = catalog.body(self.body) if self.body in catalog.body_names() else None
        if body is not None and (p := body.param("bytes")) is not None and p.required and self.bytes is None:
            raise ValueError(f"body '{self.body}' needs 'bytes' (e.g. \"llc/4\" or \"8MiB\")")
        work = body.work if body is not None else None
        if self.utilization is not None:
            if work is None:
                knobs = ", ".join(b.name for b in catalog.current().bodies.values() if b.work)
                raise ValueError(f"'utilization' calibrates the work of bodies {knobs}, not '{self.body}'; remove it")
            if getattr(self, work) is not None:
                raise ValueError(f"give either '{work}' or 'utilization', not both")
            from ..units import fraction
            fraction(self.utilization, "victim.utilization", high=0.9)
        elif work is not None and body.param(work).required and getattr(self, work, None) is None:
            raise ValueError(f"body '{self.body}' needs '{work}' or 'utilization' (e.g. \"30%\")")
        if self.body == "taskset":
            if not self.tasks:
                raise ValueError("body 'taskset' needs 'tasks', e.g. [{ name = \"t1\", period = \"10ms\", wcet = \"2ms\" }]")
            if self.hyperperiods is None:
                raise ValueError("body 'taskset' needs 'hyperperiods' (measured hyperperiods per run)")
            if self.jobs is not None or self.period is not None:
                raise ValueError("a task set's length is 'hyperperiods' and its periods are the tasks'; remove 'jobs' and 'period'")
            return self
        if self.tasks is not None or self.hyperperiods is not None:
            raise ValueError("'tasks' and 'hyperperiods' are for body 'taskset'")
        if self.probes:
            if self.body != "command":
                raise ValueError("'probes' names a command's probes; remove it or use body 'command'")
            self.probes = check_probe_names(self.probes)
        if self.body == "attach":
            self._attach_fields()
        elif self.pid is not None or self.duration is not None:
            raise ValueError("'pid' and 'duration' are for body 'attach' (a process already running)")
        if self.jobs_from is not None:
            check_jobs_from(self.jobs_from, self.body, self.probes)
        if self.body in ("command", "attach"):
            if self.body == "command" and not self.argv:
                raise ValueError("body 'command' needs 'argv', e.g. [\"./build/probe_demo\", \"200\"]")
            if self.jobs not in (None, 1):
                raise ValueError(f"a {self.body} victim's jobs are its own (one window per run); leave 'jobs' out")
            self._warmup_declared = self.warmup_jobs if "warmup_jobs" in self.model_fields_set else None
            if self._warmup_declared is not None and self.jobs_from is None:
                raise ValueError("'warmup_jobs' of a command counts its declared jobs; add jobs_from or remove it")
            self.jobs, self.warmup_jobs = 1, 0
            self._period_declared = self.period is not None
            # Until the pilot run measures the program (pilot.py): a placeholder, so that a
            # short `timeout` is not refused for a guess.
            self.period = self.period or self.COMMAND_PERIOD
        else:
            if self.argv is not None or self.preload is not None:
                raise ValueError("'argv' and 'preload' are for body 'command'")
            if self.jobs is None:
                raise ValueError("'jobs' is required; add it (measured jobs per run)")
            self.period = self.period or "10ms"
        return self


#: The enemy kinds of the agent's catalog (catalog.py); an unknown kind is refused.
EnemyKind = Literal[tuple(catalog.kind_names())]  # type: ignore[valid-type]

#: The plan parameters of an `aocs` enemy that the host makes (config/expand.py `_aocs`)
#: from the file's keys below: it generates or copies the input and expected files.
AOCS_MADE = {"input", "expected", "duplicate_executable"}
#: Those keys of an experiment file's `aocs` enemy.
AOCS_FILE_KEYS: dict[str, catalog.Param] = {
    "data": catalog.Param("data", "str", "directory of the AOCS files (generated when absent)", False, "aocs-data"),
    "data_seed": catalog.Param("data_seed", "u64", "seed of the generated scenario", False, 0, min=0),
    "files": catalog.Param("files", "choice", "every instance on the same files, or each on its own copy", False, "shared",
                           choices=("shared", "duplicated")),
    "executable": catalog.Param("executable", "choice", "the agent's text shared with the victim, or each instance's own copy",
                                False, "shared", choices=("shared", "duplicated")),
    "instances": catalog.Param("instances", "u64", "copies of this enemy (named name#k)", False, 1, min=1, max=64),
}


def _file_value(p: catalog.Param, key: str, v):
    """`v`, the file's value of parameter `p`, checked in the file's terms: a size for
    bytes, a duration for a `_ns` parameter (both resolved when the plan is made), else the
    declared type and bounds. ValueError `@key: problem; fix` (error_line names the field)."""
    def bad(why: str):
        raise ValueError(f"@{key}: {why}")

    if p.type == "u64" and p.unit in ("bytes", "ns") or (key == "bytes" and p.per_bytes):
        if isinstance(v, bool) or not isinstance(v, (int, float, str)):
            sized = key == "bytes" or p.unit == "bytes"
            bad(f"{_shown(v)} is not a {'size' if sized else 'duration'}; give e.g. {'4MiB' if sized else '50us'!r}")
        _finite(v)
        return v
    if p.type == "u64":
        if isinstance(v, bool) or not isinstance(v, int):
            bad(f"{_shown(v)} is not an integer; change it")
        if p.min is not None and v < p.min:
            bad(f"should be at least {p.min} (got {v}); change it")
        if p.max is not None and v > p.max:
            bad(f"should be at most {p.max} (got {v}); change it")
        if p.multiple_of and v % p.multiple_of:
            bad(f"should be a multiple of {p.multiple_of} (got {v}); change it")
    elif p.type == "bool" and not isinstance(v, bool):
        bad(f"{_shown(v)} is not true or false; change it")
    elif p.type == "str" and not (isinstance(v, str) and v):
        bad(f"{_shown(v)} is not a non-empty string; change it")
    elif p.type == "strings" and not (isinstance(v, list) and v and all(isinstance(x, str) for x in v)):
        bad(f"{_shown(v)} is not a non-empty list of strings; change it")
    elif p.type == "choice" and v not in p.choices:
        bad(f"{_shown(v)} is not one of {', '.join(map(repr, p.choices))}; change it")
    return v


def _makes_aocs_files(k: catalog.Kind) -> bool:
    """A kind whose plan parameters include the AOCS files the host makes."""
    return AOCS_MADE <= {p.name for p in k.params}


def file_keys(k: catalog.Kind) -> dict[str, catalog.Param]:
    """The keys an experiment file may give for kind `k`, and the parameter each is."""
    keys = k.file_keys()
    if _makes_aocs_files(k):
        keys = {key: p for key, p in keys.items() if p.name not in AOCS_MADE} | AOCS_FILE_KEYS
    return keys


def _catalog_keys_schema(schema: dict) -> None:
    """The editor schema of an enemy lists every kind's parameters (from the catalog), each
    with the kinds that read it; which belongs to which kind is checked on load."""
    props = schema.setdefault("properties", {})
    readers: dict[str, list[str]] = {}
    docs: dict[str, str] = {}
    for k in catalog.current().kinds.values():
        for key, p in file_keys(k).items():
            readers.setdefault(key, []).append(k.name)
            docs.setdefault(key, p.doc if key == p.file_key else f"size of the {p.name} ({p.per_bytes} each)")
    for key, kinds in readers.items():
        props.setdefault(key, {"description": f"{', '.join(kinds)}: {docs[key]}"})


class EnemySpec(SchedSpec):
    """One enemy of a scenario: the common keys below, and the parameters its kind declares
    in the agent's catalog (docs/enemies.md), in the file's terms (sizes, durations)."""

    # The kind's own parameters are checked against the catalog below.
    model_config = ConfigDict(extra="allow", allow_inf_nan=False, json_schema_extra=_catalog_keys_schema)

    kind: EnemyKind
    name: Optional[str] = Field(default=None, min_length=1, max_length=limits.MAX_NAME)
    intensity: float = Field(default=100.0, gt=0, le=100, description="duty cycle in percent of each 1 ms window")
    rate: Optional[float] = Field(default=None, gt=0, description="target rate, in the kind's unit per second")
    load: Optional[str] = Field(default=None,
                                description="target load, a percentage of the measured peak of the kind's channel "
                                            "(\"50%\" or \"50% of peak\"): turned into `rate` from the peaks `xtalk characterize --peaks` saved")
    per_cpu: bool = Field(default=False, description="one copy pinned on each CPU of `cpus`")

    @field_validator("load")
    @classmethod
    def _load(cls, v: Optional[str]) -> Optional[str]:
        if v is None:
            return v
        from ..peaks import load_problem  # its models: only for a file that asks for a load

        if why := load_problem(v):
            raise ValueError(why)
        return v

    def params(self) -> dict:
        """The kind's parameters as the file gives them (file keys)."""
        return dict(self.__pydantic_extra__ or {})

    def param(self, key: str, default=None):
        return (self.__pydantic_extra__ or {}).get(key, default)

    @model_validator(mode="after")
    def _kind_fields(self):
        k = catalog.kind(self.kind)
        keys = file_keys(k)
        given = self.params()
        for key in given:
            if key not in keys:
                if not any(key in file_keys(other) for other in catalog.current().kinds.values()):
                    near = did_you_mean(key, [*keys, *(n for n in type(self).model_fields if n != "kind")])
                    raise ValueError(f"@{key}: unknown key; {near} (or remove it)" if near else
                                     f"@{key}: unknown key; remove it or check its spelling")
                allowed = ", ".join(sorted(keys)) or "none"
                raise ValueError(f"@{key}: '{key}' is not a parameter of enemy '{self.kind}' (its parameters: {allowed}); remove it")
        for key, v in given.items():
            _file_value(keys[key], key, v)
        for p in k.params:
            if not p.required or p.file_default is not None or p.file_key not in keys:
                continue
            alt = "bytes" if p.per_bytes else None
            if p.file_key not in given and (alt is None or alt not in given):
                either = f"'{p.file_key}' or 'bytes'" if alt else f"'{p.file_key}'"
                raise ValueError(f"enemy '{self.kind}' needs {either} ({p.doc}); add it")
        if self.param("instances", 1) != 1 and not _makes_aocs_files(k):
            raise ValueError("'instances' is for kind 'aocs'")
        if self.per_cpu and self.cpus is None:
            raise ValueError("'per_cpu' needs 'cpus' (e.g. \"others\")")
        if self.load is not None and self.rate is not None:
            raise ValueError("'load' and 'rate' both set; keep one (load is a percentage of the channel's peak)")
        return self


#: Measured applications of one experiment (pairs grow as n²: 16 make 120).
MAX_APPLICATIONS = 16
#: The plan's pattern for a measured process's name (the victim's and each application's).
APP_NAME = r"^[A-Za-z0-9_.-]{1,64}$"
#: Scenario families generated from applications (docs/experiments.md, `[[application]]`).
APPLICATION_SCENARIOS = ("alone", "pairs", "all", "first", "faults")


class FaultSpec(EnemySpec):
    """A fault of an application: an enemy kind of the catalog that runs inside the
    application (its group, CPUs and, unless it sets its own, its policy), named
    `<application>:<kind>`."""

    @model_validator(mode="after")
    def _inside(self):
        if self.cpus is not None or self.per_cpu:
            raise ValueError("a fault runs on its application's CPUs; remove 'cpus' and 'per_cpu'")
        if self.name is not None:
            raise ValueError("a fault is named <application>:<kind>; remove 'name'")
        if self.param("instances", 1) != 1:
            raise ValueError("a fault is one process of its application; remove 'instances'")
        return self


class ApplicationSpec(VictimSpec):
    """One measured application: any victim body and its placement and policy, with a
    criticality level (ECSS A, highest, to D), an optional ε and the faults it may have."""

    #: No pilot run for applications: a command application's one job may last a minute.
    COMMAND_PERIOD: ClassVar[str] = "60s"

    name: str = Field(pattern=APP_NAME, description="unique among the applications; names its jobs and files")
    description: str = ""
    criticality: Literal["A", "B", "C", "D"]
    epsilon: Optional[ApplicationEpsilon] = Field(default=None, description="the application's ε: { metric, statistic, bound }")
    files: Literal["shared", "duplicated"] = Field(
        default="shared", description="aocs: the data files shared with the other applications, or a copy of its own")
    faults: list[FaultSpec] = Field(default=[], max_length=limits.MAX_ENEMIES)

    @model_validator(mode="after")
    def _application_fields(self):
        if self.utilization is not None:
            work = (catalog.body(self.body).work if self.body in catalog.body_names() else None) or "the work"
            raise ValueError(f"'utilization' is calibrated for a [victim] only; give '{work}' instead")
        if self.files != "shared" and self.body != "aocs":
            raise ValueError("'files' chooses the data files of body 'aocs'; remove it")
        kinds = [f.kind for f in self.faults]
        for k in kinds:
            if kinds.count(k) > 1:
                raise ValueError(f"faults: kind '{k}' is given twice; one fault of each kind per application")
        return self


class ScenarioSpec(_Strict):
    name: Name
    description: str = ""
    enemies: list[EnemySpec] = Field(default=[], max_length=limits.MAX_ENEMIES)


class TraceSpec(_Strict):
    """`[trace]`: capture the kernel scheduling trace of each run's measured window."""

    events: Optional[list[EventName]] = Field(default=None, max_length=256)
    buffer_kb: int = Field(default=8192, ge=64, le=1 << 20)
    segment: list[Segment] = Field(default=[], max_length=MAX_SEGMENTS,
                                   description="`[[trace.segment]]`: the time between two traced events per job, "
                                               "the job-table column seg_<name>_ns (docs/observe.md)")

    @field_validator("events")
    @classmethod
    def _event_names(cls, v: Optional[list[str]]) -> Optional[list[str]]:
        # The agent builds tracefs paths from these: nothing that could leave tracefs.
        for i, name in enumerate(v or []):
            if not re.fullmatch(TRACE_EVENT_PATTERN, name):
                raise ValueError(f"[{i}] {name!r} is not an event name: write subsystem:event, each part letters, digits, "
                                 "'_' or '-' (e.g. sched:sched_switch)")
        return v

    @model_validator(mode="after")
    def _segments(self) -> "TraceSpec":
        why = segment_problem(self.segment, self.events or Trace.model_fields["events"].default, "segment")
        if why:
            raise ValueError(f"@{why}")  # error_line: `trace.segment[i]...: problem`
        return self


class Experiment(_Strict):
    name: Name
    description: str = ""
    repetitions: int = Field(default=3, ge=1, le=limits.MAX_REPETITIONS)
    seed: int = Field(default=0, ge=0, description="seed of the interleaving order")
    settle: Duration = "200ms"
    timeout: Optional[Duration] = None
    pids_max: Optional[int] = Field(default=None, ge=8, le=limits.MAX_PIDS, description="the whole run's process budget: every process of each run counts against one pids.max (the stand-in for the machine's PID table)")
    results: str = "results"
    settings: Optional[str] = Field(default=None, description="a declared-settings file (TOML, relative to this file): "
                                    "values the machine must hold, with a rationale each (docs/settings.md)")
    min_effect: Union[float, str] = Field(default="5%", description="the smallest slowdown worth resolving (\"5%\": 1.05×): "
                                          "the solo feasibility run says how many repetitions that takes on this machine")
    victim: Optional[VictimSpec] = None
    application: list[ApplicationSpec] = Field(default=[], max_length=MAX_APPLICATIONS)
    application_scenarios: list[Literal[APPLICATION_SCENARIOS]] = Field(  # type: ignore[valid-type]
        default=["alone", "pairs", "all", "faults"],
        description="which scenarios the applications make: alone, pairs, all, first (the first k, 2 <= k < n), faults")
    scenario: list[ScenarioSpec] = Field(default=[], max_length=limits.MAX_SCENARIOS)
    configuration: list[ConfigurationSpec] = Field(default=[], max_length=limits.MAX_CONFIGURATIONS)
    trace: Optional[TraceSpec] = None

    @model_validator(mode="after")
    def _bounds(self):
        # The plan's limits, in the file's terms, so that the file schema and the plan agree.
        from ..units import duration_ns, fraction

        fraction(self.min_effect, "min_effect", high=10.0)

        if duration_ns(self.settle, "settle") > limits.MAX_SETTLE_NS:
            raise ValueError(f"settle: {self.settle!r} is longer than 60 s; give at most \"60s\"")
        if self.timeout is not None:
            duration_ns(self.timeout, "timeout")
        plans = max(1, len(self.configuration)) * (len(self.scenario) + 1 if self.victim is not None
                                                    else len(self.application_scenario_names()))
        if plans > limits.MAX_PLANS:
            raise ValueError(f"scenario: configurations × scenarios make {plans} distinct runs to check, above the limit of "
                             f"{limits.MAX_PLANS}; split the experiment")
        runs = plans * self.repetitions
        if runs > limits.MAX_RUNS:
            raise ValueError(f"repetitions: configurations × scenarios × repetitions make {runs} runs, above the limit of "
                             f"{limits.MAX_RUNS}; lower the repetitions or split the experiment")
        return self

    @model_validator(mode="before")
    @classmethod
    def _victim_or_applications(cls, data):
        # Before the fields: a missing [victim] is only an error without applications.
        if isinstance(data, dict):
            apps = data.get("application")
            if "victim" in data and apps:
                raise ValueError("application: an experiment has either [victim] or [[application]]s, not both; "
                                 "make the victim an [[application]] or remove the applications")
            if "victim" not in data and not apps:
                raise ValueError("victim: required; add a [victim] table, or two or more [[application]] tables")
            if "victim" not in data and isinstance(apps, list) and len(apps) == 1:
                raise ValueError("application: one application is a [victim]; declare two or more [[application]]s "
                                 "or write it as [victim]")
        return data

    @model_validator(mode="after")
    def _applications(self):
        if self.victim is not None:
            if "application_scenarios" in self.model_fields_set:
                raise ValueError("application_scenarios: for experiments of [[application]]s; remove it")
            for i, c in enumerate(self.configuration):
                if c.applications:
                    raise ValueError(f"configuration[{i}].applications: for experiments of [[application]]s; "
                                     "set the victim with 'victim' instead")
            return self
        names = [a.name for a in self.application]
        for i, n in enumerate(names):
            if n in names[:i]:
                raise ValueError(f"application[{i}].name: '{n}' is used twice; give each application its own name")
        for i, s in enumerate(self.scenario):
            if not s.enemies:
                raise ValueError(f"scenario[{i}]: beside applications a scenario adds enemies to all of them (all+{s.name}); "
                                 "give it enemies or remove it")
        if not self.application_scenarios:
            raise ValueError("application_scenarios: empty; list at least one of " + ", ".join(APPLICATION_SCENARIOS))
        for i, c in enumerate(self.configuration):
            for n in c.applications:
                if n not in names:
                    raise ValueError(f"configuration[{i}].applications.{n}: no application named '{n}'; "
                                     f"the applications are {', '.join(names)}")
        if not self.application_scenario_names():
            raise ValueError("application_scenarios: makes no scenario here (e.g. 'faults' without any fault); add 'alone'")
        return self

    def application_scenario_names(self) -> list[str]:
        """The scenarios the applications make, in order: `alone:<A>`, `pair:<A>+<B>`,
        `first:<k>`, `all`, `all+<scenario>`, `fault:<A>:<kind>` (those the file asks for)."""
        names = [a.name for a in self.application]
        want = set(self.application_scenarios)
        out = []
        if "alone" in want:
            out += [f"alone:{n}" for n in names]
        if "pairs" in want:
            out += [f"pair:{a}+{b}" for i, a in enumerate(names) for b in names[i + 1:]]
        if "first" in want:
            out += [f"first:{k}" for k in range(2, len(names))]
        if "all" in want:
            out.append("all")
            out += [f"all+{s.name}" for s in self.scenario]
        if "faults" in want:
            out += [f"fault:{a.name}:{f.kind}" for a in self.application for f in a.faults]
        return out

    def applications_in(self, scenario: str) -> list[str]:
        """The applications that run in a scenario of `application_scenario_names`."""
        names = [a.name for a in self.application]
        family, _, rest = scenario.partition(":")
        if family == "alone":
            return [rest]
        if family == "pair":
            a, b = rest.split("+", 1)
            return [a, b]
        if family == "first":
            return names[:int(rest)]
        return names  # all, all+<scenario>, fault:<A>:<kind>

    @model_validator(mode="after")
    def _scenarios(self):
        names = [s.name for s in self.scenario]
        for n in names:
            if names.count(n) > 1:
                raise ValueError(f"scenario name '{n}' is used twice; give each scenario its own name")
        for s in self.scenario:
            if s.name == "solo" and s.enemies:
                raise ValueError("scenario 'solo' is the victim alone and may not have enemies; rename it")
        cnames = [c.name for c in self.configuration]
        for n in cnames:
            if cnames.count(n) > 1:
                raise ValueError(f"configuration name '{n}' is used twice; give each configuration its own name")
        return self

    def configurations(self) -> list[ConfigurationSpec]:
        """The configurations to compare; one `default` (the file's own settings) if none."""
        return list(self.configuration) or [ConfigurationSpec(name="default")]

    def scenarios(self) -> list[ScenarioSpec]:
        """All scenarios, `solo` (no enemies) always first."""
        if any(s.name == "solo" for s in self.scenario):
            return sorted(self.scenario, key=lambda s: s.name != "solo")
        return [ScenarioSpec(name="solo", description="the victim alone")] + list(self.scenario)


_UNION_TAG = re.compile(r"^(int|float|str|bool|none|[a-z][a-z-]*\[.*\]|constrained-[a-z]+)$")
_TAG_WORDS = {"int": "an integer", "float": "a number", "str": "a string", "bool": "true or false",
              "list[int]": "a list of integers", "list[str]": "a list of strings"}


def _is_tag(part) -> bool:
    """Parts of an error location that pydantic adds for unions and validators, not keys."""
    return isinstance(part, str) and bool(_UNION_TAG.match(part)) and part not in ("name", "kind")


def _path(loc: tuple) -> str:
    """The dotted field path of an error location (`scenario[0].enemies[1].bytes`)."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _is_tag(part):
            continue
        else:
            out += ("." if out else "") + str(part)
    return out or "(top level)"


def _shown(value) -> str:
    """A short, one-line rendering of a value for an error message."""
    text = repr(value)
    text = text if len(text) <= 40 else text[:37] + "..."
    return text.replace("\n", " ")


#: What a name of a pattern other than `Name`'s must look like.
_PATTERN_WORDS = {
    TRACE_EVENT_PATTERN: "should be subsystem:event, each part letters, digits, '_' or '-' (e.g. sched:sched_switch)",
    SEGMENT_NAME_PATTERN: "should be lower-case letters, digits and '_', a letter first, at most 48 (its column: seg_<name>_ns)",
    FIELD_PATTERN: "should be a field of the event, as its format file names it (lower-case letters, digits, '_')",
}


def _fix(err: dict, model_fields: list[str]) -> str:
    """What is wrong and what to do, from one pydantic error, on one line (`model_fields`: the
    keys the table accepts, for the nearest spelling of an unknown one)."""
    kind = err["type"]
    if kind == "extra_forbidden":
        near = did_you_mean(err["loc"][-1], model_fields)
        return f"unknown key; {near} (or remove it)" if near else "unknown key; remove it or check its spelling"
    if kind == "missing":
        return "required; add it"
    msg = err["msg"]
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, "):]
    else:
        msg = msg.replace("Input should be", "should be").replace("String should", "should").replace("List should", "should")
        msg = msg.replace("less than or equal to", "at most").replace("greater than or equal to", "at least")
        msg = msg.replace(" after validation", "")
        if kind == "string_pattern_mismatch":
            msg = _PATTERN_WORDS.get(err.get("ctx", {}).get("pattern"), "should be letters, digits and . _ + - only")
        if "input" in err and not isinstance(err["input"], (dict, list)):
            msg += f" (got {_shown(err['input'])})"
        near = did_you_mean(err.get("input"), quoted_choices(err.get("ctx", {}).get("expected", ""))) \
            if kind == "literal_error" else ""
        msg += f"; {near}" if near else "; change it"
    return " ".join(msg.split())


def error_line(e: ValidationError, model: type[BaseModel] | None = None, where=lambda loc: loc) -> str:
    """`field: what is wrong; fix` for the first problem of `e`. An invalid value of a field
    that accepts several types (a duration, a CPU set) is one line naming what it accepts,
    not one line per type. `model`: the model validated, whose keys an unknown key is
    compared with ("did you mean"); `where`: a model location → the file's (they differ
    where the file's grammar nests less than the model)."""
    errors = e.errors()
    err = errors[0]
    path = _path(where(err["loc"]))
    tags = [p for x in errors if _path(where(x["loc"])) == path for p in x["loc"][-1:] if _is_tag(p) and x["type"] != "value_error"]
    if len(tags) > 1 and err["type"] not in ("extra_forbidden", "missing"):
        kinds = " or ".join(dict.fromkeys(_TAG_WORDS.get(t, t) for t in tags))
        return f"{path}: {_shown(err.get('input'))} is not valid here; give {kinds}"
    near = []
    if err["type"] == "extra_forbidden":
        near = keys_at(model, err["loc"][:-1], _is_tag)
        if where(err["loc"]) != err["loc"]:  # the file's table holds the keys of two of the model's (not the nesting key)
            outer = keys_at(model, where(err["loc"])[:-1], _is_tag)
            near += [k for k in outer if k not in near and k != err["loc"][len(where(err["loc"])) - 1]]
    fix = _fix(err, near)
    # A check of an enemy's catalog parameter names its key: `@key: problem` (EnemySpec).
    m = re.match(r"^@([A-Za-z_][\w.\[\]]*): (.*)$", fix)
    if m:
        return f"{path}.{m.group(1)}: {m.group(2)}" if path != "(top level)" else f"{m.group(1)}: {m.group(2)}"
    # A check of the whole model names its field itself ("settle: ..."): no "(top level)".
    if path == "(top level)" and re.match(r"^[A-Za-z_][\w.\[\]]*: ", fix):
        return fix
    return f"{path}: {fix}"


def format_validation_error(source: str, e: ValidationError, model: type[BaseModel] | None = None) -> str:
    """One line for the first problem: `SOURCE: field: what is wrong; fix`."""
    return f"{source}: {error_line(e, model)}"


def load(path: Union[str, Path]) -> Experiment:
    """Read and validate an experiment file; raise UsageError with one clear line."""
    p = Path(path)
    _, data = read_toml(p)
    found = deprecations.Deprecations()
    try:
        exp = Experiment.model_validate(data, context=found)
    except ValidationError as e:
        raise UsageError(format_validation_error(str(p), e, Experiment)) from None
    deprecations.say(str(p), found)
    return exp


def json_schema() -> dict:
    """JSON Schema of experiment files, for editors (e.g. Taplo / Even Better TOML) and checkers."""
    schema = Experiment.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = "https://xtalk.dev/schema/experiment-v1.json"
    schema["title"] = "xtalk experiment"
    return schema
