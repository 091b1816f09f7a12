"""The processes of a run plan, from an experiment file's tables: a measured process (the
victim, or an application) with its body, placement and policy; a scenario's enemies with
their loads from the agent's catalog; the trace. Units and CPU sets resolve against the target.
"""

from __future__ import annotations

import math
from typing import Callable

from pydantic import ValidationError

from ..aocs import data_paths
from .. import catalog
from ..plan import (BODY_MODELS, Counter, DeadlineSched, Enemy, FifoSched, LOAD_MODELS, OtherSched, Placement, RrSched, Task, Trace,
                    Victim, body_model)
from ..targets.agent import TargetFacts
from .. import limits, units
from ..errors import UsageError
from .jobs_from import TRACE_JOBS_IMPLEMENTED, plan_jobs_from
from .experiment import AOCS_MADE, EnemySpec, Experiment, SchedSpec, ScenarioSpec, TraceSpec, VictimSpec


#: Makes the AOCS files where the runs happen: (directory, seed, field, copy tag or None) ->
#: (input, expected) paths there. A target's `aocs_data`; without one, expansion only names
#: the files (`aocs.data_paths`) and whoever runs the plans makes them.
AocsData = Callable[[str, int, str, str | None], tuple[str, str]]


def named_only(directory: str, seed: int, field: str, copy: str | None = None) -> tuple[str, str]:
    """The AOCS files' paths only (nothing is made: whoever runs the plans makes them)."""
    return data_paths(directory, copy)


def sched_of(s: SchedSpec, field: str, period_ns: int):
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


def _taskset(v, field: str) -> tuple:
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
    return body_model("taskset")(tasks=tasks, policy=v.task_policy), hyper, v.hyperperiods * per, v.warmup_hyperperiods * per


def periodic_body(v: VictimSpec, field: str, facts: TargetFacts):
    """The plan body of a periodic body (catalog run "jobs") from the file's keys of the same
    names, in one loop over its catalog parameters (as `enemy_load`): sizes and durations
    resolved against the target; a work knob left to `utilization` starts at 1 (calibrated
    before the runs); a key the file leaves out takes the agent's default."""
    b = catalog.body(v.body)
    out: dict = {"kind": b.name}
    for p in b.params:
        value = getattr(v, p.file_key, None)
        if value is None:
            if p.name == b.work and p.required:
                out[p.name] = 1
            continue
        if p.unit == "bytes":
            value = units.size_bytes(value, f"{field}.{p.file_key}", facts.caches)
        elif p.unit == "ns":
            value = units.duration_ns(value, f"{field}.{p.file_key}")
        out[p.name] = value
    try:
        return BODY_MODELS[b.name].model_validate(out)
    except ValidationError as err:  # a bound the body declares: one line, the file's key
        first = err.errors()[0]
        key = str(first["loc"][0]) if first["loc"] else "body"
        key, unit = (key.removesuffix("_ns"), " ns") if key.endswith("_ns") else (key, "")
        raise ValueError(f"{field}.{key}: {first['msg']}{unit} (got {first.get('input')!r}{unit}); change it") from None


