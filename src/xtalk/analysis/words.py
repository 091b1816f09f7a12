"""The words of every verdict xtalk prints, and the one rule for what a slowdown CI concludes.

Kept apart from :mod:`xtalk.analysis.verdict` (which re-exports all of it) so that what needs
only the words — the guards, the command line before a run — loads no numpy, pandas or scipy.
"""

from __future__ import annotations

import math
from typing import Mapping

#: The words, re-exported whole by :mod:`xtalk.analysis.verdict`.
__all__ = [
    'HOLDS', 'VIOLATED', 'INCONCLUSIVE', 'VERDICTS', 'REFERENCE', 'NO_EPSILON', 'NO_SOLO',
    'NO_JOBS', 'EPSILON_STATES', 'NO_CI', 'TOO_NOISY', 'SLOWED_DOWN', 'SPED_UP', 'WITHIN_NOISE',
    'INTERFERENCE', 'CONCLUDED', 'MIN_EFFECT', 'EPS_VIOLATED', 'SERIOUS_MISSES',
    'DEADLINE_MISSES', 'EPS_INCONCLUSIVE', 'EPS_HOLDS_SLOWED', 'EPS_HOLDS',
    'NOTHING_BEYOND_NOISE', 'OK', 'ABOVE_RTA', 'ABOVE_RTA_SUFFIX', 'LATENCY_HIGHER',
    'LATENCY_WITHIN_NOISE', 'NO_JOBS_STATUS', 'DISTURBED_SUFFIX', 'STATUSES', 'MET', 'MISSED',
    'GOALS', 'PROPAGATED', 'SLOWED', 'REFUSED', 'CONTAINED', 'CONTAINMENT', 'MISS_ALPHA',
    'NOT_EXERCISED', 'min_effect', 'interference',
]

#: ε verdicts (:func:`epsilon_verdict`), and an observation goal's (:func:`goal`).
HOLDS, VIOLATED, INCONCLUSIVE = "holds", "violated", "inconclusive"
VERDICTS = (HOLDS, VIOLATED, INCONCLUSIVE)
#: Why a campaign cell has no ε verdict: solo itself, no bound, no solo to be relative to, no job.
REFERENCE, NO_EPSILON, NO_SOLO, NO_JOBS = "reference", "no ε given", "no solo", "no jobs"
EPSILON_STATES = (REFERENCE, NO_EPSILON, NO_SOLO, NO_JOBS)

#: A slowdown CI against the noise floor (:func:`interference`).
NO_CI, TOO_NOISY, SLOWED_DOWN, SPED_UP, WITHIN_NOISE = (
    "no CI", "noise too high to judge", "slowed down", "sped up", "within noise")
INTERFERENCE = (NO_CI, TOO_NOISY, SLOWED_DOWN, SPED_UP, WITHIN_NOISE, INCONCLUSIVE)
#: The words of :func:`interference` that have concluded (an effect either way, or none of
#: the size worth resolving).
CONCLUDED = (SLOWED_DOWN, SPED_UP, WITHIN_NOISE)
#: The smallest effect worth resolving when an experiment does not say (its `min_effect`).
MIN_EFFECT = 0.05

#: A scenario's status (:func:`status`), worst first; then the kinds' own (task sets,
#: latency victims) and a campaign cell without jobs.
EPS_VIOLATED, SERIOUS_MISSES, DEADLINE_MISSES, EPS_INCONCLUSIVE = (
    "ε VIOLATED", "SERIOUS MISSES", "DEADLINE MISSES", "ε INCONCLUSIVE")
EPS_HOLDS_SLOWED, EPS_HOLDS, NOTHING_BEYOND_NOISE, OK = (
    "ε holds, slowed down", "ε holds", "no interference beyond noise", "ok")
