"""Wake-up series of a periodic victim: rel(k), Δw(k), drift and period quantisation.

Seed 002 §VI-C (= seed 000 §5.3.3) measured the wake-up date w(k) of a 125 ms task with
CLOCK_MONOTONIC and plotted
  - the relative wake-up  rel(k) = w(k) − w(0) − k·P   (Fig. 10: a linear drift, 40 µs early
    after 15 000 steps), and
  - the wake-up delta     Δw(k) = w(k) − w(k−1) − P    (Fig. 11: peaks, a late wake-up
    followed by an early one as the scheduler catches up).
With the time-synchronisation services removed (seed 000 §5.3.3, Fig. 5.22–5.23) the drift
became an oscillating 1–3.5 ms delay and consecutive wake-ups were 124 ms or 128 ms apart,
128 ms every 4th step: a period *quantised* to a coarse tick (4 ms is one jiffy at
CONFIG_HZ=250, which is our hypothesis for that pattern, not the seed's).

Two things besides the timer move w(k), and neither is timer drift:

- the reference. The seed's w(0) is one job's wake-up; a first (warm-up) job that woke 46 ms
  late shifts the whole curve by −46 ms. Here rel(k) is the lateness against the planned
  release schedule, w(k) − release(k), minus its median over the first idle measured jobs
  (the minimum-lateness baseline), so without drift rel(k) stays around 0 whatever one job
  did;
- backlog. A job released while the previous one still runs (previous end > release, an
  overload) wakes when that one ends, not when its timer fires: its lateness is the
  previous job's overrun, and under sustained overload it grows by (execution − P) per job,
  a slope that once read as hundreds of ppm of drift. Such jobs are flagged ``backlog`` and
  left out of the drift fit, which only sees wake-ups of an idle victim.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd
from scipy import stats

from .runorder import run_job_order, stretch_starts


def _rows(jobs: pd.DataFrame, include_warmup: bool) -> pd.DataFrame:
    """The jobs a wake-up series is made of (warm-up ones left out unless asked for); a table
    without job indices or wake-up times is refused."""
    for col in ("job", "wakeup_ns"):
        if col not in jobs.columns:
            raise ValueError(f"jobs: missing column {col!r}")
    if not include_warmup and "warmup" in jobs.columns:
        return jobs[~jobs["warmup"].astype(bool)]
    return jobs


def _runs(jobs: pd.DataFrame, include_warmup: bool):
    df = _rows(jobs, include_warmup)
    if "run_id" in df.columns:
        for rid, g in df.groupby("run_id", sort=True):
            yield rid, _by_job(g)
    else:
        yield None, _by_job(df)


def _by_job(g: pd.DataFrame) -> pd.DataFrame:
    """``g.sort_values("job")``: a stable argsort of the indices (a run's measured jobs then
    its warm-up jobs are two sorted stretches, which it merges in one pass) when the indices
    are distinct, where every sort gives the same order; pandas' own sort otherwise."""
    job = g["job"].to_numpy()
    if job.dtype.kind in "iu":
        order = np.argsort(job, kind="stable")
        s = job[order]
        if s.size < 2 or bool(np.all(s[1:] > s[:-1])):
            return g.take(order)
    return g.sort_values("job")


def _period(g: pd.DataFrame, period_ns: int | None) -> int:
    if period_ns is not None:
        return int(period_ns)
    if "period_ns" not in g.columns:
        raise ValueError("period_ns: not given and no 'period_ns' column in the job table")
    return int(g["period_ns"].iloc[0])


#: Idle measured jobs whose median lateness is the reference of rel(k).
REFERENCE_JOBS = 100


