"""Confirmation: the search's best candidates again, with interleaved repetitions, against
`solo` and against stress-ng's stressors, each with a CI (analysis/slowdown.py `ratio_ci`).

The finalists, every stressor of `STRESSORS` (one copy per enemy CPU, as `external` enemies,
as bench/potency.py runs them) and solo share one experiment, so every comparison is between
runs interleaved on the same machine. The best stressor is the one with the highest point
estimate against solo (picking it from the same runs favours stress-ng, never the search).
Without stress-ng on the PATH, the finalists are confirmed against solo only and the result
says so.
"""

from __future__ import annotations

import math
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from ..analysis.slowdown import SOLO, ratio_ci
from ..analysis.stats import BootstrapCI
from .runs import RoundResult, Victim, experiment_text, run_round

#: stress-ng's memory, cache, bus-lock and CPU stressors (bench/potency.py compares with the
#: same). lockbus is stress-ng's peer of the buslock enemy: leaving it out would let a bus-lock
#: finalist beat stress-ng on a channel stress-ng loads as hard.
STRESSORS = ("stream", "cache", "memrate", "vm", "memcpy", "l1cache", "matrix", "cpu", "lockbus")
#: The prefix of a stressor's scenario.
SNG = "sng-"


def stress_ng() -> str | None:
    """stress-ng's path, or None when it is not installed."""
    return shutil.which("stress-ng")


def stressor_scenarios(cpus: list[int], names: tuple[str, ...] = STRESSORS) -> dict[str, list[dict]]:
    """One scenario per stressor: one instance on each of `cpus` (affinity is inherited
    through exec, so each copy stays on its CPU)."""
    return {f"{SNG}{s}": [{"kind": "external", "argv": ["stress-ng", f"--{s}", "1"], "cpus": list(cpus), "per_cpu": True}]
            for s in names}


def ratio(scenario: list[np.ndarray], reference: list[np.ndarray], stat: str, n_boot: int = 2000) -> BootstrapCI:
    """`stat(scenario) / stat(reference)` with its 95 % CI: over runs (runs, then jobs
    resampled) for median and max, over the pooled jobs (BCa) for a percentile, which the
    per-run bootstrap does not offer."""
    if stat in ("median", "max"):
        return ratio_ci(scenario, reference, stat, n_boot=n_boot)
    return ratio_ci(np.concatenate(scenario), np.concatenate(reference), stat, n_boot=n_boot)


def ci_dict(ci: BootstrapCI | None) -> dict | None:
    if ci is None or not math.isfinite(ci.estimate):
        return None
    return {"estimate": round(ci.estimate, 4), "low": round(ci.low, 4), "high": round(ci.high, 4), "level": ci.level}


@dataclass
class Confirmation:
    """What the confirmation measured: per scenario its slowdown against solo; the best
    stressor; each finalist against that stressor."""

    vs_solo: dict[str, BootstrapCI]
    best_stressor: str | None
    vs_stressor: dict[str, BootstrapCI]
    stress_ng: str  # "present" or why it was left out
    result: RoundResult
    repetitions: int


def confirm(victim: Victim, finalists: dict[str, list[dict]], enemy_cpus: list[int], repetitions: int, stat: str,
            metric: str, work: Path, seed: int, with_stress_ng: bool = True,
            progress: Callable[[int, int, str], None] | None = None, deadline: float | None = None) -> Confirmation:
    """Run the finalists (name -> enemy tables), the stressors and solo interleaved,
    `repetitions` runs each, and compare."""
    from .runs import CONFIRM_RUN_S

    scen = dict(finalists)
    if not with_stress_ng:
        why = "left out (--no-stress-ng)"
    elif stress_ng() is None:
        why = "absent (stress-ng is not on the PATH): the finalists are compared with solo only"
    else:
        why = "present"
        scen.update(stressor_scenarios(enemy_cpus))
    text = experiment_text("worst-confirm", victim, scen, repetitions, seed, CONFIRM_RUN_S,
                           "xtalk worst: finalists and stress-ng stressors, interleaved")
    res = run_round(text, work, "confirm", metric, progress, deadline, min_repetitions=2)
    repetitions = min(repetitions, min((len(v) for v in res.samples.values()), default=0))
    solo = res.samples.get(SOLO, [])
    vs_solo = {s: ratio(v, solo, stat) for s, v in res.samples.items() if s != SOLO and solo}
    sng = {s: c for s, c in vs_solo.items() if s.startswith(SNG) and math.isfinite(c.estimate)}
    best = max(sng, key=lambda s: sng[s].estimate) if sng else None
    vs_stressor = {s: ratio(res.samples[s], res.samples[best], stat) for s in finalists if best and s in res.samples}
    return Confirmation(vs_solo, best, vs_stressor, why, res, repetitions)
