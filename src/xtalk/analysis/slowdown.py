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

from .stats import BootstrapCI, _per_run, ratio_ci, ratio_cis, runs_ratio_cis_many

__all__ = ["SOLO", "BootstrapCI", "ratio_ci", "slowdown", "slowdowns", "slowdowns_many"]

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
    return slowdowns_many([(scenario, reference)], stats, n_boot=n_boot, level=level, seed=seed, max_jobs=max_jobs,
                          rng=rng, points=[points])[0]


def slowdowns_many(pairs: Sequence[tuple[Sequence[np.ndarray], Sequence[np.ndarray]]],
                   stats: Sequence[str] = ("median", "max"), *, n_boot: int = 2000, level: float = 0.95, seed: int = 0,
                   max_jobs: int | None = None, rng: np.random.Generator | None = None,
                   points: Sequence[dict[str, float] | None] | None = None) -> list[dict[str, BootstrapCI]]:
    """:func:`slowdowns` of each (scenario, reference) pair (``points``: each pair's), the
    same intervals as a call each: pairs whose runs have the same sizes (a cell's execution
    and response times) share their bootstrap replicates (``stats.runs_ratio_cis_many``),
    which depend on the sizes and the seed alone."""
    stats = tuple(dict.fromkeys(stats))
    points = [p or {} for p in (points or [None] * len(pairs))]
    samples, subs = [], []
    for scenario, reference in pairs:
        total = max(sum(len(v) for v in scenario), sum(len(v) for v in reference))
        sub = max_jobs is not None and total > max_jobs
        if sub:
            draw = np.random.default_rng(seed) if rng is None else rng
            k = max(1, len(scenario), len(reference))
            cap = max(MIN_RUN_SAMPLE, max_jobs // k)
            samples.append(([_run_sample(v, cap, draw) for v in scenario], [_run_sample(v, cap, draw) for v in reference]))
        else:
            samples.append((list(scenario), list(reference)))
        subs.append(sub)
    per_run = [_per_run(a) and _per_run(b) for a, b in samples]
    if all(per_run):
        cis_all = runs_ratio_cis_many(samples, stats, n_boot=n_boot, level=level, seed=seed)
    else:
        cis_all = [ratio_cis(a, b, stats, n_boot=n_boot, level=level, seed=seed) for a, b in samples]
    out = []
    for (scenario, reference), sub, pts, cis in zip(pairs, subs, points, cis_all):
        if not sub:
            out.append({s: ci if pts.get(s) is None else replace(ci, estimate=pts[s]) for s, ci in cis.items()})
            continue
        res = {}
        for stat, ci in cis.items():
            f = np.median if stat == "median" else np.max
            p = pts[stat] if pts.get(stat) is not None else \
                float(f(np.concatenate(scenario).astype(float, copy=False)) / f(np.concatenate(reference).astype(float, copy=False)))
            lo, hi = ci.low, ci.high
            if ci.estimate > 0:
                lo, hi = lo * p / ci.estimate, hi * p / ci.estimate
            res[stat] = replace(ci, estimate=p, low=lo, high=hi, subsampled=True,
                                n=(sum(len(v) for v in scenario), sum(len(v) for v in reference)))
        out.append(res)
    return out