def wakeup_series(
    jobs: pd.DataFrame, *, period_ns: int | None = None, include_warmup: bool = True
) -> pd.DataFrame:
    """Per job: k, rel_ns = rel(k), dw_ns = Δw(k), interval_ns = w(k) − w(k−1), backlog.

    k counts from the first job of each run. rel(k) is the wake-up lateness against the
    planned release, w(k) − release(k) (w(k) − w(0) − k·P without a ``release_ns`` column),
    minus its median over the first ``REFERENCE_JOBS`` idle measured jobs (not warm-up, not
    backlogged; all jobs when there are none): a late first job does not offset the curve.
    ``backlog_ns`` = previous job's end − this release when positive (the job was released
    while the previous one ran: it could not wake before that end), ``backlog`` its flag;
    both need ``end_ns`` (without it no job is flagged). Integer arithmetic on int64 keeps
    nanosecond exactness over long runs. When job indices have gaps (a lost job),
    Δw(k) = w(k) − w(j) − (k − j)·P over the gap and ``interval_ns`` is NaN there.
    Warm-up jobs are kept by default (flagged ``warmup``): the scheduler's timer does not
    warm up, but they are never the reference.
    """
    fast = _series_at_once(jobs, period_ns, include_warmup)
    if fast is not None:
        return fast
    out = []
    for rid, g in _runs(jobs, include_warmup):
        if g.empty:
            continue
        p = _period(g, period_ns)
        job = g["job"].to_numpy(dtype=np.int64)
        w = g["wakeup_ns"].to_numpy(dtype=np.int64)
        k = job - job[0]
        warm = g["warmup"].to_numpy(dtype=bool) if "warmup" in g.columns else np.zeros(w.size, dtype=bool)
        if "release_ns" in g.columns:
            release = g["release_ns"].to_numpy(dtype=np.int64)
        else:
            release = w[0] + k * p
        late = w - release
        dk = np.diff(job)
        back = np.zeros(w.size, dtype=np.int64)
        if "end_ns" in g.columns:
            end = g["end_ns"].to_numpy(dtype=np.int64)
            over = end[:-1] - release[1:]
            back[1:] = np.where((dk == 1) & (over > 0), over, 0)
        backlog = back > 0
        ref_pool = np.flatnonzero(~warm & ~backlog)
        if ref_pool.size == 0:
            ref_pool = np.flatnonzero(~backlog) if (~backlog).any() else np.arange(w.size)
        ref = int(np.rint(np.median(late[ref_pool[:REFERENCE_JOBS]])))
        rel = late - ref
        dw = np.empty(w.size)
        dw[0] = np.nan
        dw[1:] = np.diff(w) - dk * p
        interval = np.full(w.size, np.nan)
        interval[1:] = np.where(dk == 1, np.diff(w), np.nan)
        d = pd.DataFrame({"job": job, "k": k, "wakeup_ns": w, "rel_ns": rel, "dw_ns": dw,
                          "interval_ns": interval, "period_ns": p, "warmup": warm,
                          "backlog_ns": back, "backlog": backlog})
        if "release_ns" in g.columns:
            d["latency_ns"] = late
        if rid is not None:
            d.insert(0, "run_id", rid)
        out.append(d)
    if not out:
        return pd.DataFrame(columns=["job", "k", "wakeup_ns", "rel_ns", "dw_ns", "interval_ns", "period_ns", "warmup",
                                     "backlog_ns", "backlog"])
    return pd.concat(out, ignore_index=True)


