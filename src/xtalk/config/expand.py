"""Experiment -> one run plan per (scenario, repetition), in interleaved order.

Scenarios are shuffled independently inside every repetition (seeded), so runs of one
scenario never form a block and a slow drift of the machine cannot pass for interference.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from ..errors import UsageError
import math

from pydantic import ValidationError

from ..plan import (AocsBody, AocsLoad, CrashloopLoad, DiskfillLoad, FdexhaustLoad, ForkbombLoad, MemhogLoad, SyscallstormLoad, ChaseBody, ChaseLoad, CommandBody, Counter, Trace, DeadlineSched, Enemy, FifoSched, LatencyBody,
                    OtherSched, PiBody, PiLoad, Placement, Plan, ReadLoad, RrSched, SumBody, Task, TasksetBody, Victim, WriteLoad)
from ..targets.agent import TargetFacts
from . import units
from .experiment import EnemySpec, Experiment, SchedSpec, ScenarioSpec


@dataclass(frozen=True)
class RunSpec:
    """One run of an experiment: its place in the order, scenario, repetition and plan."""

    index: int
    scenario: str
    repetition: int
    plan: Plan

    @property
    def run_id(self) -> str:
        return self.plan.run_id

    def expected_seconds(self) -> float:
        return self.plan.settle_ms / 1e3 + victim_seconds(self.plan.victim)


def victim_seconds(v: Victim) -> float:
    """How long the victim runs: its jobs' periods, or a task set's hyperperiods (its jobs
    count the records of every task) plus the one a late task may use to finish."""
    if isinstance(v.body, TasksetBody):
        per = sum(v.period_ns // t.period_ns for t in v.body.tasks)
        return ((v.jobs + v.warmup_jobs) // per + 1) * v.period_ns / 1e9
    return (v.jobs + v.warmup_jobs) * v.period_ns / 1e9


def interleave(scenarios: list[str], repetitions: int, seed: int) -> list[tuple[int, str]]:
    """(repetition, scenario) pairs: every repetition holds each scenario once, in a
    random order of its own."""
    rng = random.Random(seed)
    order = []
    for r in range(repetitions):
        names = list(scenarios)
        rng.shuffle(names)
        order.extend((r, n) for n in names)
    return order


def _sched(s: SchedSpec, field: str, period_ns: int):
    if s.policy == "other":
        return OtherSched(nice=s.nice)
    if s.policy == "fifo":
        return FifoSched(priority=s.priority)
    if s.policy == "rr":
        return RrSched(priority=s.priority)
    r = s.reservation
    return DeadlineSched(
        runtime_ns=units.duration_ns(r.runtime, f"{field}.reservation.runtime"),
        deadline_ns=units.duration_ns(r.deadline, f"{field}.reservation.deadline") if r.deadline is not None else period_ns,
        period_ns=units.duration_ns(r.period, f"{field}.reservation.period") if r.period is not None else period_ns,
    )


def _taskset(v, field: str) -> tuple[TasksetBody, int, int, int]:
    """The task set's body, hyperperiod, and measured / warm-up job records."""
    tasks = []
    for i, t in enumerate(v.tasks):
        f = f"{field}.tasks[{i}]"
        try:
            tasks.append(Task(name=t.name, period_ns=units.duration_ns(t.period, f"{f}.period"), wcet_ns=units.duration_ns(t.wcet, f"{f}.wcet"),
                              deadline_ns=units.duration_ns(t.deadline, f"{f}.deadline") if t.deadline is not None else None,
                              priority=t.priority, runtime_ns=units.duration_ns(t.runtime, f"{f}.runtime") if t.runtime is not None else None))
        except ValidationError as e:  # a bound of the plan (e.g. period >= 100 us): one line, in the file's terms
            err = e.errors()[0]
            key = str(err["loc"][0]).removesuffix("_ns")
            raise ValueError(f"{f}.{key}: {err['msg'].replace('Input should be', 'should be')} ns ({err['input']} ns given)") from None
    hyper = math.lcm(*(t.period_ns for t in tasks))
    per = sum(hyper // t.period_ns for t in tasks)
    return TasksetBody(tasks=tasks, policy=v.task_policy), hyper, v.hyperperiods * per, v.warmup_hyperperiods * per


def _victim(exp: Experiment, facts: TargetFacts) -> Victim:
    v = exp.victim
    jobs, warmup = v.jobs, v.warmup_jobs
    if v.body == "taskset":
        body, period, jobs, warmup = _taskset(v, "victim")
    else:
        period = units.duration_ns(v.period, "victim.period")
    if v.body == "taskset":
        pass  # built above, with its period
    elif v.body == "aocs":
        from ..aocs import ensure_data
        from ..targets.agent import find_agent

        inp, expected = ensure_data(v.data, v.data_seed, find_agent())
        body = AocsBody(input=str(inp), expected=str(expected), first_step=v.first_step)
    elif v.body == "latency":
        body = LatencyBody()
    elif v.body == "chase":
        body = ChaseBody(bytes=units.size_bytes(v.bytes, "victim.bytes", facts.caches), order=v.order, accesses=v.accesses, seed=v.seed)
    elif v.body == "sum":
        body = SumBody(bytes=units.size_bytes(v.bytes, "victim.bytes", facts.caches))
    elif v.body == "pi":
        body = PiBody(iterations=v.iterations)
    else:
        body = CommandBody(argv=v.argv, env=v.env, preload=v.preload, probe_capacity=v.probe_capacity)
    return Victim(
        body=body,
        period_ns=period,
        deadline_ns=units.duration_ns(v.deadline, "victim.deadline") if v.deadline is not None else None,
        jobs=jobs,
        warmup_jobs=warmup,
        placement=Placement(cpus=units.cpu_set(v.cpus, "victim.cpus", facts.online_cpus)),
        sched=_sched(v, "victim", period),
        lock_memory=v.lock_memory,
        huge_pages=v.huge_pages,
        counters=[Counter(event=c) if isinstance(c, str) else Counter(event=c.event, optional=c.optional) for c in v.counters],
        counters_exclude_kernel=v.counters_exclude_kernel,
    )


def _load(e: EnemySpec, field: str, facts: TargetFacts):
    if e.kind == "read":
        return ReadLoad(bytes=units.size_bytes(e.bytes, f"{field}.bytes", facts.caches))
    if e.kind == "write":
        return WriteLoad(bytes=units.size_bytes(e.bytes, f"{field}.bytes", facts.caches))
    if e.kind == "chase":
        elements = e.elements or max(2, units.size_bytes(e.bytes, f"{field}.bytes", facts.caches) // e.element_bytes)
        return ChaseLoad(elements=elements, element_bytes=e.element_bytes, order=e.order, seed=e.seed)
    if e.kind == "aocs":
        from ..aocs import ensure_data
        from ..targets.agent import find_agent

        inp, expected = ensure_data(e.data, e.data_seed, find_agent(), f"{field}.data")
        return AocsLoad(input=str(inp), expected=str(expected), first_step=e.first_step, steps=e.steps,
                        period_ns=units.duration_ns(e.period, f"{field}.period"))
    if e.kind == "memhog":
        return MemhogLoad(bytes=units.size_bytes(e.bytes, f"{field}.bytes", facts.caches))
    if e.kind == "diskfill":
        return DiskfillLoad(dir=e.dir, bytes=units.size_bytes(e.bytes, f"{field}.bytes", facts.caches))
    if e.kind == "fdexhaust":
        return FdexhaustLoad(fds=e.fds)
    if e.kind == "forkbomb":
        return ForkbombLoad(max_procs=e.max_procs)
    if e.kind == "syscallstorm":
        return SyscallstormLoad()
    if e.kind == "crashloop":
        return CrashloopLoad()
    return PiLoad()


def _enemies(sc: ScenarioSpec, si: int, victim: Victim, facts: TargetFacts, period_ns: int) -> list[Enemy]:
    out: list[Enemy] = []
    for k, e in enumerate(sc.enemies):
        field = f"scenario[{si}].enemies[{k}]"
        cpus = units.cpu_set(e.cpus, f"{field}.cpus", facts.online_cpus, victim.placement.cpus)
        load = _load(e, field, facts)
        sched = _sched(e, field, period_ns)
        base = e.name or e.kind
        groups = [[c] for c in cpus] if (e.per_cpu and cpus) else [cpus]
        for g in groups:
            name = f"{base}@{g[0]}" if e.per_cpu else (base if len(sc.enemies) == 1 else f"{base}.{k}")
            for i in range(e.instances):
                iname = f"{name}#{i}" if e.instances > 1 else name
                iload = load
                if e.kind == "aocs" and e.files == "duplicated":
                    from ..aocs import duplicate

                    iload = load.model_copy(update=duplicate(load.input, load.expected, f"{sc.name}-{iname}"))
                out.append(Enemy(name=iname, load=iload, placement=Placement(cpus=g), sched=sched, lock_memory=e.lock_memory,
                                 huge_pages=e.huge_pages))
    return out


def expand(exp: Experiment, facts: TargetFacts, labels: dict[str, str] | None = None) -> list[RunSpec]:
    """Resolve units and placements against the target and build every run's plan."""
    try:
        victim = _victim(exp, facts)
        settle_ms = units.duration_ns(exp.settle, "settle") / 1e6
        scenarios = exp.scenarios()
        enemies = {sc.name: _enemies(sc, i, victim, facts, victim.period_ns)
                   for i, sc in enumerate(s for s in exp.scenario) } if exp.scenario else {}
        enemies.setdefault("solo", [])
        run_s = settle_ms / 1e3 + victim_seconds(victim)
        timeout_s = units.duration_ns(exp.timeout, "timeout") / 1e9 if exp.timeout is not None else 2 * run_s + 30
    except ValueError as e:
        raise UsageError(str(e)) from None
    trace = None
    if exp.trace is not None:
        trace = Trace(buffer_kb=exp.trace.buffer_kb, **({"events": exp.trace.events} if exp.trace.events else {}))
    runs = []
    width = len(str(len(scenarios) * exp.repetitions))
    for i, (rep, name) in enumerate(interleave([s.name for s in scenarios], exp.repetitions, exp.seed)):
        run_id = f"{i:0{width}d}-{name}-r{rep}"
        plan = Plan(run_id=run_id, timeout_s=timeout_s, settle_ms=settle_ms, victim=victim, enemies=enemies[name], trace=trace,
                    labels={**(labels or {}), "experiment": exp.name, "scenario": name, "repetition": str(rep)})
        runs.append(RunSpec(index=i, scenario=name, repetition=rep, plan=plan))
    return runs
