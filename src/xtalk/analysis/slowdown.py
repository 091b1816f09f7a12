"""Slowdown against `solo` with bootstrap confidence intervals: the one slowdown of xtalk.

:func:`slowdown` is what every table calls, per scenario and metric: the ratio of a
statistic over every job against the reference, and its CI from
:func:`xtalk.analysis.stats.ratio_ci` over the runs (runs, then jobs within them, resampled,
the interval widened for few runs). At 10^7 jobs it resamples a per-run subsample and moves
the interval to the full-data ratio. An experiment's cells (:mod:`xtalk.analysis.cells`, what
`xtalk run`, `xtalk summary`, `xtalk report` and `xtalk query` read) and campaign cells call
:func:`slowdown` on the groups they choose.

`stats.ratio_ci` on one pooled sample is the job-level (i.i.d.) counterpart and
`stats.cluster_ratio_ci` the percentile cluster bootstrap for experiments with many runs (five
or more).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

import numpy as np

from .stats import BootstrapCI, ratio_ci, ratio_cis

__all__ = ["SOLO", "BootstrapCI", "ratio_ci", "slowdown", "slowdowns"]

SOLO = "solo"
#: Smallest per-run subsample when the bootstrap is capped (see :func:`slowdown`).
MIN_RUN_SAMPLE = 200


def _run_sample(v: np.ndarray, cap: int, rng: np.random.Generator) -> np.ndarray:
    """At most ``cap`` values of one run for the bootstrap, its maximum always included, as
    floats. Integer values (a view of the job table's column) are picked as they are and only
    the picks converted: the float's first maximum is the integer's where that maximum lies
    within (−2^53, 2^53] (every smaller value then converts below it)."""
    v = np.asarray(v)
    if v.dtype.kind not in "iu":
        v = np.asarray(v, dtype=float)
    if v.size <= cap:
        return v.astype(float, copy=False)
    top = int(np.argmax(v))
    if v.dtype.kind in "iu" and not -2**53 < int(v[top]) <= 2**53:
        v = v.astype(float)
        top = int(np.argmax(v))
    pick = rng.choice(v.size - 1, size=cap - 1, replace=False)
    pick = pick + (pick >= top)  # skip the maximum, then add it back once
    return np.concatenate([[v[top]], v[pick]]).astype(float, copy=False)


def slowdown(scenario: Sequence[np.ndarray], reference: Sequence[np.ndarray], stat: str = "median", *,
             n_boot: int = 2000, level: float = 0.95, seed: int = 0, max_jobs: int | None = None,
             rng: np.random.Generator | None = None, point: float | None = None) -> BootstrapCI:
    """Slowdown ``stat(scenario) / stat(reference)`` ("median" or "max") of per-run samples,
    with its CI (runs then jobs resampled, widened for few runs; ``stats.ratio_ci``).

    ``max_jobs``: when one side has more jobs, the CI is computed on a per-run subsample (at
    least ``MIN_RUN_SAMPLE`` jobs a run, each run's slowest job kept, so the ratio of maxima
    is unchanged; drawn with ``rng``) and moved to the full-data ratio on the log scale;
    ``subsampled`` says so. Subsampling only widens the within-run part of the interval.
    ``point``: the full-data ratio when the caller already has it (the report computes it
    from its sorted cache of 10^7 jobs); otherwise the ratio of the pooled runs.
    """
    return slowdowns(scenario, reference, (stat,), n_boot=n_boot, level=level, seed=seed, max_jobs=max_jobs, rng=rng,
                     points=None if point is None else {stat: point})[stat]


def slowdowns(scenario: Sequence[np.ndarray], reference: Sequence[np.ndarray], stats: Sequence[str] = ("median", "max"),
              *, n_boot: int = 2000, level: float = 0.95, seed: int = 0, max_jobs: int | None = None,
              rng: np.random.Generator | None = None, points: dict[str, float] | None = None) -> dict[str, BootstrapCI]:
    """:func:`slowdown` of each of ``stats``, the same intervals as a call each: the per-run
    subsample and the bootstrap replicates do not depend on the statistic, so they are drawn
    once (``points``: each statistic's full-data ratio, when the caller has it)."""
    points = points or {}
    stats = tuple(dict.fromkeys(stats))
    total = max(sum(len(v) for v in scenario), sum(len(v) for v in reference))
    sub = max_jobs is not None and total > max_jobs
    if not sub:
        cis = ratio_cis(list(scenario), list(reference), stats, n_boot=n_boot, level=level, seed=seed)
        return {s: ci if points.get(s) is None else replace(ci, estimate=points[s]) for s, ci in cis.items()}
    rng = np.random.default_rng(seed) if rng is None else rng
    k = max(1, len(scenario), len(reference))
    cap = max(MIN_RUN_SAMPLE, max_jobs // k)
    a = [_run_sample(v, cap, rng) for v in scenario]
    b = [_run_sample(v, cap, rng) for v in reference]
    cis = ratio_cis(a, b, stats, n_boot=n_boot, level=level, seed=seed)
    out = {}
    for stat, ci in cis.items():
        f = np.median if stat == "median" else np.max
        p = points[stat] if points.get(stat) is not None else \
            float(f(np.concatenate(scenario).astype(float, copy=False)) / f(np.concatenate(reference).astype(float, copy=False)))
        lo, hi = ci.low, ci.high
        if ci.estimate > 0:
            lo, hi = lo * p / ci.estimate, hi * p / ci.estimate
        out[stat] = replace(ci, estimate=p, low=lo, high=hi, subsampled=True,
                            n=(sum(len(v) for v in scenario), sum(len(v) for v in reference)))
    return out

