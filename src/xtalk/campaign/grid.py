"""Campaign -> the ordered list of its runs.

Every cell (application × configuration × grid variant) becomes an ordinary `Experiment`,
expanded by `config.expand.expand` (units, CPU sets, plans), so a campaign run is exactly the
run an experiment file would give. Two-way variations add scenarios to every cell; exclusions
drop runs by their labels; the order is interleaved across cells inside every repetition so
that machine drift cannot line up with any parameter.
"""

from __future__ import annotations

import itertools
import random
import re
from dataclasses import dataclass, field

from pydantic import ValidationError

from .. import catalog, units
from ..config.expand import expand
from ..config.experiment import Experiment, error_line
from ..errors import UsageError
from ..plan import Plan
from ..targets.agent import TargetFacts
from .schema import Campaign, Grid, TwoWay


@dataclass
class CampaignRun:
    """One run of a campaign: its id (also its directory name), labels and plan."""

    run_id: str
    labels: dict[str, str]
    plan: Plan

    def expected_seconds(self) -> float:
        """Settle plus every job's period: the measured part of the run."""
        v = self.plan.victim
        return self.plan.settle_ms / 1e3 + (v.jobs + v.warmup_jobs) * v.period_ns / 1e9


@dataclass
class Expansion:
    runs: list[CampaignRun]
    excluded: list[tuple[dict[str, str], str]] = field(default_factory=list)  # (cell labels, why)


def _slug(value) -> str:
    return re.sub(r"[^A-Za-z0-9_.+=-]", "_", str(value))


def _set(d: dict, dotted: str, value) -> None:
    parts = dotted.split(".")
    for p in parts[:-1]:
        d = d.setdefault(p, {})
    d[parts[-1]] = value


def grid_points(g: Grid) -> list[dict]:
    """The points of one grid, each a dict axis -> value."""
    if g.mode == "list":
        return [dict(p) for p in g.points]
    keys = list(g.axes)
    combos = itertools.product(*g.axes.values()) if g.mode == "product" else zip(*g.axes.values())
    return [dict(zip(keys, c)) for c in combos]


def variants(c: Campaign) -> list[tuple[str, dict]]:
    """(name, point) for every grid point, or one variant `default` when there is no grid."""
    out = []
    for gi, g in enumerate(c.grid):
        for p in grid_points(g):
            name = ",".join(f"{k.split('.')[-1]}={_slug(v)}" for k, v in p.items())
            out.append(((f"{g.name}:" if g.name else "") + name, p))
    return out or [("default", {})]


def _period_ns(victim: dict) -> int:
    return units.duration_ns(victim.get("period", "10ms"), "victim.period")


def two_way_cells(tw: TwoWay, twi: int, victim_period_ns: int, facts: TargetFacts, point: dict):
    """(scenario dict, labels) for each feasible cell, and (labels, reason) for the others."""
    field_name = f"two_way[{twi}]"
    ok, bad = [], []
    template = tw.enemy.model_dump(exclude_unset=True)
    for k, v in point.items():
        if k.startswith("enemy."):
            _set(template, k[len("enemy."):], v)
    cores = len(facts.online_cpus)
    for total in tw.totals:
        for n in tw.counts:
            labels = {"two_way": tw.name, "enemies": str(n), "total": str(total)}
            enemy = dict(template)
            if tw.share in ("reservation.runtime", "intensity"):
                total_ns = units.duration_ns(total, f"{field_name}.totals")
                res = dict(enemy.get("reservation", {}))
                period = units.duration_ns(res["period"], f"{field_name}.enemy.reservation.period") if "period" in res \
                    else victim_period_ns
                share = total_ns // n
                # Seed 000 §6.5.1: one enemy cannot use more than a period per period, and all
                # together cannot use more than the machine has.
                if share >= period:
                    bad.append((labels, f"per-enemy share {share / 1e6:g} ms ≥ period {period / 1e6:g} ms"))
                    continue
                if total_ns >= cores * period:
                    bad.append((labels, f"total demand {total_ns / 1e6:g} ms ≥ {cores} cores × {period / 1e6:g} ms"))
                    continue
                if tw.share == "intensity":
                    # The enemy works `intensity` % of every 1 ms window: on average, `share`
                    # of CPU time in each victim period.
                    enemy["intensity"] = round(100.0 * share / period, 6)
                elif share < 1024:
                    bad.append((labels, f"per-enemy runtime {share} ns is below SCHED_DEADLINE's 1024 ns"))
                    continue
                else:
                    res["runtime"] = f"{share}ns"
                    enemy["reservation"] = res
            elif tw.share == "bytes":
                size = units.size_bytes(total, f"{field_name}.totals", facts.caches) // n
                least = getattr(catalog.kind(tw.enemy.kind).param("bytes"), "min", None)
                if least and size < least:
                    bad.append((labels, f"per-enemy buffer {size} B is below {least} B"))
                    continue
                enemy["bytes"] = size
            else:
                elements = int(total) // n
                if elements < 2:
                    bad.append((labels, f"per-enemy list of {elements} element(s) is below 2"))
                    continue
                enemy["elements"] = elements
            enemy.pop("per_cpu", None)
            enemies = [dict(enemy, name=f"{tw.enemy.name or tw.enemy.kind}{i}") for i in range(n)]
            name = f"{tw.name}-n{n}-t{_slug(total)}"
            ok.append(({"name": name, "description": f"{n} × {tw.enemy.kind}, total {total}", "enemies": enemies}, labels))
    return ok, bad


