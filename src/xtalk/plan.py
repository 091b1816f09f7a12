"""The run plan: the one contract between host and agent (version 1).

These models mirror `agent/src/plan.rs`; `xtalk plan --schema` prints the JSON Schema
generated from them, and `src/xtalk/schema/run-plan.schema.json` is that schema checked in
(a test keeps the two identical and feeds generated plans to the agent's own parser).
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Annotated, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field

from .limits import MAX_ENEMIES, MAX_JOBS, MAX_PERIOD_NS, MAX_PIDS, MAX_TIMEOUT_S

PLAN_VERSION = 1


class _Strict(BaseModel):
    # JSON has no inf or nan: refused here rather than written as null.
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class ChaseBody(_Strict):
    """Dependent loads, one per cache line, over `bytes`; `accesses` per job (default one pass)."""

    kind: Literal["chase"] = "chase"
    bytes: int = Field(ge=128)
    order: Literal["random", "linear"] = "random"
    accesses: Optional[int] = Field(default=None, ge=1)
    seed: int = Field(default=0, ge=0)


class SumBody(_Strict):
    """Sum of a u64 array of `bytes` (seed 002 §VI-B)."""

    kind: Literal["sum"] = "sum"
    bytes: int = Field(ge=8)


class SpawnBody(_Strict):
    """Each job forks a child that sums `bytes` and exits; a refused fork fails the job."""

    kind: Literal["spawn"] = "spawn"
    bytes: int = Field(ge=8)


class PiBody(_Strict):
    """pi/4 series in registers (seed 000 §6.4.2)."""

    kind: Literal["pi"] = "pi"
    iterations: int = Field(ge=1)


class CommandBody(_Strict):
    """Any program (argv, no shell), once per run; its probes land in probes.bin."""

    kind: Literal["command"] = "command"
    argv: list[str] = Field(min_length=1)
    env: dict[str, str] = {}
    preload: Optional[str] = None
    probe_capacity: int = Field(default=1 << 18, ge=1, le=1 << 26)




class SyscallBody(_Strict):
    """`calls` getppid(2) system calls (system-call latency probe)."""

    kind: Literal["syscall"] = "syscall"
    calls: int = Field(ge=1)


class AocsBody(_Strict):
    """Attitude and orbit control loop: one step per job from `input`, outputs compared with
    `expected` bit for bit (files from `xtalk-agent aocs-generate`)."""

    kind: Literal["aocs"] = "aocs"
    input: str = Field(min_length=1)
    expected: str = Field(min_length=1)
    first_step: int = Field(default=0, ge=0)


class LatencyBody(_Strict):
    """cyclictest-equivalent: an empty job; wake-up minus release is the timer latency."""

    kind: Literal["latency"] = "latency"


class Task(_Strict):
    """One periodic task of a task set: a calibrated busy loop of `wcet_ns` per job."""

    name: str = Field(min_length=1)
    period_ns: int = Field(ge=100_000, le=MAX_PERIOD_NS)
    wcet_ns: int = Field(ge=1000)
    deadline_ns: Optional[int] = Field(default=None, ge=1)
    priority: Optional[int] = Field(default=None, ge=1, le=99)
    runtime_ns: Optional[int] = Field(default=None, ge=1024)


class TasksetBody(_Strict):
    """Periodic tasks as threads (RM priorities or SCHED_DEADLINE reservations); the victim's
    period is the hyperperiod and `jobs` counts job records of all tasks."""

    kind: Literal["taskset"] = "taskset"
    tasks: list[Task] = Field(min_length=1, max_length=64)
    policy: Literal["rm", "deadline"] = "rm"


Body = Annotated[Union[ChaseBody, SumBody, SpawnBody, PiBody, CommandBody, SyscallBody, AocsBody, LatencyBody, TasksetBody], Field(discriminator="kind")]


class ReadLoad(_Strict):
    kind: Literal["read"] = "read"
    bytes: int = Field(ge=4096)


class WriteLoad(_Strict):
    kind: Literal["write"] = "write"
    bytes: int = Field(ge=4096)


class ChaseLoad(_Strict):
    """Linked list of `elements` nodes of `element_bytes` (seed 003), `chains` walkers."""

    kind: Literal["chase"] = "chase"
    elements: int = Field(ge=2)
    element_bytes: int = Field(default=64, ge=8, multiple_of=8)
    order: Literal["random", "linear"] = "random"
    seed: int = Field(default=0, ge=0)
    chains: int = Field(default=1, ge=1, le=64)


class PiLoad(_Strict):
    kind: Literal["pi"] = "pi"


class L1dLoad(_Strict):
    """Read-modify-write of every cache line of a buffer sized to L1D."""

    kind: Literal["l1d"] = "l1d"
    bytes: int = Field(ge=4096)


class L2Load(_Strict):
    kind: Literal["l2"] = "l2"
    bytes: int = Field(ge=4096)


class LlcLoad(_Strict):
    kind: Literal["llc"] = "llc"
    bytes: int = Field(ge=4096)


class LoadsLoad(_Strict):
    """Seed 000 "Loads": strided loads, a new cache line each."""

    kind: Literal["loads"] = "loads"
    lines: int = Field(ge=1)
    stride_bytes: int = Field(default=64, ge=8, multiple_of=8)


class TlbLoad(_Strict):
    kind: Literal["tlb"] = "tlb"
    pages: int = Field(ge=2)
    page_bytes: int = Field(default=4096, ge=4096, multiple_of=4096)


class IcacheLoad(_Strict):
    kind: Literal["icache"] = "icache"
    functions: int = Field(default=4096, ge=1, le=4096)


class BranchLoad(_Strict):
    kind: Literal["branch"] = "branch"
    seed: int = Field(default=0, ge=0)


class CopyLoad(_Strict):
    kind: Literal["copy"] = "copy"
    bytes: int = Field(ge=8192)


class NtstoreLoad(_Strict):
    kind: Literal["ntstore"] = "ntstore"
    bytes: int = Field(ge=4096)


class PingpongLoad(_Strict):
    kind: Literal["pingpong"] = "pingpong"


class FalseshareLoad(_Strict):
    kind: Literal["falseshare"] = "falseshare"


class SyscallLoad(_Strict):
    kind: Literal["syscall"] = "syscall"


class FileioLoad(_Strict):
    """Page-cache reads of a file: one for every copy (`shared`) or one each (seed 000 §5.3.1)."""

    kind: Literal["fileio"] = "fileio"
    bytes: int = Field(ge=4096)
    shared: bool = False
    dir: Optional[str] = None


class ForkLoad(_Strict):
    kind: Literal["fork"] = "fork"
    exec: bool = False


class PagefaultLoad(_Strict):
    kind: Literal["pagefault"] = "pagefault"
    bytes: int = Field(ge=4096)


class NetLoad(_Strict):
    kind: Literal["net"] = "net"
    proto: Literal["tcp", "udp"]
    message_bytes: int = Field(default=32768, ge=1, le=16 << 20)


class TimerLoad(_Strict):
    kind: Literal["timer"] = "timer"
    interval_ns: int = Field(ge=1000, le=1_000_000_000)


class ExternalLoad(_Strict):
    """Any command (argv, no shell), in its own process group."""

    kind: Literal["external"] = "external"
    argv: list[str] = Field(min_length=1)
    rate_regex: Optional[str] = None
    unit: str = Field(default="ops", min_length=1)


class AocsLoad(_Strict):
    """Another AOCS instance (loop, reader, comparer) at its own period, replaying a window."""

    kind: Literal["aocs"] = "aocs"
    input: str = Field(min_length=1)
    expected: str = Field(min_length=1)
    first_step: int = Field(default=0, ge=0)
    steps: int = Field(ge=1)
    period_ns: int = Field(ge=100_000, le=MAX_PERIOD_NS)
    duplicate_executable: bool = Field(default=False, description="run from a private copy of the agent's executable (own text pages)")


class MemhogLoad(_Strict):
    """Failure propagation: memory touched up to RLIMIT_AS = `bytes` over its own, freed, again."""

    kind: Literal["memhog"] = "memhog"
    bytes: int = Field(ge=1 << 20)


class FdexhaustLoad(_Strict):
    """Failure propagation: descriptors opened up to RLIMIT_NOFILE = `fds`, closed, again."""

    kind: Literal["fdexhaust"] = "fdexhaust"
    fds: int = Field(ge=16, le=65_536)


class ForkbombLoad(_Strict):
    """Failure propagation: up to `max_procs` children alive, each spinning `hold_ns` then
    replaced; a pids limit that stops it first leaves it retrying."""

    kind: Literal["forkbomb"] = "forkbomb"
    max_procs: int = Field(ge=1, le=256)
    hold_ns: int = Field(default=2_000_000, ge=1_000, le=60_000_000_000)


class DiskfillLoad(_Strict):
    """Failure propagation: an unnamed file in `dir` written up to `bytes`, synced, emptied."""

    kind: Literal["diskfill"] = "diskfill"
    dir: str = Field(default="/tmp", min_length=1)
    bytes: int = Field(ge=1 << 20)


class SyscallstormLoad(_Strict):
    """Failure propagation: cheap system calls in a tight loop."""

    kind: Literal["syscallstorm"] = "syscallstorm"


class CrashloopLoad(_Strict):
    """Failure propagation: a child that aborts, restarted at once."""

    kind: Literal["crashloop"] = "crashloop"


Load = Annotated[Union[ReadLoad, WriteLoad, ChaseLoad, PiLoad, L1dLoad, L2Load, LlcLoad, LoadsLoad, TlbLoad, IcacheLoad,
                       BranchLoad, CopyLoad, NtstoreLoad, PingpongLoad, FalseshareLoad, SyscallLoad, FileioLoad, ForkLoad,
                       PagefaultLoad, NetLoad, TimerLoad, ExternalLoad, AocsLoad, MemhogLoad, FdexhaustLoad, ForkbombLoad,
                       DiskfillLoad, SyscallstormLoad, CrashloopLoad], Field(discriminator="kind")]


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


class Trace(_Strict):
    """Kernel trace of the measured window through tracefs (root only)."""

    events: list[TraceEvent] = Field(default=["sched:sched_switch", "sched:sched_wakeup", "sched:sched_migrate_task",
                                       "irq:irq_handler_entry", "irq:irq_handler_exit", "irq:softirq_entry",
                                       "irq:softirq_exit", "timer:hrtimer_expire_entry", "timer:hrtimer_expire_exit"],
                              min_length=1)
    buffer_kb: int = Field(default=8192, ge=64, le=1 << 20)


class Plan(_Strict):
    """Everything one run needs; the agent executes exactly this."""

    version: Literal[1] = PLAN_VERSION
    run_id: str = Field(min_length=1, max_length=200)
    timeout_s: float = Field(gt=0, le=MAX_TIMEOUT_S)
    settle_ms: float = Field(default=200.0, ge=0, le=60_000)
    victim: Victim
    enemies: list[Enemy] = Field(default=[], max_length=MAX_ENEMIES)
    trace: Optional[Trace] = None
    groups: list[Group] = []
    housekeeping_cpus: Optional[list[int]] = None
    steer_irqs: bool = False
    regulator: Optional[Regulator] = None
    pids_max: Optional[int] = Field(default=None, ge=1, le=MAX_PIDS, description="the whole run's process budget (the stand-in for the machine's PID table)")
    labels: dict[str, str] = {}

    def to_json(self) -> str:
        return self.model_dump_json(indent=2)


def json_schema() -> dict:
    """The run plan's JSON Schema, generated from the models above."""
    schema = Plan.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = "https://xtalk.dev/schema/run-plan-v1.json"
    return schema


def checked_in_schema() -> dict:
    """The schema file shipped in the package (src/xtalk/schema/run-plan.schema.json)."""
    return json.loads(resources.files("xtalk").joinpath("schema/run-plan.schema.json").read_text())