def _series_at_once(jobs: pd.DataFrame, period_ns: int | None, include_warmup: bool) -> pd.DataFrame | None:
    """:func:`wakeup_series` of every run at once, on the columns (the rows in run, then job
    order; each run's numbers from its stretch of the ordered arrays): the same
    table, row for row, as the loop over runs (a frame per run, which at 10^7 jobs cost
    seconds). None where the loop must decide: no ``run_id``, no job, job indices that are
    not distinct integers within a run, a missing period."""
    df = _rows(jobs, include_warmup)
    if "run_id" not in df.columns or df.empty or df["job"].dtype.kind not in "iu":
        return None
    if period_ns is None and "period_ns" not in df.columns:
        return None
    # The runs in groupby's order (sorted; a categorical's in its categories' order), NaN left out.
    codes, uniques = pd.factorize(df["run_id"], sort=True)
    job_all = df["job"].to_numpy()
    order = run_job_order(codes, job_all, len(uniques))
    c = codes[order] if order is not None else codes[:0]
    if c.size == 0:
        return None  # no rows with a run, or repeated indices: the loop's sort decides their order
    job = job_all[order].astype(np.int64)
    first = stretch_starts(c)
    same = np.ones(job.size, dtype=bool)
    same[first] = False  # rows with a previous job in the same run
    lengths = np.diff(np.append(first, job.size))
    # Each run's value on its rows by np.repeat, and differences written in place (out=):
    # at 10^7 rows every temporary array is fresh memory, and its page faults cost more
    # than the arithmetic.
    if period_ns is not None:
        p_run = np.full(first.size, int(period_ns), dtype=np.int64)
    else:
        pv = df["period_ns"].to_numpy()[first if isinstance(order, slice) else order[first]]
        p_run = np.array([int(x) for x in pv], dtype=np.int64)
    p = np.repeat(p_run, lengths)
    w = df["wakeup_ns"].to_numpy(dtype=np.int64)[order]
    k = np.repeat(job[first], lengths)
    np.subtract(job, k, out=k)
    warm = df["warmup"].to_numpy(dtype=bool)[order] if "warmup" in df.columns else np.zeros(w.size, dtype=bool)
    has_release = "release_ns" in df.columns
    if has_release:
        release = df["release_ns"].to_numpy(dtype=np.int64)[order]
    else:
        release = k * p
        release += np.repeat(w[first], lengths)
    late = w - release
    dk = _diff(job)
    dw_int = _diff(w)
    one_step = same & (dk == 1)
    if "end_ns" in df.columns:
        end = df["end_ns"].to_numpy(dtype=np.int64)[order]
        back = np.empty(w.size, dtype=np.int64)
        back[0] = 0
        np.subtract(end[:-1], release[1:], out=back[1:])
        del end
        back *= one_step & (back > 0)
    else:
        back = np.zeros(w.size, dtype=np.int64)
    backlog = back > 0
    ref = np.empty(first.size, dtype=np.int64)
    for i, (a, n) in enumerate(zip(first, lengths)):
        b_, wm, lt = backlog[a:a + n], warm[a:a + n], late[a:a + n]
        pool = np.flatnonzero(~wm & ~b_)
        if pool.size == 0:
            pool = np.flatnonzero(~b_) if (~b_).any() else np.arange(n)
        ref[i] = int(np.rint(np.median(lt[pool[:REFERENCE_JOBS]])))
    rel = np.repeat(ref, lengths)
    np.subtract(late, rel, out=rel)
    dk *= p  # dk is not needed after this: Δw(k) = w(k) − w(j) − (k − j)·P
    np.subtract(dw_int, dk, out=dk)
    dw = dk.astype(float)
    dw[~same] = np.nan
    interval = dw_int.astype(float)
    interval[~one_step] = np.nan
    rid = pd.Series([uniques[i] for i in range(len(uniques))]).array.take(c)  # as the loop inserts each scalar
    d = pd.DataFrame({"run_id": rid, "job": job, "k": k, "wakeup_ns": w, "rel_ns": rel, "dw_ns": dw,
                      "interval_ns": interval, "period_ns": p, "warmup": warm, "backlog_ns": back, "backlog": backlog,
                      **({"latency_ns": late} if has_release else {})},
                     copy=False)  # the arrays are this function's own: no copy into consolidated blocks
    return d


#: The columns of :func:`wakeup_series`' table, in its order (``latency_ns`` with a release column).
SERIES_COLUMNS = ("run_id", "job", "k", "wakeup_ns", "rel_ns", "dw_ns", "interval_ns", "period_ns", "warmup",
                  "backlog_ns", "backlog", "latency_ns")
_I32 = np.iinfo(np.int32)