ABOVE_RTA, ABOVE_RTA_SUFFIX = "ABOVE RTA BOUND", ", above RTA bound"
LATENCY_HIGHER, LATENCY_WITHIN_NOISE = "latency higher", "latency within noise"
NO_JOBS_STATUS = "NO JOBS"
#: Appended to a verdict or status measured against a disturbed reference (solo, or an
#: application alone, that missed deadlines or had a tail far above its median: guards.reference_trouble).
DISTURBED_SUFFIX = ", against a DISTURBED reference"
STATUSES = (EPS_VIOLATED, SERIOUS_MISSES, DEADLINE_MISSES, EPS_INCONCLUSIVE, EPS_HOLDS_SLOWED, SLOWED_DOWN,
            EPS_HOLDS, NOTHING_BEYOND_NOISE, OK, ABOVE_RTA, LATENCY_HIGHER, LATENCY_WITHIN_NOISE, NO_JOBS_STATUS)

#: An observation cost against its goal (intrusiveness.py, :func:`goal`).
MET, MISSED = "met", "missed"
GOALS = (MET, MISSED, INCONCLUSIVE)

#: Did a fault stay inside its partition (report/containment.py, :func:`containment`);
#: INCONCLUSIVE when the victim missed more than solo but too few jobs say whether by chance.
PROPAGATED, SLOWED, REFUSED, CONTAINED = "propagated", "slowed", "refused", "contained"
CONTAINMENT = (PROPAGATED, SLOWED, REFUSED, CONTAINED, INCONCLUSIVE)
#: The level of the one-sided exact test of a miss count against the reference's.
MISS_ALPHA = 0.05
#: The failure-propagation property of a configuration (analysis/propagation.py) is one of
#: VERDICTS, or this when no fault of a lower-criticality application was run beside a
#: higher-criticality one (nothing to check).
NOT_EXERCISED = "not exercised"



def _nan(v) -> bool:
    if v is None:
        return True
    try:
        return math.isnan(float(v))
    except (TypeError, ValueError):
        return False


def min_effect(experiment: Mapping | None) -> float:
    """An experiment document's `min_effect` (experiment.json's ``experiment`` table) as a
    fraction, MIN_EFFECT where it gives none or one that does not parse (the file was
    checked when the experiment ran)."""
    from ..units import fraction

    value = ((experiment or {}).get("experiment") or {}).get("min_effect")
    try:
        return fraction(value, "min_effect", high=10.0) if value is not None else MIN_EFFECT
    except (ValueError, TypeError):
        return MIN_EFFECT


def interference(lo: float, hi: float, floor: float = float("nan"), effect: float = MIN_EFFECT) -> str:
    """The one rule for what a slowdown (ratio) CI [lo, hi] concludes, every surface's: the
    guards (:func:`xtalk.analysis.guards.concluded`, the `ci_too_wide` warning, the end-of-run
    line), the report's and a campaign cell's interference word, the maps' known cells
    (results/campaign_maps.py). ``floor``: the A/A noise floor (± around 1, how far a ratio
    strays when nothing changed; NaN when not measured, read as 0); ``effect``: the
    experiment's `min_effect`.

    - no CI (either end NaN): NO_CI;
    - a floor above 0.5 (references differ by more than half): TOO_NOISY, nothing judged;
    - lo > 1 + floor: SLOWED_DOWN (the CI excludes 1 and the noise, however wide: [2.04, 2.73]
      is a slowdown); hi < 1 − floor: SPED_UP;
    - inside 1 ± max(floor, effect): WITHIN_NOISE (no effect as large as the smallest one
      worth resolving, nor one the noise could not hide): concluded too;
    - anything else (it holds 1, or the floor, and reaches beyond the band): INCONCLUSIVE.

    The first three words after NO_CI/TOO_NOISY are CONCLUDED.
    """
    if _nan(lo) or _nan(hi):
        return NO_CI
    f = 0.0 if _nan(floor) else float(floor)
    if f > 0.5:
        return TOO_NOISY
    if lo > 1 + f:
        return SLOWED_DOWN
    if hi < 1 - f:
        return SPED_UP
    band = max(f, 0.0 if _nan(effect) else float(effect))
    if lo >= 1 - band and hi <= 1 + band:
        return WITHIN_NOISE
    return INCONCLUSIVE
