"""Experiments of `[[application]]`s: the scenarios they make and each scenario's plan.

Every application is a measured process. The scenarios (names fixed: the verdicts read them)
are `alone:<A>`, `pair:<A>+<B>` (declaration order), `first:<k>` (the first k applications,
when asked for), `all`, `all+<scenario>` (all beside a `[[scenario]]`'s enemies) and
`fault:<A>:<kind>` (all, with the fault inside A). In each plan the first application present
is the plan's `victim` (in a fault scenario, the first one that is not the faulty one), the
others are its `applications`; a faulty application is `may_fail` (its death is recorded and
the others go on), and its fault is an enemy named `<A>:<kind>` in A's CPUs, group and policy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from pydantic import ValidationError

from .. import limits, units
from ..plan import Enemy, Placement, Plan, Victim, victim_seconds
from ..targets.agent import TargetFacts
from .experiment import ApplicationSpec, Experiment, FaultSpec, error_line
from .processes import AocsData, enemy_load, measured, scenario_enemies, sched_of, trace_of


def _field(exp: Experiment, name: str) -> str:
    return f"application[{[a.name for a in exp.application].index(name)}]"


def _build(exp: Experiment, facts: TargetFacts, aocs_data: AocsData, files: str | None) -> dict[str, Victim]:
    """Each application's measured process; `files` (a configuration's) overrides each
    application's own choice of AOCS data files."""
    out = {}
    for i, a in enumerate(exp.application):
        mode = files or a.files
        field = f"application[{i}]"
        try:
            out[a.name] = measured(a, field, facts, aocs_data, copy=a.name if mode == "duplicated" else None)
        except ValidationError as e:  # built on its own: name the application, not "victim"
            raise ValueError(f"{field}.{error_line(e).removeprefix('(top level): ')}") from None
    return out


def _fault(exp: Experiment, a: ApplicationSpec, k: int, f: FaultSpec, owner: Victim, facts: TargetFacts, aocs_data) -> Enemy:
    """The fault `f` of application `a` as an enemy inside it (CPUs here; group and policy
    are the application's once a configuration resolves it)."""
    field = f"{_field(exp, a.name)}.faults[{k}]"
    try:
        load = enemy_load(f, field, facts, aocs_data)
    except ValidationError as err:
        first = err.errors()[0]
        key = ".".join(str(x) for x in first["loc"]) or "kind"
        exp_key, unit = (key.removesuffix("_ns"), " ns") if key.endswith("_ns") else (key, "")
        raise ValueError(f"{field}.{exp_key}: {first['msg']}{unit} (got {first.get('input')!r}{unit}); change it") from None
    own = "policy" in f.model_fields_set
    sched = sched_of(f, field, owner.period_ns) if own else owner.sched
    return Enemy(name=f"{a.name}:{f.kind}", load=load, placement=Placement(cpus=owner.placement.cpus), sched=sched,
                 lock_memory=f.lock_memory, huge_pages=f.huge_pages, intensity=f.intensity, rate=f.rate)


def _plan(exp: Experiment, scenario: str, procs: dict[str, Victim], enemies: dict[str, list[Enemy]],
          faults: dict[str, Enemy], timeout_s: float, settle_ms: float, trace) -> Plan:
    present = exp.applications_in(scenario)
    faulty = scenario.split(":")[1] if scenario.startswith("fault:") else None
    order = sorted(present, key=lambda n: n == faulty)  # the faulty one is never the victim
    victim = procs[order[0]].model_dump() | {"name": order[0]}
    apps = [procs[n].model_dump() | {"name": n, **({"may_fail": True} if n == faulty else {})} for n in order[1:]]
    if scenario.startswith("all+"):
        extra = enemies[scenario.removeprefix("all+")]
    elif faulty is not None:
        extra = [faults[scenario]]
    else:
        extra = []
    return Plan.model_validate({"run_id": "x", "timeout_s": timeout_s, "settle_ms": settle_ms, "victim": victim,
                                "applications": apps, "enemies": [e.model_dump() for e in extra],
                                **({"trace": trace.model_dump()} if trace is not None else {}), "pids_max": exp.pids_max})