def series_of_runs(runs: Sequence[tuple[int, dict]], categories: pd.Index, *, ordered: bool = False,
                   columns: Sequence[str] | None = None, narrow: bool = False) -> pd.DataFrame | None:
    """:func:`wakeup_series` of runs handed over one by one, each run's numbers written
    into the table's columns at its rows: ``runs`` is (code into ``categories``, the run's
    columns ``job``, ``wakeup_ns``, ``period_ns`` and, when the job table has them,
    ``warmup``, ``release_ns``, ``end_ns``: arrays in job order) in run order. The same
    numbers, row for row, as :func:`wakeup_series` of those rows, but ``run_id`` is a
    Categorical of ``categories`` (the runs given): codes, not a label per row, to build and
    to group. No copy of every job's inputs in run order, no temporary array of every job:
    a run's temporaries are its own (10^5 jobs: in cache). ``columns``: only these of the
    table (in its order; all by default): a column nobody reads is 40 MB of fresh memory a
    group at 10^7 jobs. ``narrow``: the integer columns ``k``, ``rel_ns``, ``period_ns`` and
    ``backlog_ns`` as int32 while every value fits (int64 from the run that does not on),
    the same values read back. None where the table's path must decide: no run, job indices
    that are not increasing integers within a run, runs with different columns."""
    runs = [(c, r) for c, r in runs if len(r["job"])]
    if not runs:
        return None
    names = set(runs[0][1])
    if any(set(r) != names for _, r in runs) or not {"job", "wakeup_ns", "period_ns"} <= names:
        return None
    if any(c1 >= c2 for (c1, _), (c2, _) in zip(runs, runs[1:])):
        return None  # not one entry per run in run order
    for _, r in runs:
        j = np.asarray(r["job"])
        if j.dtype.kind not in "iu" or not bool(np.all(j[1:] > j[:-1])):
            return None
    has_release, has_end, has_warm = "release_ns" in names, "end_ns" in names, "warmup" in names
    want = [c for c in SERIES_COLUMNS if (c != "latency_ns" or has_release) and (columns is None or c in columns)]
    n = sum(len(r["job"]) for _, r in runs)
    small = np.int32 if narrow else np.int64
    kinds = {"job": np.int64, "k": small, "wakeup_ns": np.int64, "rel_ns": small, "dw_ns": float,
             "interval_ns": float, "period_ns": small, "warmup": bool, "backlog_ns": small, "backlog": bool,
             "latency_ns": np.int64}
    out = {c: np.empty(n, dtype=kinds[c]) for c in want if c != "run_id"}

    def put(c: str, a: int, b: int, v, lo, hi) -> None:
        """v into column c's rows [a, b); an int32 column that v does not fit becomes int64."""
        col = out.get(c)
        if col is None:
            return
        if col.dtype == np.int32 and (lo < _I32.min or hi > _I32.max):
            out[c] = col = col.astype(np.int64)  # (rows past b are written later)
        col[a:b] = v

    a = 0
    for _, r in runs:
        m = len(r["job"])
        b = a + m
        jb = np.asarray(r["job"], dtype=np.int64)
        wb = np.asarray(r["wakeup_ns"], dtype=np.int64)
        pr = int(r["period_ns"][0])
        kb = jb - jb[0]
        if has_release:
            rl = np.asarray(r["release_ns"], dtype=np.int64)
        else:
            rl = kb * pr
            rl += wb[0]
        lt = wb - rl
        dk = np.subtract(jb[1:], jb[:-1])
        dwi = np.subtract(wb[1:], wb[:-1])
        one = dk == 1
        bk = np.empty(m, dtype=np.int64)
        bk[0] = 0
        if has_end:
            np.subtract(np.asarray(r["end_ns"], dtype=np.int64)[:-1], rl[1:], out=bk[1:])
            bk[1:] *= one & (bk[1:] > 0)
        else:
            bk[1:] = 0
        bl = bk > 0
        wm = np.asarray(r["warmup"], dtype=bool) if has_warm else np.zeros(m, dtype=bool)
        pool = np.flatnonzero(~wm & ~bl)
        if pool.size == 0:
            pool = np.flatnonzero(~bl) if (~bl).any() else np.arange(m)
        ref = int(np.rint(np.median(lt[pool[:REFERENCE_JOBS]])))
        put("latency_ns", a, b, lt, 0, 0)
        put("job", a, b, jb, 0, 0)
        put("wakeup_ns", a, b, wb, 0, 0)
        put("k", a, b, kb, 0, int(kb[-1]))
        put("period_ns", a, b, pr, pr, pr)
        put("warmup", a, b, wm, 0, 0)
        put("backlog", a, b, bl, 0, 0)
        if "backlog_ns" in out:
            put("backlog_ns", a, b, bk, 0, int(bk.max()))
        if "rel_ns" in out:
            lt -= ref
            put("rel_ns", a, b, lt, int(lt.min()), int(lt.max()))
        if "dw_ns" in out:
            dw = out["dw_ns"]
            dw[a] = np.nan
            dw[a + 1:b] = dwi - dk * pr  # Δw(k) = w(k) − w(j) − (k − j)·P
        if "interval_ns" in out:
            iv = out["interval_ns"]
            iv[a] = np.nan
            ivr = iv[a + 1:b]
            ivr[:] = dwi
            ivr[~one] = np.nan
        a = b
    cols = {}
    if "run_id" in want:
        # The runs given, 0, 1, ...: codes of the categories' used ones, as small as pandas keeps them.
        lengths = [len(r["job"]) for _, r in runs]
        ctype = np.int8 if len(runs) < 128 else np.int16 if len(runs) < 32768 else np.int32
        codes = np.repeat(np.arange(len(runs), dtype=ctype), lengths)
        cols["run_id"] = pd.Categorical.from_codes(codes, categories=categories[[c for c, _ in runs]], ordered=ordered)
    cols.update((c, out[c]) for c in want if c != "run_id")
    return pd.DataFrame(cols, copy=False)  # the arrays are this function's own


