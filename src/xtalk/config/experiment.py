"""The experiment file (TOML): one victim, enemy scenarios, placement, policy, repetitions.

Parsing is strict: an unknown key, a wrong type or a missing field is reported as one line
`FILE: field: problem; fix`. See examples/quickstart.toml and docs/experiments.md.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Annotated, Literal, Optional, Union

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, field_validator, model_validator

from ..errors import UsageError
from ..plan import TRACE_EVENT_PATTERN
from .. import limits
from .configuration import ConfigurationSpec
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
    body: Literal["chase", "sum", "spawn", "pi", "command", "syscall", "aocs", "latency", "taskset"]
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
    data: str = Field(default="aocs-data", description="aocs: directory of aocs-input.bin / aocs-expected.bin (generated when absent)")
    data_seed: int = Field(default=0, ge=0, description="aocs: sensor-noise seed used when generating the data")
    first_step: int = Field(default=0, ge=0, description="aocs: scenario step of the first job (e.g. 3000)")
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

    @model_validator(mode="after")
    def _body_fields(self):
        if self.body in ("chase", "sum", "spawn") and self.bytes is None:
            raise ValueError(f"body '{self.body}' needs 'bytes' (e.g. \"llc/4\" or \"8MiB\")")
        work = {"chase": "accesses", "pi": "iterations", "syscall": "calls"}.get(self.body)
        if self.utilization is not None:
            if work is None:
                raise ValueError(f"'utilization' calibrates the work of bodies chase, pi and syscall, not '{self.body}'; remove it")
            if getattr(self, work) is not None:
                raise ValueError(f"give either '{work}' or 'utilization', not both")
            from ..units import fraction
            fraction(self.utilization, "victim.utilization", high=0.9)
        elif self.body == "pi" and self.iterations is None:
            raise ValueError("body 'pi' needs 'iterations' or 'utilization' (e.g. \"30%\")")
        elif self.body == "syscall" and self.calls is None:
            raise ValueError("body 'syscall' needs 'calls' or 'utilization' (e.g. \"30%\")")
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
        if self.body == "command":
            if not self.argv:
                raise ValueError("body 'command' needs 'argv', e.g. [\"./build/probe_demo\", \"200\"]")
            if self.jobs not in (None, 1):
                raise ValueError("a command victim runs once per run; leave 'jobs' out")
            self.jobs, self.warmup_jobs = 1, 0
            self.period = self.period or "60s"
        else:
            if self.argv is not None or self.preload is not None:
                raise ValueError("'argv' and 'preload' are for body 'command'")
            if self.jobs is None:
                raise ValueError("'jobs' is required; add it (measured jobs per run)")
            self.period = self.period or "10ms"
        return self


EnemyKind = Literal["read", "write", "chase", "pi", "l1d", "l2", "llc", "loads", "tlb", "icache", "branch", "copy",
                    "ntstore", "pingpong", "falseshare", "syscall", "fileio", "fork", "pagefault", "net", "timer",
                    "external", "aocs", "memhog", "fdexhaust", "forkbomb", "diskfill", "syscallstorm", "crashloop"]

#: The parameters each enemy kind reads (docs/enemies.md); any other one is refused.
KIND_PARAMS: dict[str, set[str]] = {
    "read": {"bytes"}, "write": {"bytes"}, "copy": {"bytes"}, "ntstore": {"bytes"},
    "chase": {"bytes", "elements", "element_bytes", "order", "seed", "chains"},
    "pi": set(), "branch": {"seed"}, "pingpong": set(), "falseshare": set(), "syscall": set(),
    "l1d": {"bytes"}, "l2": {"bytes"}, "llc": {"bytes"},
    "loads": {"bytes", "lines", "stride_bytes"}, "tlb": {"bytes", "pages", "page_bytes"},
    "icache": {"functions"}, "fileio": {"bytes", "shared", "dir"}, "fork": {"exec"},
    "pagefault": {"bytes"}, "net": {"proto", "message_bytes"}, "timer": {"interval"},
    "external": {"argv", "rate_regex", "unit"},
    "aocs": {"data", "data_seed", "first_step", "steps", "period", "files", "executable", "instances"},
    "memhog": {"bytes"}, "diskfill": {"bytes", "dir"}, "fdexhaust": {"fds"}, "forkbomb": {"max_procs", "hold"},
    "syscallstorm": set(), "crashloop": set(),
}
_COMMON = {"kind", "name", "per_cpu", "intensity", "rate"} | set(SchedSpec.model_fields)


class EnemySpec(SchedSpec):
    kind: EnemyKind
    name: Optional[str] = Field(default=None, min_length=1, max_length=limits.MAX_NAME)
    bytes: Optional[Size] = None
    elements: Optional[int] = Field(default=None, ge=2)
    element_bytes: int = Field(default=64, ge=8, multiple_of=8)
    order: Literal["random", "linear"] = "random"
    seed: int = Field(default=0, ge=0)
    chains: int = Field(default=1, ge=1, le=64, description="chase: independent walkers (memory-level parallelism)")
    lines: Optional[int] = Field(default=None, ge=1, description="loads: cache lines touched")
    stride_bytes: int = Field(default=64, ge=8, multiple_of=8)
    pages: Optional[int] = Field(default=None, ge=2, description="tlb: pages touched")
    page_bytes: int = Field(default=4096, ge=4096, multiple_of=4096)
    functions: int = Field(default=4096, ge=1, le=4096, description="icache: distinct functions called")
    shared: bool = Field(default=False, description="fileio: one file for every copy (seed 000 mono file)")
    dir: Optional[str] = Field(default=None, description="fileio: directory of the files ($TMPDIR); diskfill: of the unnamed file (/tmp)")
    exec: bool = Field(default=False, description="fork: exec /bin/true in each child")
    proto: Optional[Literal["tcp", "udp"]] = None
    message_bytes: Optional[Size] = None
    interval: Optional[Duration] = None
    argv: Optional[list[str]] = Field(default=None, min_length=1)
    rate_regex: Optional[str] = None
    unit: str = Field(default="ops", min_length=1)
    intensity: float = Field(default=100.0, gt=0, le=100, description="duty cycle in percent of each 1 ms window")
    rate: Optional[float] = Field(default=None, gt=0, description="target rate, in the kind's unit per second")
    per_cpu: bool = Field(default=False, description="one copy pinned on each CPU of `cpus`")
    # aocs: more instances of the AOCS application (seed 000 §5.3.1)
    data: str = Field(default="aocs-data", description="aocs: directory of the AOCS files (generated when absent)")
    data_seed: int = Field(default=0, ge=0)
    first_step: int = Field(default=0, ge=0)
    steps: int = Field(default=800, ge=1, description="aocs: steps replayed over and over")
    period: Duration = Field(default="125ms", description="aocs: the instance's period")
    files: Literal["shared", "duplicated"] = Field(default="shared", description="aocs: every instance on the same files, or each on its own copy")
    executable: Literal["shared", "duplicated"] = Field(default="shared", description="aocs: the agent's text shared with the victim (forked), or each instance run from its own copy of the executable")
    instances: int = Field(default=1, ge=1, le=64, description="aocs: copies of this enemy (named name#k)")
    # failure propagation (docs/victims.md): the hard limit of each fault
    fds: int = Field(default=1024, ge=16, le=65_536, description="fdexhaust: RLIMIT_NOFILE")
    max_procs: int = Field(default=64, ge=1, le=256, description="forkbomb: live children")
    hold: Optional[Duration] = Field(default=None, description="forkbomb: each child's life, spinning (default 2ms)")

    @model_validator(mode="after")
    def _kind_fields(self):
        extra = sorted(self.model_fields_set - _COMMON - KIND_PARAMS[self.kind])
        if extra:
            allowed = ", ".join(sorted(KIND_PARAMS[self.kind])) or "none"
            raise ValueError(f"'{extra[0]}' is not a parameter of enemy '{self.kind}' (its parameters: {allowed}); remove it")
        if self.kind in ("read", "write", "copy", "ntstore") and self.bytes is None:
            raise ValueError(f"enemy '{self.kind}' needs 'bytes' (e.g. \"4*llc\")")
        if self.kind == "chase" and self.elements is None and self.bytes is None:
            raise ValueError("enemy 'chase' needs 'elements' or 'bytes'")
        if self.kind == "loads" and self.lines is None and self.bytes is None:
            raise ValueError("enemy 'loads' needs 'lines' or 'bytes' (e.g. bytes = \"l2/2\")")
        if self.kind == "net" and self.proto is None:
            raise ValueError("enemy 'net' needs 'proto' (\"tcp\" or \"udp\")")
        if self.kind == "external" and self.argv is None:
            raise ValueError("enemy 'external' needs 'argv' (e.g. [\"stress-ng\", \"--stream\", \"1\"])")
        if self.kind in ("memhog", "diskfill") and self.bytes is None:
            raise ValueError(f"enemy '{self.kind}' needs 'bytes' (its hard ceiling, e.g. \"256MiB\")")
        if self.instances > 1 and self.kind != "aocs":
            raise ValueError("'instances' is for kind 'aocs'")
        if self.per_cpu and self.cpus is None:
            raise ValueError("'per_cpu' needs 'cpus' (e.g. \"others\")")
        return self


class ScenarioSpec(_Strict):
    name: Name
    description: str = ""
    enemies: list[EnemySpec] = Field(default=[], max_length=limits.MAX_ENEMIES)


class TraceSpec(_Strict):
    """`[trace]`: capture the kernel scheduling trace of each run's measured window."""

    events: Optional[list[EventName]] = Field(default=None, max_length=256)
    buffer_kb: int = Field(default=8192, ge=64, le=1 << 20)

    @field_validator("events")
    @classmethod
    def _event_names(cls, v: Optional[list[str]]) -> Optional[list[str]]:
        # The agent builds tracefs paths from these: nothing that could leave tracefs.
        for i, name in enumerate(v or []):
            if not re.fullmatch(TRACE_EVENT_PATTERN, name):
                raise ValueError(f"[{i}] {name!r} is not an event name: write subsystem:event, each part letters, digits, "
                                 "'_' or '-' (e.g. sched:sched_switch)")
        return v


