"""The solo feasibility run: before the interleaved runs, the victim runs alone for one short
pass in each configuration, and an experiment that cannot hold its period alone is refused.

A victim that misses alone measures its own backlog, not interference (every job of an
overloaded quickstart missed and the table still printed a slowdown of 1.03), and a
SCHED_DEADLINE runtime below the victim's need throttles every job: seed 000 §7.2.1 sizes the
runtime as the observed maximum plus a margin. Both are found in a second, refused with the
numbers and what to set, exit 2, and the results directory removed. `--skip-feasibility`
runs anyway (the result guards still say what is wrong).

The same passes give the noise floor: the spread of the solo median from one pass to the
next (NOISE_PASSES passes in the first configuration), stated against the smallest effect
the experiment wants to see (`min_effect`, 5 % by default) with the repetitions that
resolving it takes. Too few repetitions is a warning, or a refusal with `--require-effect`.
"""

from __future__ import annotations

import math
import statistics
from pathlib import Path

from .calibrate_work import KNOB, solo_pass
from .config.expand import RunSpec
from .errors import UsageError
from .plan import ChaseBody, PiBody, SpawnBody, SumBody, SyscallBody

#: Bodies with periodic jobs of their own work (command, task sets, latency and AOCS have
#: their own structure or their own checks).
PERIODIC = (ChaseBody, PiBody, SpawnBody, SumBody, SyscallBody)

#: Alone, the median job may take at most this share of the deadline ...
MAX_SHARE = 0.9
#: ... and at most this share of the pass's jobs may miss. (Loose: a short job that misses
#: now and then alone suffers wake-up latency or preemption, which the guards report; a run
#: missing most of its deadlines alone measures nothing but its backlog.)
MAX_MISSES = 0.5
#: Margin over the observed maximum CPU time for a suggested DEADLINE runtime.
RUNTIME_MARGIN = 1.1
#: Solo passes whose medians give the run-to-run spread (the first configuration only).
NOISE_PASSES = 3
#: Two-sided 95 % normal quantile.
Z95 = 1.96


def repetitions_needed(spread: float, effect: float) -> int:
    """Repetitions per scenario for a slowdown of 1 + `effect` to stand out of a run-to-run
    relative spread `spread` (the coefficient of variation of the solo median): the ratio
    of two means of n runs each has a relative standard error of spread·√(2/n), and its
    95 % interval excludes 1 when Z95·spread·√(2/n) < effect. At least 2."""
    return max(2, math.ceil(2 * (Z95 * spread / effect) ** 2))


def noise_floor(medians: list[float], effect: float, repetitions: int, jobs: int) -> dict:
    """The noise floor from the solo medians of a few passes, against `effect`."""
    spread = statistics.stdev(medians) / statistics.fmean(medians) if len(medians) > 1 else math.nan
    return {"passes": len(medians), "jobs_per_pass": jobs, "median_exec_ns": medians, "spread": spread,
            "min_effect": effect, "repetitions": repetitions, "repetitions_needed": repetitions_needed(spread, effect)}


def noise_text(n: dict) -> str:
    """One line: the spread, the effect, the repetitions it takes and those planned."""
    return (f"noise floor: the solo median varies {n['spread']:.1%} from run to run ({n['passes']} passes of "
            f"{n['jobs_per_pass']} jobs); resolving a {n['min_effect']:.0%} slowdown (min_effect) takes about "
            f"{n['repetitions_needed']} repetitions, the experiment has {n['repetitions']}")


def _suggest_work(plan, scale: float) -> str:
    """'lower the work to …': the body's work knob times `scale` (< 1), where it has one."""
    knob = KNOB.get(type(plan.victim.body))
    now = getattr(plan.victim.body, knob, None) if knob else None
    if knob is None:
        return "lighten the victim"
    if now is None:
        return f"lower the work: set victim.utilization = \"30%\" (or victim.{knob})"
    return f"lower the work to about victim.{knob} = {max(1, int(now * scale))} (or victim.utilization = \"30%\")"