def _diff(x: np.ndarray) -> np.ndarray:
    """x[i] − x[i−1], 0 first, written into one new array."""
    d = np.empty(x.size, dtype=np.int64)
    if x.size:
        d[0] = 0
        np.subtract(x[1:], x[:-1], out=d[1:])
    return d


def runs_of_series(series: pd.DataFrame):
    """(run id, its rows) of a :func:`wakeup_series` in run-id order, as
    ``series.groupby("run_id", sort=True)`` gives them, from the stretches the series holds
    (each run's rows are contiguous there) instead of a groupby of every row."""
    st = run_stretches(series)
    if st is None:
        return list(series.groupby("run_id", sort=True)) if "run_id" in series.columns else []
    starts, ends, keys = st
    # groupby's order: a Categorical's categories' (the stretches' codes), else the ids sorted
    cat = isinstance(series["run_id"].dtype, pd.CategoricalDtype)
    rank = series["run_id"].cat.codes.to_numpy()[starts] if cat else keys
    return [(keys[i], series.iloc[starts[i]:ends[i]]) for i in sorted(range(len(keys)), key=lambda i: rank[i])]


def run_stretches(series: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, list] | None:
    """(starts, ends, run ids) of the runs' stretches of a :func:`wakeup_series`, in the
    order the rows hold them; None when a run's rows are not one stretch (or there is no
    ``run_id``, or no row). A Categorical's codes are read as they are (no factorize)."""
    if series.empty or "run_id" not in series.columns:
        return None
    col = series["run_id"]
    if isinstance(col.dtype, pd.CategoricalDtype):
        codes, uniques = col.cat.codes.to_numpy(), col.cat.categories
    else:
        codes, uniques = pd.factorize(col)  # codes, not 10^7 labels compared as objects
    starts = stretch_starts(codes)
    if (codes[starts] < 0).any() or np.unique(codes[starts]).size != starts.size:
        return None  # not one stretch per run: let pandas group
    ends = np.append(starts[1:], codes.size)
    return starts, ends, [uniques[c] for c in codes[starts]]


# --------------------------------------------------------------------------- drift


@dataclass(frozen=True)
class Drift:
    """Linear drift of rel(k): slope in ns per job and in ppm of the period, with a CI.

    ``total_ns`` = slope × (last k − first k): the shift accumulated over the run
    (seed 002: about −40 000 ns over 15 000 steps).
    """

    slope_ns_per_job: float
    ci_low: float
    ci_high: float
    ppm: float
    ppm_low: float
    ppm_high: float
    intercept_ns: float
    total_ns: float
    n: int
    n_outliers: int
    level: float


def _newey_west_se(k: np.ndarray, resid: np.ndarray) -> float:
    """HAC (Newey-West, Bartlett kernel) standard error of an OLS slope.

    rel(k) residuals are autocorrelated (a late wake-up is followed by a catch-up, seed 002
    Fig. 12), so the i.i.d. OLS standard error would be wrong in either direction.
    """
    n = k.size
    xc = k - k.mean()
    sxx = np.sum(xc**2)
    u = xc * resid
    lag = int(np.floor(4.0 * (n / 100.0) ** (2.0 / 9.0)))
    buf = u * u
    s = float(buf.sum())
    for l in range(1, min(lag, n - 1) + 1):
        prod = np.multiply(u[l:], u[:-l], out=buf[:n - l])  # the same products and sum, in one buffer
        s += 2.0 * (1.0 - l / (lag + 1.0)) * float(prod.sum())
    return float(np.sqrt(max(s, 0.0)) / sxx)