def _matches(labels: dict[str, str], rule: dict) -> bool:
    return all(str(labels.get(k)) == str(v) for k, v in rule.items())


def _cell_experiment(c: Campaign, app, conf, point: dict, facts: TargetFacts, source: str):
    """The Experiment of one cell, with per-scenario extra labels and excluded two-way cells."""
    victim = app.victim.model_dump(exclude_unset=True)
    victim.update(conf.overrides())
    settle = c.settle
    for k, v in point.items():
        if k.startswith("victim."):
            _set(victim, k[len("victim."):], v)
        elif k == "settle":
            settle = v
    scenarios, extra, excluded = [], {}, []
    for s in c.scenario:
        sd = s.model_dump(exclude_unset=True)
        for e in sd.get("enemies", []):
            for k, v in point.items():
                if k.startswith("enemy."):
                    _set(e, k[len("enemy."):], v)
        scenarios.append(sd)
    try:
        period = _period_ns(victim)
        for i, tw in enumerate(c.two_way):
            ok, bad = two_way_cells(tw, i, period, facts, point)
            for sd, labels in ok:
                scenarios.append(sd)
                extra[sd["name"]] = labels
            excluded.extend(bad)
    except ValueError as e:
        raise UsageError(f"{source}: {e}") from None
    data = {"name": c.name, "repetitions": c.repetitions, "seed": c.seed, "settle": settle, "results": c.results,
            "victim": victim, "scenario": scenarios}
    if c.timeout is not None:
        data["timeout"] = c.timeout
    if c.trace is not None:
        data["trace"] = c.trace.model_dump(exclude_unset=True)
    try:
        exp = Experiment.model_validate(data)
    except ValidationError as e:
        raise UsageError(f"{source}: application '{app.name}' with configuration '{conf.name}'"
                         f"{'' if not point else ' and variant ' + str(point)[:80]}: {error_line(e)}") from None
    return exp, extra, excluded


def expand_campaign(c: Campaign, facts: TargetFacts, source: str = "campaign", labels: dict | None = None,
                    aocs_data=None) -> Expansion:
    """Every run of the campaign, in execution order, with unique ids; AOCS data made by
    `aocs_data` (see `config.expand.expand`)."""
    cells = []  # (cell labels, RunSpec, scenario extra labels)
    excluded: list[tuple[dict, str]] = []
    for app in c.application:
        for conf in c.configurations():
            for vname, point in variants(c):
                exp, extra, bad = _cell_experiment(c, app, conf, point, facts, source)
                cell = {"application": app.name, "criticality": app.criticality, "configuration": conf.name,
                        "variant": vname, **{k: str(v) for k, v in point.items()}}
                if exp.victim.utilization is not None:  # calibrated before the runs (preflight.py)
                    cell["utilization"] = str(exp.victim.utilization)
                excluded.extend(({**cell, **lb}, why) for lb, why in bad)
                try:
                    specs = expand(exp, facts, labels={**(labels or {}), "epsilon": app.epsilon.model_dump_json(exclude_none=True)},
                                   aocs_data=aocs_data)
                except UsageError as e:
                    raise UsageError(f"{source}: application '{app.name}', configuration '{conf.name}', variant '{vname}': {e}") from None
                for r, kernel in itertools.product(specs, c.kernels or [None]):
                    run_labels = {**r.plan.labels, **cell, **extra.get(r.scenario, {}), "campaign": c.name,
                                  **({"kernel": kernel} if kernel else {})}
                    if any(_matches(run_labels, rule) for rule in c.exclude):
                        continue
                    cells.append((r.repetition, run_labels, r.plan))
    if c.exclude:
        known = set().union(*(lb.keys() for _, lb, _ in cells)) if cells else set()
        for i, rule in enumerate(c.exclude):
            unknown = [k for k in rule if k not in known and not any(k in lb for lb, _ in excluded)]
            if unknown:
                raise UsageError(f"{source}: exclude[{i}].{unknown[0]}: no run has this label; "
                                 f"use one of {sorted(known)}")
    if c.interleave == "random":
        rng = random.Random(c.seed)
        ordered = []
        for rep in sorted({r for r, _, _ in cells}):
            block = [x for x in cells if x[0] == rep]
            rng.shuffle(block)
            ordered.extend(block)
        cells = ordered
    width = len(str(max(len(cells) - 1, 0)))
    runs = []
    for i, (rep, lb, plan) in enumerate(cells):
        parts = [lb["application"], lb["configuration"]] + ([lb["variant"]] if lb["variant"] != "default" else []) + \
            ([lb["kernel"]] if "kernel" in lb else [])
        run_id = _slug(f"{i:0{width}d}-" + "-".join(parts) + f"-{lb['scenario']}-r{rep}")
        runs.append(CampaignRun(run_id, lb, plan.model_copy(update={"run_id": run_id, "labels": lb})))
    return Expansion(runs, excluded)
