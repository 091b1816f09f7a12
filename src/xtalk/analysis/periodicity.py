"""Is a series of event times periodic, with what period, and how sure are we?

Seed 000 §5.3.2: execution-time peaks of a solo task came "20 in 625 seconds" whatever the
task's period, with "exactly 9 small peaks between two big peaks". The peaks are events in
time (an OS service waking up), seen only at the victim's job times: a disturber of period
37.3 ms hits a 10 ms victim at jobs 3 or 4 apart. Two traps follow from that sampling:

- the events sit on the victim's lattice (multiples of its period P), so *every* set of
  events is perfectly "periodic" at P and its multiples' harmonics: that alias must never be
  the answer (the victim's own period is not a disturbance);
- a disturbance whose period is not a multiple of P gives irregular gaps in jobs (3, 4, 4,
  3, 4 …): gap-based estimates fail, a spectral one does not.

Method: the events become a 0/1 indicator on the sampling lattice (resolution = P), minus its
mean; its zero-padded FFT gives the Rayleigh power of every trial frequency between
``min_cycles`` cycles over the span and the lattice's Nyquist frequency 1/(2P), so periods
from 2P up. Sharp periodic events put power in many harmonics, so the statistic is de
Jager's H (de Jager, Raubenheimer & Swanepoel 1989): H = max over m ≤ 8 of Z²_m − 4m + 4,
where Z²_m sums the first m harmonics' powers; harmonics above the lattice's Nyquist
frequency are left out (they fold back onto lower ones, or onto the lattice line where
every event set has full power). The ``p_value`` is the rank of the observed maximum of H
among the maxima of as many episodes shuffled uniformly over the observed span (a Poisson
null conditioned on the count: the trial factor of searching many frequencies is in it,
and H's analytic tail is far too optimistic for the few events of seed-like runs; see
:func:`_null_rank` for the sequential stop that keeps long runs cheap);
``confidence`` = 1 − p_value. Below ``alpha`` the series has a period, refined by least
squares on t ≈ t0 + n·T; otherwise
"no period". ``regularity`` is the mean resultant length of the events' phases at the
period (1: every event at the same phase; about 1/√n for random events).
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass

import numpy as np
from scipy import fft as sfft


@dataclass(frozen=True)
class Periodicity:
    """Result of :func:`periodicity`.

    ``period`` (in the unit of the times; NaN when ``periodic`` is False), ``p_value`` (false
    alarm probability of the best candidate under a Poisson null, all trial frequencies
    accounted for), ``confidence`` = 1 − p_value, ``regularity`` (mean resultant length of
    the phases at the period, 0–1), ``coverage`` (fraction of the period's cycles over the
    span that hold an event: below 1 when occurrences were missed), ``harmonics`` (m of the
    H statistic), ``n_events`` (times given), ``n_episodes`` (after merging events in
    adjacent lattice slots: a disturbance hitting two consecutive jobs is one occurrence),
    ``phase`` (a time of the fitted lattice t0 + n·period), ``best_period`` (the candidate
    tested, also when not significant), ``reason`` (why there is no period, else "").
    """

    periodic: bool
    period: float
    p_value: float
    confidence: float
    regularity: float
    coverage: float
    harmonics: int
    n_events: int
    n_episodes: int
    phase: float
    best_period: float
    reason: str = ""


def _none(n: int, n_ep: int, reason: str) -> Periodicity:
    nan = float("nan")
    return Periodicity(False, nan, 1.0, 0.0, nan, nan, 0, n, n_ep, nan, nan, reason)


def episodes(bins: np.ndarray) -> np.ndarray:
    """Sorted unique lattice slots with the slots that directly follow another one dropped."""
    b = np.unique(bins)
    if b.size == 0:
        return b
    return b[np.concatenate([[True], np.diff(b) > 1])]


def periodicity(
    times,
    *,
    resolution: float,
    start: float | None = None,
    end: float | None = None,
    alpha: float = 0.01,
    min_events: int = 5,
    min_cycles: float = 3.0,
    min_coverage: float = 0.5,
    max_harmonics: int = 8,
    shuffles: int = 199,
    seed: int = 0,
) -> Periodicity:
    """Period of event ``times`` sampled on a lattice of step ``resolution``, with a test.

    ``resolution`` is the time quantum of the events (a victim's period when the events are
    its spiking jobs' release times; a clock's resolution otherwise). ``start``/``end``: the
    observed span (default: first and last event; give the run's first and last job so that
    quiet stretches count as observed). Periods from 2·resolution to span/``min_cycles`` are
    searched, and no shorter than ``min_coverage`` · span / episodes: a periodic disturbance
    shows in at least that fraction of its cycles. The p-value is the rank of the observed
    H among ``shuffles`` placements of as many episodes uniformly at random over the span's
    slots (a Poisson null conditioned on the count; ``seed`` makes it reproducible).
    Fewer than ``min_events`` episodes: no period ("too few events").
    """
    if not resolution > 0:
        raise ValueError(f"resolution: must be positive, got {resolution}")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha: must be in (0, 1), got {alpha}")
    if shuffles < 1:
        raise ValueError(f"shuffles: must be at least 1, got {shuffles}")
    t = np.asarray(times, dtype=float)
    t = np.sort(t[np.isfinite(t)])
    n = int(t.size)
    if n == 0:
        return _none(0, 0, "no events")
    t0 = float(t[0] if start is None else min(start, t[0]))
    t1 = float(t[-1] if end is None else max(end, t[-1]))
    slots = np.rint((t - t0) / resolution).astype(np.int64)
    ep = episodes(slots)
    k = int(ep.size)
    if k < min_events:
        return _none(n, k, f"too few events ({k} < {min_events})")
    length = int(np.rint((t1 - t0) / resolution)) + 1
    # Frequencies in cycles per slot: from min_cycles over the span to the highest one a
    # periodic disturbance with this many episodes can have (and the lattice's Nyquist).
    f_lo = min_cycles / length
    f_hi = min(0.5, k / (min_coverage * length))
    if f_hi <= f_lo:
        return _none(n, k, "span too short for a period of 2 samples or more")
    # Bins coarser than a slot lose nothing below a quarter of their own Nyquist frequency:
    # the highest harmonic examined stays there, and the FFTs get shorter.
    coarse = max(1, int(1.0 / (4.0 * min(0.5, max_harmonics * f_hi))))
    bins = -(-length // coarse)
    # A trial frequency within half a bin of the true one puts its m-th harmonic m/2 bins
    # off: bins of 1/(2·max_harmonics) of the span's resolution keep every harmonic in phase.
    lp = sfft.next_fast_len(2 * max_harmonics * bins)
    lo = int(np.ceil(f_lo * coarse * lp))
    top = int(np.floor(f_hi * coarse * lp))
    nyq = lp // 2  # harmonics stay below the (coarse) lattice's Nyquist frequency
    if top <= lo:
        return _none(n, k, "span too short for a period of 2 samples or more")
    cand = np.arange(lo, top + 1, dtype=np.int64)

    obs = _centred([ep // coarse], k, bins, lp)
    h_obs, i_obs, m_obs, p_cand = _h_statistic(obs, k, length, cand, nyq, max_harmonics)
    i_best = _fundamental(p_cand[0], cand, int(i_obs[0]))
    null = _null_source((seed, length, k, coarse, bins, lp, lo, top, max_harmonics, shuffles))
    p = _null_rank(float(h_obs[0]), null.cursor(), lambda x: x, shuffles, alpha)
    period0 = lp * coarse * resolution / float(cand[i_best])
    period, phase, reg, cov = _refine(t0 + ep * resolution, period0, t0, t1)
    m = int(m_obs[0])
    if p >= alpha or not np.isfinite(period):
        return Periodicity(False, float("nan"), p, 1.0 - p, reg, cov, m, n, k, float("nan"), period,
                           f"no significant period (p = {p:.2g} ≥ {alpha})")
    return Periodicity(True, period, p, 1.0 - p, reg, cov, m, n, k, phase, period)


def _fundamental(power: np.ndarray, cand: np.ndarray, i: int, keep: float = 0.5) -> int:
    """The lowest subharmonic f/j of the best candidate f with a power of its own.

    Sharp events of period T are in phase at every multiple j/T, so H can be as high at 2/T
    as at 1/T. H cannot tell them apart (a subharmonic's H holds the harmonic f too), the
    first harmonic can: events of period T have full power at 1/T itself, events of period
    T/2 have none there. So f/j is taken when its own power is ``keep`` of f's or more."""
    best = i
    # Consecutive candidates (periodicity's): the few within 1 of a target are searched in a
    # window around it, with the same test, not among all of them.
    step = cand.size > 1 and bool(np.all(np.diff(cand) == 1))
    for j in range(2, 64):
        target = cand[i] / j
        if target < cand[0] - 1:
            break
        if step:
            w = max(int(np.floor(target)) - 2 - int(cand[0]), 0)
            near = np.flatnonzero(np.abs(cand[w:w + 6] - target) <= 1.0) + w
        else:
            near = np.flatnonzero(np.abs(cand - target) <= 1.0)
        if near.size:
            c = int(near[np.argmax(power[near])])
            if power[c] >= keep * power[i]:
                best = c
    return best


def _null_rank(h: float, draw, stat, shuffles: int, alpha: float, chunk: int = 32, hits_enough: int = 10) -> float:
    """p-value of ``h`` against shuffled statistics, drawn ``chunk`` at a time.

    Sequential (Besag & Clifford 1991): once ``hits_enough`` shuffles reach ``h`` the
    p-value is hits / shuffles drawn, and no more are needed (most non-periodic series stop
    after one chunk). When none reaches it after two chunks and a Gumbel law fitted to the
    shuffled maxima (the maximum of many nearly independent powers) puts ``h`` beyond
    alpha/100, that tail is the p-value: the rank of 199 shuffles would only say < 0.005.
    Otherwise the rank among all ``shuffles``: (1 + hits) / (1 + shuffles)."""
    seen = np.zeros(0)
    while seen.size < shuffles:
        seen = np.concatenate([seen, stat(draw(min(chunk, shuffles - seen.size)))])
        hits = int(np.sum(seen >= h))
        if hits >= hits_enough:
            return hits / seen.size
        if hits == 0 and seen.size >= 2 * chunk:
            beta = float(np.std(seen)) * np.sqrt(6.0) / np.pi
            if beta > 0:
                mu = float(np.mean(seen)) - 0.5772156649 * beta
                tail = float(-np.expm1(-np.exp(-(h - mu) / beta)))
                if tail < alpha / 100:
                    return max(tail, 1e-300)
    return float((1 + np.sum(seen >= h)) / (1 + seen.size))


class _NullDraws:
    """The shuffled H statistics of one null (``seed``, span, episodes, lattice), chunk after
    chunk as :func:`periodicity` draws them from ``default_rng(seed)``, kept once drawn.

    The null depends on those parameters only, never on the observed events: runs of one
    experiment with the same span and as many spike episodes test against the same shuffles,
    which are drawn and transformed once (the same numbers as drawing them again: the
    generator is the same and runs through the same draws in the same order)."""

    def __init__(self, key: tuple) -> None:
        self.seed, self.length, self.k, self.coarse, self.bins, self.lp, lo, top, self.max_harmonics, _ = key
        self.cand = np.arange(lo, top + 1, dtype=np.int64)
        self.rng = np.random.default_rng(self.seed)
        self.chunks: list[np.ndarray] = []
        self.lock = threading.Lock()  # campaign targets run in threads: one drawer at a time

    def chunk(self, i: int, b: int) -> np.ndarray:
        with self.lock:
            return self._chunk(i, b)

    def _chunk(self, i: int, b: int) -> np.ndarray:
        while len(self.chunks) <= i:
            x = _centred([self.rng.choice(self.length, self.k, replace=False) // self.coarse for _ in range(b)],
                         self.k, self.bins, self.lp)
            self.chunks.append(_h_statistic(x, self.k, self.length, self.cand, self.lp // 2, self.max_harmonics)[0])
        if self.chunks[i].size != b:
            raise AssertionError("null chunks are drawn in the same sizes by every caller")
        return self.chunks[i]

    def cursor(self):
        """``draw(b)`` for :func:`_null_rank`: the next chunk's H values (its ``stat`` is then
        the identity)."""
        it = iter(range(1 << 30))
        return lambda b: self.chunk(next(it), b)


#: Nulls kept (most recent last); a report tests one null per distinct (span, episodes).
_NULLS: dict[tuple, _NullDraws] = {}
_NULLS_KEPT = 64
_NULLS_LOCK = threading.Lock()


def _null_source(key: tuple) -> _NullDraws:
    """The null of ``key`` (its first field the seed), kept when the seed is an integer (a
    generator or None draws anew every time, as it did before nulls were kept)."""
    if not isinstance(key[0], (int, np.integer)) or isinstance(key[0], bool):
        return _NullDraws(key)
    with _NULLS_LOCK:
        src = _NULLS.pop(key, None)
        if src is None:
            src = _NullDraws(key)
            while len(_NULLS) >= _NULLS_KEPT:
                _NULLS.pop(next(iter(_NULLS)))
        _NULLS[key] = src
        return src


def _counts(bins: np.ndarray, size: int) -> np.ndarray:
    return np.bincount(bins, minlength=size).astype(float)


def _centred(rows: list[np.ndarray], k: int, size: int, lp: int) -> np.ndarray:
    """The event counts of each row of lattice bins (``size`` of them), minus their mean
    ``k / size``, zero-padded to ``lp`` columns: written in place into one zeroed block (the
    values of ``_counts(row, size) - k / size``; rfft's own padding copies every row again,
    two thirds of a batch's transform time)."""
    x = np.zeros((len(rows), lp))
    mean = k / size
    for i, r in enumerate(rows):
        np.subtract(np.bincount(r, minlength=size), mean, out=x[i, :size])
    return x


#: Threads of each batch of transforms (the shuffles of the test are a batch of rows): the
#: CPUs this process may run on (a pinned or cpuset-limited report sees fewer than the machine's).
_WORKERS = max(1, min(4, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1))


def _h_statistic(x: np.ndarray, k: int, length: int, cand: np.ndarray, nyq: int, max_harmonics: int):
    """(H, candidate index, m, power at the candidates) of each row of :func:`_centred`
    event counts ``x``: de Jager's H over the candidate frequency bins, harmonics m·f kept
    below ``nyq`` (above it they fold back onto lower ones, or onto the lattice line where
    every event set has full power). The power is computed only at the bins read (the
    same numbers, element by element, as the whole spectrum's)."""
    spec = sfft.rfft(x, axis=1, workers=_WORKERS)  # rows transformed apart: the same numbers on any count
    norm = k * (1.0 - k / length)

    def power(idx: np.ndarray) -> np.ndarray:
        s = spec[:, idx]
        return (s.real**2 + s.imag**2) / norm

    z2 = np.zeros((x.shape[0], cand.size))
    best = np.full((x.shape[0], cand.size), -np.inf)
    best_m = np.zeros((x.shape[0], cand.size), dtype=np.int64)
    p_cand = None
    for m in range(1, max_harmonics + 1):
        q = int(np.searchsorted(cand, nyq // m, side="right"))  # candidates whose m·f is below nyq
        if q == 0:
            break
        pm = power(m * cand[:q])
        if m == 1:
            p_cand = pm if q == cand.size else None
        z2[:, :q] += 2.0 * pm
        h = z2[:, :q] - (4.0 * m - 4.0)
        better = h > best[:, :q]
        np.maximum(best[:, :q], h, out=best[:, :q])
        best_m[:, :q][better] = m
    if p_cand is None:
        p_cand = power(cand)
    i = np.argmax(best, axis=1)
    rows = np.arange(x.shape[0])
    return best[rows, i], i, best_m[rows, i], p_cand


def _refine(t: np.ndarray, period: float, t0: float, t1: float) -> tuple[float, float, float, float]:
    """(period, phase, regularity, coverage): least squares of t ≈ phase + n·period over the
    events within a quarter cycle of the lattice (the others are not occurrences of it)."""
    for _ in range(3):  # a better period re-assigns cycle numbers; two rounds settle it
        ph = np.angle(np.mean(np.exp(2j * np.pi * t / period))) / (2 * np.pi) * period
        c = (t - ph) / period
        cyc = np.rint(c)
        on = np.abs(c - cyc) <= 0.25
        if np.unique(cyc[on]).size < 2:
            break
        slope, icpt = np.polyfit(cyc[on], t[on], 1)
        if not slope > 0:
            break
        period = float(slope)
    reg = float(np.abs(np.mean(np.exp(2j * np.pi * t / period))))
    ph = float(np.angle(np.mean(np.exp(2j * np.pi * t / period))) / (2 * np.pi) * period)
    c = (t - ph) / period
    on = np.abs(c - np.rint(c)) <= 0.25
    cycles = max(1.0, np.floor((t1 - t0) / period) + 1.0)
    cov = float(min(1.0, np.unique(np.rint(c[on])).size / cycles))
    first = ph + period * np.ceil((t0 - ph) / period)  # the lattice's first point in the span
    return period, float(first), reg, cov