class Experiment(_Strict):
    name: Name
    description: str = ""
    repetitions: int = Field(default=3, ge=1, le=limits.MAX_REPETITIONS)
    seed: int = Field(default=0, ge=0, description="seed of the interleaving order")
    settle: Duration = "200ms"
    timeout: Optional[Duration] = None
    pids_max: Optional[int] = Field(default=None, ge=8, le=limits.MAX_PIDS, description="the whole run's process budget: every process of each run counts against one pids.max (the stand-in for the machine's PID table)")
    results: str = "results"
    min_effect: Union[float, str] = Field(default="5%", description="the smallest slowdown worth resolving (\"5%\": 1.05×): "
                                          "the solo feasibility run says how many repetitions that takes on this machine")
    victim: VictimSpec
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
        plans = max(1, len(self.configuration)) * (len(self.scenario) + 1)
        if plans > limits.MAX_PLANS:
            raise ValueError(f"scenario: configurations × scenarios make {plans} distinct runs to check, above the limit of "
                             f"{limits.MAX_PLANS}; split the experiment")
        runs = plans * self.repetitions
        if runs > limits.MAX_RUNS:
            raise ValueError(f"repetitions: configurations × scenarios × repetitions make {runs} runs, above the limit of "
                             f"{limits.MAX_RUNS}; lower the repetitions or split the experiment")
        return self

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


