"""Experiment -> one run plan per (scenario, repetition), in interleaved order.

Scenarios are shuffled independently inside every repetition (seeded), so runs of one
scenario never form a block and a slow drift of the machine cannot pass for interference.
The processes of a plan are built in config/processes.py; an experiment of applications
makes its scenarios in config/applications.py.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Callable

from pydantic import ValidationError

from ..errors import UsageError
from ..plan import Plan, Victim, run_seconds, victim_seconds
from ..targets.agent import TargetFacts
from .. import limits, units
from .configuration import Unavailable, resolve as resolve_configuration
from .experiment import Experiment
from . import applications as _applications
from .processes import (AocsData, named_only as _named_only, scenario_enemies as _enemies, measured as _measured,
                        trace_of as _trace)


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


def _victim(exp: Experiment, facts: TargetFacts, aocs_data: AocsData) -> Victim:
    return _measured(exp.victim, "victim", facts, aocs_data)


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
           aocs_data: AocsData | None = None, refused: dict[str, str] | None = None) -> list[RunSpec]:
    """Resolve units and placements against the target and build every run's plan, for
    every configuration × scenario × repetition. A configuration this kernel cannot provide
    is an input error, or (skip_unavailable) left out and noted in `skipped`; so are those of
    `refused` (configuration -> why the target's check refused it: runner.prepare). AOCS data
    files are made by `aocs_data` (the target's, so they exist where the runs happen), or
    only named when it is None."""
    try:
        return _expand(exp, facts, labels, skip_unavailable, skipped, aocs_data or _named_only, refused or {})
    except ValidationError as e:
        raise UsageError(plan_error_line(e)) from None


def _expand(exp: Experiment, facts: TargetFacts, labels: dict[str, str] | None,
            skip_unavailable: bool, skipped: list | None, aocs_data: AocsData, refused: dict[str, str]) -> list[RunSpec]:
    if exp.victim is None:
        try:
            apps = _applications.prepare(exp, facts, aocs_data)
        except ValidationError as e:  # a ValueError too: before the next clause
            raise UsageError(plan_error_line(e)) from None
        except ValueError as e:
            raise UsageError(str(e)) from None
        return configured_runs(exp, facts, labels, skip_unavailable, skipped, apps.bases, apps.reservations, apps.faults,
                               apps.labels, apps.plan_for, refused)
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
    return configured_runs(exp, facts, labels, skip_unavailable, skipped, bases, {s.name: reservation for s in scenarios},
                           refused=refused)


def configured_runs(exp: Experiment, facts: TargetFacts, labels: dict[str, str] | None, skip_unavailable: bool,
                    skipped: list | None, bases: dict[str, Plan], reservations: dict[str, int | None],
                    faults: dict[str, dict] | None = None, run_labels: dict[str, dict[str, str]] | None = None,
                    plan_for: Callable[[str, str], Plan] | None = None, refused: dict[str, str] | None = None) -> list[RunSpec]:
    """Every configuration × scenario (`bases`: scenario -> its plan before configuration,
    in order) × repetition, interleaved. `faults` and `run_labels` (per scenario) are those
    of applications (config/applications.py); `plan_for(configuration, scenario)` gives a
    scenario's plan under a configuration where it differs from `bases` (its data files).
    The configurations of `refused` (name -> why) are left out and noted like unavailable ones."""
    configs = exp.configurations()
    resolved: dict[tuple[str, str], Plan] = {}
    left_out: list[dict] = []
    for ci, cfg in enumerate(configs):
        if refused and cfg.name in refused:
            left_out.append({"configuration": cfg.name, "reason": refused[cfg.name]})
            continue
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
                if all(x["configuration"] != cfg.name for x in left_out):
                    left_out.append({"configuration": cfg.name, "reason": str(e)})
                break
            except ValidationError as e:
                raise UsageError(plan_error_line(e)) from None
            except ValueError as e:
                raise UsageError(str(e)) from None
    pairs = [(c.name, n) for c in configs for n in bases if (c.name, n) in resolved]
    if not pairs:
        raise UsageError("configuration: none of the configurations can run on this machine"
                         + (": " if left_out else "") + "; ".join(f"'{x['configuration']}': {x['reason']}" for x in left_out))
    if skipped is not None:
        skipped.extend(x for x in left_out if all(y["configuration"] != x["configuration"] for y in skipped))
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
