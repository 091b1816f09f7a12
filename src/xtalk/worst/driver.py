"""`xtalk worst`'s work: pilot, search, confirmation, output, within the budget.

1. A solo pilot run: the victim runs at all here, and a run's real cost (a command victim's
   length is known only by running it).
2. The budget split: the confirmation's cost (finalists, stressors and solo, at least
   `MIN_CONFIRM_REPS` runs each) is reserved first; the search gets the rest and plans its
   rounds in it (search.fit, from the runner's per-run estimate and the pilot).
3. Successive halving (search.py) over candidates from the catalog's space (space.py): each
   kind alone on every enemy CPU first (the strongest single enemies), then the random
   combinations the stopping rule needs (stopping.py), in batches it is asked after.
4. The confirmation (confirm.py) with `confirm_repetitions` runs each (fewer where the time
   left cannot hold them), and the output files (output.py).
"""

from __future__ import annotations

import math
import random
import time
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from .. import safepath
from .. import catalog, peaks
from ..errors import UsageError
from ..runner import COMMAND_OVERHEAD_S
from . import confirm as confirm_mod
from . import coverage as coverage_mod
from . import residual as residual_mod
from . import output, search, space as space_mod
from .inputs import Request, resolve_cpus
from . import runs as runs_mod
from .runs import CONFIRM_RUN_S, SEARCH_RUN_S, Victim, experiment_text, planned_run_seconds, run_round, scores

#: Candidates confirmed after the search (the worst and two runner-ups).
FINALISTS = 3
MIN_CONFIRM_REPS = 3
#: Candidates a later round of the search keeps: 1/SEARCH_ETA of them. With the rounds capped
#: at the confirmation's runs per candidate (search.schedule's `cap`), three rounds or fewer.
SEARCH_ETA = 3
#: The fixed cost of one round: writing its experiment, the agent's check of every plan,
#: reading the runs back (`xtalk run`'s own overhead, runner.COMMAND_OVERHEAD_S).
ROUND_OVERHEAD_S = COMMAND_OVERHEAD_S
#: Enemy buffers of all candidates together stay under this share of available memory.
MEMORY_SHARE = 0.25
#: The first round is tried this many candidates at a time; the stopping rule is asked
#: after each batch (each has its own solo runs and fixed cost, so not fewer).
EXPLORE_BATCH = 12
#: Confirmation scenarios reserved for the residual's channel parts (residual.py): a finalist
#: loading two channels, the usual split; a third part runs if time is left.
PARTS_RESERVED = 2


def _available_memory() -> int:
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 1 << 30


def _window_s(v: Victim, measured_s: float) -> float:
    """Seconds a run of `v` measures with jobs cut to `measured_s` (0 for a command: its
    length is the pilot's)."""
    from ..units import duration_ns

    if not v.periodic:
        return 0.0
    t = v.with_jobs(measured_s)
    return (int(t["jobs"]) + int(t.get("warmup_jobs", 0))) * duration_ns(t.get("period", "10ms"), "victim.period") / 1e9