def _fix(err: dict, model_fields: list[str]) -> str:
    """What is wrong and what to do, from one pydantic error, on one line."""
    kind = err["type"]
    if kind == "extra_forbidden":
        return "unknown key; remove it or check its spelling"
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
            msg = "should be letters, digits and . _ + - only"
        if "input" in err and not isinstance(err["input"], (dict, list)):
            msg += f" (got {_shown(err['input'])})"
        msg += "; change it"
    return " ".join(msg.split())


def error_line(e: ValidationError) -> str:
    """`field: what is wrong; fix` for the first problem of `e`. An invalid value of a field
    that accepts several types (a duration, a CPU set) is one line naming what it accepts,
    not one line per type."""
    errors = e.errors()
    err = errors[0]
    path = _path(err["loc"])
    tags = [p for x in errors if _path(x["loc"]) == path for p in x["loc"][-1:] if _is_tag(p) and x["type"] != "value_error"]
    if len(tags) > 1 and err["type"] not in ("extra_forbidden", "missing"):
        kinds = " or ".join(dict.fromkeys(_TAG_WORDS.get(t, t) for t in tags))
        return f"{path}: {_shown(err.get('input'))} is not valid here; give {kinds}"
    fix = _fix(err, [])
    # A check of the whole model names its field itself ("settle: ..."): no "(top level)".
    if path == "(top level)" and re.match(r"^[A-Za-z_][\w.\[\]]*: ", fix):
        return fix
    return f"{path}: {fix}"


def format_validation_error(source: str, e: ValidationError) -> str:
    """One line for the first problem: `SOURCE: field: what is wrong; fix`."""
    return f"{source}: {error_line(e)}"


def load(path: Union[str, Path]) -> Experiment:
    """Read and validate an experiment file; raise UsageError with one clear line."""
    p = Path(path)
    _, data = read_toml(p)
    try:
        return Experiment.model_validate(data)
    except ValidationError as e:
        raise UsageError(format_validation_error(str(p), e)) from None
