"""Measurement-based probabilistic timing analysis (MBPTA): i.i.d. checks, EVT fits, pWCET.

SPEC §8: "Probabilistic WCET (extreme-value theory, with the i.i.d. checks MBPTA requires)".
The seeds report observed maxima only (seed 000 ch. 6, seed 004 §VIII); seed 000 §3.1.3
only cites measurement-based probabilistic timing analysis as related work.

Pipeline of :func:`pwcet`:

1. i.i.d. checks on the series *in time order* (:func:`iid_checks`): Ljung-Box
   (independence, autocorrelation up to ``lags``), two-sample Kolmogorov-Smirnov between the
   first and second half (identical distribution over time) and the Wald-Wolfowitz runs test
   above/below the median (randomness of the order).
2. An extreme-value fit: GEV on block maxima (:func:`fit_gev`) or a generalized Pareto
   distribution over a threshold chosen by goodness of fit (:func:`fit_gpd`).
3. pWCET at per-job exceedance probabilities 1e-3 … 1e-12 with confidence bounds from the
   profile likelihood (default) or a parametric bootstrap.

Refusal rules (the result's ``refused`` field names the test and its p-value, and the table
stays empty): fewer than ``min_samples`` values; any i.i.d. test with p < ``alpha``/3
(Bonferroni over the three tests); the EVT fit failing its KS goodness-of-fit test
(p < ``alpha``) or, for GPD, no candidate threshold passing it; too few block maxima
(< 20) or exceedances (< ``min_exceedances``) to fit.

Conventions: ``shape`` ξ is the EVT shape (ξ > 0 heavy tail, ξ = 0 Gumbel/exponential,
ξ < 0 bounded). scipy's ``genextreme`` uses c = −ξ, ``genpareto`` uses c = ξ.
The KS p-value of a fitted model is optimistic (parameters were estimated on the same data),
so the GoF refusal is lenient rather than strict; the PPCC and Anderson-Darling statistics
are reported for the reader's judgement.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import pandas as pd
from scipy import optimize, stats

from .stats import quantile_of_sorted

DEFAULT_PROBABILITIES = tuple(10.0 ** -k for k in range(3, 13))


class PWCETRefused(ValueError):
    """Raised by :meth:`PWCETResult.raise_if_refused` when the data do not support a fit."""


# --------------------------------------------------------------------------- i.i.d. checks


def _series(x, column: str = "exec_ns") -> np.ndarray:
    """Values in time order; a job table is sorted by run and job, warm-up jobs dropped."""
    if isinstance(x, pd.DataFrame):
        if column not in x.columns:
            raise ValueError(f"column: {column!r} not in job table")
        df = x
        if "warmup" in df.columns:
            df = df[~df["warmup"].astype(bool)]
        keys = [k for k in ("run_id", "repetition", "job") if k in df.columns]
        if keys:
            df = df.sort_values(keys, kind="stable")
        x = df[column].to_numpy(dtype=float)
    arr = np.asarray(x, dtype=float).ravel()
    return arr[np.isfinite(arr)]


def acf(x, nlags: int) -> np.ndarray:
    """Sample autocorrelation r_1 … r_nlags (biased estimator, FFT; as in Box-Jenkins)."""
    x = np.asarray(x, dtype=float) - np.mean(x)
    n = x.size
    nfft = 1 << int(np.ceil(np.log2(2 * n)))
    f = np.fft.rfft(x, nfft)
    ac = np.fft.irfft(f * np.conj(f), nfft)[: nlags + 1]
    if ac[0] == 0:
        return np.zeros(nlags)
    return ac[1:] / ac[0]


def ljung_box(x, lags: int = 20) -> tuple[float, float]:
    """Ljung-Box Q = n(n+2) Σ_{k≤h} r_k² / (n − k) and its χ²(h) p-value."""
    x = np.asarray(x, dtype=float)
    n = x.size
    lags = int(min(lags, n - 1))
    r = acf(x, lags)
    k = np.arange(1, lags + 1)
    q = float(n * (n + 2) * np.sum(r**2 / (n - k)))
    return q, float(stats.chi2.sf(q, lags))


def runs_test(x) -> tuple[float, float]:
    """Wald-Wolfowitz runs test above/below the median: z statistic and two-sided p-value.

    Values equal to the median are dropped (the usual convention for ties).
    """
    x = np.asarray(x, dtype=float)
    med = np.median(x)
    s = x[x != med] > med
    n1 = int(s.sum())
    n2 = int(s.size - n1)
    if n1 == 0 or n2 == 0:
        return float("nan"), 0.0  # all on one side: no variation to test, cannot be random
    runs = 1 + int(np.count_nonzero(s[1:] != s[:-1]))
    n = n1 + n2
    mu = 2.0 * n1 * n2 / n + 1.0
    var = 2.0 * n1 * n2 * (2.0 * n1 * n2 - n) / (n**2 * (n - 1.0))
    z = (runs - mu) / np.sqrt(var)
    return float(z), float(2.0 * stats.norm.sf(abs(z)))


def iid_checks(x, *, lags: int | None = None, alpha: float = 0.05, column: str = "exec_ns") -> pd.DataFrame:
    """The three MBPTA i.i.d. checks; one row per test: test, statistic, p_value, threshold, passed.

    ``lags`` defaults to min(20, n // 10). ``alpha`` is family-wise over the three tests
    (Bonferroni): a test passes when p ≥ alpha / 3. At 5 % per test, i.i.d. data would be
    refused about 14 % of the time, which makes refusals uninformative.
    """
    v = _series(x, column)
    if v.size < 20:
        raise ValueError(f"x: need at least 20 values for the i.i.d. checks, got {v.size}")
    lags = min(20, v.size // 10) if lags is None else lags
    half = v.size // 2
    lb = ljung_box(v, lags)
    ks = stats.ks_2samp(v[:half], v[half:])
    rt = runs_test(v)
    rows = [
        ("ljung_box", lb[0], lb[1]),
        ("ks_halves", float(ks.statistic), float(ks.pvalue)),
        ("runs", rt[0], rt[1]),
    ]
    df = pd.DataFrame(rows, columns=["test", "statistic", "p_value"])
    df["threshold"] = alpha / len(rows)
    df["passed"] = df["p_value"] >= df["threshold"]
    return df


# --------------------------------------------------------------------------- EVT fits


@dataclass(frozen=True)
class EVTFit:
    """A fitted tail model. ``quantile(p)`` gives the value exceeded with per-job probability p."""

    model: str  # 'gev' or 'gpd'
    shape: float  # EVT ξ
    loc: float  # GEV location; GPD threshold u
    scale: float
    n_fit: int  # block maxima or exceedances used
    n_total: int  # values in the series
    block_size: int | None = None  # GEV only
    zeta: float | None = None  # GPD only: fraction of values above the threshold
    ks_stat: float = float("nan")
    ks_p: float = float("nan")
    ad_stat: float = float("nan")
    ppcc: float = float("nan")

    def _dist(self):
        if self.model == "gev":
            return stats.genextreme(-self.shape, loc=self.loc, scale=self.scale)
        return stats.genpareto(self.shape, loc=0.0, scale=self.scale)

    def quantile(self, p) -> np.ndarray:
        p = np.asarray(p, dtype=float)
        if self.model == "gev":
            # A block of b i.i.d. jobs exceeds x with probability 1 − (1 − p)^b.
            pb = -np.expm1(self.block_size * np.log1p(-p))
            return self._dist().isf(pb)
        # P(X > u + y) = zeta · P(Y > y); below the threshold the model says nothing.
        ratio = p / self.zeta
        return np.where(ratio <= 1.0, self.loc + self._dist().isf(np.minimum(ratio, 1.0)), np.nan)


def _gof(data: np.ndarray, dist) -> tuple[float, float, float, float]:
    """KS statistic and p-value, Anderson-Darling A² and probability-plot correlation."""
    data = np.sort(data)
    n = data.size
    ks = stats.kstest(data, dist.cdf)
    eps = 1e-300
    cdf = np.clip(dist.cdf(data), eps, 1.0 - 1e-16)
    i = np.arange(1, n + 1)
    ad = float(-n - np.mean((2 * i - 1) * (np.log(cdf) + np.log1p(-cdf[::-1]))))
    pp = (i - 0.44) / (n + 0.12)  # Gringorten plotting positions, usual for extremes
    theo = dist.ppf(pp)
    ok = np.isfinite(theo)
    ppcc = float(np.corrcoef(data[ok], theo[ok])[0, 1]) if ok.sum() > 2 else float("nan")
    return float(ks.statistic), float(ks.pvalue), ad, ppcc


_EULER = 0.5772156649015329


def _gev_nll(params: np.ndarray, z: np.ndarray) -> float:
    """GEV negative log-likelihood in (ξ, μ, log σ) on standardised data."""
    xi, mu, logs = params
    if xi <= -1.0:  # the likelihood is unbounded there (Smith 1985): not a valid fit
        return np.inf
    y = (z - mu) / np.exp(logs)
    n = z.size
    if abs(xi) < 1e-7:  # Gumbel limit
        return float(n * logs + y.sum() + np.exp(-y).sum())
    t = 1.0 + xi * y
    if np.any(t <= 0):
        return np.inf
    lt = np.log(t)
    return float(n * logs + (1.0 + 1.0 / xi) * lt.sum() + np.exp(-lt / xi).sum())


def _gpd_nll(params: np.ndarray, y: np.ndarray) -> float:
    """GPD negative log-likelihood in (ξ, log σ) on scaled excesses."""
    xi, logs = params
    if xi <= -1.0:  # unbounded likelihood, as for the GEV
        return np.inf
    u = y / np.exp(logs)
    n = y.size
    if abs(xi) < 1e-7:  # exponential limit
        return float(n * logs + u.sum())
    t = 1.0 + xi * u
    if (t <= 0).any():  # the array's own method: np.any's Python wrapper cost as much as the sum (~20 000 calls a report)
        return np.inf
    return float(n * logs + (1.0 + 1.0 / xi) * np.log(t).sum())


def _minimize(nll, starts, data) -> np.ndarray:
    best = None
    for x0 in starts:
        r = optimize.minimize(nll, x0, args=(data,), method="Nelder-Mead",
                              options={"xatol": 1e-6, "fatol": 1e-9, "maxiter": 4000})
        if np.isfinite(r.fun) and (best is None or r.fun < best.fun):
            best = r
    if best is None:
        raise ValueError("x: maximum-likelihood fit did not converge")
    return best.x


# Own maximum-likelihood fits rather than scipy's ``fit``: scipy's generic optimiser
# starts from poor values and, on nanosecond-scale data, lands far from the optimum. The data
# are standardised first and the search starts from the Gumbel / exponential moment fit.


def _fit_gev_params(maxima: np.ndarray, start=None) -> tuple[float, float, float]:
    """MLE (ξ, μ, σ); ``start`` = (ξ, μ, σ) in data units replaces the default two starts."""
    m, sd = float(maxima.mean()), float(maxima.std())
    z = (maxima - m) / sd
    if start is None:
        s0 = np.sqrt(6.0) / np.pi
        starts = [[0.0, -_EULER * s0, np.log(s0)], [0.2, -_EULER * s0, np.log(s0)]]
    else:
        starts = [[start[0], (start[1] - m) / sd, np.log(start[2] / sd)]]
    xi, mu, logs = _minimize(_gev_nll, starts, z)
    return float(xi), m + sd * float(mu), sd * float(np.exp(logs))


def _fit_gpd_params(excess: np.ndarray, start=None) -> tuple[float, float]:
    """MLE (ξ, σ); ``start`` = (ξ, σ) in data units replaces the default two starts."""
    m = float(excess.mean())
    starts = [[0.0, 0.0], [0.2, 0.0]] if start is None else [[start[0], np.log(start[1] / m)]]
    xi, logs = _minimize(_gpd_nll, starts, excess / m)
    return float(xi), m * float(np.exp(logs))


def fit_gev(x, block_size: int | None = None, *, column: str = "exec_ns") -> EVTFit:
    """GEV fit (maximum likelihood) on maxima of consecutive blocks of ``block_size`` jobs.

    ``block_size`` defaults to max(20, n // 100), i.e. about 100 blocks. Leftover values at
    the end that do not fill a block are ignored.
    """
    v = _series(x, column)
    if block_size is None:
        block_size = max(20, v.size // 100)
    nb = v.size // block_size
    if nb < 20:
        raise ValueError(f"block_size: only {nb} blocks of {block_size}; need at least 20")
    maxima = v[: nb * block_size].reshape(nb, block_size).max(axis=1)
    if np.ptp(maxima) == 0:
        raise ValueError("x: block maxima are all equal, no tail to fit")
    xi, loc, scale = _fit_gev_params(maxima)
    ks_s, ks_p, ad, ppcc = _gof(maxima, stats.genextreme(-xi, loc=loc, scale=scale))
    return EVTFit("gev", xi, loc, scale, nb, v.size, block_size=block_size,
                  ks_stat=ks_s, ks_p=ks_p, ad_stat=ad, ppcc=ppcc)


def threshold_scan(
    x,
    levels: Sequence[float] = tuple(np.round(np.linspace(0.90, 0.99, 10), 3)),
    *,
    min_exceedances: int = 50,
    column: str = "exec_ns",
) -> pd.DataFrame:
    """GPD fits over candidate thresholds (empirical quantiles at ``levels``), one row each."""
    v = _series(x, column)
    sv = np.sort(v)  # one sort for the ten thresholds, np.quantile's values bit for bit
    rows = []
    for lv in levels:
        u = quantile_of_sorted(sv, float(lv))
        exc = v[v > u] - u
        if exc.size < min_exceedances or np.ptp(exc) == 0:
            continue
        xi, scale = _fit_gpd_params(exc)
        ks_s, ks_p, ad, ppcc = _gof(exc, stats.genpareto(xi, scale=scale))
        rows.append(dict(level=lv, threshold=u, n_exceed=exc.size, shape=xi, scale=scale,
                         ks_stat=ks_s, ks_p=ks_p, ad_stat=ad, ppcc=ppcc))
    return pd.DataFrame(rows, columns=["level", "threshold", "n_exceed", "shape", "scale",
                                       "ks_stat", "ks_p", "ad_stat", "ppcc"])


def fit_gpd(
    x,
    threshold: float | None = None,
    *,
    alpha: float = 0.05,
    min_exceedances: int = 50,
    column: str = "exec_ns",
) -> tuple[EVTFit | None, pd.DataFrame]:
    """GPD fit over a threshold; returns (fit or None, threshold scan table).

    Threshold selection when ``threshold`` is None: the *lowest* candidate of
    :func:`threshold_scan` whose fitted GPD passes the KS test (p ≥ ``alpha``) — the most
    data the tail model is consistent with. None when no candidate passes.
    """
    v = _series(x, column)
    chosen = None
    if threshold is None:
        scan = threshold_scan(v, min_exceedances=min_exceedances)
        passing = scan[scan["ks_p"] >= alpha]
        if passing.empty:
            return None, scan
        chosen = passing.iloc[0]
        threshold = float(chosen["threshold"])
    else:
        scan = pd.DataFrame()
    exc = v[v > threshold] - threshold
    if exc.size < min_exceedances:
        raise ValueError(f"threshold: only {exc.size} exceedances, need {min_exceedances}")
    if chosen is not None:  # the scan fitted these very excesses, from the same starts: its numbers
        xi, scale, ks_s, ks_p, ad, ppcc = (float(chosen[k]) for k in ("shape", "scale", "ks_stat", "ks_p", "ad_stat", "ppcc"))
    else:
        xi, scale = _fit_gpd_params(exc)
        ks_s, ks_p, ad, ppcc = _gof(exc, stats.genpareto(xi, scale=scale))
    fit = EVTFit("gpd", xi, float(threshold), scale, exc.size, v.size, zeta=exc.size / v.size,
                 ks_stat=ks_s, ks_p=ks_p, ad_stat=ad, ppcc=ppcc)
    return fit, scan


# --------------------------------------------------------------------------- pWCET


@dataclass
class PWCETResult:
    """pWCET estimate or a refusal. ``table``: exceedance, pwcet, ci_low, ci_high."""

    refused: str | None
    model: str
    n: int
    iid: pd.DataFrame
    fit: EVTFit | None = None
    thresholds: pd.DataFrame | None = None
    table: pd.DataFrame = field(
        default_factory=lambda: pd.DataFrame(columns=["exceedance", "pwcet", "ci_low", "ci_high"])
    )
    level: float = 0.95

    @property
    def ok(self) -> bool:
        return self.refused is None

    def raise_if_refused(self) -> "PWCETResult":
        if self.refused is not None:
            raise PWCETRefused(f"pWCET refused: {self.refused}")
        return self


def _bootstrap_quantiles(fit: EVTFit, probs: np.ndarray, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """Parametric bootstrap: simulate from the fit, refit, take the quantiles (n_boot × len(p))."""
    out = np.full((n_boot, probs.size), np.nan)
    for b in range(n_boot):
        try:
            if fit.model == "gev":
                sim = stats.genextreme.rvs(-fit.shape, loc=fit.loc, scale=fit.scale,
                                           size=fit.n_fit, random_state=rng)
                # The simulated data come from the fit, so start the search there.
                xi, loc, scale = _fit_gev_params(sim, start=(fit.shape, fit.loc, fit.scale))
                f = EVTFit("gev", xi, loc, scale, fit.n_fit, fit.n_total, block_size=fit.block_size)
            else:
                # The number of exceedances is itself binomial; resample it too.
                k = max(10, int(rng.binomial(fit.n_total, fit.zeta)))
                sim = stats.genpareto.rvs(fit.shape, scale=fit.scale, size=k, random_state=rng)
                xi, scale = _fit_gpd_params(sim, start=(fit.shape, fit.scale))
                f = EVTFit("gpd", xi, fit.loc, scale, k, fit.n_total, zeta=k / fit.n_total)
            out[b] = f.quantile(probs)
        except Exception:  # a failed refit is dropped, not fatal (noted by the NaN row)
            continue
    return out


# Profile likelihood (Coles 2001, §4.3.3): the quantile itself becomes a parameter, the
# others are maximised out, and the CI is where the deviance stays below χ²₁(level). Unlike a
# percentile bootstrap it is asymmetric where the likelihood is, which matters far in the
# tail (a long upper side). Computed on standardised data; the deviance is affine-invariant.


def _feasible(nll, params: list, data: np.ndarray, idx_logs: int) -> list:
    """Raise log σ until the support covers the data (a wider scale always does)."""
    p = list(params)
    for _ in range(40):
        if np.isfinite(nll(p, data)):
            return p
        p[idx_logs] += 0.5
    return p


def _root_side(g, q0: float, step: float, limit: float) -> float:
    """First crossing of g from q0 in the direction of ``step``: expanding bracket, then brentq."""
    a = q0
    for _ in range(60):
        b = a + step
        if np.isfinite(limit) and (b - limit) * np.sign(step) >= 0:
            b = limit - 1e-9 * np.sign(step) * max(1.0, abs(limit))
            if g(b) <= 0:
                return limit
            return optimize.brentq(g, min(a, b), max(a, b), xtol=1e-6 * max(1.0, abs(q0)))
        if g(b) > 0:
            return optimize.brentq(g, min(a, b), max(a, b), xtol=1e-6 * max(1.0, abs(q0)))
        a = b
        step *= 1.6
    return float(np.sign(step) * np.inf)


def _profile_gev(maxima: np.ndarray, fit: EVTFit, probs: np.ndarray, crit: float) -> tuple[np.ndarray, np.ndarray]:
    m, sd = float(maxima.mean()), float(maxima.std())
    z = (maxima - m) / sd
    mle = [fit.shape, (fit.loc - m) / sd, np.log(fit.scale / sd)]
    nll_hat = _gev_nll(mle, z)
    lo = np.full(probs.size, np.nan)
    hi = np.full(probs.size, np.nan)
    for i, p in enumerate(probs):
        pb = -np.expm1(fit.block_size * np.log1p(-p))
        yp = -np.log1p(-pb)

        def h(xi: float) -> float:
            return -np.log(yp) if abs(xi) < 1e-7 else (yp ** (-xi) - 1.0) / xi

        def full(params, data, zp):
            xi, logs = params
            return _gev_nll([xi, zp - np.exp(logs) * h(xi), logs], data)

        last = [mle[0], mle[2]]

        def prof(zp: float) -> float:
            best = None
            for start in (last, [mle[0], mle[2]], [0.0, mle[2]]):
                st0 = _feasible(lambda q, d: full(q, d, zp), start, z, 1)
                r = optimize.minimize(full, st0, args=(z, zp), method="Nelder-Mead",
                                      options={"xatol": 1e-5, "fatol": 1e-7, "maxiter": 1500})
                if np.isfinite(r.fun) and (best is None or r.fun < best.fun):
                    best = r
            if best is None:
                return np.inf
            last[:] = list(best.x)
            return float(best.fun)

        zq = (float(fit.quantile(p)) - m) / sd
        g = lambda q: 2.0 * (prof(q) - nll_hat) - crit
        if not g(zq) < 0:
            continue
        step = 0.25 * max(1.0, abs(zq - mle[1]))
        lo[i] = m + sd * _root_side(g, zq, -step, -np.inf)
        last[:] = [mle[0], mle[2]]
        hi[i] = m + sd * _root_side(g, zq, step, np.inf)
    return lo, hi


def _profile_gpd(excess: np.ndarray, fit: EVTFit, probs: np.ndarray, crit: float) -> tuple[np.ndarray, np.ndarray]:
    sc = float(excess.mean())
    y = excess / sc
    nll_hat = _gpd_nll([fit.shape, np.log(fit.scale / sc)], y)
    grid = np.linspace(-0.9, 2.0, 30)
    lo = np.full(probs.size, np.nan)
    hi = np.full(probs.size, np.nan)
    for i, p in enumerate(probs):
        r = p / fit.zeta
        if r >= 1.0:
            continue

        def prof(q: float) -> float:
            def f(xi: float) -> float:
                sig = q / -np.log(r) if abs(xi) < 1e-7 else q * xi / (r ** (-xi) - 1.0)
                return _gpd_nll([xi, np.log(sig)], y) if sig > 0 else np.inf

            vals = np.array([f(x) for x in grid])
            if not np.isfinite(vals).any():
                return np.inf
            j = int(np.nanargmin(vals))
            res = optimize.minimize_scalar(f, bounds=(grid[max(j - 1, 0)], grid[min(j + 1, grid.size - 1)]),
                                           method="bounded", options={"xatol": 1e-6})
            return float(min(res.fun, vals[j]))

        qh = (float(fit.quantile(p)) - fit.loc) / sc
        g = lambda q: 2.0 * (prof(q) - nll_hat) - crit
        if not g(qh) < 0:
            continue
        step = 0.25 * qh
        lo[i] = fit.loc + sc * _root_side(g, qh, -step, 0.0)
        hi[i] = fit.loc + sc * _root_side(g, qh, step, np.inf)
    return lo, hi


def pwcet(
    x,
    *,
    method: str = "gpd",
    probabilities: Sequence[float] = DEFAULT_PROBABILITIES,
    alpha: float = 0.05,
    level: float = 0.95,
    ci: str = "profile",
    n_boot: int = 200,
    min_samples: int = 300,
    min_exceedances: int = 50,
    block_size: int | None = None,
    threshold: float | None = None,
    lags: int | None = None,
    column: str = "exec_ns",
    seed: int | np.random.Generator | None = None,
) -> PWCETResult:
    """pWCET curve with confidence bounds, or a refusal naming the failed check.

    ``x``: execution (or response) times in time order, or a job table (``column`` used,
    warm-up dropped). ``method``: 'gpd' (peaks over threshold) or 'gev' (block maxima).
    ``probabilities``: per-job exceedance probabilities. Bounds at confidence ``level``:
    ``ci='profile'`` (default) profile-likelihood interval of each quantile (an upper bound
    of inf means the data cannot bound it), or ``ci='bootstrap'``: percentile interval of
    ``n_boot`` parametric-bootstrap refits. With GPD, probabilities
    above the exceedance rate of the threshold are outside the tail model and give NaN.
    """
    if method not in ("gpd", "gev"):
        raise ValueError(f"method: must be 'gpd' or 'gev', got {method!r}")
    if ci not in ("profile", "bootstrap"):
        raise ValueError(f"ci: must be 'profile' or 'bootstrap', got {ci!r}")
    probs = np.asarray(probabilities, dtype=float)
    if np.any((probs <= 0) | (probs >= 1)):
        raise ValueError("probabilities: must lie in (0, 1)")
    v = _series(x, column)
    empty_iid = pd.DataFrame(columns=["test", "statistic", "p_value", "threshold", "passed"])
    if v.size < min_samples:
        return PWCETResult(f"sample_size: n={v.size} < min_samples={min_samples}", method, v.size, empty_iid)
    iid = iid_checks(v, lags=lags, alpha=alpha)
    failed = iid[~iid["passed"]]
    if not failed.empty:
        reason = "; ".join(f"{r.test} p={r.p_value:.3g} < {r.threshold:.3g}" for r in failed.itertuples())
        return PWCETResult(reason, method, v.size, iid)
    scan = None
    try:
        if method == "gev":
            fit = fit_gev(v, block_size)
        else:
            fit, scan = fit_gpd(v, threshold, alpha=alpha, min_exceedances=min_exceedances)
    except ValueError as exc:
        return PWCETResult(f"fit: {exc}", method, v.size, iid)
    if fit is None:
        if scan is None or scan.empty:
            reason = f"threshold: no candidate threshold leaves {min_exceedances} distinct exceedances"
        else:
            reason = f"gof_ks: no threshold passes, best p={float(scan['ks_p'].max()):.3g} < {alpha}"
        return PWCETResult(reason, method, v.size, iid, thresholds=scan)
    if not fit.ks_p >= alpha:
        return PWCETResult(f"gof_ks p={fit.ks_p:.3g} < {alpha}", method, v.size, iid, fit, scan)
    if ci == "profile":
        crit = float(stats.chi2.ppf(level, 1))
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore", RuntimeWarning)
            if method == "gev":
                nb = v.size // fit.block_size
                maxima = v[: nb * fit.block_size].reshape(nb, fit.block_size).max(axis=1)
                lo, hi = _profile_gev(maxima, fit, probs, crit)
            else:
                lo, hi = _profile_gpd(v[v > fit.loc] - fit.loc, fit, probs, crit)
    else:
        rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
        boot = _bootstrap_quantiles(fit, probs, n_boot, rng)
        a = (1.0 - level) / 2.0
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns (p above GPD zeta)
            lo = np.nanquantile(boot, a, axis=0)
            hi = np.nanquantile(boot, 1.0 - a, axis=0)
    table = pd.DataFrame({"exceedance": probs, "pwcet": fit.quantile(probs), "ci_low": lo, "ci_high": hi})
    return PWCETResult(None, method, v.size, iid, fit, scan, table, level)