def run(req: Request, console: Console) -> Path:
    """Search, confirm, write the output directory; return it."""
    from ..targets.agent import PlanRefused, find_agent, local_facts, recover, refuse_fixture

    refuse_fixture("worst")
    start = time.monotonic()
    agent = find_agent()
    facts = local_facts(agent)
    victim, enemy_cpus = resolve_cpus(req.victim, facts.online_cpus)
    arch = facts.environment.get("kernel", {}).get("machine")  # the catalog's choices of this machine only
    sp = space_mod.build(catalog.current(), facts.caches, enemy_cpus, int(_available_memory() * MEMORY_SHARE), req.kinds,
                         arch)
    if not sp.kinds:
        raise UsageError(f"--kind: none of {', '.join(req.kinds or [])} can be searched "
                         f"({'; '.join(f'{k}: {w}' for k, w in sp.excluded.items())}); choose other kinds")
    stressors = req.stress_ng and confirm_mod.stress_ng() is not None
    n_confirm = FINALISTS + (len(confirm_mod.STRESSORS) if stressors else 0)
    out = req.out
    work = out / "rounds"
    safepath.makedirs(work)
    # The estimate first, from the plans alone: a budget that cannot hold the smallest
    # search is refused before any run starts (a command's length is unknown until it runs).
    est_path = work / "estimate.toml"
    safepath.write_text(est_path, experiment_text("worst-estimate", victim, {}, 1, req.seed, SEARCH_RUN_S))
    run_s, _ = planned_run_seconds(est_path)
    est_path.unlink()
    if victim.periodic:
        _check_budget(req.budget_s, run_s, run_s - _window_s(victim, SEARCH_RUN_S) + _window_s(victim, CONFIRM_RUN_S), n_confirm)
    for line in recover(agent):
        console.print(f"[yellow]restored after an earlier run that died: {line}[/]")
    if victim.table.get("utilization") is not None:
        victim = _calibrated(victim, work, req.seed, agent, console)
    console.print(f"xtalk worst: victim {victim.table.get('body')} on CPU {victim.cpus}, enemies on {enemy_cpus}; "
                  f"{len(sp.kinds)} enemy kinds from the catalog ({', '.join(sp.kinds)}); budget {req.budget_s:.0f} s; "
                  f"maximising {req.statistic} {req.metric} time", highlight=False)
    pilot = run_round(experiment_text("worst-pilot", victim, {}, 1, req.seed, SEARCH_RUN_S), work, "pilot", req.metric)
    if not pilot.samples.get("solo"):
        raise UsageError(f"victim: the solo pilot run recorded no job ({'; '.join(pilot.failed) or 'see ' + str(pilot.directory)}); "
                         "fix the victim so that it runs alone")
    # The pilot's own time, not its wall time: a wait for others holding the machine says
    # nothing of what a run costs (the rounds' pace corrects for waits that go on).
    run_s = max(run_s if victim.periodic else 0.0, pilot.own_seconds or pilot.seconds - ROUND_OVERHEAD_S / 2, 0.2)
    confirm_run_s = run_s - _window_s(victim, SEARCH_RUN_S) + _window_s(victim, CONFIRM_RUN_S)
    reserve = search.stage_seconds(n_confirm, MIN_CONFIRM_REPS, confirm_run_s, ROUND_OVERHEAD_S)
    left = req.budget_s - (time.monotonic() - start)
    seeds = sp.singles()
    random.Random(req.seed).shuffle(seeds)
    rule = req.rule
    # The stopping rule's count is known before any run (ε = 1/2: stopping.py): the first
    # round is planned as the seeds and exactly the random candidates it needs, so it fires on
    # the batch that completes them; a few spares stand in for candidates that give no score.
    needed = rule.assess([], 1.0).needed
    first = len(seeds) + needed
    cap = req.confirm_repetitions
    try:
        # The residual's channel parts (PARTS_RESERVED more scenarios) are reserved too,
        # where the budget holds them; else the search keeps its time and they are left out.
        with_parts = search.stage_seconds(n_confirm + PARTS_RESERVED, MIN_CONFIRM_REPS, confirm_run_s, ROUND_OVERHEAD_S)
        try:
            plan = search.fit(left - with_parts, run_s, ROUND_OVERHEAD_S, FINALISTS, SEARCH_ETA, first, EXPLORE_BATCH, cap)
            reserve = with_parts
        except search.BudgetTooSmall:
            plan = search.fit(left - reserve, run_s, ROUND_OVERHEAD_S, FINALISTS, SEARCH_ETA, first, EXPLORE_BATCH, cap)
    except search.BudgetTooSmall as e:
        raise UsageError(f"--budget: {req.budget_s:.0f} s is too small: {e}, and the confirmation about {reserve:.0f} s; "
                         f"give at least {math.ceil((_least(run_s) + reserve + pilot.seconds) / 60)}m") from None
    candidates = sp.draw(first + EXPLORE_BATCH, req.seed, seeds)
    if len(candidates) < plan[0].candidates:  # a space with fewer distinct candidates
        plan = search.fit(left - reserve, run_s, ROUND_OVERHEAD_S, FINALISTS, SEARCH_ETA, len(candidates), EXPLORE_BATCH,
                          cap)
    seeded = {c.key for c in seeds}
    console.print(f"search: {first} candidates ({len(seeds)} seeded, {needed} random: what the stopping rule needs), rounds " + " → ".join(f"{s.candidates}×{s.repetitions}" for s in plan)
                  + f" (about {sum(s.seconds for s in plan):.0f} s; the first round {EXPLORE_BATCH} at a time until the "
                    f"stopping rule fires: {rule.confidence:.0%} sure that ≤ {1 - rule.confidence:.0%} of untried candidates "
                    f"score {rule.margin:.0%} above the best); confirmation: {n_confirm} scenarios, "
                    f"{req.confirm_repetitions} runs each (at least {MIN_CONFIRM_REPS}: about {reserve:.0f} s reserved)", highlight=False)
    by_key = {c.key: c for c in candidates}
    own: list[float] = []  # the runs' own time, round by round
    deadline = start + req.budget_s
    with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.fields[note]}"), TimeElapsedColumn(),
                  console=console, transient=False) as bar:
        task = bar.add_task("search", total=req.budget_s, note="")
        counter = {"round": 0}
        refusals: dict[str, str] = {}  # candidate key -> the agent's refusal
        own.append(pilot.own_seconds)

        def tick(i: int, n: int, scen: str, what: str) -> None:
            bar.update(task, completed=min(req.budget_s, time.monotonic() - start), description=what, note=f"run {i}/{n}")

        def evaluate(cands: list, reps: int):
            counter["round"] += 1
            r = counter["round"]
            names = {f"c{j:02d}": c for j, c in enumerate(cands) if c.key not in refusals}
            text = experiment_text(f"worst-round{r}", victim, {n: c.tables() for n, c in names.items()}, reps,
                                   req.seed + r, SEARCH_RUN_S, "xtalk worst: one round of the search")
            try:
                res = run_round(text, work, f"round{r}", req.metric,
                                lambda i, n, s: tick(i, n, s, f"round {r}: {len(cands)} candidates × {reps}"),
                                deadline - reserve)
            except PlanRefused:
                # A candidate the agent refuses on this machine: found alone, left out (its
                # score stays NaN: coverage says `refused`), and the round runs without it.
                why = runs_mod.refused(victim, {n: c.tables() for n, c in names.items()}, work, req.seed)
                if not why:
                    raise
                for n, line in why.items():
                    refusals[names[n].key] = line
                    bar.console.print(f"[yellow]left out, refused by the agent: {names[n].label()}: {line}[/]", highlight=False)
                names = {n: c for n, c in names.items() if n not in why}
                text = experiment_text(f"worst-round{r}", victim, {n: c.tables() for n, c in names.items()}, reps,
                                       req.seed + r, SEARCH_RUN_S, "xtalk worst: one round of the search")
                res = run_round(text, work, f"round{r}", req.metric,
                                lambda i, n, s: tick(i, n, s, f"round {r}: {len(names)} candidates × {reps}"),
                                deadline - reserve)
            own.append(res.own_seconds)
            sc = scores(res, req.statistic)
            return {c.key: sc.get(n, float("nan")) for n, c in names.items()}, res.seconds

        def said(i, ranked, spent):
            best = ranked[0]
            bar.console.print(f"round {i + 1}: best so far {best.score:.2f}× {best.item.label()}", highlight=False)

        shown = {"n": 0}

        def check(tried: list):
            """The stopping rule on each candidate's first score (the seeded ones raise the
            best, only the random ones count)."""
            first = [a.scores[0][2] for a in tried]
            a = rule.assess([a.scores[0][2] for a in tried if a.key not in seeded], max(first, default=1.0))
            bar.console.print(f"  stopping rule: {a.text(rule.confidence)}", highlight=False)
            new = [{"score": round(x.scores[0][2], 4), "seeded": x.key in seeded} for x in tried[shown["n"]:]]
            shown["n"] = len(tried)
            return a.fired, {**a.as_json(), "batch": new}

        def more(tried: list) -> int:
            """Candidates the rule still needs: the random ones it lacks and the seeds untried."""
            keys = {a.key for a in tried}
            scored = sum(1 for a in tried if a.scores and a.key not in seeded)
            return max(0, needed - scored) + sum(1 for k in seeded if k not in keys)

        ranked, trace = search.successive_halving(candidates, evaluate, plan, left - reserve, run_s, ROUND_OVERHEAD_S,
                                                  key=lambda c: c.key, on_round=said, label=lambda c: c.label(),
                                                  explore=search.Explore(EXPLORE_BATCH, check, more), eta=SEARCH_ETA,
                                                  cap=cap)
        finalists = [a for a in ranked if a.scores][:FINALISTS]
        time_left = deadline - time.monotonic()
        names = {f"finalist-{j + 1}": a for j, a in enumerate(finalists)}
        split = _split(names, time_left - ROUND_OVERHEAD_S - (n_confirm + 1) * MIN_CONFIRM_REPS * confirm_run_s,
                       confirm_run_s)
        extra = {s: by_ch[1] for s, by_ch in split.get("scenarios", {}).items()}
        reps = int((time_left - ROUND_OVERHEAD_S) // ((n_confirm + len(extra) + 1) * confirm_run_s))
        reps = max(MIN_CONFIRM_REPS, min(req.confirm_repetitions, reps))
        what = (f"confirmation: {len(names)} finalists" + (f" + {len(extra)} channel parts" if extra else "")
                + (" + stress-ng" if stressors else "") + f" × {reps}")
        conf = confirm_mod.confirm(
            victim, {**{n: a.item.tables() for n, a in names.items()}, **{s: c.tables() for s, c in extra.items()}},
            enemy_cpus, reps, req.statistic, req.metric, work,
            req.seed, req.stress_ng,
            lambda i, n, s: tick(i, n, s, what),
            deadline)
        bar.update(task, completed=min(req.budget_s, time.monotonic() - start))
    own.append(conf.result.own_seconds)
    return _write(req, victim, enemy_cpus, sp, names, conf, trace, by_key, start, console, sum(own), refusals, split,
                  facts.environment)


def _split(names: dict, seconds: float, run_s: float) -> dict:
    """The search's best finalist that loads several channels (two or three), split into its
    channel parts for the residual (residual.py): {"finalist", "scenarios": {scenario:
    (channel, part)}}, or {"finalist", "why"} when none is split (each loads one channel or
    more than MAX_PARTS; `seconds`, what the budget leaves beside the confirmation's own
    minimum, cannot hold the parts' MIN_CONFIRM_REPS runs of `run_s` each)."""
    if not names:
        return {}
    cat = catalog.current()
    split = {n: residual_mod.parts(cat, a.item) for n, a in names.items()}
    fit = [n for n, p in split.items() if 2 <= len(p) <= residual_mod.MAX_PARTS]
    if not fit:
        many = [n for n, p in split.items() if len(p) > residual_mod.MAX_PARTS]
        said = "; ".join(f"{n} loads {len(split[n])} channels, more than the {residual_mod.MAX_PARTS} the confirmation splits"
                         for n in many)
        one = [f"{n} {', '.join(sorted(coverage_mod.loads(cat, a.item)))}" for n, a in names.items() if n not in many]
        return {"finalist": next(iter(names)), "why": "; ".join(
            x for x in (f"{'the others load' if many else 'each finalist loads'} one channel ({'; '.join(one)}): "
                        "its slowdown is that channel's effect, "
                        "nothing to separate" if one else "", said) if x)}
    name = fit[0]
    split = split[name]
    if seconds < MIN_CONFIRM_REPS * len(split) * run_s:
        return {"finalist": name, "why": f"no time left in the budget for its {len(split)} channel parts' runs "
                                         "(a larger --budget)"}
    return {"finalist": name, "scenarios": {residual_mod.part_name(ch): (ch, c) for ch, c in split.items()}}


def _calibrated(victim: Victim, work: Path, seed: int, agent: Path, console: Console) -> Victim:
    """`victim.utilization` turned into the work itself, calibrated once on this machine
    (calibrate_work.py): every round then runs the same work."""
    from ..calibrate_work import calibrate
    from ..runner import prepare
    from ..units import fraction

    path = work / "calibration.toml"
    safepath.write_text(path, experiment_text("worst-calibration", victim, {}, 1, seed, SEARCH_RUN_S))
    _, runs, _ = prepare(path)
    _, record = calibrate(runs, fraction(victim.table["utilization"], "victim.utilization", high=0.9), agent, work,
                          say=lambda line: console.print(line, highlight=False))
    table = {k: v for k, v in victim.table.items() if k != "utilization"}
    table[record["knob"]] = record["work"]
    return Victim(table, victim.cpus, victim.settle, victim.source)


def _least(run_s: float) -> float:
    return sum(s.seconds for s in search.schedule(FINALISTS + 1, run_s, ROUND_OVERHEAD_S, FINALISTS))


def _check_budget(budget_s: float, run_s: float, confirm_run_s: float, n_confirm: int) -> None:
    need = (_least(run_s) + search.stage_seconds(n_confirm, MIN_CONFIRM_REPS, confirm_run_s, ROUND_OVERHEAD_S)
            + run_s + ROUND_OVERHEAD_S)
    if budget_s < need:
        raise UsageError(f"--budget: {budget_s:.0f} s cannot hold the smallest search and its confirmation "
                         f"(about {need:.0f} s for this victim); give at least {math.ceil(need / 60)}m")


def _write(req: Request, victim: Victim, enemy_cpus: list[int], sp, names: dict, conf, trace, by_key, start, console,
           own_s: float, refusals: dict[str, str], split: dict, env: dict) -> Path:
    out = req.out
    rates_of, rates_note = finalist_rates(conf)
    confirmed = {}
    for n in list(names) + sorted(s for s in conf.vs_solo if s.startswith(confirm_mod.SNG)):
        arm = names.get(n)
        confirmed[n] = {
            "key": arm.key if arm else None,
            "label": arm.item.label() if arm else n.removeprefix(confirm_mod.SNG) + " (stress-ng, one per enemy CPU)",
            "enemies": arm.item.tables() if arm else confirm_mod.stressor_scenarios(enemy_cpus, (n.removeprefix(confirm_mod.SNG),))[n],
            "search_score": round(arm.score, 4) if arm and math.isfinite(arm.score) else None,
            "vs_solo": confirm_mod.ci_dict(conf.vs_solo.get(n)),
            "vs_best_stressor": confirm_mod.ci_dict(conf.vs_stressor.get(n)),
            "rates": rates_of.get(n) or None,
        }
    # The worst is the finalist the confirmation found worst (the search's order may differ).
    fin = [n for n in names if confirmed[n]["vs_solo"]]
    worst = max(fin, key=lambda n: confirmed[n]["vs_solo"]["estimate"]) if fin else next(iter(names))
    order = [worst] + [n for n in names if n != worst]
    best = conf.best_stressor
    scen = {"worst": confirmed[worst]["enemies"]}
    for j, n in enumerate(order[1:], 1):
        scen[f"runner-up-{j}"] = confirmed[n]["enemies"]
    if best:
        scen["stress-ng-best"] = confirmed[best]["enemies"]
    w = confirmed[worst]
    desc = (f"xtalk worst: {w['label']}; {req.statistic} {req.metric} slowdown {output.ci_text(w['vs_solo'])} against solo"
            + (f", {output.ci_text(w['vs_best_stressor'])} against stress-ng {best.removeprefix(confirm_mod.SNG)}" if best else ""))
    output.write_experiment(out / "worst.toml", victim, scen, max(5, conf.repetitions), req.seed, desc)
    doc = {
        "victim": {"source": victim.source, "table": victim.table, "cpus": victim.cpus},
        "enemy_cpus": enemy_cpus,
        "statistic": req.statistic, "metric": req.metric, "budget_s": req.budget_s,
        "elapsed_s": round(time.monotonic() - start, 1),
        # Time outside the runs themselves: the agent's checks of each round's plans, and
        # waits for others holding the machine (targets/lock.py).
        "outside_runs_s": round(time.monotonic() - start - own_s, 1),
        "space": {"kinds": {k: [{"key": a.key, "values": list(a.values)} for a in ks.axes] for k, ks in sp.kinds.items()},
                  "excluded": sp.excluded, "footprints": list(space_mod.FOOTPRINTS),
                  "intensities": list(space_mod.INTENSITIES), "max_per_cpu": space_mod.MAX_PER_CPU},
        "worst": {"scenario": "worst", "confirm_scenario": worst, **w},
        "runner_ups": [{"scenario": f"runner-up-{j}", "confirm_scenario": n, **confirmed[n]} for j, n in enumerate(order[1:], 1)],
        "stress_ng": conf.stress_ng,
        "best_stressor": ({"scenario": best, **confirmed[best]} if best else None),
        "stressors": {n: confirmed[n] for n in confirmed if n.startswith(confirm_mod.SNG)},
        "confirmation": {"repetitions": conf.repetitions, "runs": str(conf.result.directory), "failed": conf.result.failed},
        "experiment": "worst.toml",
    }
    stop = stopping_doc(req.rule, trace)
    doc["stopping"] = stop
    doc["coverage"] = cov = channel_coverage(req, sp, trace, by_key, names, refusals, rates_of, rates_note)
    # What the enemies' counters say of what they load, or why nothing (peaks.py).
    cov["counters"] = peaks.signature_text(None, env)
    doc["residual"] = res = residual_doc(req, split, names, conf)
    output.write_json(out / "result.json", doc)
    output.write_json(out / "trace.json", trace.as_json())
    output.stopping_figure(out / "stopping.png", stop, req.statistic, req.metric)
    roles = {n: ("worst" if n == worst else f"runner-up-{order.index(n)}") for n in order}
    output.figure(out / "trace.png", trace.as_json(), {roles.get(n, n): confirmed[n] for n in confirmed}, req.statistic, req.metric)
    console.print(f"\n[bold]worst[/]: {w['label']}", highlight=False)
    console.print(f"  {req.statistic} {req.metric} / solo: {output.ci_text(w['vs_solo'])}", highlight=False)
    if w.get("rates"):
        console.print(f"  its enemies reached: {w['rates']}", highlight=False)
    if best:
        console.print(f"  best stress-ng stressor: {best.removeprefix(confirm_mod.SNG)} {output.ci_text(confirmed[best]['vs_solo'])}; "
                      f"worst / it: {output.ci_text(w['vs_best_stressor'])}", highlight=False)
    else:
        console.print(f"  stress-ng: {conf.stress_ng}", highlight=False)
    for j, n in enumerate(order[1:], 1):
        console.print(f"  runner-up {j}: {confirmed[n]['label']}: {output.ci_text(confirmed[n]['vs_solo'])}"
                      + (f"; reached {confirmed[n]['rates']}" if confirmed[n].get("rates") else ""), highlight=False)
    console.print(f"  {stopping_text(req.rule, stop)}", highlight=False)
    for line in coverage_mod.text(cov):
        console.print(f"  {line}", highlight=False)
    console.print(f"  {residual_mod.text(res)}", highlight=False)
    console.print(f"  counters: {cov['counters']}", highlight=False)
    elapsed = time.monotonic() - start
    if elapsed > req.budget_s * 1.05:
        console.print(f"[yellow]the search took {elapsed:.0f} s of a {req.budget_s:.0f} s budget: {elapsed - own_s:.0f} s went outside "
                      f"its runs (plan checks, waits for others holding the machine), and the confirmation runs at least "
                      f"2 repetitions[/]", highlight=False)
    console.print(f"wrote {out}/worst.toml (reproduce: xtalk run {out}/worst.toml), result.json, trace.json, trace.png, "
                  "stopping.png",
                  highlight=False)
    return out


def stopping_doc(rule, trace) -> dict:
    """result.json's `stopping`: the rule, its claim and assumptions, what stopped the first
    round, the last estimate and every batch's."""
    history = trace.exploration
    return {**rule.as_json(), "stopped_by": trace.stopped_by or "budget",
            "estimate": {k: v for k, v in history[-1].items() if k != "batch"} if history else None, "history": history}


def stopping_text(rule, stop: dict) -> str:
    """One line: the rule met or not, with its estimate."""
    e = stop.get("estimate")
    if not e:
        return "stopping rule: not assessed (no candidate was measured)"
    said = (f"{rule.confidence:.0%} sure an untried candidate scores above {e['threshold']:.2f}× "
            f"(best {e['best']:.2f}× + {rule.margin:.0%}) with probability ≤ {e['beyond']:.1%}")
    # The batches list the candidates that gave a score, seeded or not; the others (refused,
    # failed) count in `candidates` only.
    scored = [b for h in stop.get("history") or [] for b in h.get("batch", [])]
    seeded = sum(1 for b in scored if b.get("seeded"))
    others = f"+{seeded} seeded" + (f", {e['candidates'] - len(scored)} without a score" if e["candidates"] > len(scored) else "")
    if stop["stopped_by"] == "rule":
        return f"stopping rule met after {e['tried']} random candidates ({others}): {said}"
    if stop["stopped_by"] == "exhausted":
        return (f"stopping rule NOT met: every candidate drawn was tried ({e['candidates']}; {e['tried']} random gave a score): "
                f"{said}; ≤ {e['target']:.0%} needs {e['needed']} random candidates")
    return (f"stopping rule NOT met: the budget ran out after {e['tried']} random candidates ({others}): {said}; "
            f"≤ {e['target']:.0%} needs {e['needed']} random candidates (a larger --budget)")


def residual_doc(req: Request, split: dict, names: dict, conf) -> dict | None:
    """result.json's `residual`: the split finalist's slowdown against what its channel
    parts, run alone in the confirmation, add up to (residual.py); or why it was not split."""
    from ..analysis.slowdown import SOLO

    if not split:
        return None
    fin = split["finalist"]
    label = names[fin].item.label() if fin in names else fin
    if "scenarios" not in split:
        return {**residual_mod.not_split(fin, split["why"]), "label": label}
    part_scen = {ch: s for s, (ch, _) in split["scenarios"].items()}
    got = residual_mod.residual(conf.result.samples, conf.result.samples.get(SOLO, []), fin, part_scen, req.statistic)
    if got is None:
        return {**residual_mod.not_split(fin, "the confirmation recorded no runs of it, its parts or solo (see its runs)"),
                "label": label}
    for s, (ch, c) in split["scenarios"].items():
        got["parts"][ch].update({"label": c.label(), "enemies": c.tables()})
    return {**got, "label": label}


def finalist_rates(conf) -> tuple[dict[str, str], str | None]:
    """Each confirmation scenario's enemy rates over the victim's window, with their share
    of the channel's peak where this machine's peaks are saved (report/summary.py's enemy
    line); and why none were read, when the runs could not be (named, not fatal)."""
    try:
        from ..report.summary import enemy_rates
        from ..store import open as open_results

        return {scen: t for (_, scen), t in enemy_rates(open_results(conf.result.directory).runs()).items()}, None
    except (OSError, ValueError, KeyError) as e:  # the rates are extra: a damaged run is named, not fatal
        return {}, f"finalists' rates not read from {conf.result.directory}: {e}"


def channel_coverage(req: Request, sp, trace, by_key: dict, names: dict, refusals: dict[str, str],
                     measured: dict[str, str], note: str | None) -> dict:
    """result.json's `coverage`: every candidate of the first round by the channels it
    loads (coverage.py), with the finalists' measured rates from the confirmation runs
    (`measured`: scenario -> text, finalist_rates; `note`: why none were read) and the
    agent's refusals (candidate key -> its line)."""
    cat = catalog.current()
    first = trace.rounds[0]["candidates"] if trace.rounds else []
    pooled = {c["key"]: c["pooled"] for r in trace.rounds for c in r["candidates"]}  # over the rounds it survived
    tried = [(by_key[c["key"]], pooled.get(c["key"]) if c["score"] is not None else None) for c in first if c["key"] in by_key]
    rates: dict[str, list[str]] = {}
    for n, arm in names.items():
        if measured.get(n):
            for ch in sorted(coverage_mod.loads(cat, arm.item)):
                rates.setdefault(ch, []).append(f"{n} {measured[n]}")
    cov = coverage_mod.coverage(cat, sp, req.kinds, tried, req.rule.margin, rates,
                                {by_key[k].label(): line for k, line in refusals.items() if k in by_key})
    if note:
        cov["rates_error"] = note
    return cov