def labels_of(exp: Experiment, scenario: str) -> dict[str, str]:
    """The run labels of a scenario: `applications` present (comma-separated), and for a
    fault scenario `faulty` (the application) and `fault` (the kind)."""
    out = {"applications": ",".join(exp.applications_in(scenario))}
    if scenario.startswith("fault:"):
        _, app, kind = scenario.split(":", 2)
        out.update(faulty=app, fault=kind)
    return out


@dataclass
class Prepared:
    """What config/expand.py `configured_runs` needs for the runs of applications, per
    scenario in order: its plan before configuration, the reservation of its victim, its
    faults (enemy name -> application, sets its own policy), its labels; and the plan of a
    scenario under a configuration that chooses the data files."""

    bases: dict[str, Plan]
    reservations: dict[str, int | None]
    faults: dict[str, dict[str, tuple[str, bool]]]
    labels: dict[str, dict[str, str]]
    plan_for: Callable[[str, str], Plan]


def prepare(exp: Experiment, facts: TargetFacts, aocs_data: AocsData) -> Prepared:
    """Every scenario of an experiment of applications, planned (see the module's text).
    Raises ValueError or ValidationError naming the field."""
    names = exp.application_scenario_names()
    settle_ms = units.duration_ns(exp.settle, "settle") / 1e6
    procs = _build(exp, facts, aocs_data, None)
    first = procs[exp.application[0].name]
    enemies = {sc.name: scenario_enemies(sc, i, first, facts, first.period_ns, aocs_data) for i, sc in enumerate(exp.scenario)}
    faults = {f"fault:{a.name}:{f.kind}": _fault(exp, a, k, f, procs[a.name], facts, aocs_data)
              for a in exp.application for k, f in enumerate(a.faults)}
    longest = 0.0
    for i, a in enumerate(exp.application):
        run_s = settle_ms / 1e3 + victim_seconds(procs[a.name])
        if run_s > limits.MAX_RUN_S:
            raise ValueError(f"application[{i}].jobs: jobs × period make a run of {run_s:.0f} s, above the limit of "
                             f"{limits.MAX_RUN_S} s (7 days); lower jobs or the period")
        why = limits.check_memory(procs[a.name], facts.environment.get("memory_available_bytes"))
        if why:
            raise ValueError(why.replace("victim.", f"application[{i}].", 1))
        longest = max(longest, run_s)
    timeout_s = units.duration_ns(exp.timeout, "timeout") / 1e9 if exp.timeout is not None else 2 * longest + 30
    reservation = {a.name: units.duration_ns(a.reservation.runtime, f"application[{i}].reservation.runtime")
                   if a.reservation is not None else None for i, a in enumerate(exp.application)}
    trace = trace_of(exp)
    bases = {n: _plan(exp, n, procs, enemies, faults, timeout_s, settle_ms, trace) for n in names}
    # A configuration that chooses the data files makes its own processes (other file names).
    by_files = {m: _build(exp, facts, aocs_data, m) for m in {c.files for c in exp.configuration if c.files}}
    files = {c.name: c.files for c in exp.configurations()}

    def plan_for(configuration: str, scenario: str) -> Plan:
        mode = files.get(configuration)
        if not mode:
            return bases[scenario]
        return _plan(exp, scenario, by_files[mode], enemies, faults, timeout_s, settle_ms, trace)

    fault_map = {}
    for n in names:
        if n.startswith("fault:"):
            _, app, kind = n.split(":", 2)
            fault_map[n] = {f"{app}:{kind}": (app, "policy" in _fault_spec(exp, n).model_fields_set)}
    return Prepared(bases, {n: reservation[bases[n].victim.name] for n in names}, fault_map,
                    {n: labels_of(exp, n) for n in names}, plan_for)


def _fault_spec(exp: Experiment, scenario: str) -> FaultSpec:
    _, app, kind = scenario.split(":", 2)
    a = next(x for x in exp.application if x.name == app)
    return next(f for f in a.faults if f.kind == kind)
