"""Bootstrap confidence intervals, slowdown ratios, distribution-shift tests, A/A noise floor.

SPEC §8 asks for "statistics fit for noisy machines: interleaved scenarios, confidence
intervals, A/A checks"; seed 000 §8.2 judged its 50 repetitions per experiment "not enough
to have satisfactory distribution" while reporting means over steps and repetitions. Every
estimate here therefore comes with an interval, and every comparison with an effect size,
not only a p-value.

Speed: quantile statistics (median, pNN, max, min) are bootstrapped *without* resampling the
data. The k-th order statistic of a bootstrap resample of sorted data x is x[ceil(n·U_(k)) − 1]
where U_(k) ~ Beta(k, n − k + 1) is the k-th order statistic of n uniforms (the map
u ↦ x[ceil(n·u) − 1] is monotone, so it carries order statistics across). The next order
statistic is U_(k+1) = U_(k) + (1 − U_(k))·Beta(1, n − k). Drawing n_boot pairs of Betas gives
the exact bootstrap distribution in O(n_boot) after one sort, so 10^5 samples cost ~ms.
Other statistics (mean, callables) are resampled in bounded-memory chunks.
"""

from __future__ import annotations

import warnings
from dataclasses import asdict, dataclass
from typing import Callable, Sequence, Union

import numpy as np
import pandas as pd
from scipy import special, stats

Statistic = Union[str, Callable[..., np.ndarray]]
SeedLike = Union[None, int, np.random.Generator]

# Memory cap for generic resampling: number of float64 cells per chunk (~40 MB).
_CHUNK_CELLS = 5_000_000


# --------------------------------------------------------------------------- helpers


def _rng(seed: SeedLike) -> np.random.Generator:
    return seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)


def _clean(x, name: str = "sample") -> np.ndarray:
    arr = np.asarray(x, dtype=float).ravel()
    arr = arr[np.isfinite(arr)]
    if arr.size < 2:
        raise ValueError(f"{name}: need at least 2 finite values, got {arr.size}")
    return arr


def _quantile_level(statistic: Statistic) -> float | None:
    """Quantile level q in [0, 1] for order-statistic names, None for other statistics.

    Accepted names: 'median', 'max', 'min', 'pNN' (e.g. 'p99', 'p99.9').
    """
    if not isinstance(statistic, str):
        return None
    s = statistic.lower()
    if s == "median":
        return 0.5
    if s == "max":
        return 1.0
    if s == "min":
        return 0.0
    if s.startswith("p"):
        try:
            q = float(s[1:]) / 100.0
        except ValueError:
            q = -1.0
        if 0.0 <= q <= 1.0:
            return q
    if s == "mean":
        return None
    raise ValueError(
        f"statistic: unknown name {statistic!r} (use 'median', 'mean', 'max', 'min', 'pNN' or a callable)"
    )


def statistic_value(x, statistic: Statistic = "median") -> float:
    """Point value of ``statistic`` on sample ``x`` (same conventions as the bootstrap)."""
    arr = _clean(x)
    q = _quantile_level(statistic)
    if q is not None:
        return float(np.quantile(arr, q))
    if statistic == "mean":
        return float(arr.mean())
    return float(statistic(arr, axis=-1))


