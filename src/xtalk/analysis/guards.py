"""Guards on a result: what makes a number in the summary untrustworthy, said where the
number is shown (terminal table, summary.md/json, the HTML report), with what to change.

Each guard reads the summary table (one row per configuration × scenario, from
analysis.cells.summarize) and the victim of each configuration's plan. A guard that fires
does not hide the number: it says why the number should not be signed as it stands.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from enum import Enum
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # tables are only passed through: `xtalk run` needs the thresholds before pandas
    import pandas as pd

from . import words as vd

#: Solo is overloaded when its median job takes more than this share of the deadline:
#: slowdowns then compare backlogs.
OVERLOAD_SHARE = 0.9
#: A reference whose longest job takes more than this many times its median job has a tail
#: that is not the victim's work (the machine delayed it, or the hypervisor stole its CPU).
TAIL_FACTOR = 5.0
#: The smallest effect worth resolving when the experiment does not say (its `min_effect`).
MIN_EFFECT = vd.MIN_EFFECT
#: Fewer runs per side than this: a max-slowdown is the ratio of two extremes of few runs.
#: With n runs a next run exceeds every maximum seen with probability 1/(n + 1); the
#: statistic carries a 95 % statement (the level of the CIs) from 19 runs on.
MIN_RUNS_FOR_MAX = 19
#: Faster under interference beyond this (CI upper end below 1 − this).
FASTER = 0.02
#: An enemy that reached less than this share of its rate alone is much weaker than asked.
ENEMY_SHARE = 0.5


class Kind(str, Enum):
    """The guards, as stable names for automation (summary.json)."""

    OVERLOADED_SOLO = "overloaded_solo"
    MISSES_SOLO = "misses_solo"
    TAIL_SOLO = "tail_solo"
    DISTURBED_REFERENCE = "disturbed_reference"
    DEADLINE_RUNTIME_BELOW_NEED = "deadline_runtime_below_need"
    FASTER_UNDER_INTERFERENCE = "faster_under_interference"
    CI_TOO_WIDE = "ci_too_wide"
    TOO_FEW_RUNS_FOR_MAX = "too_few_runs_for_max"
    ENEMY_BELOW_ALONE_RATE = "enemy_below_alone_rate"


@dataclass(frozen=True)
class Guard:
    """One warning about one row of the summary: what is wrong and what to change."""

    kind: Kind
    configuration: str
    scenario: str
    message: str

    def to_dict(self) -> dict:
        return {**asdict(self), "kind": self.kind.value}

    def line(self) -> str:
        where = self.scenario if self.configuration == "default" else f"{self.configuration} / {self.scenario}"
        return f"{where}: {self.message}"


def _ms(ns: float) -> str:
    return f"{ns / 1e6:.3g} ms"


def concluded(lo: float, hi: float, effect: float = MIN_EFFECT, floor: float = math.nan) -> bool:
    """Whether a ratio CI [lo, hi] has concluded, by the one rule
    (:func:`xtalk.analysis.verdict.interference`, which every guard, the end-of-run line, the
    summary, the report's words and the campaign maps use): it excludes 1 and the noise
    ``floor`` (an effect, either way), or lies within 1 ± max(``effect``, ``floor``) (no
    effect of that size). A missing CI concludes nothing (and is not this rule's)."""
    return vd.interference(lo, hi, floor, effect) in vd.CONCLUDED


def repetitions_to_conclude(runs: int, lo: float, hi: float, effect: float = MIN_EFFECT) -> int:
    """Repetitions per side after which a CI like [lo, hi] from ``runs`` runs would lie
    within 1 ± ``effect`` (its half-widths shrink as 1/√runs): runs·(d/effect)², d the
    farthest end from 1."""
    d = max(hi - 1, 1 - lo)
    return max(int(runs) + 1, math.ceil(max(int(runs), 1) * (d / effect) ** 2))


#: Two-sided 95 % normal quantile.
Z95 = 1.96


def repetitions_needed(spread: float, effect: float) -> int:
    """Repetitions per scenario for a slowdown of 1 + `effect` to stand out of a run-to-run
    relative spread `spread` (the coefficient of variation of the solo median): the ratio
    of two means of n runs each has a relative standard error of spread·√(2/n), and its
    95 % interval excludes 1 when Z95·spread·√(2/n) < effect. At least 2."""
    return max(2, math.ceil(2 * (Z95 * spread / effect) ** 2))


def more_runs(runs: int, lo: float, hi: float, effect: float, spread: float | None = None) -> str:
    """What would conclude an unconcluded CI [lo, hi] of ``runs`` runs per side: the
    repetitions the solo runs' spread asks for (:func:`repetitions_needed`) where it is
    known, or the word that the effect itself varies when the spread already allows fewer
    runs than were made; from the CI's own width (:func:`repetitions_to_conclude`) without it."""
    if spread is not None and spread == spread:
        need = repetitions_needed(spread, effect)
        if need > runs:
            return f"set repetitions = {need}"
        return ("the CI is wider than the solo spread explains (the enemies' effect varies from run to run): "
                "add repetitions")
    return f"about {repetitions_to_conclude(runs, lo, hi, effect)} repetitions (now {runs}) would narrow it"


def _is_command(victim: dict) -> bool:
    return ((victim.get("body") or {}).get("kind")) == "command"


def _lighten(victim: dict) -> str:
    """What to change to give the victim more slack: a command's work is its own."""
    if _is_command(victim):
        return "lengthen the period or give the command less work per job"
    return "lower the work (victim.utilization = \"30%\") or lengthen the period"


def reference_trouble(jobs: int, misses: int, serious: int, median_exec_ms: float, max_exec_ms: float) -> str | None:
    """Why a reference (solo, or an application alone) cannot be taken at face value, or
    None: it missed deadlines, had serious misses, or had a job far longer than its median
    (TAIL_FACTOR: the machine delayed it or the hypervisor stole its CPU). The report's ε
    and slowdown lines against it say so with these words."""
    parts = []
    if misses:
        parts.append(f"{misses} deadline miss{'es' if misses != 1 else ''} in {jobs} jobs"
                     + (f" ({serious} serious)" if serious else ""))
    elif serious:
        parts.append(f"{serious} serious miss{'es' if serious != 1 else ''} in {jobs} jobs")
    if median_exec_ms == median_exec_ms and max_exec_ms == max_exec_ms and median_exec_ms > 0 \
            and max_exec_ms > TAIL_FACTOR * median_exec_ms:
        parts.append(f"a {max_exec_ms:.3g} ms job against a {median_exec_ms:.3g} ms median")
    return ", ".join(parts) or None


def _serious(row) -> int:
    v = getattr(row, "serious_misses", 0)
    return int(v) if v == v else 0


def _solo_guards(row, victim: dict, tasks: bool = False) -> list[Guard]:
    """The reference's own guards. ``tasks``: a task set, whose misses are judged per task
    (:func:`task_guards`), not pooled over tasks designed to differ."""
    out = []
    period = victim.get("period_ns")
    deadline = victim.get("deadline_ns") or period
    miss = row.deadline_misses / row.jobs if row.jobs else 0.0
    serious = _serious(row)
    if not tasks and deadline and row.median_exec_ms * 1e6 > OVERLOAD_SHARE * deadline:
        out.append(Guard(Kind.OVERLOADED_SOLO, row.configuration, row.scenario,
                         f"the victim is overloaded alone: median job {row.median_exec_ms:.3g} ms against a {_ms(deadline)} "
                         f"deadline, {miss:.0%} of jobs missed; every slowdown then compares backlogs. {_lighten(victim).capitalize()}"))
    elif not tasks and (row.deadline_misses or serious):
        share = f"{row.median_exec_ms * 1e6 / deadline:.0%} of the deadline" if deadline else f"{row.median_exec_ms:.3g} ms"
        out.append(Guard(Kind.MISSES_SOLO, row.configuration, row.scenario,
                         f"the reference misses {int(row.deadline_misses)} of {int(row.jobs)} deadlines ({miss:.1%}; "
                         f"{serious} serious) alone although its median job takes {share}: wake-up latency, preemption by "
                         f"other work or the machine; misses, slowdowns and ε against it are not the enemies' alone. Give "
                         f"it a real-time policy, quiet the machine, or {_lighten(victim)}"))
    if not tasks and row.median_exec_ms == row.median_exec_ms and row.median_exec_ms > 0 \
            and row.max_exec_ms > TAIL_FACTOR * row.median_exec_ms:
        out.append(Guard(Kind.TAIL_SOLO, row.configuration, row.scenario,
                         f"the reference's longest job took {row.max_exec_ms:.3g} ms against a {row.median_exec_ms:.3g} ms "
                         f"median (over {TAIL_FACTOR:g}×): the machine delayed it or the hypervisor stole its CPU, and a "
                         f"maximum or ε against it is inflated by that; quiet the machine or pin the victim to a CPU "
                         f"nothing else uses, and read max slowdowns and relative ε with this in mind"))
    sched = victim.get("sched") or {}
    if sched.get("policy") == "deadline" and row.max_exec_ms * 1e6 > sched.get("runtime_ns", math.inf):
        need = row.max_exec_ms * 1.1
        out.append(Guard(Kind.DEADLINE_RUNTIME_BELOW_NEED, row.configuration, row.scenario,
                         f"SCHED_DEADLINE runtime {_ms(sched['runtime_ns'])} is below the victim's solo need (longest job "
                         f"{row.max_exec_ms:.3g} ms): jobs are throttled, not measured. Set the reservation's runtime to the "
                         f"observed maximum plus a margin (seed 000 §7.2.1), e.g. \"{need:.3g}ms\", or lower the work"))
    return out


def task_guards(tasks: pd.DataFrame, reference: str = "solo") -> list[Guard]:
    """Per task of a task set alone (report/victim_kinds.tasks_of's rows): a task that
    misses deadlines alone although its planned wcet fits its deadline (a task planned to
    overrun, wcet above the deadline, is expected to miss and fires nothing)."""
    out = []
    for t in tasks.itertuples():
        if t.scenario != reference or not t.missed:
            continue
        if t.wcet_ms == t.wcet_ms and t.deadline_ms == t.deadline_ms and t.wcet_ms > t.deadline_ms:
            continue
        out.append(Guard(Kind.MISSES_SOLO, t.configuration, t.scenario,
                         f"task {t.name} misses {int(t.missed)} of {int(t.jobs)} deadlines alone ({t.dmr:.1%}) although "
                         f"its planned wcet {t.wcet_ms:.3g} ms fits its {t.deadline_ms:.3g} ms deadline: wake-up latency, "
                         f"preemption by other work or the machine; its misses under interference are not the enemies' "
                         f"alone. Give it a higher priority or a reservation, or quiet the machine"))
    return out


def _scenario_guards(row, effect: float = MIN_EFFECT, spread: float | None = None,
                     floor: float = math.nan) -> list[Guard]:
    out = []
    med, lo, hi = row.slowdown_median, row.slowdown_median_lo, row.slowdown_median_hi
    if not all(isinstance(v, (int, float)) and v == v for v in (med, lo, hi)):
        return out
    if hi < 1 - FASTER:
        out.append(Guard(Kind.FASTER_UNDER_INTERFERENCE, row.configuration, row.scenario,
                         f"the victim ran faster beside the enemies ({med:.2f}× [{lo:.2f}, {hi:.2f}]): a co-runner effect "
                         f"(CPU frequency, SMT, the hypervisor's scheduling), not isolation; fix the CPU frequency or "
                         f"compare on bare metal before reading the other slowdowns"))
    elif not concluded(lo, hi, effect, floor):
        runs = max(int(row.runs_ok), 1)
        band = max(effect, 0.0 if floor != floor else floor)
        if vd.interference(lo, hi, floor, effect) == vd.TOO_NOISY:
            what = f"is judged against a noise floor of ±{floor:.0%} (references differ by more than half)"
        elif lo <= 1 <= hi:
            what = f"holds 1 and is wider than ±{band:.0%}"
        else:
            what = f"reaches inside the noise floor ±{floor:.1%} and beyond ±{band:.0%}"
        out.append(Guard(Kind.CI_TOO_WIDE, row.configuration, row.scenario,
                         f"the median slowdown's CI [{lo:.2f}, {hi:.2f}] {what}: "
                         f"nothing is concluded at min_effect; {more_runs(runs, lo, hi, band, spread)}, raise "
                         f"min_effect, or quiet the machine"))
    if int(row.runs_ok) < MIN_RUNS_FOR_MAX:
        out.append(Guard(Kind.TOO_FEW_RUNS_FOR_MAX, row.configuration, row.scenario,
                         f"the max slowdown comes from {int(row.runs_ok)} run(s) per side: with n runs a next run "
                         f"exceeds every maximum seen with probability 1/(n + 1), so the ratio of two maxima of so few "
                         f"runs is noise and is not shown; it takes {MIN_RUNS_FOR_MAX} repetitions"))
    return out


def _enemy_guard(configuration: str, scenario: str, enemies: list[dict]) -> list[Guard]:
    """Enemies of one scenario that reached less than ENEMY_SHARE of their rate alone."""
    from ..units import rate_text

    weak = sorted((e for e in enemies if e.get("alone") and e.get("achieved") is not None
                   and e["achieved"] < ENEMY_SHARE * e["alone"]), key=lambda e: e["achieved"] / e["alone"])
    if not weak:
        return []
    parts = ", ".join(f"{e['enemy']} {e['achieved'] / e['alone']:.0%} ({rate_text(e['achieved'], e['unit'])} against "
                      f"{rate_text(e['alone'], e['unit'])} alone)" for e in weak[:4])
    more = f" and {len(weak) - 4} more" if len(weak) > 4 else ""
    return [Guard(Kind.ENEMY_BELOW_ALONE_RATE, configuration, scenario,
                  f"{len(weak)} of {len(enemies)} enemies reached less than {ENEMY_SHARE:.0%} of their rate alone: {parts}{more}; "
                  f"they share a CPU with the victim or with each other, or a real-time victim starves them, so the "
                  f"scenario is milder than its name. Give each enemy a CPU of its own (cpus = \"others\", no more "
                  f"enemies than free CPUs) or read the slowdown against the rates they reached")]


def check(table: pd.DataFrame, victims: dict[str, dict], reference: str = "solo",
          enemies: dict[tuple[str, str], list[dict]] | None = None, min_effect: float = MIN_EFFECT,
          tasks: pd.DataFrame | None = None, spreads: dict[str, float] | None = None,
          floor: float = math.nan) -> list[Guard]:
    """Every guard that fires on `table` (analysis.cells.summarize's rows); `victims` maps a
    configuration to its plan's victim (period_ns, deadline_ns, sched, body); `enemies` maps
    (configuration, scenario) to its enemies' rates, each {enemy, unit, achieved (mean over
    the runs), alone (enemy_alone.py), or None when not measured}; `min_effect` the
    experiment's (:func:`concluded`), `spreads` each configuration's run-to-run spread of the
    solo median (:func:`more_runs`), `floor` the A/A noise floor of the median execution time
    where it was measured (the report's; NaN: none, :func:`concluded`); `tasks` a task set's per-task table, whose misses
    alone are judged per task. A reference (`reference`, or an `alone:` scenario) that is
    disturbed (:func:`reference_trouble`) also marks every other row of its configuration."""
    out: list[Guard] = []
    disturbed: dict[str, str] = {}
    for row in table.itertuples():
        if row.scenario == reference or str(row.scenario).startswith("alone:"):
            victim = victims.get(row.configuration, {})
            is_set = tasks is not None or ((victim.get("body") or {}).get("kind")) == "taskset"
            out += _solo_guards(row, victim, tasks=is_set)
            # A task set's pooled jobs mix tasks designed to differ: judged per task below.
            why = None if is_set else reference_trouble(int(row.jobs), int(row.deadline_misses), _serious(row),
                                                        row.median_exec_ms, row.max_exec_ms)
            if why:
                disturbed[row.configuration] = f"{row.scenario} ({why})"
    if tasks is not None:
        out += task_guards(tasks, reference)
        for g in out:
            if g.kind == Kind.MISSES_SOLO:
                disturbed.setdefault(g.configuration, f"{g.scenario} (a task misses alone)")
    for row in table.itertuples():
        if row.scenario == reference or str(row.scenario).startswith("alone:"):
            continue
        out += _scenario_guards(row, min_effect, (spreads or {}).get(row.configuration), floor)
        out += _enemy_guard(row.configuration, row.scenario, (enemies or {}).get((row.configuration, row.scenario), []))
        if row.configuration in disturbed:
            out.append(Guard(Kind.DISTURBED_REFERENCE, row.configuration, row.scenario,
                             f"slowdowns, misses and ε here are against a disturbed reference, {disturbed[row.configuration]}: "
                             f"they measure the enemies and whatever disturbed the reference together; fix the reference "
                             f"(its warning) and run again before signing them"))
    return out
