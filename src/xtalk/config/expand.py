"""Experiment -> one run plan per (scenario, repetition), in interleaved order.

Scenarios are shuffled independently inside every repetition (seeded), so runs of one
scenario never form a block and a slow drift of the machine cannot pass for interference.
"""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass
from typing import Callable

from pydantic import TypeAdapter, ValidationError

from ..aocs import data_paths
from ..errors import UsageError
from .. import catalog
from ..plan import (AocsBody, ChaseBody, CommandBody, Counter, DeadlineSched, Enemy, FifoSched, LatencyBody, Load, OtherSched,
                    PiBody, Placement, Plan, RrSched, SpawnBody, SumBody, SyscallBody, Task, TasksetBody, Trace, Victim,
                    run_seconds, victim_seconds)
from ..targets.agent import TargetFacts
from .. import limits, units
from .configuration import Unavailable, resolve as resolve_configuration
from .experiment import AOCS_MADE, EnemySpec, Experiment, SchedSpec, ScenarioSpec, VictimSpec
from . import applications as _applications


#: Makes the AOCS files where the runs happen: (directory, seed, field, copy tag or None) ->
#: (input, expected) paths there. A target's `aocs_data`; without one, expansion only names
#: the files (`aocs.data_paths`) and whoever runs the plans makes them.
AocsData = Callable[[str, int, str, str | None], tuple[str, str]]


def _named_only(directory: str, seed: int, field: str, copy: str | None = None) -> tuple[str, str]:
    return data_paths(directory, copy)


@dataclass(frozen=True)
class RunSpec:
    """One run of an experiment: its place in the order, configuration, scenario, repetition
    and plan."""

    index: int
    scenario: str
    repetition: int
    plan: Plan
    configuration: str = "default"

    @property
    def run_id(self) -> str:
        return self.plan.run_id

    def expected_seconds(self) -> float:
        return run_seconds(self.plan)


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


def _victim(exp: Experiment, facts: TargetFacts, aocs_data: AocsData) -> Victim:
    return _measured(exp.victim, "victim", facts, aocs_data)


def _measured(v: VictimSpec, field: str, facts: TargetFacts, aocs_data: AocsData, copy: str | None = None) -> Victim:
    """One measured process of the plan (the victim, or an application: `field` names it in
    the file); `copy` tags an AOCS body's own copy of the data files."""
    jobs, warmup = v.jobs, v.warmup_jobs
    if v.body == "taskset":
        body, period, jobs, warmup = _taskset(v, field)
    else:
        period = units.duration_ns(v.period, f"{field}.period")
    if v.body == "taskset":
        pass  # built above, with its period
    elif v.body == "aocs":
        inp, expected = aocs_data(v.data, v.data_seed, f"{field}.data", copy)
        body = AocsBody(input=str(inp), expected=str(expected), first_step=v.first_step)
    elif v.body == "latency":
        body = LatencyBody()
    elif v.body == "chase":
        body = ChaseBody(bytes=units.size_bytes(v.bytes, f"{field}.bytes", facts.caches), order=v.order, accesses=v.accesses, seed=v.seed)
    elif v.body == "sum":
        body = SumBody(bytes=units.size_bytes(v.bytes, f"{field}.bytes", facts.caches))
    elif v.body == "spawn":
        body = SpawnBody(bytes=units.size_bytes(v.bytes, f"{field}.bytes", facts.caches))
    elif v.body == "syscall":
        body = SyscallBody(calls=v.calls or 1)  # with utilization: calibrated before the runs
    elif v.body == "pi":
        body = PiBody(iterations=v.iterations or 1)
    else:
        body = CommandBody(argv=v.argv, env=v.env, preload=v.preload, probe_capacity=v.probe_capacity)
    return Victim(
        body=body,
        period_ns=period,
        deadline_ns=units.duration_ns(v.deadline, f"{field}.deadline") if v.deadline is not None else None,
        jobs=jobs,
        warmup_jobs=warmup,
        placement=Placement(cpus=units.cpu_set(v.cpus, f"{field}.cpus", facts.online_cpus)),
        sched=_sched(v, field, period),
        lock_memory=v.lock_memory,
        huge_pages=v.huge_pages,
        counters=[Counter(event=c) if isinstance(c, str) else Counter(event=c.event, optional=c.optional) for c in v.counters],
        counters_exclude_kernel=v.counters_exclude_kernel,
    )


