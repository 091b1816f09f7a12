"""The solo feasibility run: before the interleaved runs, the victim runs alone for one short
pass in each configuration, and an experiment that cannot hold its period alone is refused.
In an experiment of `[[application]]`s every measured application with periodic jobs runs
so, in its `alone:<name>` placement of each configuration, and is judged the same way.

A victim that misses alone measures its own backlog, not interference (every job of an
overloaded quickstart missed and the table still printed a slowdown of 1.03), and a
SCHED_DEADLINE runtime below the victim's need throttles every job: seed 000 §7.2.1 sizes the
runtime as the observed maximum plus a margin. Both are found in a second, refused with the
numbers and what to set, exit 2, and the results directory removed. `--skip-feasibility`
runs anyway (the result guards still say what is wrong).

Before the runs, NOISE_PASSES solo passes in the first configuration give a first noise
floor: the spread of the solo median from one pass to the next, stated against the smallest
effect the experiment wants to see (`min_effect`, 5 % by default) with the repetitions that
resolving it takes. Each pass lasts about NOISE_PASS_S (and at most one of the experiment's
runs): three 20-job passes measured mostly the start of a fresh process, and the demo was told
"20 repetitions needed" while both its enemy CIs excluded 1. With `--require-effect` too few
repetitions is refused there; otherwise that estimate is only printed, and the verdict comes
after the runs (`after_runs`): the spread of the experiment's own solo runs, and a warning
only where a scenario's slowdown CI neither excludes 1 nor is narrow enough to see
`min_effect`, so the warning never contradicts the intervals printed above it. (An
experiment of applications has no noise passes: its references are each application alone,
and its verdicts its ε.)
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

from .analysis.guards import Z95, concluded, more_runs, repetitions_needed  # noqa: F401 (Z95: the API's)
from .calibrate_work import knob_of, solo_pass
from .config.expand import RunSpec
from .errors import UsageError
from . import catalog
from .plan import Plan, Victim


def _periodic(body) -> bool:
    """A body with periodic jobs of its own work and nothing else to report (command, task
    sets, latency and AOCS have their own structure or their own checks): catalog `plain`."""
    return catalog.body(body.kind).plain

#: Alone, the median job may take at most this share of the deadline ...
MAX_SHARE = 0.9
#: ... and at most this share of the pass's jobs may miss. (Loose: a short job that misses
#: now and then alone suffers wake-up latency or preemption, which the guards report; a run
#: missing most of its deadlines alone measures nothing but its backlog.)
MAX_MISSES = 0.5
#: Margin over the observed maximum CPU time for a suggested DEADLINE runtime.
RUNTIME_MARGIN = 1.1
#: Solo passes whose medians give the run-to-run spread (the first configuration only) ...
NOISE_PASSES = 3
#: ... each about this long (at least PASS_JOBS jobs, at most the experiment's own run).
NOISE_PASS_S = 1.5


def noise_jobs(plan) -> int:
    """Jobs of one noise pass: about NOISE_PASS_S of periods, at least PASS_JOBS, at most
    the experiment's own run (the spread that matters is that of its runs' medians)."""
    from .calibrate_work import PASS_JOBS

    by_time = math.ceil(NOISE_PASS_S * 1e9 / plan.victim.period_ns)
    return max(PASS_JOBS, min(by_time, plan.victim.jobs))


def noise_floor(medians: list[float], effect: float, repetitions: int, jobs: int, source: str = "solo passes") -> dict:
    """The solo spread (the record keeps its name noise_floor) from the solo medians of a few passes (or runs), against `effect`."""
    import statistics  # after the runs: not for `xtalk plan`'s estimate

    spread = statistics.stdev(medians) / statistics.fmean(medians) if len(medians) > 1 else math.nan
    need = repetitions_needed(spread, effect) if spread == spread else None
    return {"source": source, "passes": len(medians), "jobs_per_pass": jobs, "median_exec_ns": medians, "spread": spread,
            "min_effect": effect, "repetitions": repetitions, "repetitions_needed": need}


def noise_text(n: dict) -> str:
    """One line: the spread, the effect, the repetitions it takes and those planned."""
    what = (f"{n['passes']} passes of {n['jobs_per_pass']} jobs" if n.get("source", "solo passes") == "solo passes"
            else f"{n['passes']} solo runs")
    # "solo spread", not "noise floor": the report's noise floor is another statistic (the
    # A/A bootstrap ratio floor, results/tables.noise_floor); docs/experiments.md names both.
    return (f"solo spread: the solo median varies {n['spread']:.1%} from run to run ({what}); resolving a "
            f"{n['min_effect']:.0%} slowdown (min_effect) takes about {n['repetitions_needed']} repetitions, "
            f"the experiment has {n['repetitions']}")


def machine_delay(passes, deadline_ns: int) -> dict:
    """What the machine, not the victim, costs a job in the solo passes: how late it started
    after its release, and the wall time it lost while on its CPU with no context switch (on
    a kernel that leaves steal out of a task's CPU time, the hypervisor running something
    else), against the slack the deadline leaves beside the median job."""
    import pandas as pd

    jobs = pd.concat(passes)
    late = jobs.start_ns - jobs.release_ns
    still = (jobs.nvcsw + jobs.nivcsw) == 0
    stolen = ((jobs.end_ns - jobs.start_ns) - jobs.cpu_time_ns).where(still, 0).clip(lower=0)
    lost = late + stolen
    return {"jobs": len(jobs), "max_late_start_ns": float(late.max()), "max_stolen_ns": float(stolen.max()),
            "p99_lost_ns": float(lost.quantile(0.99)), "max_lost_ns": float(lost.max()),
            "slack_ns": float(deadline_ns - jobs.exec_ns.median()), "over_slack": int((lost > deadline_ns - jobs.exec_ns.median()).sum())}


def delay_text(d: dict) -> str:
    """One line: how much the machine delayed the solo jobs, against the slack."""
    # A job's stolen time is clipped at zero: none at all is said as such, not "up to 0 ms".
    stolen = (f"up to {d['max_stolen_ns'] / 1e6:.2g} ms off the CPU without a context switch" if d["max_stolen_ns"] > 0
              else "never off the CPU without a context switch")
    line = (f"machine delay over {d['jobs']} solo jobs: up to {d['max_late_start_ns'] / 1e6:.2g} ms late to start, "
            f"{stolen} (p99 of both together {d['p99_lost_ns'] / 1e6:.2g} ms), against {d['slack_ns'] / 1e6:.3g} ms of slack")
    if d["over_slack"]:
        line += (f"; {d['over_slack']} job(s) lost more than the slack: expect solo misses that are the machine's "
                 f"(other work on the victim's CPU in a non-preemptible kernel, or the hypervisor), not the victim's; "
                 f"a longer period absorbs them, quieting the machine removes them")
    return line


def unresolved(table, effect: float, reference: str = "solo") -> list[str]:
    """The scenarios of a summary table whose median-slowdown CI concluded nothing about
    `effect` (analysis.guards.concluded, the one rule: the `ci_too_wide` guard fires on the
    same rows). A missing CI is left to its own guard."""
    out = []
    for row in table.itertuples():
        if row.scenario == reference:
            continue
        lo, hi = row.slowdown_median_lo, row.slowdown_median_hi
        if not (lo == lo and hi == hi) or concluded(lo, hi, effect):
            continue
        out.append(row.scenario if row.configuration == "default" else f"{row.configuration}/{row.scenario}")
    return out


def after_runs(solo_medians: list[float], table, effect: float, repetitions: int) -> tuple[dict, str | None]:
    """The solo spread from the experiment's own solo runs (`solo_medians`: the median job
    of each, first configuration), and the warning it deserves given the CIs obtained
    (`table`: the summary's rows): None unless some scenario is unresolved and the spread
    says more repetitions would resolve it."""
    noise = noise_floor(solo_medians, effect, repetitions, 0, source="solo runs")
    vague = unresolved(table, effect)
    if not vague or noise["repetitions_needed"] is None:
        return noise, None
    # The words and numbers of the rows' `ci_too_wide` guards (summary.json, the report).
    more = more_runs(repetitions, math.nan, math.nan, effect, noise["spread"])
    return noise, (f"{noise_text(noise)}; {', '.join(vague)}: the slowdown CI holds 1 and is wider than "
                   f"±{effect:.0%}, nothing is concluded at min_effect; {more} or raise min_effect "
                   f"(the warning of each in summary.json and the report)")


def infeasible(plan, field: str, who: str, where: str, median: float, deadline: float, missed: float,
               n_jobs: int) -> str | None:
    """Why a solo pass cannot be measured against (the refusal's one line), None when it can.

    A median job above MAX_SHARE of the deadline does not fit: a longer period or less work
    is the fix. A job that fits but misses more than MAX_MISSES of its deadlines alone waits
    to run (wake-up latency, preemption by other work): there the fix is the policy or a
    quieter machine, never more period or less work."""
    share = median / deadline
    if share > MAX_SHARE:
        period = math.ceil(median / 0.3 / 1e6)
        return (f"{field}.period{where}: {who} cannot hold its period alone (median job {median / 1e6:.3g} ms against "
                f"a {deadline / 1e6:g} ms deadline, {missed:.0%} of {n_jobs} jobs missed); lengthen the period to "
                f"about \"{period}ms\", or {_suggest_work(plan, 0.3 / share, field)}; --skip-feasibility runs it anyway")
    if missed > MAX_MISSES:
        policy = getattr(plan.victim.sched, "policy", None) or "other"
        return (f"{field}.policy{where}: {who} misses {missed:.0%} of {n_jobs} jobs alone although its median job "
                f"takes {share:.0%} of its {deadline / 1e6:g} ms deadline: it waits to run (wake-up latency or "
                f"preemption by other work under policy \"{policy}\"); give it a real-time policy (policy = \"fifo\" "
                "or \"deadline\"), quiet the machine, or --skip-feasibility runs it anyway")
    return None


def _suggest_work(plan, scale: float, field: str = "victim") -> str:
    """'lower the work to …': the body's work knob times `scale` (< 1), where it has one.
    `utilization` is offered for a victim only (an application gives its work)."""
    knob = knob_of(plan.victim.body)
    now = getattr(plan.victim.body, knob, None) if knob else None
    if knob is None:
        return "lighten the victim" if field == "victim" else f"lighten {field}"
    if now is None:
        return (f"lower the work: set victim.utilization = \"30%\" (or victim.{knob})" if field == "victim"
                else f"lower the work: set {field}.{knob}")
    also = " (or victim.utilization = \"30%\")" if field == "victim" else ""
    return f"lower the work to about {field}.{knob} = {max(1, int(now * scale))}{also}"


def alone_plan(plan: Plan, name: str) -> Plan:
    """`plan` with its measured process `name` alone: the plan's victim, no applications
    and no enemies (its placement, policy and groups as they are)."""
    p = plan.model_copy(deep=True)
    proc = next(m for m in p.measured() if m.name == name)
    p.victim = Victim.model_validate(proc.model_dump(exclude={"may_fail"}))
    p.applications, p.enemies = [], []
    return p


def solo_runs(runs: list[RunSpec], periodic_only: bool = True) -> list[tuple[RunSpec, str | None]]:
    """What the solo passes run, once per configuration and measured process (with periodic
    jobs, unless not `periodic_only`), with that process's name (None for a victim): the
    victim's first `solo` run; in an experiment of applications each application's first
    `alone:<name>` run, or, where the experiment has no `alone` scenarios, the first run that
    holds it, with it alone."""
    chosen: dict[tuple[str, str | None], RunSpec] = {}
    for r in runs:
        if "applications" not in r.plan.labels:
            if r.scenario == "solo" and (_periodic(r.plan.victim.body) or not periodic_only):
                chosen.setdefault((r.configuration, None), r)
            continue
        for proc in r.plan.measured():
            key = (r.configuration, proc.name)
            if periodic_only and not _periodic(proc.body):
                continue
            if r.scenario == f"alone:{proc.name}":
                if key not in chosen or chosen[key].scenario != r.scenario:
                    chosen[key] = r
            elif key not in chosen:
                chosen[key] = dataclasses.replace(r, plan=alone_plan(r.plan, proc.name))
    return [(r, name) for (_, name), r in chosen.items()]


def estimated_seconds(runs: list[RunSpec], per_run_overhead_s: float, noise: bool = True) -> float:
    """What the feasibility passes add: one short solo pass per configuration and measured
    process (solo_runs), and (with `noise`) NOISE_PASSES noise passes of a victim in the first."""
    from .calibrate_work import PASS_JOBS, PASS_WARMUP

    solos = solo_runs(runs)
    total = sum(r.plan.settle_ms / 1e3 + (PASS_JOBS + PASS_WARMUP) * r.plan.victim.period_ns / 1e9 + per_run_overhead_s
                for r, _ in solos)
    if noise and solos and solos[0][1] is None:
        p = solos[0][0].plan
        total += NOISE_PASSES * (p.settle_ms / 1e3 + (noise_jobs(p) + PASS_WARMUP) * p.victim.period_ns / 1e9
                                 + per_run_overhead_s)
    return total


def check(runs: list[RunSpec], agent, out: Path, say=print, min_effect: float = 0.05,
          require_effect: bool = False, warn=None, noise: bool = True, applications: list[str] = ()) -> list[dict]:
    """One solo pass per configuration and measured process (solo_runs) on `agent` (a path
    or a campaign target, see calibrate_work.run_on); UsageError (exit 2) when the victim, or
    an application, cannot hold its period alone or its DEADLINE runtime is below its need
    (`applications`: their names in declaration order, for the field of the message). With
    `noise`, NOISE_PASSES longer passes of a victim in the first configuration give a first
    solo spread against `min_effect`: printed, or refused (exit 2) with `require_effect` when
    the repetitions cannot resolve it (the runs' own verdict is `after_runs`). Returns what
    each pass measured (the first configuration's record holds the solo spread)."""
    warn = warn or say
    record = []
    for r, name in solo_runs(runs):
        v = r.plan.victim
        where = "" if r.configuration == "default" else f" in configuration '{r.configuration}'"
        if name is None:
            field, who, pass_dir = "victim", "the victim", r.configuration
            need_of = "the victim's solo need"
        else:
            field = (f"application[{list(applications).index(name)}]" if name in applications
                     else f"application '{name}'")
            who, pass_dir = f"application '{name}'", f"{r.configuration}-{name}"
            need_of = f"the solo need of application '{name}'"
        what = f"the solo feasibility run{where}" + ("" if name is None else f" of application '{name}'")
        jobs = solo_pass(r.plan, out / "feasibility" / pass_dir, agent, what, "or run with --skip-feasibility")
        deadline = v.deadline_ns or v.period_ns
        median, share = float(jobs.exec_ns.median()), float(jobs.exec_ns.median()) / deadline
        missed = float(jobs.missed.mean())
        cpu_max = float(jobs.cpu_time_ns.max())
        record.append({"configuration": r.configuration, **({} if name is None else {"application": name}),
                       "jobs": len(jobs), "median_exec_ns": median,
                       "share_of_deadline": share, "missed": missed, "max_cpu_time_ns": cpu_max})
        say(f"solo feasibility{where}{'' if name is None else f' of {name}'}: median job {median / 1e6:.3g} ms = "
            f"{share:.0%} of the deadline, {missed:.0%} missed")
        runtime = getattr(v.sched, "runtime_ns", None)
        if runtime is not None and cpu_max > runtime:
            need = math.ceil(cpu_max * RUNTIME_MARGIN / 1e5) / 10
            raise UsageError(f"{field}.reservation.runtime{where}: {runtime / 1e6:g} ms is below {need_of} "
                             f"(up to {cpu_max / 1e6:.3g} ms of CPU per job over {len(jobs)} jobs): every job would be "
                             f"throttled; set runtime = \"{need:g}ms\" (the observed maximum + 10 %, seed 000 §7.2.1), "
                             f"or {_suggest_work(r.plan, runtime / (cpu_max * RUNTIME_MARGIN), field)}")
        refusal = infeasible(r.plan, field, who, where, median, deadline, missed, len(jobs))
        if refusal is not None:
            raise UsageError(refusal)
        # Only a feasible victim is worth repeating (a throttled one would take minutes).
        if noise and name is None and len(record) == 1:
            n_jobs = noise_jobs(r.plan)
            passes = [solo_pass(r.plan, out / "feasibility" / f"{r.configuration}-noise-{k}", agent,
                                f"the solo feasibility run{where}", "or run with --skip-feasibility", jobs=n_jobs)
                      for k in range(NOISE_PASSES)]
            medians = [float(p.exec_ns.median()) for p in passes]
            record[0]["machine_delay"] = delay = machine_delay(passes, deadline)
            say(delay_text(delay))
            reps = 1 + max((x.repetition for x in runs if x.configuration == r.configuration and x.scenario == "solo"), default=0)
            floor = noise_floor(medians, min_effect, reps, n_jobs)
            record[0]["noise_floor"] = floor
            if floor["repetitions_needed"] <= reps:
                say(noise_text(floor))
            elif require_effect:
                raise UsageError(f"repetitions: {noise_text(floor)}; set repetitions = {floor['repetitions_needed']}, "
                                 f"raise min_effect, or quiet the machine (--require-effect refuses this)")
            else:  # an estimate from passes: the runs' own CIs decide after them (after_runs)
                say(f"{noise_text(floor)} (an estimate before the runs; checked against the slowdown CIs after them)")
    return record
