"""How much observing the victim changes it: the same victim with timestamps only, with
per-job counters, and with the kernel trace, interleaved, compared like any interference."""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path

from rich.console import Console

from .version import __version__
from .analysis.slowdown import summarize
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
    """Run the variants of `experiment`'s victim (no enemies) and print the ratios."""
    from .trust import require_trusted

    require_trusted(experiment)
    exp = load(experiment)
    target = LocalTarget(find_agent())
    facts = local_facts(target.agent)
    exp.victim.jobs = jobs
    solo = [r for r in expand(exp, facts, aocs_data=target.aocs_data) if r.scenario == "solo"][0].plan
    countable = facts.environment["capabilities"]["pmu"]["countable"]
    wanted = [e for e in ("cycles", "instructions", "cache-misses", "task-clock", "context-switches", "page-faults") if e in countable]
    variants = _variants(solo, wanted)
    out = Path(results) / f"intrusiveness-{dt.datetime.now():%Y%m%d-%H%M%S}"
    (out / "runs").mkdir(parents=True)
    order = interleave(list(variants), repetitions, seed=7)
    console.print(f"intrusiveness: {len(order)} runs of {jobs} jobs ({', '.join(variants)}; counters: {', '.join(wanted)}) → {out}")
    for i, (rep, name) in enumerate(order):
        plan = variants[name].model_copy(deep=True)
        plan.run_id = f"{i:02d}-{name}-r{rep}"
        plan.labels = {"experiment": "intrusiveness", "scenario": name, "repetition": str(rep), "xtalk_version": __version__}
        meta = target.run(plan, out / "runs" / plan.run_id)  # holds the machine for the run
        if meta.status != "completed":
            console.print(f"[yellow]{plan.run_id}: {meta.status}: {meta.reason}[/]")
    res = open_results(out)
    table = summarize(res.jobs(), res.runs(), reference="timestamps")
    rows = []
    for r in table.itertuples():
        goal = GOALS.get(r.scenario)
        verdict = None if goal is None else vd.goal(r.slowdown_median_lo, r.slowdown_median_hi, 1 + goal)
        rows.append({"observation": r.scenario, "median_exec_ms": r.median_exec_ms, "ratio": r.slowdown_median,
                     "ci_lo": r.slowdown_median_lo, "ci_hi": r.slowdown_median_hi,
                     "goal": f"<= {1 + goal:.2f}" if goal else vd.REFERENCE, "verdict": verdict})
        ci = "" if r.scenario == "timestamps" else f" [{r.slowdown_median_lo:.3f}, {r.slowdown_median_hi:.3f}]"
        says = "" if goal is None else f" (goal ≤ {1 + goal:.2f}: {verdict})"
        console.print(f"  {r.scenario:10s} median job {r.median_exec_ms:.3f} ms, ratio {r.slowdown_median:.3f}{ci}{says}")
    (out / "intrusiveness.json").write_text(json.dumps(rows, indent=1))
    return out