def _boot_quantile(sorted_x: np.ndarray, q: float, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """Exact bootstrap draws of np.quantile(x, q) (linear interpolation) without resampling."""
    n = sorted_x.size
    h = (n - 1) * q
    lo = int(np.floor(h))
    g = h - lo
    k = lo + 1  # 1-based order statistic
    u_k = rng.beta(k, n - k + 1, size=n_boot)
    j_k = np.clip(np.ceil(n * u_k).astype(np.int64) - 1, 0, n - 1)
    out = sorted_x[j_k]
    if g > 0 and k < n:
        u_k1 = u_k + (1.0 - u_k) * rng.beta(1, n - k, size=n_boot)
        j_k1 = np.clip(np.ceil(n * u_k1).astype(np.int64) - 1, 0, n - 1)
        out = out + g * (sorted_x[j_k1] - out)
    return out


def _jack_quantile(sorted_x: np.ndarray, q: float) -> np.ndarray:
    """Leave-one-out values of np.quantile(x, q) for every left-out point, in O(n)."""
    n = sorted_x.size
    h = (n - 2) * q
    lo = int(np.floor(h))
    g = h - lo
    i = np.arange(n)

    def pick(m: int) -> np.ndarray:
        # Element m of x with x[i] removed: x[m] if m < i else x[m + 1].
        m = min(m, n - 2)
        return np.where(m < i, sorted_x[m], sorted_x[min(m + 1, n - 1)])

    v = pick(lo)
    if g > 0:
        v = v + g * (pick(lo + 1) - v)
    return v


def _boot_generic(x: np.ndarray, func: Callable, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    n = x.size
    rows = max(1, _CHUNK_CELLS // n)
    out = np.empty(n_boot)
    done = 0
    while done < n_boot:
        r = min(rows, n_boot - done)
        idx = rng.integers(0, n, size=(r, n))
        out[done : done + r] = func(x[idx], axis=1)
        done += r
    return out


def _jack_generic(x: np.ndarray, func: Callable, max_groups: int = 1000) -> np.ndarray:
    """Leave-one-out (or delete-a-group when n > max_groups) jackknife values.

    The grouped version is an approximation used only for the BCa acceleration constant,
    which is a small correction; it keeps callables on 10^5 samples tractable.
    """
    n = x.size
    if n <= max_groups:
        mask = ~np.eye(n, dtype=bool)
        return np.array([func(x[mask[i]], axis=-1) for i in range(n)])
    groups = np.array_split(np.arange(n), max_groups)
    keep = np.ones(n, dtype=bool)
    vals = []
    for g in groups:
        keep[g] = False
        vals.append(func(x[keep], axis=-1))
        keep[g] = True
    return np.asarray(vals, dtype=float)


def _is_sorted(x: np.ndarray) -> bool:
    """Whether ``x`` is in increasing order (O(n); numpy sorts a sorted array as slowly as any)."""
    return x.size < 2 or bool(np.all(x[1:] >= x[:-1]))


def _draws_and_jack(x: np.ndarray, statistic: Statistic, n_boot: int, rng, need_jack: bool, est: float | None = None):
    """(estimate, bootstrap draws, jackknife values or None) for one sample; ``est``: the
    estimate of a quantile statistic, ``x`` then sorted, as the caller computed it."""
    q = _quantile_level(statistic)
    if q is not None:
        if est is not None:
            xs = x
        else:
            xs = x if _is_sorted(x) else np.sort(x)  # a sorted sample (the report's cache) is not sorted again
            est = float(np.quantile(xs, q))
        draws = _boot_quantile(xs, q, n_boot, rng)
        jack = _jack_quantile(xs, q) if need_jack else None
        return est, draws, jack
    if statistic == "mean":
        n = x.size
        est = float(x.mean())
        draws = _boot_generic(x, np.mean, n_boot, rng)
        jack = (n * est - x) / (n - 1) if need_jack else None
        return est, draws, jack
    est = float(statistic(x, axis=-1))
    draws = _boot_generic(x, statistic, n_boot, rng)
    jack = _jack_generic(x, statistic) if need_jack else None
    return est, draws, jack


def _influence_terms(jack: np.ndarray) -> np.ndarray:
    """Per-observation influence / n from jackknife values (Efron & Tibshirani eq. 14.15)."""
    n = jack.size
    return (n - 1) * (jack.mean() - jack) / n


def _acceleration(*influence: np.ndarray) -> float:
    u = np.concatenate(influence)
    den = 6.0 * np.sum(u**2) ** 1.5
    return float(np.sum(u**3) / den) if den > 0 else 0.0


def _interval(draws: np.ndarray, est: float, level: float, method: str, accel: float) -> tuple[float, float, str]:
    alpha = (1.0 - level) / 2.0
    draws = draws[np.isfinite(draws)]
    if method == "bca":
        # Mid-rank bias correction: quantile bootstraps are discrete and tie with the estimate.
        p0 = (np.sum(draws < est) + 0.5 * np.sum(draws == est)) / draws.size
        if 0.0 < p0 < 1.0:
            z0 = special.ndtri(p0)
            z = special.ndtri(np.array([alpha, 1.0 - alpha]))
            den = 1.0 - accel * (z0 + z)
            # den ≤ 0 happens only for absurd accelerations; BCa is then undefined.
            adj = special.ndtr(z0 + (z0 + z) / den) if np.all(den > 0) else np.array([np.nan])
            if np.all(np.isfinite(adj)):
                lo, hi = np.quantile(draws, adj)
                return float(lo), float(hi), "bca"
        # Degenerate bias correction: fall back and say so.
        method = "percentile"
    lo, hi = np.quantile(draws, [alpha, 1.0 - alpha])
    return float(lo), float(hi), method


def _check_args(level: float, n_boot: int, method: str) -> None:
    if not 0.0 < level < 1.0:
        raise ValueError(f"level: must be in (0, 1), got {level}")
    if n_boot < 100:
        raise ValueError(f"n_boot: must be >= 100, got {n_boot}")
    if method not in ("bca", "percentile"):
        raise ValueError(f"method: must be 'bca' or 'percentile', got {method!r}")


def _effective_method(statistic: Statistic, method: str) -> str:
    # BCa is meaningless for extremes: the bootstrap distribution of the max puts ~63 % of its
    # mass on the observed max, so bias correction and acceleration are not defined sensibly.
    if isinstance(statistic, str) and statistic.lower() in ("max", "min", "p100", "p0"):
        return "percentile"
    return method


def _stat_name(statistic: Statistic) -> str:
    return statistic if isinstance(statistic, str) else getattr(statistic, "__name__", "callable")


# --------------------------------------------------------------------------- public API


@dataclass(frozen=True)
class BootstrapCI:
    """A point estimate with a bootstrap confidence interval: the one result of every CI and
    slowdown of :mod:`xtalk.analysis`.

    It unpacks as ``(estimate, low, high)`` (``point, lo, hi = ratio_ci(...)``), the triple
    the summary tables store as ``slowdown_*``, ``*_lo`` and ``*_hi`` columns.
    """

    statistic: str
    estimate: float
    low: float
    high: float
    level: float
    method: str  # 'bca', 'percentile', 'cluster-percentile' or 'runs' (what was actually used)
    n_boot: int
    n: tuple[int, ...]  # sample size(s): values (jobs) on each side
    #: Runs on each side when the samples were given run by run (empty when pooled).
    runs: tuple[int, ...] = ()
    #: The CI was computed on a per-run subsample and moved to the full-data estimate.
    subsampled: bool = False

    def contains(self, value: float) -> bool:
        return self.low <= value <= self.high

    def to_dict(self) -> dict:
        return asdict(self)

    def __iter__(self):
        return iter((self.estimate, self.low, self.high))

    def __len__(self) -> int:
        return 3

    def __getitem__(self, i):
        return (self.estimate, self.low, self.high)[i]


def bootstrap_ci(
    x,
    statistic: Statistic = "median",
    *,
    level: float = 0.95,
    n_boot: int = 4000,
    method: str = "bca",
    seed: SeedLike = None,
) -> BootstrapCI:
    """Bootstrap CI of ``statistic`` on one sample (SPEC §8: confidence intervals).

    ``statistic``: 'median', 'mean', 'max', 'min', 'pNN' or a callable ``f(a, axis)``.
    ``method``: 'bca' (default; bias-corrected and accelerated) or 'percentile'. Max/min
    always use percentile; the bootstrap of an extreme is known to be inconsistent, so use
    :mod:`xtalk.analysis.pwcet` for tail statements.
    """
    _check_args(level, n_boot, method)
    arr = _clean(x)
    method = _effective_method(statistic, method)
    rng = _rng(seed)
    est, draws, jack = _draws_and_jack(arr, statistic, n_boot, rng, method == "bca")
    accel = _acceleration(_influence_terms(jack)) if jack is not None else 0.0
    lo, hi, used = _interval(draws, est, level, method, accel)
    return BootstrapCI(_stat_name(statistic), est, lo, hi, level, used, n_boot, (arr.size,))


def _per_run(x) -> bool:
    """Whether ``x`` is a list of per-run samples (each one-dimensional), not one sample."""
    return isinstance(x, (list, tuple)) and all(np.ndim(g) >= 1 for g in x)


def ratio_ci(
    scenario,
    reference,
    stat: Statistic = "median",
    *,
    level: float = 0.95,
    n_boot: int | None = None,
    method: str | None = None,
    seed: SeedLike = 0,
) -> BootstrapCI:
    """Bootstrap CI of the slowdown ``stat(scenario) / stat(reference)`` (SPEC §6: slowdown
    vs solo), the one ratio CI of xtalk.

    Each side is either one sample (an array: its jobs are pooled and resampled as i.i.d.)
    or a list of per-run samples (runs, then jobs within each run, are resampled; see
    :func:`_runs_ratio_ci`). Pooled: ``method`` 'bca' (default) or 'percentile', the two
    samples resampled independently and, for BCa, the acceleration combining the jackknife
    influence of both (Efron & Tibshirani 1993, §14.3); ``n_boot`` defaults to 4000. Per run:
    ``stat`` 'median', 'max', 'mean' or 'pNN', percentile interval widened for few runs, ``n_boot``
    defaults to 2000, and an empty side gives NaN. ``seed`` 0 by default: the same data give
    the same interval.
    """
    if _per_run(scenario) and _per_run(reference):
        if method not in (None, "runs"):
            raise ValueError(f"method: per-run samples are resampled by run ('runs'), got {method!r}")
        return _runs_ratio_ci(scenario, reference, stat, n_boot=2000 if n_boot is None else n_boot,
                              level=level, seed=seed)
    if any(isinstance(x, (list, tuple)) and any(np.ndim(g) >= 1 for g in x) for x in (scenario, reference)):
        raise ValueError("scenario / reference: give both as one sample or both as lists of per-run samples")
    n_boot = 4000 if n_boot is None else n_boot
    method = "bca" if method is None else method
    _check_args(level, n_boot, method)
    return _pooled_ratio_ci(_clean(scenario, "scenario"), _clean(reference, "solo"), stat, level, n_boot, method,
                            _rng(seed))


def _pooled_ratio_ci(a: np.ndarray, b: np.ndarray, stat: Statistic, level: float, n_boot: int, method: str,
                     rng: np.random.Generator, known: tuple[float, float] | None = None) -> BootstrapCI:
    """:func:`ratio_ci` of two clean pooled samples. ``known``: the statistic of each, both
    samples sorted (a quantile statistic): what :func:`aa_noise_floor` computes once per
    sample for the pairs it is in (the same numbers, the same draws)."""
    method = _effective_method(stat, method)
    need = method == "bca"
    est_a, d_a, j_a = _draws_and_jack(a, stat, n_boot, rng, need, None if known is None else known[0])
    est_b, d_b, j_b = _draws_and_jack(b, stat, n_boot, rng, need, None if known is None else known[1])
    if est_b == 0:
        raise ValueError("solo: statistic is 0, the ratio is undefined")
    with np.errstate(divide="ignore", invalid="ignore"):
        draws = d_a / d_b
    est = est_a / est_b
    accel = 0.0
    if need:
        # Jackknife of the ratio: leave one out of the scenario, then of the solo sample.
        accel = _acceleration(_influence_terms(j_a / est_b), _influence_terms(est_a / j_b))
    lo, hi, used = _interval(draws, est, level, method, accel)
    return BootstrapCI(_stat_name(stat), est, lo, hi, level, used, n_boot, (a.size, b.size))


def ratio_cis(scenario, reference, stat_names: Sequence[Statistic], *, level: float = 0.95, n_boot: int | None = None,
              seed: SeedLike = 0) -> dict[str, BootstrapCI]:
    """:func:`ratio_ci` of each of ``stat_names``, the same intervals as a call each. Per-run
    samples draw their replicates once for every statistic (they do not depend on it); a
    pooled sample is a call each."""
    if _per_run(scenario) and _per_run(reference):
        return _runs_ratio_cis(scenario, reference, stat_names, n_boot=2000 if n_boot is None else n_boot, level=level,
                               seed=seed)
    return {s: ratio_ci(scenario, reference, s, level=level, n_boot=n_boot, seed=seed) for s in dict.fromkeys(stat_names)}


def _resample_runs(groups: list[np.ndarray], stat: str, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """`n_boot` bootstrap replicates of `stat` ("median", "max" or "pNN") over pooled groups."""
    return _resample_runs_many(groups, (stat,), n_boot, rng)[stat]


def _resample_runs_many(groups: list[np.ndarray], stats: tuple[str, ...], n_boot: int,
                        rng: np.random.Generator) -> dict[str, np.ndarray]:
    """:func:`_resample_runs` of each of `stats` from the same replicates: the draws do not
    depend on the statistic, so each one's numbers are those of a call of its own."""
    sizes = np.array([len(g) for g in groups])
    m = int(np.median(sizes))
    flat = np.concatenate(groups)
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    k = len(groups)
    out = {stat: np.empty(n_boot) for stat in stats}
    # Chunk the replicates to bound memory at large job counts.
    step = max(1, int(4e6 // max(1, k * m)))
    if _ranks_apply(flat, stats):
        return _resample_ranks([flat], sizes, offsets, k, m, stats, n_boot, step, rng)[0]
    for lo in range(0, n_boot, step):
        b = min(step, n_boot - lo)
        runs = rng.integers(0, k, size=(b, k))
        pick = (rng.random((b, k, m)) * sizes[runs][:, :, None]).astype(np.int64) + offsets[runs][:, :, None]
        sample = flat[pick.reshape(b, k * m)]
        for stat in stats:
            out[stat][lo:lo + b] = _rows_statistic(sample, stat)
    return out


def _rows_statistic(sample: np.ndarray, stat: str) -> np.ndarray:
    """``stat`` ("median", "max", "mean" or "pNN") of each row of ``sample``."""
    if stat == "median":
        return np.median(sample, axis=1)
    if stat == "max":
        return sample.max(axis=1)
    if stat == "mean":
        return sample.mean(axis=1)
    return np.quantile(sample, _quantile_level(stat), axis=1)


def _ranks_apply(flat: np.ndarray, stats) -> bool:
    """Whether :func:`_resample_ranks` gives :func:`_resample_runs_many`'s numbers for the
    pooled values ``flat``: the median and the maximum, no NaN, positions within int32."""
    return flat.size < 2**31 and set(stats) <= {"median", "max"} and not np.isnan(flat).any()


def _resample_runs_shared(samples: list[list[np.ndarray]], stats: tuple[str, ...], n_boot: int,
                          rng: np.random.Generator) -> list[dict[str, np.ndarray]]:
    """:func:`_resample_runs_many` of each of ``samples`` (per-run samples with the same run
    sizes, :func:`_ranks_apply` to each), each from the generator's state at the call: the
    picks depend on the sizes alone, so they are drawn once for all (a cell's execution and
    response times), and each sample's numbers are those of a call of its own."""
    sizes = np.array([len(g) for g in samples[0]])
    m = int(np.median(sizes))
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    k = len(sizes)
    step = max(1, int(4e6 // max(1, k * m)))
    return _resample_ranks([np.concatenate(g) for g in samples], sizes, offsets, k, m, stats, n_boot, step, rng)


def _resample_ranks(flats, sizes, offsets, k, m, stats, n_boot, step, rng) -> list[dict[str, np.ndarray]]:
    """:func:`_resample_runs_many` on the ranks of the pooled values, for each of ``flats``
    (pooled values of runs of ``sizes``): the same draws (the same generator calls in the
    same order, the same picks), each replicate's median or maximum selected among small
    integer ranks instead of float values, then read from the sorted values. Ranks follow
    the values (ties broken by position), so the j-th smallest rank of a replicate is the
    position of its j-th smallest value in the sorted values: the same numbers as np.median
    (the mean of the two middle values of an even count) and max. The picks do not depend on
    the values: one set serves every one of ``flats``."""
    n = k * m
    small = flats[0].size <= 2**15
    tables = []
    for flat in flats:
        order = np.argsort(flat, kind="stable")
        rank_of = np.empty(flat.size, dtype=np.int16 if small else np.int32)
        rank_of[order] = np.arange(flat.size)
        tables.append((flat[order], rank_of, {stat: np.empty(n_boot) for stat in stats}))
    # The sizes as floats: u·size as numpy computes it for the int sizes (exact conversion),
    # without a cast in the loop.
    size_f, off32 = sizes.astype(np.float64), offsets.astype(np.int32)
    mid = [n // 2 - 1, n // 2] if n % 2 == 0 else [n // 2]
    # A chunk's replicates are drawn and reduced a block of rows at a time, into buffers
    # allocated once: the uniforms of consecutive blocks are those of one call (the generator
    # fills them in order), and a block stays in the cache where a chunk's 32 MB of fresh
    # uniforms cost more in page faults than in arithmetic.
    rows = max(1, min(step, (1 << 18) // max(1, n)))
    u_buf = np.empty((rows, k, m))
    pick_buf = np.empty((rows, k, m), dtype=np.int32)
    r_buf = np.empty((rows, n), dtype=np.int16 if small else np.int32)
    for lo in range(0, n_boot, step):
        b = min(step, n_boot - lo)
        runs = rng.integers(0, k, size=(b, k))
        for a in range(0, b, rows):
            c = min(rows, b - a)
            u, pick, r = u_buf[:c], pick_buf[:c], r_buf[:c]
            rng.random(out=u)
            np.multiply(u, size_f[runs[a:a + c]][:, :, None], out=u)
            np.copyto(pick, u, casting="unsafe")  # floor of u·size, as the int64 cast (below 2^31)
            pick += off32[runs[a:a + c]][:, :, None]
            at = slice(lo + a, lo + a + c)
            for sorted_v, rank_of, out in tables:
                np.take(rank_of, pick.reshape(c, n), out=r)
                if "max" in stats:  # before the selection below reorders each row (not its maximum)
                    out["max"][at] = sorted_v[r.max(axis=1)]
                if "median" in stats:
                    if small:  # 16-bit ranks: numpy's radix sort, several times faster than a partition
                        r.sort(axis=1, kind="stable")
                    else:
                        r.partition(mid, axis=1)
                    out["median"][at] = sorted_v[r[:, mid[0]]] if len(mid) == 1 else \
                        (sorted_v[r[:, mid[0]]] + sorted_v[r[:, mid[1]]]) / 2
    return [out for _, _, out in tables]


def _runs_ratio_ci(scenario: list, reference: list, stat: Statistic, *, n_boot: int, level: float,
                   seed: SeedLike) -> BootstrapCI:
    """Ratio stat(scenario) / stat(reference) over per-run samples and its percentile CI.

    Jobs of one run are not independent of each other (the run's physical pages, its
    neighbours on the host), so the bootstrap resamples at two levels: runs with
    replacement, then jobs within each chosen run. With a single run per side it reduces to
    the plain job-level bootstrap.

    Resampling k runs underestimates the between-run variance by the factor (k - 1)/k, and a
    percentile interval behaves like a normal one, while with k runs per side the variance
    is estimated with only 2(k - 1) degrees of freedom. Both matter at the handful of
    repetitions an experiment has (3 by default): the interval is widened about the point
    estimate, on the log scale, by sqrt(k/(k - 1)) · t(2(k - 1)) / z at the interval's level
    (1.73 for k = 3, 1.13 for k = 10). The A/A test (tests/test_aa.py) checks the resulting
    coverage on this machine: with the first factor alone it covered 1 in 17/20 experiments
    on a busy day.
    """
    return _runs_ratio_cis(scenario, reference, (stat,), n_boot=n_boot, level=level, seed=seed)[stat]


def _runs_ratio_cis(scenario: list, reference: list, stat_names: Sequence[str], *, n_boot: int, level: float,
                    seed: SeedLike) -> dict[str, BootstrapCI]:
    """:func:`_runs_ratio_ci` of each of ``stat_names`` ("median", "max", "pNN") from one set of
    replicates: a call per statistic draws the same ones (the same generator, the same
    calls), so each interval is the one its own call gives, at the cost of one."""
    return runs_ratio_cis_many([(scenario, reference)], stat_names, n_boot=n_boot, level=level, seed=seed)[0]


def runs_ratio_cis_many(pairs: Sequence[tuple[list, list]], stat_names: Sequence[str], *, n_boot: int = 2000,
                        level: float = 0.95, seed: SeedLike = 0) -> list[dict[str, BootstrapCI]]:
    """:func:`ratio_cis` of each (scenario, reference) pair of per-run samples, the same
    intervals as a call each. Pairs whose runs have the same sizes on each side (a cell's
    execution and response times) draw the same replicates from the same seed, so with an
    integer seed they are drawn once for all of them (:func:`_resample_runs_shared`)."""
    for stat in stat_names:
        if not isinstance(stat, str) or (stat not in ("median", "max", "mean") and _quantile_level(stat) is None):
            raise ValueError(f"stat: {stat!r} is not supported over runs; use 'median', 'max', 'mean' or 'pNN'")
    stat_names = tuple(dict.fromkeys(stat_names))
    prepared = [([np.asarray(g, dtype=float) for g in scenario if len(g)],
                 [np.asarray(g, dtype=float) for g in reference if len(g)]) for scenario, reference in pairs]
    draws: list = [None] * len(prepared)
    together: dict = {}
    for i, (scenario, reference) in enumerate(prepared):
        if min(sum(g.size for g in scenario), sum(g.size for g in reference)) < 2:
            continue  # no statistic to resample
        alike = len(prepared) > 1 and isinstance(seed, (int, np.integer)) and all(
            _ranks_apply(np.concatenate(x), stat_names) for x in (scenario, reference))
        key = (tuple(g.size for g in scenario), tuple(g.size for g in reference)) if alike else i
        together.setdefault(key, []).append(i)
    for key, idx in together.items():
        rng = np.random.default_rng(seed)
        if len(idx) == 1:
            scenario, reference = prepared[idx[0]]
            draws[idx[0]] = (_resample_runs_many(scenario, stat_names, n_boot, rng),
                             _resample_runs_many(reference, stat_names, n_boot, rng))
        else:
            num = _resample_runs_shared([prepared[i][0] for i in idx], stat_names, n_boot, rng)
            den = _resample_runs_shared([prepared[i][1] for i in idx], stat_names, n_boot, rng)
            for i, a, b in zip(idx, num, den):
                draws[i] = (a, b)
    return [_runs_interval(scenario, reference, stat_names, d, n_boot, level)
            for (scenario, reference), d in zip(prepared, draws)]


def _runs_interval(scenario: list, reference: list, stat_names: tuple, draws, n_boot: int,
                   level: float) -> dict[str, BootstrapCI]:
    """Each statistic's point and percentile interval, widened for few runs, from the
    replicates ``draws`` (numerator's, denominator's; None: too few jobs, NaN)."""
    sizes = (sum(g.size for g in scenario), sum(g.size for g in reference))
    runs = (len(scenario), len(reference))
    if draws is None:  # no jobs, or one job a side: no statistic to resample (the table says how many)
        return {stat: BootstrapCI(stat, np.nan, np.nan, np.nan, level, "runs", n_boot, sizes, runs) for stat in stat_names}
    num, den = draws
    a = (1 - level) / 2
    k = min(runs)
    out = {}
    for stat in stat_names:
        point = statistic_value(np.concatenate(scenario), stat) / statistic_value(np.concatenate(reference), stat)
        lo, hi = np.quantile(num[stat] / den[stat], [a, 1 - a])
        if k >= 2:
            widen = np.sqrt(k / (k - 1)) * stats.t.ppf(1 - a, 2 * (k - 1)) / stats.norm.ppf(1 - a)
            lo = point * (lo / point) ** widen
            hi = point * (hi / point) ** widen
        out[stat] = BootstrapCI(stat, float(point), float(lo), float(hi), level, "runs", n_boot, sizes, runs)
    return out


def _cluster_draws(x: np.ndarray, groups, statistic: Statistic, n_boot: int, rng) -> tuple[float, np.ndarray, int]:
    """Bootstrap draws of ``statistic`` resampling whole clusters (runs) with replacement."""
    codes, uniq = pd.factorize(np.asarray(groups))
    n_groups = len(uniq)
    members = [np.flatnonzero(codes == g) for g in range(n_groups)]
    q = _quantile_level(statistic)

    def value(v: np.ndarray) -> float:
        if q is not None:
            return float(np.quantile(v, q))
        if statistic == "mean":
            return float(v.mean())
        return float(statistic(v, axis=-1))

    out = np.empty(n_boot)
    for b in range(n_boot):
        pick = rng.integers(0, n_groups, size=n_groups)
        out[b] = value(x[np.concatenate([members[g] for g in pick])])
    return value(x), out, n_groups


def cluster_ratio_ci(
    scenario,
    scenario_groups,
    solo,
    solo_groups,
    statistic: Statistic = "median",
    *,
    level: float = 0.95,
    n_boot: int = 1000,
    min_clusters: int = 5,
    seed: SeedLike = None,
) -> BootstrapCI:
    """CI of stat(scenario)/stat(solo) resampling whole runs (cluster bootstrap, percentile).

    Jobs of one run share that run's conditions (placement, boot, background load), so they
    are not independent across runs; pooling them makes the job-level bootstrap too narrow
    when runs differ. Resampling runs (Davison & Hinkley 1997, §3.8) keeps the between-run
    variance, which is what decides how many repetitions are enough (seed 000 §8.2 found 50
    too few). Each sample needs at least ``min_clusters`` runs.
    """
    _check_args(level, n_boot, "percentile")
    a = np.asarray(scenario, dtype=float)
    b = np.asarray(solo, dtype=float)
    ga, gb = np.asarray(scenario_groups), np.asarray(solo_groups)
    if a.shape != ga.shape or b.shape != gb.shape:
        raise ValueError("scenario_groups / solo_groups: one group label per value")
    for name, g in (("scenario_groups", ga), ("solo_groups", gb)):
        k = len(pd.unique(g))
        if k < min_clusters:
            raise ValueError(f"{name}: {k} runs, need at least {min_clusters} for a cluster bootstrap")
    rng = _rng(seed)
    est_a, d_a, _ = _cluster_draws(a, ga, statistic, n_boot, rng)
    est_b, d_b, _ = _cluster_draws(b, gb, statistic, n_boot, rng)
    if est_b == 0:
        raise ValueError("solo: statistic is 0, the ratio is undefined")
    with np.errstate(divide="ignore", invalid="ignore"):
        draws = d_a / d_b
    lo, hi, used = _interval(draws, est_a / est_b, level, "percentile", 0.0)
    return BootstrapCI(_stat_name(statistic), est_a / est_b, lo, hi, level, "cluster-" + used, n_boot,
                       (a.size, b.size))


def _column(jobs: pd.DataFrame, column: str, include_warmup: bool, numeric: bool = True) -> np.ndarray:
    if column not in jobs.columns:
        raise ValueError(f"column: {column!r} not in job table (have {list(jobs.columns)})")
    df = jobs
    if not include_warmup and "warmup" in df.columns:
        df = df[~df["warmup"].astype(bool)]
    return df[column].to_numpy(dtype=float) if numeric else df[column].to_numpy()


def slowdown(
    solo: pd.DataFrame,
    scenario: pd.DataFrame,
    *,
    column: str = "exec_ns",
    statistics: Sequence[Statistic] = ("median", "max"),
    level: float = 0.95,
    n_boot: int = 4000,
    method: str = "bca",
    include_warmup: bool = False,
    cluster: str | None = None,
    seed: SeedLike = None,
) -> pd.DataFrame:
    """Slowdown table of two job tables, one row per statistic: solo value, scenario value,
    ratio and its CI (:func:`ratio_ci` on the pooled jobs, or :func:`cluster_ratio_ci`).
    The per-scenario tables of xtalk (summary, report, campaign cells) use
    :func:`xtalk.analysis.slowdown.slowdown` over runs instead.

    Warm-up jobs are excluded unless ``include_warmup``. By default the jobs of all runs are
    pooled and resampled individually; with ``cluster`` (a column such as 'run_id' or
    'repetition') whole runs are resampled instead (:func:`cluster_ratio_ci`), which is the
    honest choice when runs differ from each other.
    """
    a = _column(scenario, column, include_warmup)
    b = _column(solo, column, include_warmup)
    if cluster is not None:
        ga = _column(scenario, cluster, include_warmup, numeric=False)
        gb = _column(solo, cluster, include_warmup, numeric=False)
    rng = _rng(seed)
    rows = []
    for st in statistics:
        if cluster is None:
            ci = ratio_ci(a, b, st, level=level, n_boot=n_boot, method=method, seed=rng)
        else:
            ci = cluster_ratio_ci(a, ga, b, gb, st, level=level, n_boot=min(n_boot, 1000), seed=rng)
        rows.append(
            {
                "column": column,
                "statistic": ci.statistic,
                "solo": statistic_value(b, st),
                "scenario": statistic_value(a, st),
                "ratio": ci.estimate,
                "ci_low": ci.low,
                "ci_high": ci.high,
                "level": level,
                "method": ci.method,
                "n_solo": b.size,
                "n_scenario": a.size,
            }
        )
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class ShiftTest:
    """Distribution-shift tests of sample ``a`` against ``b`` with effect sizes.

    ``prob_superiority`` = P(A > B) + ½·P(A = B); ``cliffs_delta`` = P(A > B) − P(A < B)
    = 2·prob_superiority − 1. Positive values mean A tends to be larger (slower).
    ``brunnermunzel_stat`` is signed the same way (positive when A is larger).
    ``magnitude`` follows Romano et al. (2006): negligible < 0.147 ≤ small < 0.33 ≤ medium
    < 0.474 ≤ large, on |delta|.
    """

    n_a: int
    n_b: int
    mannwhitney_u: float
    mannwhitney_p: float
    brunnermunzel_stat: float
    brunnermunzel_p: float
    ks_stat: float
    ks_p: float
    prob_superiority: float
    cliffs_delta: float
    magnitude: str

    def to_dict(self) -> dict:
        return asdict(self)


def _magnitude(delta: float) -> str:
    d = abs(delta)
    if d < 0.147:
        return "negligible"
    if d < 0.33:
        return "small"
    if d < 0.474:
        return "medium"
    return "large"


def shift_test(a, b, *, alternative: str = "two-sided") -> ShiftTest:
    """Mann-Whitney U, Brunner-Munzel and two-sample KS of ``a`` vs ``b`` plus Cliff's delta.

    Brunner-Munzel does not assume equal variances (interference typically widens the
    distribution as well as shifting it); KS detects any difference in shape.
    """
    x = _clean(a, "a")
    y = _clean(b, "b")
    mw = stats.mannwhitneyu(x, y, alternative=alternative, method="asymptotic")
    # U counts pairs with x > y plus half the ties, so U/(n·m) is the probability of superiority.
    ps = float(mw.statistic) / (x.size * y.size)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        try:
            bm = stats.brunnermunzel(x, y, alternative=alternative)
            # scipy's statistic is positive when y tends to be larger; flip it so every
            # signed quantity here is positive when a is larger.
            bm_stat, bm_p = -float(bm.statistic), float(bm.pvalue)
        except (ValueError, ZeroDivisionError, FloatingPointError):
            bm_stat, bm_p = float("nan"), float("nan")
    if not np.isfinite(bm_p):
        # Brunner-Munzel's variance estimate is 0 when samples do not overlap at all or are
        # both constant: complete separation (p→0) or identical samples (p=1).
        bm_p = 1.0 if ps == 0.5 else 0.0
    ks = stats.ks_2samp(x, y, alternative=alternative)
    delta = 2.0 * ps - 1.0
    return ShiftTest(
        n_a=x.size,
        n_b=y.size,
        mannwhitney_u=float(mw.statistic),
        mannwhitney_p=float(mw.pvalue),
        brunnermunzel_stat=bm_stat,
        brunnermunzel_p=bm_p,
        ks_stat=float(ks.statistic),
        ks_p=float(ks.pvalue),
        prob_superiority=ps,
        cliffs_delta=delta,
        magnitude=_magnitude(delta),
    )


@dataclass(frozen=True)
class NoiseFloor:
    """A/A noise floor: how far from 1 a slowdown ratio strays when nothing changed.

    ``floor`` is the largest relative deviation max(|low − 1|, |high − 1|) over all pairs;
    a measured slowdown whose CI stays within [1 − floor, 1 + floor] is indistinguishable
    from run-to-run noise. ``pairs`` has one row per ordered pair of samples.
    """

    statistic: str
    floor: float
    ratio_min: float
    ratio_max: float
    pairs: pd.DataFrame


def aa_noise_floor(
    samples: Sequence,
    statistic: Statistic = "median",
    *,
    level: float = 0.95,
    n_boot: int = 2000,
    method: str = "percentile",
    seed: SeedLike = None,
) -> NoiseFloor:
    """A/A check (SPEC §8): slowdown ratios between samples of the *same* scenario.

    ``samples``: two or more arrays (e.g. two repetitions, or two interleaved solo runs).
    For every ordered pair (i, j), i ≠ j, computes stat(s_i)/stat(s_j) and its bootstrap CI.
    """
    if len(samples) < 2:
        raise ValueError(f"samples: need at least 2 samples of the same scenario, got {len(samples)}")
    # Each sample sorted once (its pairs' bootstraps read the sorted values; a sample is in
    # 2(k − 1) of the k(k − 1) pairs): the same values, hence the same draws and intervals,
    # and its statistic computed once (np.quantile of 10^5 values is a partition; 2(k − 1)
    # pairs read it).
    arrs = [_clean(s, f"samples[{i}]") for i, s in enumerate(samples)]
    q = _quantile_level(statistic)
    est = None
    if q is not None:
        arrs = [a if _is_sorted(a) else np.sort(a) for a in arrs]
        est = [float(np.quantile(a, q)) for a in arrs]
    _check_args(level, n_boot, method)
    rng = _rng(seed)
    rows = []
    for i in range(len(arrs)):
        for j in range(len(arrs)):
            if i == j:
                continue
            ci = _pooled_ratio_ci(arrs[i], arrs[j], statistic, level, n_boot, method, rng,
                                  None if est is None else (est[i], est[j]))
            rows.append({"i": i, "j": j, "ratio": ci.estimate, "ci_low": ci.low, "ci_high": ci.high})
    pairs = pd.DataFrame(rows)
    floor = float(np.max(np.maximum(np.abs(pairs["ci_low"] - 1.0), np.abs(pairs["ci_high"] - 1.0))))
    return NoiseFloor(_stat_name(statistic), floor, float(pairs["ratio"].min()), float(pairs["ratio"].max()), pairs)


def markers(
    jobs: pd.DataFrame, *, column: str = "exec_ns", by: Sequence[str] = ("run_id",)
) -> pd.DataFrame:
    """Histogram markers of seed 004 §VIII (SPEC §6 cites it as §V): best, median, first, worst.

    ``first`` is the lowest job index of the group, warm-up included on purpose: the first
    iteration "frequently behave[s] quite differently" and that is what the marker shows.
    Best/median/worst exclude warm-up jobs when a ``warmup`` column exists.
    """
    if column not in jobs.columns:
        raise ValueError(f"column: {column!r} not in job table")
    keys = [k for k in by if k in jobs.columns]
    groups = jobs.groupby(keys, sort=True) if keys else [((), jobs)]
    rows = []
    for key, g in groups:
        g = g.sort_values("job", kind="stable") if "job" in g.columns else g
        steady = g[~g["warmup"].astype(bool)] if "warmup" in g.columns else g
        if steady.empty:
            steady = g
        v = steady[column].to_numpy(dtype=float)
        row = dict(zip(keys, key if isinstance(key, tuple) else (key,)))
        row.update(
            best=float(np.min(v)),
            median=float(np.median(v)),
            first=float(g[column].iloc[0]),
            worst=float(np.max(v)),
            n=int(v.size),
        )
        rows.append(row)
    return pd.DataFrame(rows)


def per_step_reference(
    jobs: pd.DataFrame, *, column: str = "exec_ns", by: Sequence[str] = ("run_id",)
) -> pd.DataFrame:
    """Per job index across runs: min (the reference curve), median, max and run count.

    Seed 000 §5.3.2 (Fig. 5.16) takes "the minimum execution time at each step" over several
    executions as the best approximation of the undisturbed curve: sporadic and periodic OS
    peaks do not hit the same step in every run, so the minimum filters them out.
    """
    for col in (column, "job"):
        if col not in jobs.columns:
            raise ValueError(f"column: {col!r} not in job table")
    runs = [b for b in by if b in jobs.columns]
    dense = _per_step_dense(jobs, column, runs[0]) if len(runs) == 1 else None
    if dense is not None:
        return dense
    g = jobs.groupby("job", sort=True)[column]
    out = g.agg(["min", "median", "max"]).rename(columns=lambda c: f"{c}_ns")
    out["n_runs"] = jobs.groupby("job")[runs[0]].nunique() if runs else g.size()
    return out.reset_index()


def _unique_ints(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(x, return_inverse=True)`` of integers, by a count over their range when it
    is not much wider than their number (no sort)."""
    if x.size == 0:
        return np.unique(x, return_inverse=True)
    lo, hi = int(x.min()), int(x.max())
    if hi - lo > 4 * x.size + 1024:
        return np.unique(x, return_inverse=True)
    off = x.astype(np.int64) - lo
    present = np.bincount(off, minlength=hi - lo + 1) > 0
    where = np.cumsum(present) - 1
    return (np.flatnonzero(present) + lo).astype(x.dtype), where[off]


def _per_step_dense(jobs: pd.DataFrame, column: str, run: str) -> pd.DataFrame | None:
    """:func:`per_step_reference` when every run has every job index once (runs of one
    scenario usually do) and the values are integers: a runs × jobs matrix reduced along the
    runs, instead of a groupby of every job (its median is the same: the middle value, or the
    mean of the two middle ones). None otherwise."""
    v, job, rid = jobs[column], jobs["job"], jobs[run]
    if v.dtype.kind not in "iu" or job.dtype.kind not in "iu" or rid.dtype.kind not in "iu" or len(jobs) == 0:
        return None
    grid = _run_major(job.to_numpy(), rid.to_numpy())
    if grid is not None:  # the rows are the matrix already: a view of the column
        ju, n_runs = grid
        m = v.to_numpy().reshape(n_runs, ju.size)
    else:
        ju, ji = _unique_ints(job.to_numpy())
        ru, ri = _unique_ints(rid.to_numpy())
        if ju.size * ru.size != len(jobs):
            return None
        cell = ri.astype(np.int64) * ju.size + ji
        if np.bincount(cell, minlength=ju.size * ru.size).min() != 1:
            return None  # a (run, job) twice, hence another one missing
        m = np.empty(ju.size * ru.size, dtype=v.dtype)
        m[cell] = v.to_numpy()
        m = m.reshape(ru.size, ju.size)
    return pd.DataFrame({"job": ju, "min_ns": m.min(axis=0), "median_ns": _column_medians(m),
                         "max_ns": m.max(axis=0), "n_runs": np.full(ju.size, m.shape[0], dtype=np.int64)})


def _run_major(job: np.ndarray, rid: np.ndarray) -> tuple[np.ndarray, int] | None:
    """(the job indices, the number of runs) when the rows are run after run (run keys
    increasing), each run the same increasing job indices: :func:`_unique_ints` of both and
    the rows already in the matrix's order (a store's rows of one scenario, run codes as
    keys). None otherwise."""
    n = job.size
    starts = np.flatnonzero(rid[1:] != rid[:-1]) + 1
    runs = starts.size + 1
    width = n // runs
    if n % runs or not np.array_equal(starts, np.arange(1, runs) * width):
        return None
    heads, first = rid[::width], job[:width]
    if np.any(heads[1:] <= heads[:-1]) or np.any(first[1:] <= first[:-1]) or not (job.reshape(runs, width) == first).all():
        return None
    return first.copy(), runs


def _column_medians(m: np.ndarray) -> np.ndarray:
    """``np.median(m.astype(float), axis=0)`` of an integer matrix (runs × jobs): each job's
    runs sorted as integers in a row of the transpose (numpy sorts many short contiguous
    rows several times faster than it partitions floats along the first axis), the middle
    value, or the mean of the two middle ones, as floats (the conversion keeps the order, so
    these are the middle floats)."""
    x = m.T.copy()  # a copy in C order always (m may be a view of the job table's column)
    x.sort(axis=1)
    r = m.shape[0]
    if r % 2:
        return x[:, r // 2].astype(float)
    return (x[:, r // 2 - 1].astype(float) + x[:, r // 2].astype(float)) / 2


def sorted_quantiles(sorted_v: np.ndarray, qs) -> np.ndarray:
    """np.quantile (linear interpolation) of data already sorted, without sorting again (the
    report's tables and figures read their quantiles this way)."""
    n = sorted_v.size
    h = (n - 1) * np.asarray(qs, dtype=float)
    lo = np.floor(h).astype(np.int64)
    hi = np.minimum(lo + 1, n - 1)
    return sorted_v[lo] + (h - lo) * (sorted_v[hi] - sorted_v[lo])


def quantile_of_sorted(sorted_v: np.ndarray, q: float) -> float:
    """``np.quantile(sorted_v, q)`` (linear) of float values already sorted, bit for bit: numpy's
    own steps (the virtual index (n − 1)·q, its neighbours, clipped at the ends, and its
    two-sided interpolation) on the two values it reads, without the copy and the partition
    of every value (a cell's 5·10^6 values: 30 ms a quantile). NaN (sorted last) goes to
    np.quantile."""
    n = sorted_v.size
    if n == 0 or sorted_v.dtype != np.float64 or np.isnan(sorted_v[-1]) or not 0 <= q <= 1:
        return float(np.quantile(sorted_v, q))
    h = np.float64(n - 1) * np.float64(q)
    if h >= n - 1:
        prev = nxt = -1
    else:
        prev = int(np.floor(h))
        nxt = prev + 1
    gamma = h - np.float64(prev)
    a, b = sorted_v[prev], sorted_v[nxt]
    diff = b - a
    return float(b - diff * (1 - gamma) if gamma >= 0.5 else a + diff * gamma)


def quantile_name(q: float) -> str:
    """The column name of quantile level ``q`` in group tables: 0.5 -> "p50", 0.999 -> "p99.9"."""
    return f"p{round(q * 100, 6):g}"


def group_quantiles(
    jobs: pd.DataFrame, column: str, qs: Sequence[float], *, by: Sequence[str] = ("scenario", "configuration")
) -> pd.DataFrame:
    """Per group of ``by``: ``n`` finite values of ``column``, their ``min``, the quantiles
    ``qs`` (np.quantile's linear interpolation: exact order statistics, interpolated between
    the two nearest, as every other quantile of this package), ``max``, ``mean`` and ``sd``
    (ddof 1). NaN and missing values are left out; a group with no finite value has n 0 and
    NaN elsewhere. One row per observed group, sorted by ``by``.

    This is the definition the report's DuckDB path (xtalk.store.aggregate.group_quantiles,
    which reads Parquet without loading the jobs) must match; tests check both agree.
    """
    for c in [column, *by]:
        if c not in jobs.columns:
            raise ValueError(f"column: {c!r} not in job table")
    names = [quantile_name(q) for q in qs]
    rows = []
    for key, g in jobs.groupby(list(by), sort=True, observed=True, dropna=False):
        v = g[column].to_numpy(dtype=float)
        v = v[np.isfinite(v)]
        row = dict(zip(by, key if isinstance(key, tuple) else (key,)))
        row["n"] = int(v.size)
        if v.size:
            row.update(min=float(v.min()), **dict(zip(names, np.quantile(v, list(qs)).tolist())), max=float(v.max()),
                       mean=float(v.mean()), sd=float(v.std(ddof=1)) if v.size > 1 else np.nan)
        else:
            row.update(min=np.nan, **{n: np.nan for n in names}, max=np.nan, mean=np.nan, sd=np.nan)
        rows.append(row)
    return pd.DataFrame(rows, columns=[*by, "n", "min", *names, "max", "mean", "sd"])
