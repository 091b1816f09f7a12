"""Measure the platform's channel peaks with the enemies themselves (`xtalk characterize
--peaks`): each bandwidth and cache enemy, and the bus-lock enemy (split locks per second:
what the hardware, and a kernel that throttles them, let through), runs alone on one CPU,
then one copy per CPU; a
one-chain chase runs over footprints sized from the machine's caches (half of L1D, half of
L2, half of the LLC, four times the LLC). Every pass is an ordinary run of the agent (the
enemies-alone stand-in victim: a sum over one page every 10 ms at SCHED_OTHER), stored
under the results directory, so each peak can be traced to its run; the numbers are
saved per machine by peaks.py.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Callable, Optional

from . import safepath
from . import peaks as pk
from .config.expand import expand
from .config.experiment import Experiment
from .enemy_alone import PASS_PERIOD_NS, _alone_plan
from .plan import Placement
from .targets.agent import TargetFacts

#: The enemy measuring each bandwidth and cache channel and the bus-lock rate, as an
#: experiment file's table. A channel measured by several kinds (write: plain and
#: non-temporal stores) keeps the best.
BANDWIDTH = [
    ("read", {"kind": "read", "bytes": "4*llc"}),
    ("write", {"kind": "write", "bytes": "4*llc"}),
    ("write", {"kind": "ntstore", "bytes": "4*llc"}),
    ("copy", {"kind": "copy", "bytes": "4*llc"}),
    ("l1d", {"kind": "l1d"}),
    ("l2", {"kind": "l2"}),
    ("llc", {"kind": "llc"}),
    ("bus-lock", {"kind": "buslock"}),
]
#: Chase footprints per level: half a cache stays in it; four LLCs do not.
LATENCY = {"l1d": "l1d/2", "l2": "l2/2", "llc": "llc/2", "dram": "4*llc"}
#: Stand-in victim jobs per pass by default (× 10 ms): 0.3 s of measuring per pass.
DEFAULT_JOBS = 30


def _experiment(tables: list[tuple[str, dict]], victim_cpu: int) -> Experiment:
    scen = [{"name": name, "enemies": [{**t, "name": t["kind"]}]} for name, t in tables]
    return Experiment.model_validate({
        "name": "peaks", "repetitions": 1, "settle": "50ms",
        "victim": {"body": "sum", "bytes": "4KiB", "period": "10ms", "jobs": 10, "cpus": [victim_cpu]},
        "scenario": scen})


def plans(facts: TargetFacts, jobs: int = DEFAULT_JOBS, only: Optional[list[str]] = None) -> list[tuple[str, str, object]]:
    """The measuring passes: (what, "one" | "all", plan). `only` keeps some channels
    ("latency" all levels, "latency.l2" one), for a short check."""
    cpus = facts.online_cpus
    # Split locks exist on x86_64 only (the agent refuses buslock elsewhere): no pass there.
    x86 = ((facts.environment.get("kernel") or {}).get("machine") or "x86_64") == "x86_64"
    tables = [(f"{ch}.{i}", t) for i, (ch, t) in enumerate(BANDWIDTH)
              if (only is None or ch in only) and (x86 or t["kind"] != "buslock")]
    levels = {lvl: b for lvl, b in LATENCY.items() if only is None or pk.LATENCY in only or f"{pk.LATENCY}.{lvl}" in only}
    # A level the machine does not report (no L2 listed) cannot be sized: left out.
    levels = {lvl: b for lvl, b in levels.items() if all(c in facts.caches for c in ("l1d", "l2", "llc") if c in b)}
    tables += [(f"latency.{lvl}", {"kind": "chase", "bytes": b, "chains": 1, "order": "random"}) for lvl, b in levels.items()]
    runs = expand(_experiment(tables, cpus[-1]), facts, labels={"purpose": "peaks"})
    out = []
    for r in runs:
        if not r.plan.enemies:  # the solo every experiment gets
            continue
        (enemy,) = r.plan.enemies
        base = _alone_plan(r.plan, enemy, f"{r.scenario}-one")
        base.victim.jobs = jobs
        base.enemies[0].placement = Placement(cpus=[cpus[0]])
        out.append((r.scenario, "one", base))
        if r.scenario.startswith("latency."):
            continue
        every = base.model_copy(deep=True)
        every.run_id = f"{r.scenario}-all"
        every.enemies = [enemy.model_copy(update={"name": f"{enemy.name}@{c}", "placement": Placement(cpus=[c])}, deep=True)
                         for c in cpus]
        out.append((r.scenario, "all", every))
    return out


#: Tries of a pass: a 50 ms window on a shared machine can catch a copy that did no work in
#: it (seen once in a CI run beside a package build: 0 bytes on one CPU), so a pass that
#: reaches no rate runs once more before its channel is left out.
PASS_TRIES = 2


def _pass(target, plan, out: Path, say: Callable[[str], None]) -> Optional[list]:
    """Run one pass (again once when it reaches no rate); its enemies' outcomes, or None
    after saying why it is left out."""
    for attempt in range(PASS_TRIES):
        run_dir = out / (plan.run_id if attempt == 0 else f"{plan.run_id}-try{attempt + 1}")
        try:
            meta = target.run(plan, run_dir)
        except Exception as why:  # one pass: the others still measure
            say(f"peaks: {plan.run_id} failed ({why}); left out")
            return None
        got = [e for e in meta.enemies if e.window_rate and not e.setup_error and not e.ended_early]
        if meta.status == "completed" and len(got) == len(plan.enemies):
            return got
        again = "; once more" if attempt + 1 < PASS_TRIES else "; left out"
        say(f"peaks: {plan.run_id} reached no rate on {len(plan.enemies) - len(got)} of {len(plan.enemies)} "
            f"copies ({meta.status}){again}")
    return None


def measure(facts: TargetFacts, agent: Path, out: Path, jobs: int = DEFAULT_JOBS, only: Optional[list[str]] = None,
            say: Callable[[str], None] = print) -> pk.Peaks:
    """Run every pass (runs under `out`) and return the peaks; nothing is saved here. A
    pass that fails or reaches no rate leaves its channel out, said in one line."""
    from .targets.base import LocalTarget

    target = LocalTarget(agent)
    todo = plans(facts, jobs, only)
    say(f"peaks: {len(todo)} passes of about {jobs * PASS_PERIOD_NS / 1e6:.0f} ms, runs under {out}")
    rates: dict[tuple[str, str], tuple[str, str, float, int]] = {}
    chase_bytes: dict[str, int] = {}
    for scenario, how, plan in todo:
        got = _pass(target, plan, out, say)
        if got is None:
            continue
        rates[(scenario, how)] = (got[0].kind, got[0].unit, sum(e.window_rate for e in got), len(got))
        if scenario.startswith("latency."):
            chase_bytes[scenario] = plan.enemies[0].load.elements * plan.enemies[0].load.element_bytes
    channels: dict[str, pk.ChannelPeak] = {}
    latency: dict[str, pk.LevelLatency] = {}
    for (scenario, how), (kind, unit, rate, n) in rates.items():
        ch = scenario.split(".")[0]
        if ch == "latency":
            latency[scenario.split(".")[1]] = pk.LevelLatency(bytes=chase_bytes[scenario], rate=rate)
            continue
        if how != "one":
            continue
        every = rates.get((scenario, "all"))
        cand = pk.ChannelPeak(kind=kind, unit=unit, one=rate, all=every[2] if every else None,
                              copies=every[3] if every else 1)
        best = channels.get(ch)
        # Two kinds on one channel (write, ntstore): the faster with every CPU, else alone.
        if best is None or (cand.all or cand.one) > (best.all or best.one):
            channels[ch] = cand
    order = list(dict.fromkeys(ch for ch, _ in BANDWIDTH))
    channels = {ch: channels[ch] for ch in order if ch in channels}
    latency = {lvl: latency[lvl] for lvl in pk.LEVELS if lvl in latency}
    return pk.new(facts.environment, channels, latency, pass_ms=jobs * PASS_PERIOD_NS / 1e6, runs=str(out))


def run(results: Path, console, remeasure: bool = False, jobs: int = DEFAULT_JOBS,
        only: Optional[list[str]] = None) -> pk.Peaks:
    """`xtalk characterize --peaks`: this machine's saved peaks, measured (and saved) when
    there are none or `remeasure`; printed either way."""
    from .targets.agent import find_agent, local_facts

    agent = find_agent()
    facts = local_facts(agent)
    env = facts.environment
    saved = None if remeasure else pk.load(env)
    if saved is not None:
        for line in pk.peaks_text(saved, pk.path_for(env)):
            console.print(line, highlight=False)
        console.print(f"(saved; re-measure with `{pk.COMMAND} --remeasure`)", highlight=False)
        if not pk.has_pmu(env):
            console.print(pk.NO_PMU, highlight=False)
        return saved
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    out = safepath.results_dir(results, "--results") / f"peaks-{stamp}"
    safepath.makedirs(out, exist_ok=False)
    got = measure(facts, agent, out, jobs=jobs, only=only, say=lambda s: console.print(s, highlight=False))
    if not got.channels and not got.latency:
        from .errors import AgentError

        raise AgentError(f"peaks: no pass reached a rate; see the runs under {out}")
    path = pk.save(got, env)
    for line in pk.peaks_text(got, path):
        console.print(line, highlight=False)
    if not pk.has_pmu(env):
        console.print(pk.NO_PMU, highlight=False)
    return got
