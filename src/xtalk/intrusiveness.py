"""How much observing the victim changes it: the same victim with timestamps only, with
per-job counters, and with the kernel trace, interleaved, compared like any interference.
In an experiment of `[[application]]`s each application is measured so, alone (its
`alone:<name>` placement, as the solo feasibility pass runs it), against its own timestamps."""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path

from rich.console import Console

from . import safepath
from .version import __version__
from .analysis.cells import summarize
from .analysis import verdict as vd
from .config.expand import interleave
from .config.experiment import load
from .config.expand import expand
from .store import open as open_results
from .targets.agent import find_agent, local_facts
from .targets.base import LocalTarget

#: Goals of the Observe issue: added median job time.
GOALS = {"counters": 0.01, "trace": 0.03}


def _variants(plan, counters: list[str]):
    from .plan import Counter, Trace

    base = plan.model_copy(deep=True)
    base.victim.counters = []
    base.trace = None
    with_counters = base.model_copy(deep=True)
    with_counters.victim.counters = [Counter(event=e) for e in counters]
    out = {"timestamps": base, "counters": with_counters}
    if os.geteuid() == 0:
        traced = base.model_copy(deep=True)
        traced.trace = Trace()
        out["trace"] = traced
    return out


def run(experiment: Path, repetitions: int, jobs: int, results: Path, console: Console):
    """Run the variants of `experiment`'s victim, or of each of its applications alone (no
    enemies), and print the ratios."""
    from .feasibility import solo_runs
    from .trust import require_trusted

    require_trusted(experiment)
    exp = load(experiment)
    target = LocalTarget(find_agent())
    facts = local_facts(target.agent)
    for proc in [exp.victim] if exp.victim is not None else exp.application:
        if proc.body not in ("command", "attach"):  # a command runs once per run, an attached process one window
            proc.jobs = jobs
    runs = expand(exp, facts, aocs_data=target.aocs_data)
    if exp.victim is not None:
        measured = {None: [r for r in runs if r.scenario == "solo"][0].plan}
    else:  # each application alone, once: in the first configuration declared that has it
        declared = [c.name for c in exp.configurations()]
        found: dict = {}
        for r, name in sorted(solo_runs(runs, periodic_only=False), key=lambda rn: declared.index(rn[0].configuration)):
            found.setdefault(name, r.plan)
        measured = {a.name: found[a.name] for a in exp.application if a.name in found}
    countable = facts.environment["capabilities"]["pmu"]["countable"]
    wanted = [e for e in ("cycles", "instructions", "cache-misses", "task-clock", "context-switches", "page-faults") if e in countable]
    variants = {(name, v): plan for name, solo in measured.items() for v, plan in _variants(solo, wanted).items()}
    out = safepath.results_dir(results, "--results") / f"intrusiveness-{dt.datetime.now():%Y%m%d-%H%M%S}"
    safepath.makedirs(out / "runs", exist_ok=False)
    order = interleave(list(variants), repetitions, seed=7)
    kinds = list(dict.fromkeys(v for _, v in variants))
    apps = "" if exp.victim is not None else f" of each of {', '.join(measured)} alone"
    console.print(f"intrusiveness: {len(order)} runs of {jobs} jobs{apps} ({', '.join(kinds)}; counters: {', '.join(wanted)}) → {out}")
    for i, (rep, (app, name)) in enumerate(order):
        plan = variants[(app, name)].model_copy(deep=True)
        plan.run_id = f"{i:02d}-{name}-r{rep}" if app is None else f"{i:02d}-{app}-{name}-r{rep}"
        plan.labels = {"experiment": "intrusiveness", "scenario": name, "repetition": str(rep), "xtalk_version": __version__,
                       **({} if app is None else {"applications": app})}
        meta = target.run(plan, out / "runs" / plan.run_id)  # holds the machine for the run
        if meta.status != "completed":
            console.print(f"[yellow]{plan.run_id}: {meta.status}: {meta.reason}[/]")
    res = open_results(out)
    all_jobs, all_runs = res.jobs(), res.runs()
    rows = []
    for app in measured:
        if app is None:
            table = summarize(all_jobs, all_runs, reference="timestamps")
        else:
            console.print(f"  {app}:")
            table = summarize(all_jobs[all_jobs.application == app], all_runs[all_runs.applications == app],
                              reference="timestamps")
        for r in table.itertuples():
            goal = GOALS.get(r.scenario)
            verdict = None if goal is None else vd.goal(r.slowdown_median_lo, r.slowdown_median_hi, 1 + goal)
            rows.append({**({} if app is None else {"application": app}),
                         "observation": r.scenario, "median_exec_ms": r.median_exec_ms, "ratio": r.slowdown_median,
                         "ci_lo": r.slowdown_median_lo, "ci_hi": r.slowdown_median_hi,
                         "goal": f"<= {1 + goal:.2f}" if goal else vd.REFERENCE, "verdict": verdict})
            ci = "" if r.scenario == "timestamps" else f" [{r.slowdown_median_lo:.3f}, {r.slowdown_median_hi:.3f}]"
            says = "" if goal is None else f" (goal ≤ {1 + goal:.2f}: {verdict})"
            console.print(f"{'  ' if app is None else '    '}{r.scenario:10s} median job {r.median_exec_ms:.3f} ms, ratio {r.slowdown_median:.3f}{ci}{says}")
    safepath.write_text(out / "intrusiveness.json", json.dumps(rows, indent=1))
    return out
