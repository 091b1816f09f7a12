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

PLAN_VERSION = 1


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


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
    period_ns: int = Field(ge=100_000)
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


Body = Annotated[Union[ChaseBody, SumBody, PiBody, CommandBody, AocsBody, LatencyBody, TasksetBody], Field(discriminator="kind")]


class ReadLoad(_Strict):
    kind: Literal["read"] = "read"
    bytes: int = Field(ge=4096)


class WriteLoad(_Strict):
    kind: Literal["write"] = "write"
    bytes: int = Field(ge=4096)


class ChaseLoad(_Strict):
    """Linked list of `elements` nodes of `element_bytes` (seed 003)."""

    kind: Literal["chase"] = "chase"
    elements: int = Field(ge=2)
    element_bytes: int = Field(default=64, ge=8, multiple_of=8)
    order: Literal["random", "linear"] = "random"
    seed: int = Field(default=0, ge=0)


class PiLoad(_Strict):
    kind: Literal["pi"] = "pi"


class AocsLoad(_Strict):
    """Another AOCS instance (loop, reader, comparer) at its own period, replaying a window."""

    kind: Literal["aocs"] = "aocs"
    input: str = Field(min_length=1)
    expected: str = Field(min_length=1)
    first_step: int = Field(default=0, ge=0)
    steps: int = Field(ge=1)
    period_ns: int = Field(ge=100_000)


class MemhogLoad(_Strict):
    """Failure propagation: memory touched up to RLIMIT_AS = `bytes` over its own, freed, again."""

    kind: Literal["memhog"] = "memhog"
    bytes: int = Field(ge=1 << 20)


class FdexhaustLoad(_Strict):
    """Failure propagation: descriptors opened up to RLIMIT_NOFILE = `fds`, closed, again."""

    kind: Literal["fdexhaust"] = "fdexhaust"
    fds: int = Field(ge=16, le=65_536)


class ForkbombLoad(_Strict):
    """Failure propagation: `max_procs` short-lived children kept alive, each replaced."""

    kind: Literal["forkbomb"] = "forkbomb"
    max_procs: int = Field(ge=1, le=256)


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


Load = Annotated[Union[ReadLoad, WriteLoad, ChaseLoad, PiLoad, AocsLoad, MemhogLoad, FdexhaustLoad, ForkbombLoad, DiskfillLoad,
                       SyscallstormLoad, CrashloopLoad], Field(discriminator="kind")]


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


class Victim(_Strict):
    body: Body
    period_ns: int = Field(ge=10_000)
    deadline_ns: Optional[int] = Field(default=None, ge=1)
    jobs: int = Field(ge=1)
    warmup_jobs: int = Field(default=0, ge=0)
    placement: Placement = Placement()
    sched: Sched = OtherSched()
    lock_memory: bool = False
    huge_pages: bool = False
    counters: list[Counter] = []
    counters_exclude_kernel: bool = False


class Enemy(_Strict):
    name: str = Field(min_length=1)
    load: Load
    placement: Placement = Placement()
    sched: Sched = OtherSched()
    lock_memory: bool = False
    huge_pages: bool = False


class Trace(_Strict):
    """Kernel trace of the measured window through tracefs (root only)."""

    events: list[str] = Field(default=["sched:sched_switch", "sched:sched_wakeup", "sched:sched_migrate_task",
                                       "irq:irq_handler_entry", "irq:irq_handler_exit", "irq:softirq_entry",
                                       "irq:softirq_exit", "timer:hrtimer_expire_entry", "timer:hrtimer_expire_exit"],
                              min_length=1)
    buffer_kb: int = Field(default=8192, ge=64, le=1 << 20)


class Plan(_Strict):
    """Everything one run needs; the agent executes exactly this."""

    version: Literal[1] = PLAN_VERSION
    run_id: str = Field(min_length=1)
    timeout_s: float = Field(gt=0)
    settle_ms: float = Field(default=200.0, ge=0, le=60_000)
    victim: Victim
    enemies: list[Enemy] = []
    trace: Optional[Trace] = None
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