def measured(v: VictimSpec, field: str, facts: TargetFacts, aocs_data: AocsData, copy: str | None = None) -> Victim:
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
        body = body_model("aocs")(input=str(inp), expected=str(expected), first_step=v.first_step, steps_per_job=v.steps_per_job,
                                  repeat_step=v.repeat_step or 1)
    elif catalog.body(v.body).periodic:
        body = periodic_body(v, field, facts)
    elif v.body == "attach":
        # The window is the run's one "job" of the plan; the program's own period goes to its jobs.
        body = body_model("attach")(pid=v.pid, jobs_from=plan_jobs_from(v.jobs_from, period if v.period_declared() else None,
                                                               v.warmup_declared()))
        period = units.duration_ns(v.duration, f"{field}.duration")
    else:
        if v.jobs_from is not None and v.jobs_from.trace is not None and not TRACE_JOBS_IMPLEMENTED:
            raise UsageError(f"{field}.jobs_from.trace: jobs from the scheduler trace are not implemented yet; "
                             "use jobs_from.probe with an instrumented program")
        body = body_model("command")(argv=v.argv, env=v.env, preload=v.preload, probe_capacity=v.probe_capacity,
                           probe_names=v.probes,
                           jobs_from=plan_jobs_from(v.jobs_from, period if v.period_declared() else None,
                                                   v.warmup_declared()))
    return Victim(
        body=body,
        period_ns=period,
        deadline_ns=units.duration_ns(v.deadline, f"{field}.deadline") if v.deadline is not None else None,
        jobs=jobs,
        warmup_jobs=warmup,
        placement=Placement(cpus=units.cpu_set(v.cpus, f"{field}.cpus", facts.online_cpus)),
        sched=sched_of(v, field, period),
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


def count_from_bytes(k, p, given: dict, caches: dict[str, int], field: str) -> int:
    """The count `p` of kind `k` (a parameter with `per_bytes`) that the file's `bytes` (else
    its file default) gives: that size over the divisor parameter, at least `p.min`."""
    size = units.size_bytes(given.get("bytes", p.file_default), f"{field}.bytes", caches)
    divisor = units.size_bytes(given.get(p.per_bytes, k.param(p.per_bytes).default), f"{field}.{p.per_bytes}", caches)
    return max(p.min or 0, size // divisor)


def enemy_load(e: EnemySpec, field: str, facts: TargetFacts, aocs_data: AocsData):
    """The agent-side load of an enemy spec, from its kind's catalog entry: sizes and
    durations resolved against the target, counts given as `bytes` divided out, the file's
    defaults filled in (the plan's own defaults are the agent's). Validated by that kind's model
    alone (a ValidationError's `loc` names the load's own fields), not the union of every kind's:
    that is built only when a plan is validated whole."""
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
            out[p.name] = count_from_bytes(k, p, given, facts.caches, field)
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
    return LOAD_MODELS[e.kind].model_validate(out)


def _rate_for_load(e: EnemySpec, load, field: str, facts: TargetFacts, copies: int) -> float:
    """`load = "50%"`: the per-copy rate that holds it, from the target's saved peaks (peaks.py)."""
    from .. import peaks

    footprint = catalog.kind(e.kind).footprint(load.model_dump()) if catalog.kind(e.kind).footprint_params else None
    return peaks.rate_for_load(e.kind, e.load, field, facts.environment, copies, footprint, facts.caches)


def scenario_enemies(sc: ScenarioSpec, si: int, victim: Victim, facts: TargetFacts, period_ns: int,
             aocs_data: AocsData) -> list[Enemy]:
    out: list[Enemy] = []
    for k, e in enumerate(sc.enemies):
        field = f"scenario[{si}].enemies[{k}]"
        cpus = units.cpu_set(e.cpus, f"{field}.cpus", facts.online_cpus, victim.placement.cpus)
        try:
            load = enemy_load(e, field, facts, aocs_data)
        except ValidationError as err:
            first = err.errors()[0]
            # Name the experiment's key (interval, not the plan's interval_ns) and its unit.
            key = ".".join(str(x) for x in first["loc"]) or "kind"
            exp_key, unit = (key.removesuffix("_ns"), " ns") if key.endswith("_ns") else (key, "")
            raise ValueError(f"{field}.{exp_key}: {first['msg']}{unit} (got {first.get('input')!r}{unit}); change it") from None
        sched = sched_of(e, field, period_ns)
        base = e.name or e.kind
        groups = [[c] for c in cpus] if (e.per_cpu and cpus) else [cpus]
        rate = e.rate if e.load is None else _rate_for_load(e, load, f"{field}.load", facts, len(groups))
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
                                 huge_pages=e.huge_pages, intensity=e.intensity, rate=rate))
                if len(out) > limits.MAX_ENEMIES:  # per_cpu and instances multiply the enemies
                    raise ValueError(f"scenario[{si}].enemies: more than {limits.MAX_ENEMIES} enemies in one run "
                                     f"(per_cpu and instances count each copy); split them over scenarios")
    return out


def trace_of(exp: Experiment) -> Trace | None:
    """The run's kernel trace: `[trace]`, and the events that jobs from the trace need
    (`jobs_from = { trace = ... }` turns tracing on by itself)."""
    wanted = [p for p in [exp.victim, *exp.application] if p is not None and getattr(p, "jobs_from", None) is not None
              and p.jobs_from.trace is not None]
    if exp.trace is None and not wanted:
        return None
    spec = exp.trace or TraceSpec()
    events = list(spec.events or Trace.model_fields["events"].default)
    if wanted:
        from ..trace.activations import EVENTS as TRACE_JOB_EVENTS  # with pandas: not for every plan

        events += [e for e in TRACE_JOB_EVENTS if e not in events]
    return Trace(buffer_kb=spec.buffer_kb, events=events, segments=spec.segment)
