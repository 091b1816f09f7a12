"""Execution-time spikes: detection, period estimation and attribution to culprits.

Seed 000 §5.3.2 (= seed 002 §VI-B): a solo AOCS task showed periodic execution-time peaks,
"20 peaks in 625 seconds" whatever the task period (so the period is in time, not in steps),
of two kinds: "exactly 9 small peaks between two big peaks". A kernel trace (LTTng,
``sched_switch`` only) showed systemd-timesyncd (small peaks) and ntpd (big peaks) running
around the peaks. SPEC §8 asks to automate that: find the spikes, their period(s), and rank
the processes / IRQs that overlap them against what overlaps ordinary jobs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd
from scipy import stats

from ..trace.overlap import overlaps
from .periodicity import Periodicity, periodicity
from .runorder import run_codes, run_job_order, stretch_starts

_MAD_TO_SD = 1.4826  # MAD of a normal sample × 1.4826 = its standard deviation


# --------------------------------------------------------------------------- detection


def robust_threshold(values, k: float = 5.0) -> tuple[float, float, float]:
    """(median, scale, threshold = median + k·scale) with scale = 1.4826·MAD.

    When more than half the values are identical the MAD is 0 (common with coarse clocks);
    the scale then falls back to 1.2533 × mean absolute deviation from the median (the
    normal-consistent factor), and to 0 — no spike possible — when all values are equal.
    """
    a = np.asarray(values)
    counted = median_mad_of_ints(a) if a.dtype.kind in "iu" and a.ndim == 1 else None
    if counted is not None:
        med, mad = counted
        scale = _MAD_TO_SD * mad
        if scale == 0.0:  # (rare: the mean deviation needs the deviations themselves)
            scale = 1.2533 * float(np.abs(a.astype(float) - med).mean())
        return med, scale, med + k * scale
    v = np.asarray(a, dtype=float)
    v = v[np.isfinite(v)]
    if v.size == 0:
        raise ValueError("values: no finite value")
    med = float(np.median(v))
    dev = np.abs(v - med)
    scale = _MAD_TO_SD * float(np.median(dev))
    if scale == 0.0:
        scale = 1.2533 * float(dev.mean())
    return med, scale, med + k * scale


_COUNTED_LIMIT = 1 << 50  # |value| below it: a sum of two middle values is exact as a float


def median_mad_of_ints(x: np.ndarray) -> tuple[float, float] | None:
    """``np.median`` of the integers ``x`` as floats and ``np.median`` of their absolute
    deviations from it, the same two floats, counted: one histogram of the values (their
    span at most 4·n + 1024 wide), its running sum for the middle ranks, the histogram
    folded around the median for the deviations' (two np.median, two partitions of the 10^5
    jobs of a run with three kths each, were most of the spike detection). The middle
    values, or their half sums, are integers or halves (quarters for the MAD) far below
    2^53, which the float mean np.median takes gives exactly. None where the span is wider,
    a value is 2^50 or more in size, or ``x`` is empty: then np.median."""
    n = x.size
    if n == 0:
        return None
    lo, hi = int(x.min()), int(x.max())
    if lo <= -_COUNTED_LIMIT or hi >= _COUNTED_LIMIT or hi - lo > 4 * n + 1024:
        return None
    x = x.astype(np.int64, copy=False)  # (x − lo of a narrower type could wrap)
    h = np.bincount(x - lo if lo else x, minlength=hi - lo + 1)
    half = n // 2

    def rank(cum: np.ndarray, r: int) -> int:  # the index holding the r-th smallest (0-based)
        return int(np.searchsorted(cum, r, side="right"))

    c = np.cumsum(h)
    m2 = 2 * rank(c, half) if n % 2 else rank(c, half - 1) + rank(c, half)  # twice the median's index
    i = m2 // 2
    # Deviations in steps from the median: from an index (m2 even) or a half index (odd,
    # then each deviation is the step count + 0.5); folded[d] = values that far on either side.
    right, left = h[i + m2 % 2:], h[i::-1]
    folded = np.zeros(max(right.size, left.size), dtype=h.dtype)
    folded[:right.size] += right
    folded[:left.size] += left
    if m2 % 2 == 0:
        folded[0] -= h[i]  # the median's own index was counted on both sides
    cf = np.cumsum(folded)
    off = 0.5 * (m2 % 2)
    if n % 2:
        mad = rank(cf, half) + off
    else:
        mad = ((rank(cf, half - 1) + off) + (rank(cf, half) + off)) / 2
    return (2 * lo + m2) / 2, float(mad)


def detect_spikes(
    jobs: pd.DataFrame,
    *,
    column: str = "exec_ns",
    k: float = 5.0,
    by: Sequence[str] = ("run_id",),
    include_warmup: bool = False,
) -> pd.DataFrame:
    """Flag jobs whose ``column`` exceeds median + k·1.4826·MAD of their group (run).

    Returns the job rows (warm-up dropped unless ``include_warmup``) with added columns
    ``baseline`` (median), ``scale``, ``threshold``, ``excess`` (value − median) and
    ``is_spike``. A robust threshold is used because the spikes themselves would inflate a
    mean + k·sd threshold. ``k`` = 5 keeps false alarms below 1e-6 per job for normal noise.
    """
    if column not in jobs.columns:
        raise ValueError(f"column: {column!r} not in job table")
    if k <= 0:
        raise ValueError(f"k: must be positive, got {k}")
    df = jobs
    if not include_warmup and "warmup" in df.columns:
        df = df[~df["warmup"].astype(bool)]
    keys = [b for b in by if b in df.columns]
    fast = _spikes_at_once(df, column, k) if keys == ["run_id"] else None
    if fast is not None:
        return fast
    parts = []
    for _, g in (df.groupby(keys, sort=True) if keys else [((), df)]):
        g = _by_job(g) if "job" in g.columns else g.copy()  # assign below copies: g itself is never changed
        med, scale, thr = robust_threshold(g[column], k)
        g = g.assign(baseline=med, scale=scale, threshold=thr, excess=g[column].astype(float) - med)
        g["is_spike"] = (g[column].astype(float) > thr) & (scale > 0)
        parts.append(g)
    if not parts:
        return df.assign(baseline=np.nan, scale=np.nan, threshold=np.nan, excess=np.nan, is_spike=False)
    return pd.concat(parts, ignore_index=True)


def _spikes_at_once(df: pd.DataFrame, column: str, k: float) -> pd.DataFrame | None:
    """:func:`detect_spikes` by run, on the columns: the rows taken once in (run, job) order
    and each run's threshold from its stretch, the same table row for row as the groupby
    (whose split and concat of a frame per run cost seconds at 10^7 jobs). None where the
    groupby must decide: no integer job index, or one a run repeats."""
    if "job" not in df.columns or df.empty:
        return None
    codes, uniques = run_codes(df["run_id"])
    order = run_job_order(codes, df["job"].to_numpy(), len(uniques))
    c = codes[order] if order is not None else codes[:0]
    if c.size == 0:
        return None
    out = df.iloc[order].reset_index(drop=True)
    first = stretch_starts(c)
    lengths = np.diff(np.append(first, c.size))
    # Each run's numbers written into the new columns at its rows, from its own float copy
    # of the values: no float copy, difference or comparison of every job (at 10^7 jobs
    # each is 10–80 MB of fresh memory, whose page faults cost more than the arithmetic).
    vals = out[column].to_numpy()
    n_rows = vals.size
    med, scale, thr, excess = np.empty(n_rows), np.empty(n_rows), np.empty(n_rows), np.empty(n_rows)
    spike = np.empty(n_rows, dtype=bool)
    for a, n in zip(first, lengths):
        b = a + n
        v = vals[a:b].astype(float)
        m_, s_, t_ = robust_threshold(vals[a:b] if vals.dtype.kind in "iu" else v, k)
        med[a:b], scale[a:b], thr[a:b] = m_, s_, t_
        np.subtract(v, m_, out=excess[a:b])
        np.greater(v, t_, out=spike[a:b])
        if not s_ > 0:
            spike[a:b] = False
    # A new frame of the taken columns and the new ones, no copy (assign copies each new
    # array: five of every job, a third of the detection's time at 10^7 jobs).
    return pd.DataFrame({**{c: out[c] for c in out.columns}, "baseline": med, "scale": scale, "threshold": thr,
                         "excess": excess, "is_spike": spike}, copy=False)


# --------------------------------------------------------------------------- periods


def split_big_small(excess, *, min_ratio: float = 1.5, min_count: int = 2) -> np.ndarray:
    """Boolean mask of "big" spikes: above the widest gap of the sorted log-amplitudes.

    The split is kept only if that gap is a ratio ≥ ``min_ratio`` and both sides have
    ≥ ``min_count`` spikes; otherwise all spikes are one class (mask all False).
    """
    a = np.asarray(excess, dtype=float)
    big = np.zeros(a.size, dtype=bool)
    pos = a > 0
    if pos.sum() < 2 * min_count:
        return big
    la = np.sort(np.log(a[pos]))
    gaps = np.diff(la)
    # Only gaps that leave min_count on each side are eligible.
    gaps[: min_count - 1] = -np.inf
    if min_count > 1:
        gaps[-(min_count - 1):] = -np.inf
    i = int(np.argmax(gaps))
    if not np.isfinite(gaps[i]) or gaps[i] < np.log(min_ratio):
        return big
    cut = np.exp(0.5 * (la[i] + la[i + 1]))
    return a > cut


def spike_periods(
    spikes: pd.DataFrame,
    *,
    time_column: str = "release_ns",
    by: Sequence[str] = ("run_id",),
    alpha: float = 0.01,
    min_ratio: float = 1.5,
    seed: int = 0,
) -> pd.DataFrame:
    """Period(s) of the detected spikes, per run, with their significance (seed 000 §5.3.2).

    ``spikes`` is the output of :func:`detect_spikes`. The spikes are events in time seen at
    the victim's job times, so the period is searched in time (``time_column``) on the
    lattice of the victim's period (``period_ns``; job indices when there is no time), by
    :func:`xtalk.analysis.periodicity.periodicity`: any period from two victim periods up,
    a multiple of the victim's or not, tested against the spikes shuffled over the run.

    One row per run and class: ``all`` (every spike) and, when amplitudes split into two
    groups (:func:`split_big_small`), ``big`` and ``small``. Columns: ``n_spikes``,
    ``n_episodes`` (spikes in consecutive jobs count once), ``periodic``, ``period_ns`` and
    ``period_jobs`` (NaN when there is no significant period: "no period"), ``regularity``
    (phase coherence at the period, 0–1), ``coverage`` (fraction of the period's cycles with
    a spike), ``p_value`` and ``confidence`` (1 − p), ``best_period_ns`` (the candidate,
    also when not significant), ``reason``. For ``big`` when ``all`` is periodic: the big
    spikes are placed on the ``all`` lattice; ``every_n`` is their most common spacing in
    cycles of ``all`` (one big every N, N − 1 small between), ``small_between`` the median
    number of small spikes between two big ones, ``on_lattice`` the fraction of big spikes on
    the ``all`` lattice, and the p-value that of a shuffle test: big spikes as regularly
    spaced among the ``all`` episodes by chance.
    """
    for col in ("job", "is_spike", "excess"):
        if col not in spikes.columns:
            raise ValueError(f"spikes: missing column {col!r} (pass the output of detect_spikes)")
    keys = [b for b in by if b in spikes.columns]
    timed = time_column in spikes.columns and "period_ns" in spikes.columns
    tcol = time_column if timed else "job"
    rows = []
    for base, res, span, s in _runs_spikes(spikes, keys, tcol, timed):
        big = split_big_small(s["excess"].to_numpy(), min_ratio=min_ratio)
        classes = [("all", np.ones(len(s), dtype=bool))]
        if big.any():
            classes += [("big", big), ("small", ~big)]
        fit_all = None
        for name, mask in classes:
            t = s.loc[mask, tcol].to_numpy(dtype=float)
            row = dict(base, cls=name, n_spikes=int(mask.sum()), every_n=float("nan"), small_between=float("nan"),
                       on_lattice=float("nan"))
            if name == "big" and fit_all is not None and fit_all.periodic:
                row.update(_on_lattice(t, s.loc[~mask, tcol].to_numpy(dtype=float), fit_all, res, alpha, seed))
            else:
                f = periodicity(t, resolution=res, start=span[0], end=span[1], alpha=alpha, seed=seed)
                row.update(_row(f, res, timed))
                if name == "all":
                    fit_all = f
            rows.append(row)
    cols = list(keys) + ["cls", "n_spikes", "n_episodes", "periodic", "period_ns", "period_jobs", "regularity",
                         "coverage", "p_value", "confidence", "every_n", "small_between", "on_lattice",
                         "best_period_ns", "reason"]
    return pd.DataFrame(rows, columns=cols)


def _runs_spikes(spikes: pd.DataFrame, keys: list[str], tcol: str, timed: bool):
    """Per group of ``keys`` in the groupby's order: (its labels, the lattice step, (first,
    last) time of its jobs in job order, its spike rows in job order). Rows of one run in
    job order already (detect_spikes' table) are read from each run's stretch: only the
    spike rows are copied, not a frame per run of every job."""
    if keys == ["run_id"] and len(spikes) and spikes["job"].dtype.kind in "iu":
        codes, uniques = run_codes(spikes["run_id"])
        if isinstance(run_job_order(codes, spikes["job"].to_numpy(), len(uniques)), slice):
            first = stretch_starts(codes)
            ends = np.append(first[1:], codes.size)
            spike = spikes["is_spike"].to_numpy(dtype=bool)
            at = np.flatnonzero(spike)
            sub = spikes.iloc[at]
            cut = np.searchsorted(at, ends)
            tv = spikes[tcol].to_numpy()
            per = spikes["period_ns"].to_numpy() if timed else None
            lo = 0
            for a, b, c in zip(first, ends, cut):
                res = float(per[a]) if timed else 1.0
                yield {"run_id": uniques[codes[a]]}, res, (float(tv[a]), float(tv[b - 1])), sub.iloc[lo:c]
                lo = c
            return
    for key, g in (spikes.groupby(keys, sort=True, observed=True) if keys else [((), spikes)]):
        g = _by_job(g)
        if g.empty:
            continue
        res = float(g["period_ns"].iloc[0]) if timed else 1.0
        yield (dict(zip(keys, key if isinstance(key, tuple) else (key,))), res,
               (float(g[tcol].iloc[0]), float(g[tcol].iloc[-1])), g[g["is_spike"]])


def _by_job(g: pd.DataFrame) -> pd.DataFrame:
    """``g.sort_values("job")``, without the sort when the indices already increase strictly
    (a run's jobs as the store gives them): every sort leaves that order as it is."""
    job = g["job"].to_numpy()
    if job.dtype.kind in "iu" and (job.size < 2 or bool(np.all(job[1:] > job[:-1]))):
        return g
    return g.sort_values("job")


def _row(f: Periodicity, res: float, timed: bool) -> dict:
    """A periodicity result as columns; without times the period is in jobs only."""
    nan = float("nan")
    return {"n_episodes": f.n_episodes, "periodic": f.periodic, "period_ns": f.period if timed else nan,
            "period_jobs": f.period / res, "regularity": f.regularity, "coverage": f.coverage, "p_value": f.p_value,
            "confidence": f.confidence, "best_period_ns": f.best_period if timed else nan, "reason": f.reason}


def _regular_spacing(cycles: np.ndarray) -> tuple[int, float]:
    """(most common spacing ≥ 1, fraction of spacings equal to it) of sorted cycle numbers."""
    d = np.diff(np.unique(cycles))
    if d.size == 0:
        return 0, 0.0
    vals, counts = np.unique(d, return_counts=True)
    j = int(np.argmax(counts))
    return int(vals[j]), float(counts[j] / d.size)


def _on_lattice(t_big: np.ndarray, t_small: np.ndarray, fit: Periodicity, res: float, alpha: float, seed: int,
                shuffles: int = 199) -> dict:
    """The big spikes against the lattice of all spikes (seed 000: "exactly 9 small peaks
    between two big peaks"): spacing in cycles, regularity, and a shuffle test that picks as
    many cycles at random among those holding a spike."""
    T, ph = fit.period, fit.phase
    c_big = (t_big - ph) / T
    on = np.abs(c_big - np.rint(c_big)) <= 0.25
    cyc_big = np.unique(np.rint(c_big[on]).astype(np.int64))
    c_small = (t_small - ph) / T
    cyc_small = np.unique(np.rint(c_small[np.abs(c_small - np.rint(c_small)) <= 0.25]).astype(np.int64))
    every, frac = _regular_spacing(cyc_big)
    out = {"n_episodes": int(cyc_big.size), "regularity": frac, "on_lattice": float(on.mean()) if on.size else float("nan"),
           "coverage": float("nan"), "every_n": float(every) if every else float("nan")}
    if cyc_big.size >= 2:
        between = [np.sum((cyc_small > a) & (cyc_small < b)) for a, b in zip(cyc_big[:-1], cyc_big[1:])]
        out["small_between"] = float(np.median(between))
    if cyc_big.size < 3 or every < 2:
        why = "fewer than 3 big spikes on the lattice" if cyc_big.size < 3 else "big spikes in consecutive cycles"
        return {**out, "periodic": False, "period_ns": float("nan"), "period_jobs": float("nan"), "p_value": 1.0,
                "confidence": 0.0, "best_period_ns": every * T if every else float("nan"), "reason": why}
    pool = np.union1d(cyc_big, cyc_small)
    rng = np.random.default_rng(seed)
    stat = frac
    hits = sum(_regular_spacing(np.sort(rng.choice(pool, cyc_big.size, replace=False)))[1] >= stat
               for _ in range(shuffles))
    p = (1 + hits) / (shuffles + 1)
    periodic = p < alpha
    return {**out, "periodic": periodic, "period_ns": every * T if periodic else float("nan"),
            "period_jobs": every * T / res if periodic else float("nan"), "p_value": p, "confidence": 1 - p,
            "best_period_ns": every * T, "reason": "" if periodic else f"no significant spacing (p = {p:.2g} ≥ {alpha})"}


# --------------------------------------------------------------------------- attribution


@dataclass
class Attribution:
    """Result of :func:`attribute_spikes`.

    ``per_spike``: one row per (spike job, culprit) with overlap_ns, ranked within the job
    by overlap (rank 1 = largest). ``ranking``: one row per culprit (kind, name) over all
    jobs; see :func:`attribute_spikes`. ``cpu_scope``: 'victim' or 'all' (what was matched).
    ``jobs``: the jobs matched, with their spike flag (the rows ``per_spike`` names).
    """

    per_spike: pd.DataFrame
    ranking: pd.DataFrame
    n_spikes: int
    n_normal: int
    cpu_scope: str
    jobs: pd.DataFrame | None = None


def attribute_spikes(
    jobs: pd.DataFrame,
    culprits: pd.DataFrame,
    *,
    spikes: pd.DataFrame | None = None,
    column: str = "exec_ns",
    k: float = 5.0,
    lookback_ns: int = 0,
    cpus: str = "victim",
    exclude_pids: Sequence[int] = (0,),
    exclude_names: Sequence[str] = (),
    alpha: float = 0.01,
) -> Attribution:
    """Which culprits run during spike jobs, and which run there more than in normal jobs.

    ``culprits``: intervals with columns ``cpu``, ``start_ns``, ``end_ns``, ``kind``
    (process, irq, softirq), ``name``, ``pid`` (optional ``run_id`` to match per run).
    Each job's window is [start_ns − ``lookback_ns``, end_ns]; seed 000 §5.3.2 saw the
    culprits run *just before* the spiking job (they evict its cache), so a lookback of up
    to one period is often what reveals them. ``cpus='victim'`` matches intervals on the
    job's CPU(s) (cpu_start and cpu_end); 'all' matches every CPU (interference through
    shared caches and memory comes from the other cores). Without cpu columns in the job
    table, all CPUs are used and ``cpu_scope`` says so. ``exclude_pids`` (default: the
    idle task, pid 0) and ``exclude_names`` drop intervals, e.g. the victim itself.

    ``ranking`` columns per culprit (kind, name), ``RANKING_COLUMNS``: ``spikes_with`` /
    ``frac_spikes`` (spike jobs it overlaps), ``normal_with`` / ``frac_normal`` (same for
    non-spike jobs), ``lift`` = frac_spikes / frac_normal (inf when it is in no ordinary job;
    NaN below ``MIN_LIFT_SPIKES`` spike jobs, where a ratio says nothing), ``fisher_p``
    (one-sided Fisher exact test that it is over-represented in spikes), ``excess_ns`` (the
    time it took in spike jobs beyond an ordinary job's share of it), ``explained`` (spike
    jobs it is in beyond chance), mean overlaps, ``associated``; ranked by
    :func:`rank_culprits`: what a culprit cost the victim, among those the test (``alpha``,
    Bonferroni over the culprits) associates with spikes first.
    """
    if spikes is None:
        spikes = detect_spikes(jobs, column=column, k=k)
    for col in ("start_ns", "end_ns", "is_spike", "job"):
        if col not in spikes.columns:
            raise ValueError(f"spikes: missing column {col!r}")
    for col in ("cpu", "start_ns", "end_ns", "kind", "name"):
        if col not in culprits.columns:
            raise ValueError(f"culprits: missing column {col!r}")
    if cpus not in ("victim", "all"):
        raise ValueError(f"cpus: must be 'victim' or 'all', got {cpus!r}")
    if lookback_ns < 0:
        raise ValueError(f"lookback_ns: must be >= 0, got {lookback_ns}")

    cul = culprits
    if "pid" in cul.columns and len(exclude_pids):
        cul = cul[~cul["pid"].isin(list(exclude_pids))]
    if len(exclude_names):
        cul = cul[~cul["name"].isin(list(exclude_names))]
    cul = cul.reset_index(drop=True)
    sp = spikes.reset_index(drop=True)

    # Windows: one per (job, cpu); a migrated job gets a window on each of its CPUs.
    have_cpu = cpus == "victim" and "cpu_start" in sp.columns
    scope = "victim" if have_cpu else "all"
    ws = sp["start_ns"].to_numpy(dtype=np.int64) - int(lookback_ns)
    we = sp["end_ns"].to_numpy(dtype=np.int64)
    if have_cpu:
        c0 = sp["cpu_start"].to_numpy(dtype=np.int64)
        c1 = sp["cpu_end"].to_numpy(dtype=np.int64) if "cpu_end" in sp.columns else c0
        two = c1 != c0
        w_job = np.concatenate([np.arange(len(sp)), np.flatnonzero(two)])
        w_cpu = np.concatenate([c0, c1[two]])
        cul_cpu = cul["cpu"].to_numpy(dtype=np.int64)
    else:
        w_job = np.arange(len(sp))
        w_cpu = np.zeros(len(sp), dtype=np.int64)
        cul_cpu = np.zeros(len(cul), dtype=np.int64)
    w_s, w_e = ws[w_job], we[w_job]
    cs = cul["start_ns"].to_numpy(dtype=np.int64)
    ce = cul["end_ns"].to_numpy(dtype=np.int64)
    if "run_id" in cul.columns and "run_id" in sp.columns:
        # Encode the run in the CPU key so that runs never match each other's intervals.
        runs = pd.Index(pd.unique(pd.concat([sp["run_id"], cul["run_id"]])))
        ncpu = int(max(w_cpu.max(initial=0), cul_cpu.max(initial=0))) + 1
        w_cpu = w_cpu + ncpu * runs.get_indexer(sp["run_id"].to_numpy()[w_job])
        cul_cpu = cul_cpu + ncpu * runs.get_indexer(cul["run_id"].to_numpy())
    pw, pc, po = overlaps(w_cpu, w_s, w_e, cul_cpu, cs, ce)

    pairs = pd.DataFrame({"row": w_job[pw], "overlap_ns": po})
    for col in ("kind", "name", "pid", "cpu"):
        if col in cul.columns:
            pairs[col] = cul[col].to_numpy()[pc]
    if "pid" not in pairs.columns:
        pairs["pid"] = -1
    pairs["is_spike"] = sp["is_spike"].to_numpy()[pairs["row"].to_numpy()]

    # Per spike: culprits by overlap time.
    job_cols = [c for c in ("run_id", "job") if c in sp.columns]
    ps = pairs[pairs["is_spike"]]
    per = (ps.groupby(["row", "kind", "name", "pid"], dropna=False, sort=False)
             .agg(overlap_ns=("overlap_ns", "sum"), n_intervals=("overlap_ns", "size"))
             .reset_index())
    per = per.sort_values(["row", "overlap_ns"], ascending=[True, False], kind="stable")
    per["rank"] = per.groupby("row").cumcount() + 1
    per = pd.concat([sp.loc[per["row"], job_cols].reset_index(drop=True),
                     per.drop(columns="row").reset_index(drop=True)], axis=1)

    # Over all jobs: presence in spike jobs vs normal jobs per culprit (kind, name).
    n_s = int(sp["is_spike"].sum())
    n_n = int(len(sp) - n_s)
    per_job = (pairs.groupby(["kind", "name", "row"], sort=False)
                    .agg(overlap_ns=("overlap_ns", "sum"), is_spike=("is_spike", "first"))
                    .reset_index())
    rows = [_culprit_row(kind, name, g, n_s, n_n) for (kind, name), g in per_job.groupby(["kind", "name"], sort=False)]
    ranking = rank_culprits(pd.DataFrame(rows, columns=RANKING_COLUMNS[1:-1]), alpha=alpha)
    return Attribution(per, ranking, n_s, n_n, scope, sp)


#: Columns of :attr:`Attribution.ranking`.
RANKING_COLUMNS = ["rank", "kind", "name", "spikes_with", "frac_spikes", "normal_with", "frac_normal", "lift",
                   "fisher_p", "excess_ns", "explained", "mean_overlap_spike_ns", "mean_overlap_normal_ns",
                   "associated"]
#: Spike jobs a culprit must be in before its lift (a ratio of two frequencies) is given.
MIN_LIFT_SPIKES = 3


def _culprit_row(kind, name, g: pd.DataFrame, n_s: int, n_n: int) -> dict:
    """One culprit's counts, lift, Fisher p and cost from its (job, overlap) rows ``g``."""
    a = int(g["is_spike"].sum())
    b = int(len(g) - a)
    fs = a / n_s if n_s else float("nan")
    fn = b / n_n if n_n else float("nan")
    # No smoothing: a culprit in 0 or 1 of 2 spike jobs has no lift to speak of, and one
    # never seen in an ordinary job is only in spikes (inf), not "22 times more often".
    if a < MIN_LIFT_SPIKES or not n_n:
        lift = float("nan")
    else:
        lift = fs / fn if b else float("inf")
    p = stats.fisher_exact([[a, n_s - a], [b, n_n - b]], alternative="greater")[1] if n_s else 1.0
    in_spikes = float(g.loc[g["is_spike"], "overlap_ns"].sum())
    in_normal = float(g.loc[~g["is_spike"], "overlap_ns"].sum())
    # What it cost the victim's spike jobs beyond what it takes from an ordinary job (the
    # normal jobs' mean, zeros included), and the spike jobs it is in beyond chance.
    excess = in_spikes - n_s * (in_normal / n_n if n_n else 0.0)
    explained = a - n_s * (b / n_n if n_n else 0.0)
    return dict(kind=kind, name=name, spikes_with=a, frac_spikes=fs, normal_with=b, frac_normal=fn, lift=lift,
                fisher_p=float(p), excess_ns=excess, explained=explained,
                mean_overlap_spike_ns=in_spikes / a if a else 0.0, mean_overlap_normal_ns=in_normal / b if b else 0.0)


def rank_culprits(table: pd.DataFrame, alpha: float = 0.01) -> pd.DataFrame:
    """Culprits ranked by what they cost the victim, the p-value as a filter.

    ``associated``: over-represented in spike jobs, one-sided Fisher p below ``alpha``
    divided by the culprits tested (Bonferroni: a trace names dozens of tasks and IRQs).
    Associated culprits come first, by ``excess_ns`` (the time they took in spike jobs beyond
    an ordinary job's share) then spike jobs ``explained``; the others follow in the same
    order. Sorting by p alone put a tick handler present in every job (p ≈ 1e-9 from sheer
    numbers, lift 1.1) above a process in 9 of 343 spikes and no other job."""
    t = table.copy()
    m = max(1, len(t))
    t["associated"] = (t["fisher_p"] < alpha / m) & (t["excess_ns"] > 0)
    t = t.sort_values(["associated", "excess_ns", "explained", "fisher_p"], ascending=[False, False, False, True],
                      kind="stable").reset_index(drop=True)
    t.insert(0, "rank", np.arange(1, len(t) + 1))
    return t[RANKING_COLUMNS]



# --------------------------------------------------------------------------- a culprit's period


#: Columns of :func:`culprit_periods`.
CULPRIT_PERIOD_COLUMNS = ["run_id", "rank", "kind", "culprit", "source", "events", "periodic", "period_s", "regularity",
                          "p", "jobs", "best_period_s", "reason"]
#: The two series a culprit's period is searched in.
SOURCES = ("spike jobs", "wake-ups")


def culprit_periods(a: Attribution, culprits: pd.DataFrame, *, resolution_ns: float | None = None,
                    alpha: float = 0.01, seed: int = 0) -> pd.DataFrame:
    """The period of each culprit the attribution associates with spikes, not of all spikes.

    Spikes from every source pooled give a period of none of them (seed 000 §5.3.2 asks
    "what is the period of timesyncd's peaks, of ntpd's"). So per associated culprit (rank
    order) and run, two series, each tested by :func:`~xtalk.analysis.periodicity.periodicity`
    on the victim's period lattice (``resolution_ns``, default the jobs' ``period_ns``) over
    the run's span of releases: ``spike jobs``, the release times of the spike jobs it is in;
    ``wake-ups``, the starts of its own intervals in ``culprits`` on any CPU (the trace dates
    them exactly; intervals in one lattice slot or adjacent ones are one wake-up). One row
    per culprit × run × source (``CULPRIT_PERIOD_COLUMNS``): ``events`` in the series,
    ``periodic`` (p below ``alpha`` over the series tested in the run: Bonferroni, so that
    a run with a dozen associated culprits does not find one periodic by chance), ``period_s`` (NaN unless periodic), ``regularity`` (mean
    resultant length at the period), ``p``, ``jobs`` (spike jobs it is in), ``best_period_s``
    (the candidate tested), ``reason`` (why no period). Empty when no culprit is associated.
    """
    jobs = a.jobs
    assoc = a.ranking[a.ranking["associated"]] if "associated" in a.ranking.columns else a.ranking.iloc[:0]
    if jobs is None or jobs.empty or assoc.empty:
        return pd.DataFrame(columns=CULPRIT_PERIOD_COLUMNS)
    runs = list(pd.unique(jobs["run_id"])) if "run_id" in jobs.columns else [None]
    rows = []
    for rid in runs:
        j = jobs if rid is None else jobs[jobs["run_id"] == rid]
        rel = np.sort(j["release_ns"].to_numpy(dtype=float))
        res = _lattice(j, rel, resolution_ns)
        t0, t1 = float(rel[0]), float(rel[-1])
        ps = a.per_spike if rid is None else a.per_spike[a.per_spike["run_id"] == rid]
        cul = culprits if rid is None or "run_id" not in culprits.columns else culprits[culprits["run_id"] == rid]
        each = alpha / (len(SOURCES) * len(assoc))
        hit_rel = ps.merge(j[[c for c in ("run_id", "job", "release_ns") if c in j.columns]],
                           on=[c for c in ("run_id", "job") if c in ps.columns], how="left")
        for r in assoc.itertuples():
            hits = hit_rel.loc[(hit_rel["kind"] == r.kind) & (hit_rel["name"] == r.name), "release_ns"]
            own = cul.loc[(cul["kind"] == r.kind) & (cul["name"] == r.name), "start_ns"].to_numpy(dtype=float)
            own = own[(own >= t0 - res) & (own <= t1 + res)]
            for source, t in zip(SOURCES, (hits.dropna().to_numpy(dtype=float), own)):
                f = periodicity(t, resolution=res, start=t0, end=t1, alpha=each, seed=seed)
                rows.append({"run_id": rid, "rank": int(r.rank), "kind": r.kind, "culprit": r.name, "source": source,
                             "events": f.n_episodes, "periodic": f.periodic, "period_s": f.period / 1e9,
                             "regularity": f.regularity, "p": f.p_value, "jobs": int(hits.nunique()),
                             "best_period_s": f.best_period / 1e9, "reason": f.reason})
    return pd.DataFrame(rows, columns=CULPRIT_PERIOD_COLUMNS)


def _lattice(jobs: pd.DataFrame, release: np.ndarray, resolution_ns: float | None) -> float:
    """The victim's period: given, else the jobs' ``period_ns``, else their median release spacing."""
    if resolution_ns is not None:
        return float(resolution_ns)
    if "period_ns" in jobs.columns and jobs["period_ns"].notna().any():
        return float(jobs["period_ns"].median())
    d = np.diff(release)
    return float(np.median(d[d > 0])) if (d > 0).any() else 1.0