def _median(a: np.ndarray) -> float:
    """``np.median(a)`` of a large 1-D float array: the same middle value(s), averaged as
    np.median does, found among the values between two quantiles of a sample of ``a`` (a
    partition of a tenth of the values, not of all of them with np.median's three kths:
    two medians a run, 100 runs a report). np.median itself for small arrays, NaN, or
    when the middle is not between those two values."""
    n = a.size
    if n < 4096:
        return np.median(a)
    samp = np.sort(a[:: n // 2048])
    m, half = samp.size, n // 2
    lo_rank = half - 1 if n % 2 == 0 else half  # the middle ranks np.median averages
    # A sample rank's spread is about sqrt(m)/2: ±2·sqrt(m) ranks hold the middle but about
    # once in 10^4 (then np.median), and a tenth of the values, whose copy and partition are
    # most of the time (±4·sqrt(m) of 1000 picks took a quarter: 2.5× the time).
    margin = 2 * int(np.sqrt(m)) + 2
    lo, hi = samp[max(0, m // 2 - margin)], samp[min(m - 1, m // 2 + margin)]
    below = int(np.count_nonzero(a < lo))
    above = int(np.count_nonzero(a > hi))
    inside = a[(a >= lo) & (a <= hi)]
    if below + inside.size + above != n or not below <= lo_rank or not half < below + inside.size:
        return np.median(a)  # NaN (counted nowhere), or the middle outside [lo, hi]
    ks = [lo_rank - below, half - below] if n % 2 == 0 else [half - below]
    part = np.partition(inside, ks)
    return np.mean(part[ks[0]:ks[-1] + 1])


def _ols(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Slope and intercept of the least-squares line of ``y`` on ``x`` (np.polyfit(x, y, 1)'s,
    from the centred sums: a fraction of polyfit's SVD on 10^5 points, 100 runs a report)."""
    xm, ym = x.mean(), y.mean()
    xc = x - xm
    sxx = float((xc * xc).sum())  # numpy's sums, not np.dot: BLAS may thread a dot product
    slope = float((xc * (y - ym)).sum()) / sxx if sxx > 0 else 0.0
    return slope, float(ym - slope * xm)


def fit_drift(
    k: Sequence[float], rel_ns: Sequence[float], period_ns: float, *, level: float = 0.95, outlier_k: float = 6.0
) -> Drift:
    """OLS slope of rel(k) on k, robust to peaks, with a Newey-West CI.

    Peaks (seed 002 Fig. 10: the execution-time peaks also show on the wake-up curve) would
    tilt a plain fit, so points whose residual from a first fit exceeds ``outlier_k`` robust
    standard deviations (1.4826·MAD) are dropped before the final fit.
    """
    k, y = np.asarray(k), np.asarray(rel_ns)
    exact = k.dtype.kind in "iub" and y.dtype.kind in "iub"  # integers: every value finite
    k = np.asarray(k, dtype=float)
    y = np.asarray(y, dtype=float)
    if not exact:
        ok = np.isfinite(k) & np.isfinite(y)
        if not ok.all():  # (a copy of each only when something is left out)
            k, y = k[ok], y[ok]
    if k.size < 10:
        raise ValueError(f"rel_ns: need at least 10 wake-ups to fit a drift, got {k.size}")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level: must be in (0, 1), got {level}")
    slope, icpt = _ols(k, y)
    r = y - (slope * k + icpt)
    dev = np.abs(r - _median(r))  # once: the MAD and the cut read the same deviations
    mad = 1.4826 * _median(dev)
    keep = dev <= outlier_k * mad if mad > 0 else np.ones(k.size, bool)
    n_out = int((~keep).sum())
    k2, y2 = (k[keep], y[keep]) if n_out else (k, y)
    slope, icpt = _ols(k2, y2)
    se = _newey_west_se(k2, y2 - (slope * k2 + icpt))
    z = stats.t.ppf(0.5 + level / 2.0, df=max(k2.size - 2, 1))
    lo, hi = slope - z * se, slope + z * se
    ppm = 1e6 / float(period_ns)
    return Drift(float(slope), float(lo), float(hi), slope * ppm, lo * ppm, hi * ppm,
                 float(icpt), float(slope * (k.max() - k.min())), int(k.size), n_out, level)


def run_drift(series: pd.DataFrame, *, level: float = 0.95, outlier_k: float = 6.0,
              include_warmup: bool = False) -> dict:
    """Timer drift of one run's :func:`wakeup_series`: the :class:`Drift` fields, fitted on
    idle jobs only (not backlogged; not warm-up unless ``include_warmup``), with
    ``n_backlog`` (jobs that waited on the previous one), ``backlog_fraction``,
    ``max_backlog_ns`` and ``note``. Fewer than 10 idle jobs: NaN fields and a note saying
    the run was overloaded, never a drift made of backlog."""
    g = series
    idle = ~g["backlog"].to_numpy(dtype=bool) if "backlog" in g.columns else np.ones(len(g), dtype=bool)
    if not include_warmup and "warmup" in g.columns:
        use = idle & ~g["warmup"].to_numpy(dtype=bool)
    else:
        use = idle
    n_back = int((~idle).sum())
    extra = {"n_backlog": n_back, "backlog_fraction": n_back / len(g) if len(g) else float("nan"),
             "max_backlog_ns": int(g["backlog_ns"].max()) if "backlog_ns" in g.columns and len(g) else 0}
    period = float(g["period_ns"].iloc[0])
    try:
        d = fit_drift(g["k"].to_numpy()[use], g["rel_ns"].to_numpy()[use], period, level=level, outlier_k=outlier_k)
    except ValueError:
        nan = float("nan")
        d = Drift(nan, nan, nan, nan, nan, nan, nan, nan, int(use.sum()), 0, level)
        return {**d.__dict__, **extra,
                "note": f"no drift: {int(use.sum())} idle job(s), {n_back} of {len(g)} waited on the previous job"}
    note = f"{n_back} backlogged job(s) left out" if n_back else ""
    return {**d.__dict__, **extra, "note": note}


def drift(
    jobs: pd.DataFrame,
    *,
    period_ns: int | None = None,
    level: float = 0.95,
    outlier_k: float = 6.0,
    include_warmup: bool = False,
) -> pd.DataFrame:
    """Timer drift of the wake-up date, one row per run (:func:`run_drift`'s columns).

    Backlogged jobs (released while the previous job ran) and, unless ``include_warmup``,
    warm-up jobs are left out of the fit: the first are an overload, the second not yet in
    the steady state the drift is about."""
    ser = wakeup_series(jobs, period_ns=period_ns, include_warmup=True)
    groups = ser.groupby("run_id", sort=True) if "run_id" in ser.columns else [(None, ser)]
    rows = []
    for rid, g in groups:
        row = {"run_id": rid} if rid is not None else {}
        row.update(run_drift(g, level=level, outlier_k=outlier_k, include_warmup=include_warmup))
        rows.append(row)
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- quantisation


@dataclass
class Quantisation:
    """Result of :func:`period_quantisation`.

    ``levels``: one row per interval level (center_ns, offset_ns = center − P, count,
    fraction). ``pattern``: the repeating sequence of level centers (ns) when the labels
    repeat with a short period, e.g. (124 ms, 124 ms, 124 ms, 128 ms); ``pattern_period``
    its length. ``step_ns``: smallest spacing between level centers (a timer tick
    candidate). ``outliers``: intervals in no level (isolated peaks).
    """

    quantised: bool
    period_ns: int
    levels: pd.DataFrame
    pattern: tuple[float, ...] | None
    pattern_period: int | None
    pattern_match: float
    step_ns: float | None
    mean_interval_ns: float
    outliers: int


def _cluster_1d(values: np.ndarray, min_gap: float) -> np.ndarray:
    """Single-linkage clustering of 1-D values: split where sorted neighbours are > min_gap apart.

    A value's label is the number of splits at or below it: found by a search among the few
    values that start a cluster, so the values are sorted, not argsorted (a stable argsort
    of 10^6 intervals cost a third of a second). Equal values get one label whichever
    order a sort leaves them in."""
    if not min_gap >= 0 or np.isnan(values).any():  # ties split, or NaN last: the stable argsort's labels
        order = np.argsort(values, kind="stable")
        labels = np.empty(values.size, dtype=np.int64)
        labels[order] = np.concatenate([[0], np.cumsum(np.diff(values[order]) > min_gap)])
        return labels
    distinct = _distinct_integers(values)
    if distinct is not None:
        sv = distinct  # the same starts: a tie's difference (0) never splits
    else:
        sv = np.sort(values)
    starts = sv[1:][np.diff(sv) > min_gap]  # the first value of each cluster but the lowest
    return np.searchsorted(starts, values, side="right").astype(np.int64, copy=False)


def _distinct_integers(values: np.ndarray) -> np.ndarray | None:
    """The distinct values of a long float array of integers (intervals in ns) in increasing
    order, as floats, from a count of each instead of a sort (10^6 intervals a group); None
    when the array is short, holds a value that is not an integer below 2^50 in size, or
    spans more than 4 values per element."""
    if values.size < 4096:
        return None
    lo, hi = float(values.min()), float(values.max())
    if not (-2.0**50 < lo and hi < 2.0**50 and hi - lo <= 4 * values.size):
        return None
    iv = values.astype(np.int64)
    if not np.array_equal(iv, values):
        return None
    iv -= int(lo)
    return np.flatnonzero(np.bincount(iv)).astype(float) + lo


def _label_period(labels: np.ndarray, max_lag: int, min_match: float) -> tuple[int | None, float]:
    """Smallest lag L with labels[i] == labels[i + L] for ≥ min_match of positions."""
    best = 0.0
    for lag in range(1, min(max_lag, labels.size // 3) + 1):
        a, b = labels[:-lag], labels[lag:]
        both = (a >= 0) & (b >= 0)
        if both.sum() == 0:
            continue
        m = float(np.mean(a[both] == b[both]))
        best = max(best, m)
        if m >= min_match:
            return lag, m
    return None, best


def period_quantisation(
    jobs: pd.DataFrame,
    *,
    period_ns: int | None = None,
    min_gap_ns: float | None = None,
    min_fraction: float = 0.02,
    max_pattern: int = 64,
    min_match: float = 0.9,
    include_warmup: bool = True,
    series: pd.DataFrame | None = None,
) -> Quantisation:
    """Detect distinct levels of the actual inter-wake-up interval (seed 000 §5.3.3, Fig. 5.23).

    Intervals between consecutive jobs of each run are clustered (single linkage; clusters
    split where sorted values are more than ``min_gap_ns`` apart, default 0.5 % of P — far
    above µs jitter, far below the 4 ms of the 124/128 ms pattern). Clusters holding at least
    ``min_fraction`` of the intervals are levels; the rest are outliers (isolated peaks).
    ``quantised`` is True when there are two or more levels. The label sequence is then
    searched for a repeating pattern of length ≤ ``max_pattern``. ``series``: the jobs'
    :func:`wakeup_series` when the caller has it (``jobs``, ``period_ns`` and
    ``include_warmup`` are then not read).
    """
    ser = wakeup_series(jobs, period_ns=period_ns, include_warmup=include_warmup) if series is None else series
    if ser.empty:
        raise ValueError("jobs: no wake-ups")
    p = int(ser["period_ns"].iloc[0])
    iv = ser["interval_ns"].to_numpy(dtype=float)
    valid = np.isfinite(iv)
    vals = iv[valid]
    if vals.size < 4:
        raise ValueError(f"jobs: need at least 4 consecutive intervals, got {vals.size}")
    gap = 0.005 * p if min_gap_ns is None else float(min_gap_ns)
    raw = _cluster_1d(vals, gap)
    counts = np.bincount(raw)
    major = np.flatnonzero(counts >= max(2, min_fraction * vals.size))
    # Relabel: levels 0..L-1 by increasing center, outliers −1.
    centers = np.array([np.median(vals[raw == c]) for c in major])
    order = np.argsort(centers)
    remap = np.full(counts.size, -1, dtype=np.int64)
    remap[major[order]] = np.arange(major.size)
    labels = remap[raw]
    centers = centers[order]
    levels = pd.DataFrame({
        "center_ns": centers,
        "offset_ns": centers - p,
        "count": counts[major[order]],
        "fraction": counts[major[order]] / vals.size,
    })
    quantised = len(levels) >= 2
    pattern = pattern_period = None
    match = float("nan")
    step = float(np.min(np.diff(centers))) if quantised else None
    if quantised:
        # Pattern search per run would be purer; runs are concatenated with a −1 separator
        # so no run boundary creates a false match.
        seq = np.full(iv.size, -1, dtype=np.int64)
        seq[valid] = labels
        pattern_period, match = _label_period(seq, max_pattern, min_match)
        if pattern_period is not None:
            # Most frequent level at each phase of the pattern.
            phase_levels = []
            for ph in range(pattern_period):
                s = seq[ph::pattern_period]
                s = s[s >= 0]
                phase_levels.append(float(centers[np.bincount(s).argmax()]) if s.size else float("nan"))
            pattern = tuple(phase_levels)
    return Quantisation(quantised, p, levels, pattern, pattern_period, match, step,
                        float(vals.mean()), int((labels < 0).sum()))