def _aocs(e: EnemySpec, field: str, aocs_data: AocsData) -> dict:
    """An `aocs` enemy's files, made (or only named) by `aocs_data` where the runs happen."""
    inp, expected = aocs_data(e.param("data", "aocs-data"), e.param("data_seed", 0), f"{field}.data", None)
    return {"input": str(inp), "expected": str(expected),
            "duplicate_executable": e.param("executable", "shared") == "duplicated"}


def _load(e: EnemySpec, field: str, facts: TargetFacts, aocs_data: AocsData):
    """The agent-side load of an enemy spec, from its kind's catalog entry: sizes and
    durations resolved against the target, counts given as `bytes` divided out, the file's
    defaults filled in (the plan's own defaults are the agent's)."""
    k = catalog.kind(e.kind)
    given = e.params()
    out: dict = {"kind": e.kind}
    if AOCS_MADE <= {p.name for p in k.params}:
        out.update(_aocs(e, field, aocs_data))
    for p in k.params:
        key = p.file_key
        if p.name in out:
            continue
        if key in given:
            v = given[key]
        elif p.per_bytes and ("bytes" in given or p.file_default is not None):
            size = units.size_bytes(given.get("bytes", p.file_default), f"{field}.bytes", facts.caches)
            divisor = units.size_bytes(given.get(p.per_bytes, k.param(p.per_bytes).default), f"{field}.{p.per_bytes}", facts.caches)
            out[p.name] = max(p.min or 0, size // divisor)
            continue
        elif p.file_default is not None:
            v = p.file_default
        else:
            continue  # the agent's default, or required and refused by the file's check
        if p.unit == "bytes":
            v = units.size_bytes(v, f"{field}.{key}", facts.caches)
        elif p.unit == "ns":
            v = units.duration_ns(v, f"{field}.{key}")
        elif p.type == "u64" and isinstance(v, str):
            v = int(v)
        out[p.name] = v
    return TypeAdapter(Load).validate_python(out)


def _enemies(sc: ScenarioSpec, si: int, victim: Victim, facts: TargetFacts, period_ns: int,
             aocs_data: AocsData) -> list[Enemy]:
    out: list[Enemy] = []
    for k, e in enumerate(sc.enemies):
        field = f"scenario[{si}].enemies[{k}]"
        cpus = units.cpu_set(e.cpus, f"{field}.cpus", facts.online_cpus, victim.placement.cpus)
        try:
            load = _load(e, field, facts, aocs_data)
        except ValidationError as err:
            first = err.errors()[0]
            # Name the experiment's key (interval, not the plan's interval_ns) and its unit.
            key = ".".join(str(x) for x in first["loc"][1:]) or "kind"  # [0] is the union's tag
            exp_key, unit = (key.removesuffix("_ns"), " ns") if key.endswith("_ns") else (key, "")
            raise ValueError(f"{field}.{exp_key}: {first['msg']}{unit} (got {first.get('input')!r}{unit}); change it") from None
        sched = _sched(e, field, period_ns)
        base = e.name or e.kind
        groups = [[c] for c in cpus] if (e.per_cpu and cpus) else [cpus]
        for g in groups:
            name = f"{base}@{g[0]}" if e.per_cpu else (base if len(sc.enemies) == 1 else f"{base}.{k}")
            for i in range(e.param("instances", 1)):
                iname = f"{name}#{i}" if e.param("instances", 1) > 1 else name
                iload = load
                if e.param("files", "shared") == "duplicated":
                    inp, expected = aocs_data(e.param("data", "aocs-data"), e.param("data_seed", 0), f"{field}.data",
                                              f"{sc.name}-{iname}")
                    iload = load.model_copy(update={"input": inp, "expected": expected})
                out.append(Enemy(name=iname, load=iload, placement=Placement(cpus=g), sched=sched, lock_memory=e.lock_memory,
                                 huge_pages=e.huge_pages, intensity=e.intensity, rate=e.rate))
                if len(out) > limits.MAX_ENEMIES:  # per_cpu and instances multiply the enemies
                    raise ValueError(f"scenario[{si}].enemies: more than {limits.MAX_ENEMIES} enemies in one run "
                                     f"(per_cpu and instances count each copy); split them over scenarios")
    return out


def _file_field(name: str) -> str:
    """A plan field's name in the experiment file: durations drop their unit (settle_ms is
    `settle`, interval_ns `interval`)."""
    return re.sub(r"_(ns|ms|s)$", "", name)


def plan_error_line(e: ValidationError) -> str:
    """A value the file schema let through but the run plan refuses (a task set's jobs
    beyond the limit, a derived period): one line naming the field in the file's terms."""
    from .experiment import error_line

    line = error_line(e)
    path, _, rest = line.partition(": ")
    if e.title == "Victim":  # built on its own: its errors' paths start below it
        path = "victim" if path == "(top level)" else f"victim.{path}"
    parts = path.split(".")
    named = ".".join(_file_field(p) for p in parts if p not in ("load", "body", "placement", "sched"))
    unit = " (ns)" if parts[-1].endswith("_ns") else " (s)" if parts[-1].endswith("_s") else ""
    return f"{named}{unit}: {rest}"


def expand(exp: Experiment, facts: TargetFacts, labels: dict[str, str] | None = None,
           skip_unavailable: bool = False, skipped: list | None = None,
           aocs_data: AocsData | None = None) -> list[RunSpec]:
    """Resolve units and placements against the target and build every run's plan, for
    every configuration × scenario × repetition. A configuration this kernel cannot provide
    is an input error, or (skip_unavailable) left out and noted in `skipped`. AOCS data
    files are made by `aocs_data` (the target's, so they exist where the runs happen), or
    only named when it is None."""
    try:
        return _expand(exp, facts, labels, skip_unavailable, skipped, aocs_data or _named_only)
    except ValidationError as e:
        raise UsageError(plan_error_line(e)) from None


def _expand(exp: Experiment, facts: TargetFacts, labels: dict[str, str] | None,
            skip_unavailable: bool, skipped: list | None, aocs_data: AocsData) -> list[RunSpec]:
    if exp.victim is None:
        return _applications.expand(exp, facts, labels, skip_unavailable, skipped, aocs_data)
    try:
        victim = _victim(exp, facts, aocs_data)
        settle_ms = units.duration_ns(exp.settle, "settle") / 1e6
        scenarios = exp.scenarios()
        enemies = {sc.name: _enemies(sc, i, victim, facts, victim.period_ns, aocs_data)
                   for i, sc in enumerate(s for s in exp.scenario) } if exp.scenario else {}
        enemies.setdefault("solo", [])
        run_s = settle_ms / 1e3 + victim_seconds(victim)
        if run_s > limits.MAX_RUN_S:
            raise ValueError(f"victim.jobs: jobs × period make a run of {run_s:.0f} s, above the limit of "
                             f"{limits.MAX_RUN_S} s (7 days); lower jobs or the period")
        timeout_s = units.duration_ns(exp.timeout, "timeout") / 1e9 if exp.timeout is not None else 2 * run_s + 30
        why = limits.check_memory(victim, facts.environment.get("memory_available_bytes"))
        if why:
            raise ValueError(why)
        reservation = (units.duration_ns(exp.victim.reservation.runtime, "victim.reservation.runtime")
                       if exp.victim.reservation is not None else None)
    except ValidationError as e:  # a ValueError too: before the next clause
        raise UsageError(plan_error_line(e)) from None
    except ValueError as e:
        raise UsageError(str(e)) from None
    trace = _trace(exp)
    bases = {s.name: Plan(run_id="x", timeout_s=timeout_s, settle_ms=settle_ms, victim=victim, enemies=enemies[s.name],
                          trace=trace, pids_max=exp.pids_max) for s in scenarios}
    return configured_runs(exp, facts, labels, skip_unavailable, skipped, bases, {s.name: reservation for s in scenarios})


def _trace(exp: Experiment) -> Trace | None:
    if exp.trace is None:
        return None
    return Trace(buffer_kb=exp.trace.buffer_kb, **({"events": exp.trace.events} if exp.trace.events else {}))


def configured_runs(exp: Experiment, facts: TargetFacts, labels: dict[str, str] | None, skip_unavailable: bool,
                    skipped: list | None, bases: dict[str, Plan], reservations: dict[str, int | None],
                    faults: dict[str, dict] | None = None, run_labels: dict[str, dict[str, str]] | None = None,
                    plan_for: Callable[[str, str], Plan] | None = None) -> list[RunSpec]:
    """Every configuration × scenario (`bases`: scenario -> its plan before configuration,
    in order) × repetition, interleaved. `faults` and `run_labels` (per scenario) are those
    of applications (config/applications.py); `plan_for(configuration, scenario)` gives a
    scenario's plan under a configuration where it differs from `bases` (its data files)."""
    configs = exp.configurations()
    resolved: dict[tuple[str, str], Plan] = {}
    for ci, cfg in enumerate(configs):
        for name, base in bases.items():
            if plan_for is not None:
                base = plan_for(cfg.name, name)
            try:
                resolved[(cfg.name, name)] = resolve_configuration(cfg, base, facts, reservations[name],
                                                                   f"configuration[{ci}]" if exp.configuration else "configuration",
                                                                   **({"faults": faults[name]} if faults and faults.get(name) else {}))
            except Unavailable as e:
                if not skip_unavailable:
                    raise UsageError(f"configuration[{ci}] '{cfg.name}': {e}; use --skip-unavailable to run the others") from None
                if skipped is not None and all(x["configuration"] != cfg.name for x in skipped):
                    skipped.append({"configuration": cfg.name, "reason": str(e)})
                break
            except ValidationError as e:
                raise UsageError(plan_error_line(e)) from None
            except ValueError as e:
                raise UsageError(str(e)) from None
    pairs = [(c.name, n) for c in configs for n in bases if (c.name, n) in resolved]
    if not pairs:
        raise UsageError("configuration: none of the configurations can run on this machine")
    multi = len(configs) > 1
    runs = []
    width = len(str(len(pairs) * exp.repetitions))
    keys = [f"{c}\t{s}" for c, s in pairs]
    for i, (rep, key) in enumerate(interleave(keys, exp.repetitions, exp.seed)):
        cname, name = key.split("\t")
        # Application scenarios are named alone:<A>, fault:<A>:<kind>: no ':' in a directory name.
        run_id = f"{i:0{width}d}-{cname + '-' if multi else ''}{name.replace(':', '_')}-r{rep}"
        # A shallow copy: runs share their (never modified) victim and enemies, so that an
        # experiment of many runs costs little memory and time to expand.
        plan = resolved[(cname, name)].model_copy(update={
            "run_id": run_id,
            "labels": {**(labels or {}), "experiment": exp.name, "scenario": name, "repetition": str(rep), "configuration": cname,
                       **((run_labels or {}).get(name) or {})}})
        runs.append(RunSpec(index=i, scenario=name, repetition=rep, plan=plan, configuration=cname))
    return runs
