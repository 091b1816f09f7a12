"""The run outcome: what the agent writes to run.json (version 1), as typed models.

The plan (`plan.py`) is what the host sends; this is what comes back. The models mirror what
`xtalk-agent run` writes (`agent/src/outcome.rs: RunOutcome`, the environment from
`agent/src/observe/env.rs` and `capabilities.rs`), plus the one field the host adds after an
agent died (`restored`). They are strict: a field the agent starts writing, renames or drops
is an error here, named, rather than a silent `None` in a report. `python -m xtalk.outcome`
prints the JSON Schema generated from them and `src/xtalk/schema/run-outcome.schema.json` is
that schema checked in (a test keeps the two identical and validates real runs against both).

A run.json is written early (`status: running`, with the plan and the environment) and
completed at the end, so every field but `status` may be absent: a run whose agent was killed,
or whose set-up failed, stays readable. :func:`load_outcome` is the one way the host reads it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, ValidationError

from .errors import UsageError
from .plan import Plan, schema_of, shipped_schema

OUTCOME_VERSION = 1

#: How a run ended. `running`: the agent has not finished it (it is running, or it died and
#: recovery has not marked it yet); `interrupted`: a signal ended it (exit code 130).
Status = Literal["running", "completed", "failed", "timeout", "interrupted"]


class _Strict(BaseModel):
    # extra="forbid": drift between agent and host is an error, not a silently missing field.
    model_config = ConfigDict(extra="forbid")


# --- the environment (observe/env.rs, observe/capabilities.rs) ---------------------------

class Kernel(_Strict):
    release: str
    version: str
    machine: str
    cmdline: str
    config_available: bool
    #: The real-time relevant CONFIG_* options found (value as in the config file).
    config: dict[str, str] = {}
    preempt_rt: bool
    hz: Optional[int] = None
    rt_group_sched: bool
    isolcpus: Optional[str] = None
    nohz_full: Optional[str] = None
    sched_rt_runtime_us: Optional[int] = None
    sched_rt_period_us: Optional[int] = None


class CpuTopology(_Strict):
    cpu: int
    package: Optional[int] = None
    core: Optional[int] = None
    siblings: Optional[str] = None
    governor: Optional[str] = None


class Cache(_Strict):
    level: int
    type: Optional[str] = None
    size_bytes: Optional[int] = None
    line_bytes: Optional[int] = None
    ways: Optional[int] = None
    shared_cpus: Optional[str] = None


class NumaNode(_Strict):
    node: int
    cpus: str


class Cpu(_Strict):
    model: Optional[str] = None
    vendor: Optional[str] = None
    online: str
    count: int
    isolated: Optional[str] = None
    topology: list[CpuTopology] = []
    caches: list[Cache] = []
    numa: list[NumaNode] = []


class Clocksource(_Strict):
    current: Optional[str] = None
    available: Optional[str] = None


class Virtualization(_Strict):
    hypervisor: bool
    vendor: Optional[str] = None
    container: bool
    #: why the CPU is emulated (qemu TCG, qemu-user), None on a real or virtualised CPU
    emulated: Optional[str] = None


class Pmu(_Strict):
    core_pmu: Optional[str] = None
    sysfs_events: Optional[list[str]] = None
    rdpmc: Optional[str] = None
    perf_event_paranoid: Optional[int] = None
    #: The generic and software events that opened on this machine.
    countable: list[str] = []


class Tracefs(_Strict):
    mount: Optional[str] = None
    events: Optional[bool] = None


class CgroupMount(_Strict):
    mount: str
    controllers: list[str] = []


class Cgroups(_Strict):
    v1: list[CgroupMount] = []
    v2: list[CgroupMount] = []
    rt_group_scheduling: bool


class Availability(_Strict):
    available: bool
    reason: Optional[str] = None


class Resctrl(_Strict):
    supported: bool
    mount: Optional[str] = None


class Capabilities(_Strict):
    pmu: Pmu
    tracefs: Tracefs
    cgroups: Cgroups
    sched_deadline: bool
    deadline_group_servers: Availability
    resctrl: Resctrl


class Environment(_Strict):
    """The machine the run was measured on (the agent's environment document)."""

    kernel: Kernel
    cpu: Cpu
    memory_bytes: int
    memory_available_bytes: int
    clocksource: Clocksource
    virtualization: Virtualization
    time_sync_services: list[str] = []
    capabilities: Capabilities
    agent_version: str


# --- what the run did ----------------------------------------------------------------------

class Pids(_Strict):
    agent: int
    victim: Optional[int] = None
    #: enemy name -> pid
    enemies: dict[str, int] = {}


class BudgetGroup(_Strict):
    group: str
    refused_forks: Optional[int] = None


class ProcessBudget(_Strict):
    """The run's process budget (`pids_max`) at the end; limit and peak as the kernel writes them."""

    pids_max: Optional[str] = None
    peak: Optional[str] = None
    refused_forks: Optional[int] = None
    groups: list[BudgetGroup] = []


class EnemyResult(_Strict):
    """What one enemy achieved: over its whole life and over the victim's measured window."""

    name: str
    kind: str
    unit: str
    ops: int
    seconds: Optional[float] = None
    rate: Optional[float] = None
    window_ops: Optional[int] = None
    window_rate: Optional[float] = None
    intensity: Optional[float] = None
    window_intensity: Optional[float] = None
    target_intensity: float
    target_rate: Optional[float] = None
    setup_error: Optional[str] = None
    ended_early: Optional[str] = None


class GroupDirs(_Strict):
    name: str
    dirs: list[str] = []


class Irqs(_Strict):
    moved: int
    refused: int


class RunGroup(_Strict):
    """The run's own cgroup: its directory and what was killed in it at the end, or why the
    run had none (`dir` null, `why`)."""

    dir: Optional[str] = None
    killed: Optional[list[str]] = None
    why: Optional[str] = None


class Configuration(_Strict):
    """The machine changes of the run and their undoing. A run whose set-up failed has only
    `restored` and `restore_errors`."""

    groups: Optional[list[GroupDirs]] = None
    housekeeping_cpus: Optional[list[int]] = None
    irqs: Optional[Irqs] = None
    #: What dead agents had left and this run's start undid.
    recovered: Optional[list[str]] = None
    records_staged_on_tmpfs: Optional[bool] = None
    run_group: Optional[RunGroup] = None
    restored: Optional[bool] = None
    restore_errors: Optional[list[str]] = None


class RegulatorReport(_Strict):
    mode: Literal["budget", "feedback"]
    accounting: str
    period_us: int
    budget_bytes: Optional[int] = None
    wakeups: int
    periods: int
    throttles: int
    overshoot_bytes_mean: float
    overshoot_bytes_max: int
    cpu_ns: int


class SkippedCounter(_Strict):
    event: str
    reason: str


class Counters(_Strict):
    """The victim's counters: those read (`events`, the columns of counters.bin in order) and
    those this machine could not read, with the reason."""

    events: list[str] = []
    skipped: list[SkippedCounter] = []
    exclude_kernel: bool = False
    read_with: Optional[Literal["rdpmc", "read(2)"]] = None
    core_pmu: Optional[str] = None


class ClockReference(_Strict):
    ticks: int
    mono_ns: int


class Probes(_Strict):
    """A command victim's probe records (probes.bin) and the tick/CLOCK_MONOTONIC pairs that
    convert their timestamps."""

    file: str
    records: int
    dropped: int
    reference_start: ClockReference
    reference_end: ClockReference


class ApplicationResult(_Strict):
    """What one application (a measured process beside the victim) did: how it ended, its
    records (under `dir`, below the run directory), counters and probes."""

    name: str
    may_fail: bool
    #: completed: every job, exit 0; failed: ended otherwise by itself; stopped: still running
    #: when the run ended; not_started: never forked.
    status: Literal["completed", "failed", "stopped", "not_started"]
    exit: Optional[str] = None
    error: Optional[str] = None
    pid: Optional[int] = None
    dir: str
    jobs_recorded: int
    jobs_planned: int
    t0_ns: int
    counters: Counters
    probes: Optional[Probes] = None


class TraceSaved(_Strict):
    """A saved kernel trace: `capture` "raw" (trace.dat, the ring buffers' pages, ns stamps)
    or "text" (trace.txt, µs stamps; the fallback, `raw_error` says why); runs before the
    raw capture have no `capture` (text)."""

    events: list[str]
    file: str
    lost_events: int
    clock: Literal["mono"]
    capture: Optional[Literal["raw", "text"]] = None
    raw_error: Optional[str] = None


class TraceFailed(_Strict):
    events: list[str]
    error: str


class Attached(_Strict):
    """The process an `attach` victim measured: its PID and its threads (id -> name) seen
    before and after the window."""

    pid: int
    threads: dict[str, str] = {}


class SettingsRecord(_Strict):
    """The machine's configuration settings before and after the run (targets/settings.py):
    file -> text; `drift` one line per file that changed (empty: they held)."""

    before: dict[str, str] = {}
    after: dict[str, str] = {}
    drift: list[str] = []


class RunOutcome(_Strict):
    """One run's run.json."""

    #: Absent in files written before the outcome was versioned: read as 1.
    version: Literal[1] = OUTCOME_VERSION
    run_id: Optional[str] = None
    status: Status
    reason: Optional[str] = None
    plan: Optional[Plan] = None
    environment: Optional[Environment] = None
    started_unix_ns: Optional[int] = None
    ended_unix_ns: Optional[int] = None
    notes: list[str] = []
    victim_exit: Optional[str] = None
    pids: Optional[Pids] = None
    process_budget: Optional[ProcessBudget] = None
    jobs_recorded: Optional[int] = None
    jobs_planned: Optional[int] = None
    #: The victim's time origin (CLOCK_MONOTONIC ns), as in jobs.bin's header.
    t0_ns: Optional[int] = None
    enemies: list[EnemyResult] = []
    #: One entry per application of the plan, in plan order (absent before applications).
    applications: list[ApplicationResult] = []
    configuration: Optional[Configuration] = None
    regulator: Optional[RegulatorReport] = None
    counters: Optional[Counters] = None
    probes: Optional[Probes] = None
    trace: Optional[Union[TraceSaved, TraceFailed]] = None
    attached: Optional[Attached] = None
    #: Written by the host after an agent died before its teardown: what recovery undid.
    restored: Optional[list[str]] = None
    #: Written by the host: the settings snapshot before and after the run, and their drift.
    settings: Optional[SettingsRecord] = None
    #: Why the run is invalid (its settings drifted): left out of every reading of the results.
    invalid: Optional[str] = None

    def to_dict(self) -> dict:
        """The document as written (fields absent from the file stay absent)."""
        return self.model_dump(mode="json", exclude_unset=True)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    def labels(self) -> dict[str, str]:
        """The plan's labels (scenario, configuration, repetition, campaign axes)."""
        return self.plan.labels if self.plan else {}

    def enemy_kinds(self) -> list[str]:
        """The kind of each enemy, as asked (the plan), else as the agent reported them."""
        if self.plan is not None:
            return [e.load.kind for e in self.plan.enemies]
        return [e.kind for e in self.enemies]


class OutcomeError(UsageError):
    """A run.json that is missing, unreadable or not an outcome this host understands."""


def parse_outcome(doc: dict, where: str = "run.json") -> RunOutcome:
    """Validate a run.json document; OutcomeError names the first wrong field."""
    try:
        return RunOutcome.model_validate(doc)
    except ValidationError as e:
        err = e.errors()[0]
        field = ".".join(str(x) for x in err["loc"]) or "(document)"
        raise OutcomeError(f"{where}: {field}: {err['msg']} (not a run.json of agent outcome version {OUTCOME_VERSION}; "
                           f"re-run with this version's agent)") from None


class OutcomeMissing(OutcomeError):
    """No run.json, or one cut short: the agent never wrote it, or died writing it."""


def _document(path: Path) -> dict:
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise OutcomeMissing(f"{path}: no run.json; give a run directory (RESULTS/runs/<run>) the agent wrote") from None
    except OSError as e:
        raise OutcomeMissing(f"{path}: unreadable ({e.strerror})") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise OutcomeMissing(f"{path}: not JSON ({e.msg} at line {e.lineno}): the file was cut short or corrupted") from None
    if not isinstance(doc, dict):
        raise OutcomeError(f"{path}: not a run outcome (a JSON {type(doc).__name__}, not an object)")
    return doc


def load_outcome(run_dir: Path) -> RunOutcome:
    """The outcome of the run in `run_dir` (its run.json). OutcomeError, one line naming the
    file (and the field), when it is missing, cut short (not JSON) or not a run outcome. A
    run the agent did not finish (`running`, or `failed` with little more than the plan)
    loads: everything but `status` is optional."""
    path = Path(run_dir) / "run.json"
    return parse_outcome(_document(path), str(path))


def read_outcome(run_dir: Path) -> Optional[RunOutcome]:
    """The run's outcome, or None where there is no readable run.json (a directory whose
    agent never wrote one, or wrote one cut short). A run.json that is JSON but does not fit
    the model still raises OutcomeError: that is drift, not a missing run."""
    try:
        return load_outcome(run_dir)
    except OutcomeMissing:
        return None


def write_outcome(run_dir: Path, outcome: RunOutcome) -> RunOutcome:
    """Write run.json atomically (a temporary file, then rename)."""
    from . import safepath

    safepath.write_text(Path(run_dir) / "run.json", outcome.to_json())
    return outcome


def json_schema() -> dict:
    """The run outcome's JSON Schema, generated from the models above."""
    return schema_of(RunOutcome, "run-outcome")


def checked_in_schema() -> dict:
    """The schema file shipped in the package (src/xtalk/schema/run-outcome.schema.json)."""
    return shipped_schema("run-outcome")


if __name__ == "__main__":  # python -m xtalk.outcome: print the schema (regenerate the checked-in file)
    print(json.dumps(json_schema(), indent=2))