def estimated_seconds(runs: list[RunSpec], per_run_overhead_s: float) -> float:
    """What the feasibility passes add: one short solo pass per configuration, NOISE_PASSES
    in the first."""
    from .calibrate_work import PASS_JOBS, PASS_WARMUP

    firsts = {r.configuration: r.plan for r in runs if isinstance(r.plan.victim.body, PERIODIC)}
    return sum((NOISE_PASSES if i == 0 else 1) * (p.settle_ms / 1e3 + (PASS_JOBS + PASS_WARMUP) * p.victim.period_ns / 1e9
                                                  + per_run_overhead_s)
               for i, p in enumerate(firsts.values()))


def check(runs: list[RunSpec], agent: Path, out: Path, say=print, min_effect: float = 0.05,
          require_effect: bool = False, warn=None) -> list[dict]:
    """One solo pass per configuration; UsageError (exit 2) when the victim cannot hold its
    period alone or its DEADLINE runtime is below its need. The first configuration's pass
    is repeated for the noise floor against `min_effect`: too few repetitions to resolve it
    is said by `warn`, or refused (exit 2) with `require_effect`. Returns what each pass
    measured (the first configuration's record holds the noise floor)."""
    warn = warn or say
    record = []
    seen = set()
    for r in runs:
        if r.configuration in seen or r.scenario != "solo" or not isinstance(r.plan.victim.body, PERIODIC):
            continue
        seen.add(r.configuration)
        v = r.plan.victim
        where = "" if r.configuration == "default" else f" in configuration '{r.configuration}'"
        jobs = solo_pass(r.plan, out / "feasibility" / r.configuration, agent, f"the solo feasibility run{where}",
                         "or run with --skip-feasibility")
        deadline = v.deadline_ns or v.period_ns
        median, share = float(jobs.exec_ns.median()), float(jobs.exec_ns.median()) / deadline
        missed = float(jobs.missed.mean())
        cpu_max = float(jobs.cpu_time_ns.max())
        record.append({"configuration": r.configuration, "jobs": len(jobs), "median_exec_ns": median,
                       "share_of_deadline": share, "missed": missed, "max_cpu_time_ns": cpu_max})
        say(f"solo feasibility{where}: median job {median / 1e6:.3g} ms = {share:.0%} of the deadline, {missed:.0%} missed")
        runtime = getattr(v.sched, "runtime_ns", None)
        if runtime is not None and cpu_max > runtime:
            need = math.ceil(cpu_max * RUNTIME_MARGIN / 1e5) / 10
            raise UsageError(f"victim.reservation.runtime{where}: {runtime / 1e6:g} ms is below the victim's solo need "
                             f"(up to {cpu_max / 1e6:.3g} ms of CPU per job over {len(jobs)} jobs): every job would be "
                             f"throttled; set runtime = \"{need:g}ms\" (the observed maximum + 10 %, seed 000 §7.2.1), "
                             f"or {_suggest_work(r.plan, runtime / (cpu_max * RUNTIME_MARGIN))}")
        if share > MAX_SHARE or missed > MAX_MISSES:
            period = math.ceil(median / 0.3 / 1e6)
            raise UsageError(f"victim.period{where}: the victim cannot hold its period alone (median job "
                             f"{median / 1e6:.3g} ms against a {deadline / 1e6:g} ms deadline, {missed:.0%} of "
                             f"{len(jobs)} jobs missed); lengthen the period to about \"{period}ms\", or "
                             f"{_suggest_work(r.plan, 0.3 / share)}; --skip-feasibility runs it anyway")
        # Only a feasible victim is worth repeating (a throttled one would take minutes).
        if len(record) == 1:
            medians = [median] + [float(solo_pass(r.plan, out / "feasibility" / f"{r.configuration}-noise-{k}", agent,
                                                  f"the solo feasibility run{where}", "or run with --skip-feasibility"
                                                  ).exec_ns.median()) for k in range(1, NOISE_PASSES)]
            reps = 1 + max((x.repetition for x in runs if x.configuration == r.configuration and x.scenario == "solo"), default=0)
            noise = noise_floor(medians, min_effect, reps, len(jobs))
            record[0]["noise_floor"] = noise
            if noise["repetitions_needed"] <= reps:
                say(noise_text(noise))
            elif require_effect:
                raise UsageError(f"repetitions: {noise_text(noise)}; set repetitions = {noise['repetitions_needed']}, "
                                 f"raise min_effect, or quiet the machine (--require-effect refuses this)")
            else:
                warn(f"{noise_text(noise)}: too few to resolve it; set repetitions = {noise['repetitions_needed']} or "
                     f"raise min_effect")
    return record
