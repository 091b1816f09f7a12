"""Each enemy alone: before the interleaved runs (with the solo feasibility run), every
distinct enemy of every scenario runs for a short pass without the victim's load and
without the other enemies, in its configuration's placement and policy. The rate it reaches
there is the reference of the guard "enemies that reached much less than their solo rate"
(analysis/guards.py): an enemy sharing its CPU with the victim or with another enemy, or
starved by a real-time victim, interferes less than the scenario's name says.

The victim cannot be left out of a plan, so it is replaced by one that loads nothing: a sum
over one page every 10 ms, at SCHED_OTHER, on the victim's CPUs.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from .errors import UsageError
from .units import rate_text
from . import catalog
from .plan import OtherSched, Plan, body_model

if TYPE_CHECKING:  # the report reads the recorded rates (`recorded`) without the expansion's models
    from .config.expand import RunSpec

#: Jobs of the stand-in victim and its period: the enemy's pass lasts about this long.
PASS_JOBS = 30
PASS_PERIOD_NS = 10_000_000


def _key(configuration: str, enemy) -> str:
    """Two enemies alike but for their name and which CPUs they are pinned to (the per-CPU
    copies of one enemy, the same enemy in two scenarios) share a pass: alone, one CPU is
    as good as another (how many it may use still counts)."""
    cpus = enemy.placement.cpus
    return "\0".join((configuration, enemy.model_dump_json(exclude={"name", "placement"}),
                      "unpinned" if cpus is None else str(len(cpus))))


def _alone_plan(plan: Plan, enemy, run_id: str) -> Plan:
    p = plan.model_copy(deep=True)
    p.run_id = run_id
    p.enemies = [enemy.model_copy(deep=True)]
    if getattr(p, "applications", None):  # alone: not beside the experiment's other applications
        p.applications = []
    v = p.victim
    v.body, v.period_ns, v.deadline_ns = body_model("sum")(bytes=4096), PASS_PERIOD_NS, None
    v.jobs, v.warmup_jobs, v.sched, v.counters, v.lock_memory = PASS_JOBS, 2, OtherSched(), [], False
    p.trace = None
    p.timeout_s = 60.0
    p.labels = {**p.labels, "scenario": "enemy-alone"}
    return p


def passes(runs: list[RunSpec]) -> dict[str, tuple[Plan, object, list[tuple[str, str, str]]]]:
    """The passes to run: per distinct enemy, the plan it comes from, the enemy, and every
    (configuration, scenario, enemy name) it stands for. Configurations with a regulator are
    left out: holding the enemies back is the regulator's purpose."""
    out: dict[str, tuple[Plan, object, list[tuple[str, str, str]]]] = {}
    for r in runs:
        if r.plan.regulator is not None:
            continue
        for e in r.plan.enemies:
            if catalog.kind(e.load.kind).fault:  # a fault counts what it breaks, not a rate
                continue
            k = _key(r.configuration, e)
            entry = out.setdefault(k, (r.plan, e, []))
            if (r.configuration, r.scenario, e.name) not in entry[2]:
                entry[2].append((r.configuration, r.scenario, e.name))
    return out


def estimated_seconds(runs: list[RunSpec], per_run_overhead_s: float, touch=None) -> float:
    """What the passes add to an experiment; `touch(plan)`, when given, is the time a pass's
    processes take to touch their buffers (the estimate's rule, campaign/estimate.py)."""
    return sum(p.settle_ms / 1e3 + (PASS_JOBS + 2) * PASS_PERIOD_NS / 1e9 + per_run_overhead_s
               + (touch(_alone_plan(p, e, "estimate")) if touch else 0.0)
               for p, e, _ in passes(runs).values())


def measure(runs: list[RunSpec], agent: Path, out: Path, say=print) -> list[dict]:
    """Run each distinct enemy alone; one record per (configuration, scenario, enemy name)
    with the rate it reached over the stand-in victim's window. An enemy whose pass fails
    gets no record (its own runs will say why)."""
    from . import peaks
    from .targets.agent import local_facts
    from .targets.base import LocalTarget

    records: list[dict] = []
    todo = passes(runs)
    env = local_facts(agent).environment if todo else {}
    try:
        saved = peaks.load(env) if todo else None
    except UsageError as why:  # a stale peak file costs the percentages, not the experiment
        say(f"enemies alone: {why}")
        saved = None
    if todo:
        say(f"enemies alone: {len(todo)} short pass(es), the reference of each enemy's achieved rate"
            + ("" if saved else f" (no peaks saved for this machine: `{peaks.COMMAND}` adds each one's share of its channel)"))
    for i, (plan, enemy, where) in enumerate(todo.values()):
        run_dir = out / "enemies-alone" / f"{i:03d}-{enemy.load.kind}"
        try:
            meta = LocalTarget(agent).run(_alone_plan(plan, enemy, run_dir.name), run_dir)
        except Exception as why:  # a reference, not a result: the experiment goes on without it
            say(f"enemy {enemy.name} alone: the pass failed ({why}); its rate guard is off")
            continue
        why = unmeasured(meta, enemy)
        if why is not None:
            say(f"enemy {enemy.name} alone: not measured: {why}; its rate guard is off")
            continue
        (e,) = meta.enemies
        sh = share_alone(enemy, e.window_rate, e.unit, saved, env)
        say(f"enemy {enemy.name} alone: {rate_text(e.window_rate, e.unit)}" + (f", {sh.text()}" if sh else ""))
        records += [{"configuration": c, "scenario": s, "enemy": n, "kind": e.kind, "unit": e.unit,
                     "rate": e.window_rate, **({"channel": sh.channel, "percent_of_peak": sh.percent} if sh else {})}
                    for c, s, n in where]
    return records


def unmeasured(meta, enemy) -> str | None:
    """Why an enemy's pass alone gives no reference rate (None when it does): the pass did
    not complete, the enemy could not start or ended early, or its work counter did not
    advance over the stand-in victim's window. A real-time hog on the stand-in's CPUs keeps
    that SCHED_OTHER victim from running its window at all, and "0 iterations/s" was printed
    as if the hog had done nothing."""
    if meta.status != "completed":
        return f"the pass {meta.status}" + (f" ({meta.reason})" if meta.reason else "")
    if len(meta.enemies) != 1:
        return "the pass recorded no enemy"
    (e,) = meta.enemies
    if e.setup_error:
        return f"it could not start ({e.setup_error})"
    if e.ended_early:
        return f"it ended before the pass did ({e.ended_early})"
    if not e.window_rate:
        policy = getattr(getattr(enemy, "sched", None), "policy", "other")
        return ("its work counter did not advance over the pass's window"
                + (f" (a {policy.upper()} enemy can starve the SCHED_OTHER stand-in victim whose window it is read "
                   f"over, or its counter's reader)" if policy in ("fifo", "rr", "deadline") else ""))
    return None


def share_alone(enemy, rate: float, unit: str, saved, env: dict):
    """One enemy's rate alone against its channel's peak (peaks.py; None without peaks)."""
    from . import catalog, peaks

    k = catalog.current().kinds.get(enemy.load.kind)
    foot = k.footprint(enemy.load.model_dump()) if k is not None and k.footprint_params else None
    return peaks.share(enemy.load.kind, rate, saved, unit, 1, foot, peaks.caches_of(env), enemy.load.model_dump())


def recorded(results_dir: Path) -> list[dict]:
    """The records experiment.json holds ([] when the passes were skipped or predate them)."""
    from .store.check import experiment_doc

    return [r for r in experiment_doc(Path(results_dir)).get("enemies_alone") or [] if isinstance(r, dict)]
