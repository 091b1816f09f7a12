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

import pandas as pd

#: Solo is overloaded when its median job takes more than this share of the deadline, or when
#: more than this share of its jobs miss: slowdowns then compare backlogs.
OVERLOAD_SHARE = 0.9
OVERLOAD_MISSES = 0.05
#: A median slowdown CI wider than this (hi − lo) cannot tell 1.0 from a real effect.
WIDE_CI = 0.3
#: The width to aim for when saying how many runs would do.
TARGET_CI = 0.1
#: Fewer runs per side than this: a max-slowdown is the ratio of two noisy extremes.
MIN_RUNS_FOR_MAX = 5
#: Faster under interference beyond this (CI upper end below 1 − this).
FASTER = 0.02
#: An enemy that reached less than this share of its rate alone is much weaker than asked.
ENEMY_SHARE = 0.5


class Kind(str, Enum):
    """The guards, as stable names for automation (summary.json)."""

    OVERLOADED_SOLO = "overloaded_solo"
    MISSES_SOLO = "misses_solo"
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


def _solo_guards(row, victim: dict) -> list[Guard]:
    out = []
    period = victim.get("period_ns")
    deadline = victim.get("deadline_ns") or period
    miss = row.deadline_misses / row.jobs if row.jobs else 0.0
    if deadline and row.median_exec_ms * 1e6 > OVERLOAD_SHARE * deadline:
        out.append(Guard(Kind.OVERLOADED_SOLO, row.configuration, row.scenario,
                         f"the victim is overloaded alone: median job {row.median_exec_ms:.3g} ms against a {_ms(deadline)} "
                         f"deadline, {miss:.0%} of jobs missed; every slowdown then compares backlogs. Lower the work "
                         f"(victim.utilization = \"30%\") or lengthen the period"))
    elif deadline and miss > OVERLOAD_MISSES:
        out.append(Guard(Kind.MISSES_SOLO, row.configuration, row.scenario,
                         f"the victim misses {miss:.0%} of its deadlines alone although its median job takes "
                         f"{row.median_exec_ms * 1e6 / deadline:.0%} of the deadline: wake-up latency or preemption by "
                         f"other work; give it a real-time policy, quiet the machine, or read the misses under "
                         f"interference against these"))
    sched = victim.get("sched") or {}
    if sched.get("policy") == "deadline" and row.max_exec_ms * 1e6 > sched.get("runtime_ns", math.inf):
        need = row.max_exec_ms * 1.1
        out.append(Guard(Kind.DEADLINE_RUNTIME_BELOW_NEED, row.configuration, row.scenario,
                         f"SCHED_DEADLINE runtime {_ms(sched['runtime_ns'])} is below the victim's solo need (longest job "
                         f"{row.max_exec_ms:.3g} ms): jobs are throttled, not measured. Set the reservation's runtime to the "
                         f"observed maximum plus a margin (seed 000 §7.2.1), e.g. \"{need:.3g}ms\", or lower the work"))
    return out


def _scenario_guards(row) -> list[Guard]:
    out = []
    med, lo, hi = row.slowdown_median, row.slowdown_median_lo, row.slowdown_median_hi
    if not all(isinstance(v, (int, float)) and v == v for v in (med, lo, hi)):
        return out
    if hi < 1 - FASTER:
        out.append(Guard(Kind.FASTER_UNDER_INTERFERENCE, row.configuration, row.scenario,
                         f"the victim ran faster beside the enemies ({med:.2f}× [{lo:.2f}, {hi:.2f}]): a co-runner effect "
                         f"(CPU frequency, SMT, the hypervisor's scheduling), not isolation; fix the CPU frequency or "
                         f"compare on bare metal before reading the other slowdowns"))
    elif hi - lo > WIDE_CI:
        runs = max(int(row.runs_ok), 1)
        need = math.ceil(runs * ((hi - lo) / TARGET_CI) ** 2)
        out.append(Guard(Kind.CI_TOO_WIDE, row.configuration, row.scenario,
                         f"the median slowdown's CI [{lo:.2f}, {hi:.2f}] is too wide to conclude; about {need} repetitions "
                         f"(now {runs}) would narrow it to ±{TARGET_CI / 2:.0%}, or quiet the machine"))
    if int(row.runs_ok) < MIN_RUNS_FOR_MAX:
        out.append(Guard(Kind.TOO_FEW_RUNS_FOR_MAX, row.configuration, row.scenario,
                         f"the max slowdown comes from {int(row.runs_ok)} run(s) per side: the ratio of two extremes of few "
                         f"runs is noise, so it is not shown; run at least {MIN_RUNS_FOR_MAX} repetitions"))
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
          enemies: dict[tuple[str, str], list[dict]] | None = None) -> list[Guard]:
    """Every guard that fires on `table` (analysis.cells.summarize's rows); `victims` maps a
    configuration to its plan's victim (period_ns, deadline_ns, sched); `enemies` maps
    (configuration, scenario) to its enemies' rates, each {enemy, unit, achieved (mean over
    the runs), alone (enemy_alone.py), or None when not measured}."""
    out: list[Guard] = []
    for row in table.itertuples():
        if row.scenario == reference:
            out += _solo_guards(row, victims.get(row.configuration, {}))
        else:
            out += _scenario_guards(row)
            out += _enemy_guard(row.configuration, row.scenario, (enemies or {}).get((row.configuration, row.scenario), []))
    return out
