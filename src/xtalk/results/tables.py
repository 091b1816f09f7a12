"""Every table of the report as a function returning a pandas DataFrame (the Python API).

Each function takes a results directory (a path, the :class:`xtalk.results.Results` that
``xtalk.open`` returns) or a :class:`~xtalk.store.frames.ReportData` already loaded; pass one of
the latter two when calling several, so the jobs are read once::

    from xtalk.results import tables
    data = tables.load("results/quickstart-20260101-120000")  # or xtalk.open(...)
    tables.verdicts(data, ["exec:max:1.2x"])
    tables.slowdown(data)

The statistics are those of :mod:`xtalk.analysis`; this module chooses the groups (scenario
× configuration, runs), keeps the data narrow, and caps what must be capped at 10^7 jobs.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from ..analysis import cells as ce
from ..analysis import guards
from ..analysis import pwcet as pw
from ..analysis import spikes as sp
from ..analysis import stats as st
from ..analysis import verdict as vd
from ..analysis import wakeup as wk
from ..analysis.runorder import run_job_order, stretch_starts
from ..analysis.verdict import EpsilonSpec
from .. import units
from . import epsilon as eps
from ..store.aggregate import group_quantiles
from ..store.frames import SOLO, ReportData, convert_stale, load, load_runs
from .platform import counter_unit, exclude_migrated, migrated

__all__ = ["load", "runs", "cells", "slowdown", "noise_floor", "misses", "epsilon_table", "verdicts", "distribution",
           "per_job_reference", "counter_summary", "counter_correlation", "redundant_counters", "parameter_grid",
           "two_way_grid", "wakeup_drift", "quantisation", "spikes", "spike_periods", "culprits", "wakers",
           "spike_attribution", "culprit_periods",
           "timeline", "pwcet", "pwcet_iid"]

#: Largest number of jobs one bootstrap replicate draws for the slowdown CIs; beyond it each
#: run is subsampled (its slowest job always kept; analysis.slowdown.slowdown's ``max_jobs``).
#: Cost is n_boot × this many draws.
BOOT_JOBS = 5_000
#: pWCET fits use whole runs in time order up to this many jobs (the i.i.d. tests and the
#: threshold scan are O(n) per candidate; 2·10^5 jobs already resolve 1e-5 empirically).
PWCET_JOBS = 200_000
#: Wake-up intervals searched for quantisation levels (whole runs, in order).
QUANT_JOBS = 1_000_000
#: Solo runs compared pairwise for the between-run spread when there is no A/A pair.
AA_RUNS = 6


def _data(x) -> ReportData:
    """The loaded frames of ``x``: itself, an xtalk.open() object's (loaded once), or a path's."""
    if isinstance(x, ReportData):
        return x
    data = getattr(x, "data", None)  # xtalk.results.Results
    return data if isinstance(data, ReportData) else load(getattr(x, "path", x))


def groups(data: ReportData) -> list[tuple[str, str]]:
    """(scenario, configuration) pairs that have jobs, solo first."""
    def compute():
        m = data.measured
        if m.empty:
            return []
        # Pairs from the category codes: a groupby over 10^7 categoricals costs half a second,
        # np.unique of the pairs (a sort) a sixth of one; a count of the pair codes a tenth of that.
        sc, cf = m["scenario"].cat.categories, m["configuration"].cat.categories
        s_codes, c_codes = m["scenario"].cat.codes.to_numpy(), m["configuration"].cat.codes.to_numpy()
        if s_codes.min() >= 0 and c_codes.min() >= 0:
            # A pair first met where a stretch of equal pairs starts, so where a label changes:
            # the pairs read there only (jobs come in runs), not a 64-bit pair code of every job.
            at = _label_changes(data)
            if at is None:  # labels interleaved: every job's pair
                at = slice(None)
            pair = s_codes[at].astype(np.int64) * len(cf) + c_codes[at]
            seen = np.flatnonzero(np.bincount(pair, minlength=len(sc) * len(cf)))
            codes = (seen // len(cf)) * 65536 + seen % len(cf)
        else:  # a row without a label: the pairs as they are, NaN codes among them
            codes = np.unique(s_codes.astype(np.int64) * 65536 + c_codes)
        pairs = [(str(sc[c // 65536]), str(cf[c % 65536])) for c in codes]
        order = {s: i for i, s in enumerate(data.scenarios)}
        return sorted(pairs, key=lambda p: (order.get(p[0], 99), p[1]))

    return list(_memo(data, ("groups",), compute))


def subset(data: ReportData, scenario: str, configuration: str | None = None, cols: Sequence[str] | None = None,
            warmup: bool = False) -> pd.DataFrame:
    """Jobs of one scenario (and configuration), only ``cols``; warm-up jobs too (flagged
    by ``warmup``) when asked. Unused run categories are dropped so groupby sees no empty run."""
    frames = [data.measured, data.warmup] if warmup else [data.measured]
    parts = []
    for j in frames:
        spans = _group_rows(data, scenario, configuration) if j is data.measured else None
        part = _rows_of_spans(j, spans, cols) if spans else None
        if part is None:
            mask = (j["scenario"] == scenario).to_numpy()
            if configuration is not None:
                mask = mask & (j["configuration"] == configuration).to_numpy()
            part = j.loc[mask, [c for c in cols if c in j.columns]] if cols is not None else j[mask]
        parts.append(part)
    out = parts[0] if len(parts) == 1 else pd.concat(parts)
    if "run_id" in out.columns:
        out = out.assign(run_id=_used_categories(out["run_id"]))
    return out


def _rows_of_spans(j: pd.DataFrame, spans: list[tuple[int, int]], cols: Sequence[str] | None) -> pd.DataFrame | None:
    """``j``'s rows ``a:b`` of every span (in order), only ``cols``: what a boolean mask of
    those rows gives (the same columns, dtypes and index), each column joined from its
    slices instead of a take of the mask's positions (a group's rows at 10^7 jobs are a few
    dozen runs' stretches). None where the mask must decide: an index other than 0, 1, …,
    n − 1, a column neither numpy nor categorical, no column, or spans of single rows (whose
    index pandas may give as a range)."""
    idx = j.index
    if not (isinstance(idx, pd.RangeIndex) and idx.start == 0 and idx.step == 1):
        return None
    names = [c for c in cols if c in j.columns] if cols is not None else list(j.columns)
    if not names or (len(spans) > 1 and all(b - a == 1 for a, b in spans)):
        return None
    cats = {}
    for c in names:
        dt = j[c].dtype
        if isinstance(dt, pd.CategoricalDtype):
            cats[c] = dt
        elif not isinstance(dt, np.dtype):
            return None
    if len(spans) == 1:
        a, b = spans[0]
        index = pd.RangeIndex(a, b)
    else:
        pos = np.arange(sum(b - a for a, b in spans))  # one array: each span's positions shifted in place
        o = 0
        for a, b in spans:
            pos[o:o + b - a] += a - o
            o += b - a
        index = pd.Index(pos)
    out = {}
    for c in names:
        col = j[c]
        v = col.cat.codes.to_numpy() if c in cats else col.to_numpy()
        joined = np.concatenate([v[a:b] for a, b in spans])
        out[c] = pd.Categorical.from_codes(joined, dtype=cats[c]) if c in cats else joined
    return pd.DataFrame(out, index=index, columns=names, copy=False)


def _used_categories(col: pd.Series) -> pd.Series:
    """``col.cat.remove_unused_categories()`` from a count of the codes instead of pandas'
    sort of every code (10^7 jobs: a sort per subset taken)."""
    codes = col.cat.codes.to_numpy()
    cats = col.cat.categories
    starts = stretch_starts(codes)
    stretched = starts.size <= max(64, codes.size // 64)
    if stretched:
        # Runs come in stretches: the codes used are those the stretches start with (a
        # bincount converts every small code to a 64-bit index first: 80 MB at 10^7 jobs).
        used = np.zeros(len(cats), dtype=bool)
        first = codes[starts]
        used[first[first >= 0]] = True
    else:
        used = np.bincount(codes[codes >= 0], minlength=len(cats)) > 0
    if used.all():
        return col
    new = np.cumsum(used) - 1
    if stretched:
        # Each stretch's new code repeated over it, in the codes' own type (not a gather of
        # 64-bit codes, a where and a conversion of every job).
        recoded = np.repeat(np.where(first >= 0, new[np.maximum(first, 0)], -1).astype(codes.dtype),
                            np.diff(np.append(starts, codes.size)))
    else:
        recoded = np.where(codes >= 0, new[np.maximum(codes, 0)], -1).astype(codes.dtype, copy=False)
    return pd.Series(pd.Categorical.from_codes(recoded, categories=cats[used], ordered=col.cat.ordered),
                     index=col.index, name=col.name)


def all_jobs(data: ReportData, cols: Sequence[str]) -> pd.DataFrame:
    """``cols`` of every job, warm-up included."""
    return pd.concat([data.warmup[list(cols)], data.measured[list(cols)]])


def _memo(data: ReportData, key, compute):
    """A table computed once per ReportData (verdicts and their section share slowdowns)."""
    if key not in data.memo:
        data.memo[key] = compute()
    return data.memo[key]


def forget(data: ReportData, kind: str) -> None:
    """Let go of every cached table of ``kind`` (e.g. "wakeup": each group's series), once no
    later reader needs them: they would otherwise be held beside the next section's."""
    for key in [k for k in data.memo if isinstance(k, tuple) and k[:1] == (kind,)]:
        del data.memo[key]


# --------------------------------------------------------------------------- runs


def runs(x) -> pd.DataFrame:
    """One row per run: labels, status, reason, jobs recorded and measured, deadline misses
    and migrated jobs (analysis.cells.per_run: the per-run stage of the cells)."""
    data = _data(x)
    r = data.runs.drop(columns=["enemies", "dir"], errors="ignore").copy()
    per = _per_run(data).set_index("run_id")
    r["jobs_measured"] = r["run_id"].astype(str).map(per["jobs"]).fillna(0).astype(int)
    r["deadline_misses"] = r["run_id"].astype(str).map(per["deadline_misses"]).fillna(0).astype(int)
    r["migrated_jobs"] = r["run_id"].astype(str).map(per["migrated_jobs"]).fillna(0).astype(int)
    return r


# --------------------------------------------------------------------------- cells


def cells(x, *, n_boot: int = 2000, seed: int = 0) -> pd.DataFrame:
    """One row per configuration × scenario with a run: runs, jobs, response and execution
    quantiles, misses, migrated jobs, slowdowns of both metrics with their CIs
    (analysis.cells.cells, CIs capped at ``BOOT_JOBS`` jobs per replicate). The slowdown,
    misses and verdict tables, the terminal summary (summary.md, summary.json) and `xtalk
    query`'s ``cells`` view all read this one table."""
    data = _data(x)
    return _memo(data, ("cells", n_boot, seed), lambda: ce.cells(data.measured, data.runs, n_boot=n_boot, seed=seed,
                                                                  max_jobs=BOOT_JOBS, per_run_table=_per_run(data),
                                                                  sorted_of=lambda cf, sc, m: sorted_values(data, sc, cf, f"{m}_ns"))).copy()


def _per_run(data: ReportData) -> pd.DataFrame:
    """analysis.cells.per_run of the measured jobs, once per ReportData (the cells and the
    run table both read it)."""
    return _memo(data, ("per_run",), lambda: ce.per_run(data.measured, data.runs))


def _cell(data: ReportData, n_boot: int, seed: int) -> pd.DataFrame:
    """The cells indexed by (scenario, configuration)."""
    return cells(data, n_boot=n_boot, seed=seed).set_index(["scenario", "configuration"])


# --------------------------------------------------------------------------- slowdown


def slowdown(x, *, n_boot: int = 2000, seed: int = 0) -> pd.DataFrame:
    """Slowdown of execution and response time against solo, per scenario, configuration and
    metric: ratio of medians and of maxima, each with its 95 % CI (analysis.slowdown: runs
    then jobs resampled, widened for few runs).

    Point values use every job. When a replicate would draw more than ``BOOT_JOBS`` jobs,
    the CI is computed on a per-run subsample (each run's slowest job kept, so the ratio of
    maxima is unchanged) and moved to the full-data point on the log scale;
    ``ci_subsampled`` says so. Subsampling only widens the within-run part of the interval.
    """
    data = _data(x)
    return _memo(data, ("slowdown", n_boot, seed), lambda: _slowdown(data, n_boot, seed)).copy()


def _slowdown(data: ReportData, n_boot: int, seed: int) -> pd.DataFrame:
    c = _cell(data, n_boot, seed)
    rows = []
    for conf in dict.fromkeys(c for _, c in groups(data)):
        for scen, cf in groups(data):
            if cf != conf:
                continue
            x = c.loc[(scen, conf)]
            for metric in ("exec", "response"):
                row = {"scenario": scen, "configuration": conf, "metric": metric, "runs": int(x["runs"]),
                       "runs_ok": int(x["runs_ok"]), "jobs": int(x["jobs"]), "median_ms": x[f"{metric}_median_ms"],
                       "p99_ms": x[f"{metric}_p99_ms"], "max_ms": x[f"{metric}_max_ms"]}
                for stat in ("median", "max"):
                    for k in ("", "_lo", "_hi"):
                        row[f"slowdown_{stat}{k}"] = x[f"{metric}_slowdown_{stat}{k}"]
                row["ci_subsampled"] = bool(x["ci_subsampled"])
                rows.append(row)
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- noise floor


def aa_pairs(data: ReportData) -> list[tuple[str, str]]:
    """Scenario pairs with identical enemies (an A/A check built into the experiment)."""
    specs = data.scenario_specs()
    have = [s for s in data.scenarios if s in specs]
    return [(a, b) for i, a in enumerate(have) for b in have[i + 1:] if specs[a] == specs[b]]


def noise_floor(x, *, n_boot: int = 2000, seed: int = 0) -> pd.DataFrame:
    """How far from 1 a slowdown strays when nothing changed, per metric and statistic.

    ``source`` is ``A/A a vs b`` when two scenarios have identical enemies (the floor of
    :func:`xtalk.analysis.stats.aa_noise_floor` between them), else ``solo runs`` — the
    experiment has no A/A pair, so the between-run spread of solo stands in: the same floor
    over pairs of solo repetitions (up to ``AA_RUNS``). ``floor`` is NaN with one solo run.
    """
    data = _data(x)
    return _memo(data, ("noise_floor", n_boot, seed), lambda: _noise_floor(data, n_boot, seed)).copy()


def _noise_floor(data: ReportData, n_boot: int, seed: int) -> pd.DataFrame:
    pairs = aa_pairs(data)
    rows = []
    for metric in ("exec_ns", "response_ns"):
        if pairs:
            a, b = pairs[0]
            samples = [sorted_values(data, s, None, metric) for s in (a, b)]  # sorted: the bootstrap's sort is cheap
            source = f"A/A {a} vs {b}"
        else:
            # Sorted once for both statistics (aa_noise_floor sorts its samples, and a sorted one
            # is taken as it is: the same values, the same floor).
            samples = _sorted_leading_runs(data, SOLO, metric, AA_RUNS)
            source = "solo runs (no A/A pair in this experiment)"
        for stat in ("median", "max"):
            row = {"metric": metric.replace("_ns", ""), "statistic": stat, "source": source, "samples": len(samples)}
            if len(samples) >= 2 and all(s.size >= 2 for s in samples):
                f = st.aa_noise_floor(samples, stat, n_boot=n_boot, seed=seed)
                row.update(floor=f.floor, ratio_min=f.ratio_min, ratio_max=f.ratio_max)
            else:
                row.update(floor=np.nan, ratio_min=np.nan, ratio_max=np.nan)
            rows.append(row)
    return pd.DataFrame(rows)


def _leading_runs(data: ReportData, scenario: str, column: str, k: int) -> list[np.ndarray]:
    """``column`` (floats) of each of the first ``k`` runs of ``scenario`` with measured jobs,
    in the run table's order, each run's jobs in table order: what
    ``subset(...).groupby("run_id", observed=True)[column]`` gives, from the label codes
    instead of a copy of the scenario's jobs and a groupby (10^7 jobs: 5·10^6 rows copied
    to keep six runs)."""
    m = data.measured
    if m.empty or scenario not in m["scenario"].cat.categories:
        return []
    col = m[column]
    values = col.to_numpy() if isinstance(col.dtype, np.dtype) else col.to_numpy(dtype=float, na_value=np.nan)
    runs = _run_spans(data, _group_rows(data, scenario, None))
    if runs is not None:  # each run's rows are slices: only the k runs' values copied
        return [np.concatenate([values[a:b] for a, b in runs[c]]).astype(float, copy=False)
                for c in sorted(c for c in runs if c >= 0)[:k]]
    rows = np.flatnonzero(m["scenario"].cat.codes.to_numpy() == m["scenario"].cat.categories.get_loc(scenario))
    rid = m["run_id"].cat.codes.to_numpy()[rows]
    rows, rid = rows[rid >= 0], rid[rid >= 0]  # a job without a run id is in no run
    if not rows.size:
        return []
    first = np.flatnonzero(np.bincount(rid))[:k]
    return [values[rows[rid == c]].astype(float) for c in first]


def _sorted_leading_runs(data: ReportData, scenario: str, column: str, k: int) -> list[np.ndarray]:
    """``np.sort`` of each of :func:`_leading_runs`: each run's values counted from its slices
    of an int64 column (:func:`_sorted_int_spans`, the same floats) where the runs come in
    stretches; sorted copies otherwise."""
    m = data.measured
    runs = None
    if not m.empty and scenario in m["scenario"].cat.categories and column in m.columns and m[column].dtype == np.int64:
        runs = _run_spans(data, _group_rows(data, scenario, None))
    if runs is None:
        return [np.sort(v) for v in _leading_runs(data, scenario, column, k)]
    v = m[column].to_numpy()
    return [_sorted_int_spans(v, runs[c]) for c in sorted(c for c in runs if c >= 0)[:k]]


def _run_spans(data: ReportData, spans: list[tuple[int, int]] | None) -> dict[int, list[tuple[int, int]]] | None:
    """The rows ``spans`` (:func:`_group_rows`) cut where the run changes: (first, end) of
    each stretch per run code (−1: no run id), in table order; None where ``spans`` is None
    or the runs interleave (more than max(64, rows / 64) stretches)."""
    if spans is None:
        return None
    rid = data.measured["run_id"].cat.codes.to_numpy()
    out: dict[int, list[tuple[int, int]]] = {}
    count, limit = 0, max(64, len(rid) // 64)
    for a, b in spans:
        c = rid[a:b]
        bounds = [a, *(np.flatnonzero(c[1:] != c[:-1]) + 1 + a).tolist(), b]
        count += len(bounds) - 1
        if count > limit:
            return None
        for x, y in zip(bounds[:-1], bounds[1:]):
            out.setdefault(int(rid[x]), []).append((x, y))
    return out


# --------------------------------------------------------------------------- misses


def misses(x) -> pd.DataFrame:
    """Deadline misses (the agent's per-job flag; the times where a table has none) and
    serious misses (not done by the end of the next period, or never run) per scenario and
    configuration, with the Wilson CI of the miss ratio, from :func:`cells`
    (analysis.verdict.deadline_misses; lost jobs are gaps inside one run, counted per run)."""
    data = _data(x)
    return _memo(data, ("misses",), lambda: _misses(data)).copy()


def _misses(data: ReportData) -> pd.DataFrame:
    c = _cell(data, 2000, 0)  # the counts do not depend on the bootstrap: the summary's cells
    rows = []
    for scen, conf in groups(data):
        x = c.loc[(scen, conf)]
        rows.append({"scenario": scen, "configuration": conf, "n_jobs": int(x["jobs"]), "n_missed": int(x["deadline_misses"]),
                     "miss_ratio": x["miss_ratio"], "miss_ci_low": x["miss_ci_low"], "miss_ci_high": x["miss_ci_high"],
                     "n_lost": int(x["lost_jobs"]), "n_serious": int(x["serious_misses"]), "serious_ratio": x["serious_ratio"],
                     "max_lateness_ns": int(x["max_lateness_ns"]), "max_responsiveness": float(x["max_responsiveness"])})
    return pd.DataFrame(rows, columns=["scenario", "configuration", "n_jobs", "n_missed", "miss_ratio", "miss_ci_low",
                                       "miss_ci_high", "n_lost", "n_serious", "serious_ratio", "max_lateness_ns",
                                       "max_responsiveness"])


# --------------------------------------------------------------------------- verdicts


def epsilon_specs(data: ReportData, epsilons, configuration: str | None = None) -> list[EpsilonSpec]:
    """The ε bounds that apply to ``configuration`` (all of them when None): the experiment's,
    those given (``--epsilon``), and those its runs carry as the ``epsilon`` label (a
    campaign's application ε, stored on every run by campaign/grid.py)."""
    out = eps.from_experiment(data.experiment)
    for e in epsilons or ():
        out.append(e if isinstance(e, EpsilonSpec) else eps.parse(e))
    run_ids = None
    if configuration is not None:
        run_ids = data.runs.loc[data.runs["configuration"] == configuration, "run_id"]
    out += [s for s in eps.from_labels(data.parameters, run_ids) if s not in out]
    return out


def epsilon_table(x, epsilons: Sequence = (), *, n_boot: int = 2000, seed: int = 0) -> pd.DataFrame:
    """One row per scenario, configuration and ε bound: observed value and CI, the bound, the
    verdict (holds / violated / inconclusive; analysis.verdict.epsilon_verdict)."""
    data = _data(x)
    key = ("epsilon", tuple(epsilons or ()), n_boot, seed)
    return _memo(data, key, lambda: _epsilon_table(data, epsilons, n_boot, seed)).copy()


def _epsilon_table(data: ReportData, epsilons: Sequence, n_boot: int, seed: int) -> pd.DataFrame:
    rows = []
    cols = ["run_id", "exec_ns", "response_ns", "start_ns", "end_ns", "release_ns"]
    for scen, conf in groups(data):
        specs = epsilon_specs(data, epsilons, conf)
        if not specs:
            continue
        solo = subset(data, SOLO, conf, cols)
        cur = subset(data, scen, conf, cols)
        for spec in specs:
            if spec.relative is not None and (scen == SOLO or solo.empty):
                continue  # a bound relative to solo says nothing about solo itself
            r = vd.epsilon_verdict(solo if len(solo) else None, cur, spec, n_boot=n_boot, seed=seed)
            r.insert(0, "epsilon", eps.describe(spec))
            r.insert(0, "configuration", conf)
            r.insert(0, "scenario", scen)
            rows.append(r)
    return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(
        columns=["scenario", "configuration", "epsilon", "observed_ns", "ci_low_ns", "ci_high_ns", "bound_ns", "verdict"])


def max_ci_text(p, lo, hi, runs_ok: int, reference: bool = False) -> str:
    """A max slowdown as the report prints it: not at all from fewer runs per side than the
    statistic carries (analysis.guards.MIN_RUNS_FOR_MAX, whose guard says why)."""
    if not reference and int(runs_ok) < guards.MIN_RUNS_FOR_MAX:
        return f"– ({int(runs_ok)} runs: too few for a maximum)"
    return ci_text(p, lo, hi)


def ci_text(p, lo, hi) -> str:
    """A ratio with its CI as the tables print it: "×1.20 [1.10, 1.31]", "–" when unknown."""
    if p is None or (isinstance(p, float) and math.isnan(p)):
        return "–"
    if isinstance(lo, float) and math.isnan(lo):
        return f"×{p:.2f}"
    return f"×{p:.2f} [{lo:.2f}, {hi:.2f}]"


def verdicts(x, epsilons: Sequence = (), *, n_boot: int = 2000, seed: int = 0) -> pd.DataFrame:
    """One row per application (the victim) and configuration, per scenario: slowdown of
    execution and response time with CIs, the noise floor beside it, misses, ε verdicts and
    a one-line ``verdict``. ``status`` is the worst of: ε violated / inconclusive, serious
    misses, misses, slowdown above the floor."""
    data = _data(x)
    slow = slowdown(data, n_boot=n_boot, seed=seed).set_index(["scenario", "configuration", "metric"])
    floor = noise_floor(data, n_boot=n_boot, seed=seed).set_index(["metric", "statistic"])
    miss = misses(data).set_index(["scenario", "configuration"])
    epst = epsilon_table(data, epsilons, n_boot=n_boot, seed=seed)
    app = _application(data)
    trouble = _reference_trouble(slow, miss)
    effect = vd.min_effect(data.experiment)
    rows = []
    for scen, conf in groups(data):
        row = {"application": app, "scenario": scen, "configuration": conf}
        parts = []
        for metric in ("exec", "response"):
            s = slow.loc[(scen, conf, metric)]
            fl = float(floor.loc[(metric, "median"), "floor"]) if (metric, "median") in floor.index else float("nan")
            row.update({f"{metric}_median_ms": s["median_ms"], f"{metric}_max_ms": s["max_ms"],
                        f"{metric}_slowdown_median": s["slowdown_median"], f"{metric}_slowdown_median_lo": s["slowdown_median_lo"],
                        f"{metric}_slowdown_median_hi": s["slowdown_median_hi"], f"{metric}_slowdown_max": s["slowdown_max"],
                        f"{metric}_slowdown_max_lo": s["slowdown_max_lo"], f"{metric}_slowdown_max_hi": s["slowdown_max_hi"],
                        f"{metric}_noise_floor": fl})
            if scen != SOLO:
                word = vd.interference(s["slowdown_median_lo"], s["slowdown_median_hi"], fl, effect)
                row[f"{metric}_interference"] = word
                mx = max_ci_text(s["slowdown_max"], s["slowdown_max_lo"], s["slowdown_max_hi"], s["runs_ok"])
                # The word is the median's: beside it, so that it is not read as the ε verdict's
                # (a line said "inconclusive" of a median and "HOLDS" of a max).
                against = f"against the noise floor ±{fl * 100:.1f} %" if not math.isnan(fl) else "no noise floor"
                parts.append(f"{metric} median {ci_text(s['slowdown_median'], s['slowdown_median_lo'], s['slowdown_median_hi'])}"
                             f" (the median {word}, {against}), max {mx}")
        if scen == SOLO:
            parts.append(f"reference: exec median {row['exec_median_ms']:.3f} ms, max {row['exec_max_ms']:.3f} ms; "
                         f"response max {row['response_max_ms']:.3f} ms")
        m = miss.loc[(scen, conf)] if (scen, conf) in miss.index else None
        n_miss = int(m["n_missed"]) if m is not None else 0
        n_ser = int(m["n_serious"]) if m is not None else 0
        row.update(jobs=int(m["n_jobs"]) if m is not None else 0, deadline_misses=n_miss, serious_misses=n_ser)
        parts.append(f"{n_miss} deadline miss{'es' if n_miss != 1 else ''}, {n_ser} serious")
        e = epst[(epst["scenario"] == scen) & (epst["configuration"] == conf)]
        disturbed = trouble.get(conf) if scen != SOLO else None
        flag = vd.DISTURBED_SUFFIX if disturbed else ""
        eps_words = [f"ε {r.epsilon}: {r.verdict.upper()}{flag}" for r in e.itertuples()]
        row["epsilon_verdicts"] = "; ".join(f"{r.epsilon}: {r.verdict}{flag}" for r in e.itertuples())
        parts += eps_words
        if e.empty and scen != SOLO:
            parts.append(vd.NO_EPSILON)
        if disturbed:
            parts.append(f"the reference is disturbed ({disturbed}): these numbers measure the enemies and that together")
        row["reference_disturbed"] = bool(disturbed)
        row["status"] = vd.status(e["verdict"].tolist(), n_ser, n_miss,
                                  [row.get("exec_interference"), row.get("response_interference")],
                                  reference_disturbed=bool(disturbed))
        row["verdict"] = f"{app} · {scen} ({conf}): {row['status']} — " + "; ".join(parts)
        rows.append(row)
    return pd.DataFrame(rows)


def _reference_trouble(slow: pd.DataFrame, miss: pd.DataFrame) -> dict[str, str]:
    """Per configuration, why its solo runs are a disturbed reference
    (analysis.guards.reference_trouble: misses, serious misses, a tail far above the median)."""
    out = {}
    for (scen, conf, metric), s in slow.iterrows():
        if scen != SOLO or metric != "exec":
            continue
        m = miss.loc[(scen, conf)] if (scen, conf) in miss.index else None
        why = guards.reference_trouble(int(s["jobs"]), int(m["n_missed"]) if m is not None else 0,
                                       int(m["n_serious"]) if m is not None else 0, s["median_ms"], s["max_ms"])
        if why:
            out[conf] = f"solo: {why}"
    return out


def application_name(data: ReportData) -> str:
    """The victim's name as the verdicts call it: ``experiment/body``."""
    return _application(data)


def _application(data: ReportData) -> str:
    v = (data.experiment.get("experiment") or {}).get("victim") or {}
    name = (data.experiment.get("experiment") or {}).get("name") or data.path.name
    body = v.get("body")
    return f"{name}/{body}" if body else str(name)


# --------------------------------------------------------------------------- distributions


QUANTILES = (("p1", 0.01), ("p25", 0.25), ("median", 0.5), ("p75", 0.75), ("p90", 0.9), ("p99", 0.99), ("p99.9", 0.999))


def sorted_values(data: ReportData, scenario: str, configuration: str | None, column: str) -> np.ndarray:
    """``column`` of the measured jobs of a group, sorted (cached: every quantile, boxplot,
    ECDF and marker of the report reads it instead of sorting again)."""
    return _memo(data, ("sorted", scenario, configuration, column), lambda: _sorted_group(data, scenario, configuration, column))


def _sorted_group(data: ReportData, scenario: str, configuration: str | None, column: str) -> np.ndarray:
    """:func:`_sorted_floats` of a group's values, read from the slices of the column where
    the group's rows come in stretches and the column is int64 (no mask, copy or frame of
    the group's 5·10^6 rows); :func:`subset`'s rows otherwise."""
    m = data.measured
    spans = _group_rows(data, scenario, configuration) if column in m.columns and m[column].dtype == np.int64 else None
    if spans is None:
        return _sorted_floats(subset(data, scenario, configuration, [column])[column])
    return _sorted_int_spans(m[column].to_numpy(), spans)


def _group_rows(data: ReportData, scenario: str, configuration: str | None) -> list[tuple[int, int]] | None:
    """(first, end) of each stretch of the measured rows of a group (scenario, and
    configuration unless None), in table order, from the label codes (cached: each group's
    metrics read them); None where the rows are interleaved (more than max(64, rows / 64)
    stretches)."""
    def compute():
        m = data.measured
        n = len(m)
        for name, label in (("scenario", scenario), ("configuration", configuration)):
            if label is None:
                continue
            col = m[name]
            if not isinstance(col.dtype, pd.CategoricalDtype):
                return None
            if label not in col.cat.categories:
                return []
        if not n:
            return []
        at = _label_changes(data)
        if at is not None:  # read where the labels change: no comparison of every row's codes
            return _group_rows_at(m, at, scenario, configuration, n)
        keep = _group_mask(m, scenario, configuration)
        edges = np.flatnonzero(keep[1:] != keep[:-1]) + 1
        if edges.size > max(64, n // 64):
            return None
        bounds = [0, *edges.tolist(), n]
        return [(a, b) for a, b in zip(bounds[:-1], bounds[1:]) if keep[a]]

    return _memo(data, ("group_rows", scenario, configuration), compute)


def _group_mask(m: pd.DataFrame, scenario: str, configuration: str | None) -> np.ndarray:
    """Whether each measured row is the group's (both labels categorical, known)."""
    keep = np.ones(len(m), dtype=bool)
    for name, label in (("scenario", scenario), ("configuration", configuration)):
        if label is not None:
            keep &= m[name].cat.codes.to_numpy() == m[name].cat.categories.get_loc(label)
    return keep


def _label_changes(data: ReportData) -> np.ndarray | None:
    """Where the measured rows' (scenario, configuration) changes, 0 first (cached: every
    group's rows are read from it); None where the labels change at more than
    max(64, rows / 64) places."""
    def compute():
        m = data.measured
        if not all(c in m.columns and isinstance(m[c].dtype, pd.CategoricalDtype) for c in ("scenario", "configuration")):
            return None
        limit = max(64, len(m) // 64)
        parts = []
        for c in ("scenario", "configuration"):
            parts.append(stretch_starts(m[c].cat.codes.to_numpy()))
            if parts[-1].size > limit:  # (before a union's sort of 10^7 positions)
                return None
        at = np.union1d(*parts)
        return at if at.size <= limit else None

    return _memo(data, ("label_changes",), compute)


def _group_rows_at(m: pd.DataFrame, at: np.ndarray, scenario: str, configuration: str | None,
                   n: int) -> list[tuple[int, int]] | None:
    """:func:`_group_rows` from the stretches of equal labels starting at ``at``: the group's
    stretches, neighbours joined; None past max(64, n / 64) edges, as the mask's count."""
    keep = m["scenario"].cat.codes.to_numpy()[at] == m["scenario"].cat.categories.get_loc(scenario)
    if configuration is not None:
        keep &= m["configuration"].cat.codes.to_numpy()[at] == m["configuration"].cat.categories.get_loc(configuration)
    ends = np.append(at[1:], n)
    spans: list[tuple[int, int]] = []
    for a, b in zip(at[keep].tolist(), ends[keep].tolist()):
        if spans and spans[-1][1] == a:
            spans[-1] = (spans[-1][0], b)
        else:
            spans.append((a, b))
    edges = sum((a > 0) + (b < n) for a, b in spans)
    return None if edges > max(64, n // 64) else spans


#: Values a group's counting sort gathers before each count (at least the span of values:
#: the counts are then added at most twice as many times as there are values).
COUNT_BUFFER = 1 << 20


def _sorted_int_spans(v: np.ndarray, spans: list[tuple[int, int]]) -> np.ndarray:
    """:func:`_sorted_floats` of the int64 values ``v[a:b]`` of every span, the same floats:
    counted span by span (through a buffer of at least the span of values, so the counts are
    added a few times, not once per run) where :func:`_sorted_floats` counts them, sorted as
    int32 or as floats where it does."""
    n = sum(b - a for a, b in spans)
    if not n:
        return np.zeros(0)
    lo = min(int(v[a:b].min()) for a, b in spans)
    hi = max(int(v[a:b].max()) for a, b in spans)
    if hi - lo < COUNTING_SPAN * n and abs(lo) < 2**53 and abs(hi) < 2**53:
        counts = np.zeros(hi - lo + 1, dtype=np.int64)
        buf = np.empty(min(n, max(hi - lo + 1, COUNT_BUFFER)), dtype=np.int64)
        fill = 0
        for a, b in spans:
            while a < b:
                k = min(b - a, buf.size - fill)
                np.subtract(v[a:a + k], lo, out=buf[fill:fill + k])
                fill, a = fill + k, a + k
                if fill == buf.size:
                    counts += np.bincount(buf, minlength=counts.size)
                    fill = 0
        if fill:
            counts += np.bincount(buf[:fill], minlength=counts.size)
        return np.repeat(np.arange(lo, hi + 1, dtype=np.int64).astype(float), counts)
    small = 0 <= lo and hi < 2**31
    out = np.empty(n, dtype=np.int32 if small else np.float64)
    at = 0
    for a, b in spans:
        out[at:at + b - a] = v[a:b]  # int32: exact below 2^31
        at += b - a
    out.sort()
    return out.astype(float, copy=False)


#: A counting sort of whole nanoseconds is used while the values span at most this many
#: times as many nanoseconds as there are values (its counts then take at most 4× the values' memory).
COUNTING_SPAN = 4


def _sorted_floats(col: pd.Series) -> np.ndarray:
    """``col`` as floats, sorted. Whole nanosecond counts that span few nanoseconds for
    their number (a group's execution or response times: 5·10^6 values within a few 10^5
    ns) are sorted by counting them, 10× faster than numpy's sort; others below 2^31 (about
    2 s: a job's time) sort as int32, which numpy sorts nearly twice as fast as 64-bit
    values. The floats are the same every way (tests/test_report_tables.py)."""
    if pd.api.types.is_integer_dtype(col.dtype) and not col.hasnans and len(col):
        v = col.to_numpy(dtype=np.int64)
        lo, hi = int(v.min()), int(v.max())
        if hi - lo < COUNTING_SPAN * v.size and abs(lo) < 2**53 and abs(hi) < 2**53:
            counts = np.bincount(v - lo, minlength=hi - lo + 1)
            return np.repeat(np.arange(lo, hi + 1, dtype=np.int64).astype(float), counts)
        if 0 <= lo and hi < 2**31:
            return np.sort(v.astype(np.int32)).astype(float)
    return np.sort(col.to_numpy(dtype=float))


#: np.quantile of data already sorted (analysis/stats.sorted_quantiles).
quantiles = st.sorted_quantiles


def group_markers(data: ReportData, scenario: str, configuration: str | None, column: str) -> dict[str, float]:
    """best / median / first / worst of a group as analysis.stats.markers defines them (one
    group: best, median, worst over measured jobs; first = the job with the lowest index,
    warm-up included, first run first), from the sorted cache instead of a sort of every job
    by index (tests check both agree)."""
    v = sorted_values(data, scenario, configuration, column)
    first = np.nan
    for frame in (data.warmup, data.measured):  # warm-up jobs come first when there are any
        m = (frame["scenario"] == scenario).to_numpy()
        if configuration is not None:
            m = m & (frame["configuration"] == configuration).to_numpy()
        if m.any():
            jobs = frame["job"].to_numpy()[m]
            first = float(frame[column].to_numpy()[m][int(np.argmin(jobs))])
            break
    return {"best": float(v[0]), "median": float(quantiles(v, 0.5)), "first": first, "worst": float(v[-1])}


def distribution(x, column: str = "exec_ns") -> pd.DataFrame:
    """Per scenario and configuration: n, min (best), quantiles, max (worst), mean, sd, and
    the first job (warm-up included: seed 004 Fig. 7's 'first iteration' marker), in ns.

    Given a results directory (not a loaded ReportData), it is computed in DuckDB over the
    Parquet files without loading the jobs (store.aggregate; the same numbers, tests check)."""
    if not isinstance(x, ReportData):
        return _distribution_parquet(getattr(x, "path", x), column)
    data = _data(x)
    rows = []
    for scen, conf in groups(data):
        v = sorted_values(data, scen, conf, column)
        mk = group_markers(data, scen, conf, column)
        row = {"scenario": scen, "configuration": conf, "column": column, "n": v.size, "best": mk["best"]}
        row.update({name: float(q) for (name, _), q in zip(QUANTILES, quantiles(v, [q for _, q in QUANTILES]))})
        row.update(worst=mk["worst"], mean=float(v.mean()), sd=float(v.std(ddof=1)) if v.size > 1 else np.nan,
                   first=mk["first"])
        rows.append(row)
    return pd.DataFrame(rows)


def _distribution_parquet(path, column: str) -> pd.DataFrame:
    """:func:`distribution` of a results directory through store.aggregate (no job loaded)."""
    runs = load_runs(path)
    convert_stale(runs)
    names = [name for name, _ in QUANTILES]
    agg = group_quantiles(runs, column, [q for _, q in QUANTILES], first=True)
    agg = agg[agg["n"] > 0]
    order = {s: i for i, s in enumerate(sorted(dict.fromkeys(runs["scenario"]), key=lambda s: s != SOLO))}
    agg = agg.assign(_o=agg["scenario"].map(order)).sort_values(["_o", "configuration"], kind="stable")
    agg = agg.rename(columns=dict(zip([st.quantile_name(q) for _, q in QUANTILES], names)))
    out = agg.assign(column=column, best=agg["min"], worst=agg["max"])
    return out[["scenario", "configuration", "column", "n", "best", *names, "worst", "mean", "sd", "first"]].reset_index(drop=True)


def per_job_reference(x, scenario: str = SOLO, column: str = "exec_ns", configuration: str | None = None, *,
                      rows: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per job index across the runs of a scenario: min (the reference curve of seed 000
    Fig. 5.16), median, max and the number of runs (analysis.stats.per_step_reference).
    ``rows``: the scenario's ``run_id``, ``job`` and ``column`` when the caller has them."""
    data = _data(x)
    g = subset(data, scenario, configuration, ["run_id", "job", column]) if rows is None else rows
    if g.empty:
        return pd.DataFrame(columns=["job", "min_ns", "median_ns", "max_ns", "n_runs"])
    same = _reference_of_stretches(g, column)
    if same is not None:
        return same
    g = g.assign(run_id=g["run_id"].cat.codes)  # integer run keys: nunique per job is much cheaper
    return st.per_step_reference(g, column=column, by=("run_id",))


def _reference_of_stretches(g: pd.DataFrame, column: str) -> pd.DataFrame | None:
    """:func:`per_job_reference` when each run is one stretch of the rows holding the same
    increasing job indices as every other run (a group's runs as the store gives them), and
    the values are integers: analysis.stats' runs × jobs matrix transposed, each job's runs
    sorted in place, its min, median and max read from them. The same numbers (the middle values, or the mean of the two middle ones,
    whatever the order of the runs); None otherwise."""
    v, job = g[column].to_numpy(), g["job"].to_numpy()
    if v.dtype.kind not in "iu" or job.dtype.kind not in "iu" or not isinstance(g["run_id"].dtype, pd.CategoricalDtype):
        return None
    codes = g["run_id"].cat.codes.to_numpy()
    starts = stretch_starts(codes)
    if (codes[starts] < 0).any() or np.unique(codes[starts]).size != starts.size:
        return None
    ends = np.append(starts[1:], codes.size)
    n = int(ends[0] - starts[0])
    ju = job[:n]
    if (ends - starts != n).any() or not bool(np.all(ju[1:] > ju[:-1])):
        return None
    if not all(np.array_equal(job[a:b], ju) for a, b in zip(starts[1:], ends[1:])):
        return None
    # The runs are consecutive stretches of n rows: the jobs × runs matrix is their runs × jobs
    # block transposed. Each job's runs sorted as integers (numpy sorts short integer rows
    # with a vectorised network: 5× faster than np.median's partition of float rows); the
    # float conversion keeps the order, so the middle values are np.median's, and their mean
    # is taken as it takes it; the first and last are the minimum and maximum.
    r = starts.size
    m = v[:r * n].reshape(r, n).T.copy()  # (C order: one job's runs contiguous)
    m.sort(axis=1)
    lo, hi = m[:, 0].copy(), m[:, -1].copy()
    median = m[:, r // 2].astype(float)
    if r % 2 == 0:
        median += m[:, r // 2 - 1]
        median /= 2
    return pd.DataFrame({"job": ju.copy(), "min_ns": lo, "median_ns": median,
                         "max_ns": hi, "n_runs": np.full(n, starts.size, dtype=np.int64)})


# --------------------------------------------------------------------------- counters


def counter_summary(x, column: str = "exec_ns") -> pd.DataFrame:
    """Per scenario and counter: best / median / first / worst, mean, and the linear (Pearson)
    and rank (Spearman) correlation of ``column`` with the counter (seed 004 Fig. 8–10)."""
    data = _data(x)
    rows = []
    for ctr in data.counters:
        for scen, conf in groups(data):
            g = subset(data, scen, conf, ["run_id", "job", "warmup", "cpu_start", "cpu_end", column, ctr], warmup=True)
            g = g[g[ctr].notna()]
            n_migrated = int(migrated(g).sum())
            g = exclude_migrated(g)  # per-core counters: a migrated job's delta mixes two CPUs (SPEC §2)
            if len(g) < 3:
                continue
            g = g.assign(**{ctr: g[ctr].astype(float)})
            mk = st.markers(g, column=ctr, by=())
            steady = g[~g["warmup"]]
            r = correlation(steady[column], steady[ctr])
            rho = correlation(steady[column].rank(), steady[ctr].rank())
            rows.append({"scenario": scen, "configuration": conf, "counter": ctr, "n": len(steady),
                         "best": mk["best"].iloc[0], "median": mk["median"].iloc[0], "first": mk["first"].iloc[0],
                         "worst": mk["worst"].iloc[0], "mean": float(steady[ctr].mean()), "pearson_r": r,
                         "spearman_rho": rho, "migrated_excluded": n_migrated, "unit": counter_unit(ctr)})
    return pd.DataFrame(rows, columns=["scenario", "configuration", "counter", "unit", "n", "migrated_excluded", "best", "median",
                                       "first", "worst", "mean", "pearson_r", "spearman_rho"])


def correlation(a: pd.Series, b: pd.Series) -> float:
    """Pearson's r of two columns; NaN with fewer than three values or a constant column."""
    a, b = a.to_numpy(dtype=float), b.to_numpy(dtype=float)
    if a.size < 3 or np.std(a) == 0 or np.std(b) == 0:
        return float("nan")
    return float(np.corrcoef(a, b)[0, 1])


def counter_correlation(x, scenario: str | None = None, column: str = "exec_ns") -> pd.DataFrame:
    """Pearson correlation matrix of ``column`` and every counter over the measured jobs (all
    scenarios unless one is named), migrated jobs excluded; constant counters are left out (no
    correlation)."""
    data = _data(x)
    cols = [column] + data.counters
    j = data.measured if scenario is None else subset(data, scenario, None, cols + ["cpu_start", "cpu_end"])
    j = exclude_migrated(j)
    if not data.counters or j.empty:
        return pd.DataFrame()
    m = j[cols].astype(float)
    m = m.loc[:, m.std() > 0]
    return m.corr()


def redundant_counters(x, threshold: float = 0.95, scenario: str | None = None) -> pd.DataFrame:
    """Counter pairs with |r| ≥ ``threshold``: one of each pair brings no new information
    (seed 004 §VIII: prune the design space). ``drop`` names the one less correlated with
    the runtime."""
    corr = counter_correlation(x, scenario)
    rows = []
    ctrs = [c for c in corr.columns if c.startswith("ctr_")]
    for i, a in enumerate(ctrs):
        for b in ctrs[i + 1:]:
            r = float(corr.loc[a, b])
            if abs(r) >= threshold:
                ra, rb = (abs(float(corr.iloc[0][c])) for c in (a, b))
                rows.append({"counter_a": a, "counter_b": b, "r": r, "keep": a if ra >= rb else b,
                             "drop": b if ra >= rb else a})
    return pd.DataFrame(rows, columns=["counter_a", "counter_b", "r", "keep", "drop"])


# --------------------------------------------------------------------------- two-way grids


def two_way_grid(table: pd.DataFrame, x: str, y: str, value: str = "exec_ns", statistic: str = "median") -> pd.DataFrame:
    """A two-way grid (seed 000 ch. 6): rows ``y``, columns ``x``, cells ``statistic`` of
    ``value`` over every job (or row) of that cell; empty cells (excluded, infeasible) NaN."""
    for c in (x, y, value):
        if c not in table.columns:
            raise ValueError(f"column: {c!r} not in the table (have {list(table.columns)})")
    q = st._quantile_level(statistic)
    g = table.groupby([y, x], observed=True)[value]
    cells = g.quantile(q) if q is not None else g.agg(statistic)
    grid = cells.unstack(x)
    return grid.loc[sorted(grid.index, key=_by_value), sorted(grid.columns, key=_by_value)]


def _by_value(label) -> tuple:
    """Sort key of a grid label by its value: numbers, then durations (as ns), then text, so
    that "10ms" comes after "5ms" and 262144 after 65536."""
    try:
        return (0, float(label), "")
    except (TypeError, ValueError):
        pass
    try:
        return (1, float(units.duration_ns(str(label), "label")), "")
    except ValueError:
        return (2, 0.0, str(label))


def grid_parameters(data: ReportData) -> list[str]:
    """Run labels beyond scenario/configuration/repetition with more than one value."""
    p = data.parameters
    if p.empty:
        return []
    return [c for c in p.columns if c != "run_id" and p[c].nunique() > 1]


def parameter_grid(x, value: str = "exec_ns", statistic: str = "median") -> pd.DataFrame:
    """The two-way grid of the first two run parameters (campaign labels), or empty when the
    experiment has fewer than two parameters."""
    data = _data(x)
    params = grid_parameters(data)
    if len(params) < 2:
        return pd.DataFrame()
    a, b = params[:2]
    lab = data.parameters.set_index("run_id")[[a, b]]
    j = data.measured[["run_id", value]]
    j = j.join(lab, on="run_id")
    return two_way_grid(j, a, b, value, statistic)


# --------------------------------------------------------------------------- wake-up


#: The wake-up series' columns that its readers use (the drift, the quantisation, the
#: section's figures): the others (job, wakeup_ns, latency_ns) are 120 MB of fresh memory
#: a group at 10^7 jobs, which nobody reads.
WAKEUP_COLUMNS = ("run_id", "k", "rel_ns", "dw_ns", "interval_ns", "period_ns", "warmup", "backlog_ns", "backlog")


def wakeup(data: ReportData, scenario: str, configuration: str) -> pd.DataFrame:
    """rel(k), Δw(k) and intervals of every run of a group, warm-up included (cached;
    analysis.wakeup.wakeup_series' numbers; its ``run_id`` a Categorical when taken run by
    run). When taken run by run it holds only ``WAKEUP_COLUMNS``, its integer columns int32
    where every value fits (analysis.wakeup.series_of_runs, ``narrow``): the same values."""
    cols = ["run_id", "job", "warmup", "wakeup_ns", "release_ns", "end_ns", "period_ns"]

    def compute() -> pd.DataFrame:
        # Run by run from the frames' stretches: no copy of the group's inputs in run order.
        got = _group_runs(data, scenario, configuration, cols)
        ser = (wk.series_of_runs(got[0], got[1], ordered=got[2], columns=WAKEUP_COLUMNS, narrow=True)
               if got is not None else None)
        if ser is not None:
            return ser
        ordered = group_in_run_order(data, scenario, configuration, cols)
        return wk.wakeup_series(ordered if ordered is not None else subset(data, scenario, configuration, cols,
                                                                           warmup=True))
    return _memo(data, ("wakeup", scenario, configuration), compute)


def _group_pieces(data: ReportData, scenario: str, configuration: str, cols: list[str]):
    """(frames, pieces, run categories) of a group: each piece a stretch of one run's rows in
    the measured or warm-up frame, (run code, first job, frame, start, end), in run, then
    first-job, order; None where the frames are not made of such stretches."""
    frames = [f for f in (data.measured, data.warmup) if len(f)]
    if not frames or any(c not in f.columns for f in frames for c in [*cols, "scenario", "configuration"]):
        return None
    runs = frames[0]["run_id"].cat.categories
    if any(not f["run_id"].cat.categories.equals(runs) for f in frames):
        return None
    pieces = []  # (run code, first job, frame, start, end)
    for i, f in enumerate(frames):
        rc = f["run_id"].cat.codes.to_numpy()
        starts = stretch_starts(rc)
        if starts.size > max(4 * len(runs), rc.size // 64):
            return None  # runs interleaved row by row
        sc = (f["scenario"] == scenario).to_numpy()
        cf = (f["configuration"] == configuration).to_numpy()
        mine = sc & cf
        # Labels belong to runs: a stretch of one run is all in the group or all out of it.
        if not np.isin(stretch_starts(mine), starts).all():
            return None
        ends = np.append(starts[1:], rc.size)
        job = f["job"].to_numpy()
        pieces += [(rc[a], job[a], i, a, b) for a, b in zip(starts, ends) if mine[a] and rc[a] >= 0]
    pieces.sort(key=lambda p: (p[0], p[1]))
    return frames, pieces, runs


def _group_runs(data: ReportData, scenario: str, configuration: str, cols: list[str]):
    """(runs, categories, ordered) for analysis.wakeup.series_of_runs: each run of the group
    as (run code, its columns but run_id), in run order, a run's stretches joined in
    first-job order (a view of the frame's column when the run is one stretch); None where
    :func:`_group_pieces` is."""
    got = _group_pieces(data, scenario, configuration, cols)
    if got is None:
        return None
    frames, pieces, runs = got
    arrays = [{c: f[c].to_numpy() for c in cols if c != "run_id"} for f in frames]
    out = []
    for p in pieces:
        if out and out[-1][0] == p[0]:
            out[-1][1].append(p)
        else:
            out.append((p[0], [p]))
    per_run = []
    for code, ps in out:
        if len(ps) == 1:
            _, _, i, a, b = ps[0]
            per_run.append((int(code), {c: v[a:b] for c, v in arrays[i].items()}))
        else:
            per_run.append((int(code), {c: np.concatenate([arrays[i][c][a:b] for _, _, i, a, b in ps]) for c in arrays[0]}))
    return per_run, runs, bool(frames[0]["run_id"].cat.ordered)


def group_in_run_order(data: ReportData, scenario: str, configuration: str, cols: list[str]) -> pd.DataFrame | None:
    """``subset(..., warmup=True)`` in run, then job, order, each column copied once from
    the runs' stretches of the measured and warm-up frames (a run's rows are contiguous in
    each): no mask, concat and reorder of 10^7 rows. The stretches are put in run order
    and first-job order; whether that is job order is for the caller to check (wakeup_series
    does, and sorts otherwise). None where the frames are not made of such stretches."""
    got = _group_pieces(data, scenario, configuration, cols)
    if got is None:
        return None
    frames, pieces, runs = got
    out = {}
    for c in cols:
        if c == "run_id":
            continue
        parts = [frames[i][c].to_numpy()[a:b] for _, _, i, a, b in pieces]
        out[c] = np.concatenate(parts) if parts else frames[0][c].to_numpy()[:0]
    used = sorted({p[0] for p in pieces})
    new_code = {code: k for k, code in enumerate(used)}
    codes = np.repeat(np.array([new_code[p[0]] for p in pieces], dtype=np.int32), [p[4] - p[3] for p in pieces])
    df = pd.DataFrame(out, copy=False)
    df.insert(0, "run_id", pd.Categorical.from_codes(codes, categories=runs[used], ordered=frames[0]["run_id"].cat.ordered))
    return df[cols]


def wakeup_drift(x) -> pd.DataFrame:
    """Timer drift of the wake-up date per run: slope of rel(k) in ns per job and in ppm, its
    CI, the total over the run, fitted on idle measured jobs; backlogged jobs (released while
    the previous one ran) counted apart (analysis.wakeup.run_drift, seed 002 Fig. 10)."""
    data = _data(x)
    rows = []
    for scen, conf in groups(data):
        for rid, g in wk.runs_of_series(wakeup(data, scen, conf)):
            if len(g) < 10:
                continue  # fewer than 10 wake-ups in the run
            rows.append({"run_id": str(rid), "scenario": scen, "configuration": conf, **wk.run_drift(g)})
    return pd.DataFrame(rows)


def quantisation(x) -> pd.DataFrame:
    """Per scenario: whether the actual wake-up interval takes a few discrete values (seed 000
    Fig. 5.23), the levels, their step and the repeating pattern if any. Uses whole runs up
    to ``QUANT_JOBS`` intervals: levels and patterns show long before that."""
    data = _data(x)
    rows = []
    for scen, conf in groups(data):
        # The group's wake-up series (cached: the drift and the figures read it), its first
        # runs: the intervals do not depend on the columns the series has beyond these.
        ser = wakeup(data, scen, conf)
        ser = _first_runs_rows(ser, QUANT_JOBS)
        try:
            q = wk.period_quantisation(None, series=ser)
        except ValueError:
            continue
        levels = ", ".join(f"{c / 1e6:.3f} ms ({f * 100:.0f} %)" for c, f in zip(q.levels["center_ns"], q.levels["fraction"]))
        rows.append({"scenario": scen, "configuration": conf, "quantised": q.quantised, "levels": levels,
                     "n_levels": len(q.levels), "step_ns": q.step_ns, "pattern_period": q.pattern_period,
                     "pattern_ms": None if q.pattern is None else ", ".join(f"{p / 1e6:.3f}" for p in q.pattern),
                     "mean_interval_ns": q.mean_interval_ns, "period_ns": q.period_ns, "outliers": q.outliers})
    return pd.DataFrame(rows)


def _first_runs_rows(g: pd.DataFrame, cap: int) -> pd.DataFrame:
    """The rows of ``g`` of its runs :func:`_first_runs` (``sort`` False) keeps: where each
    run is one stretch of rows (a wake-up series), the runs it keeps are the leading
    stretches, so their rows are a slice (not a groupby of 5·10^6 labels, a mask and a
    copy); a mask of the runs otherwise."""
    rid = g["run_id"]
    if len(g):
        codes = ce.label_codes(rid)[0]  # a series' run ids are strings: their factorisation (a tenth of a groupby's)
        starts = np.concatenate([[0], np.flatnonzero(codes[1:] != codes[:-1]) + 1])
        heads = codes[starts]
        if heads.min() >= 0 and np.unique(heads).size == heads.size:  # no NaN run id, each run one stretch
            ends = np.append(starts[1:], len(g))
            kept = int(np.count_nonzero(starts < cap))  # cumulative sizes before each run: its first row
            return g.iloc[:int(ends[kept - 1])]
    return g[rid.isin(_first_runs(g, cap, sort=False))]


def _first_runs(g: pd.DataFrame, cap: int, sort: bool = True) -> list:
    """Run ids, in order (in order of appearance with ``sort`` False: a wake-up series holds
    its runs in the order the jobs' groupby sorts them), whose jobs add up to at least
    ``cap`` (all runs if fewer)."""
    sizes = g.groupby("run_id", observed=True, sort=sort).size()
    keep = sizes.cumsum().shift(fill_value=0) < cap
    return list(sizes.index[keep.to_numpy()])


# --------------------------------------------------------------------------- spikes, culprits


SPIKE_COLUMNS = ["run_id", "job", "exec_ns", "release_ns", "period_ns", "start_ns", "end_ns", "cpu_start", "cpu_end"]


def detected_spikes(data: ReportData, scenario: str | None = None, k: float = 5.0) -> pd.DataFrame:
    """Every measured job with the spike flag (analysis.spikes.detect_spikes, per run)."""
    return _memo(data, ("spikes", scenario, k), lambda: _detected_spikes(data, scenario, k))


def _detected_spikes(data: ReportData, scenario: str | None, k: float) -> pd.DataFrame:
    # Only what the spike tables need: detect_spikes copies every column it is given.
    narrow = ["run_id", "job", "exec_ns", "release_ns", "period_ns", "scenario"]
    j = data.measured if scenario is None else subset(data, scenario, None, narrow)
    cols = [c for c in narrow if c in j.columns]
    j = j[cols]
    j = j.assign(run_id=_used_categories(j["run_id"]))
    return sp.detect_spikes(j, column="exec_ns", k=k, by=("run_id",))


def spikes(x, k: float = 5.0) -> pd.DataFrame:
    """Per run: spikes (exec time above median + k·1.4826·MAD of the run), the threshold, the
    largest excess."""
    data = _data(x)
    d = detected_spikes(data, k=k)
    if d.empty:
        return pd.DataFrame()
    fast = _spikes_by_stretch(d)
    if fast is not None:
        return fast
    g = d.groupby("run_id", observed=True)
    out = pd.DataFrame({"scenario": g["scenario"].first().astype(str), "jobs": g.size(), "spikes": g["is_spike"].sum(),
                        "baseline_ns": g["baseline"].first(), "threshold_ns": g["threshold"].first(),
                        "max_excess_ns": g["excess"].max()}).reset_index()
    out["run_id"] = out["run_id"].astype(str)
    return out


def _spikes_by_stretch(d: pd.DataFrame) -> pd.DataFrame | None:
    """:func:`spikes`' table from the runs' stretches of the detection table (each run's
    rows contiguous, the runs in their categories' order: detect_spikes' table), not a
    groupby of every row; None where the groupby must decide (a run in pieces or out of
    order, a missing label, a NaN its ``first`` or ``max`` would skip)."""
    rc, sc = d["run_id"], d["scenario"]
    if not (isinstance(rc.dtype, pd.CategoricalDtype) and isinstance(sc.dtype, pd.CategoricalDtype)):
        return None
    codes = rc.cat.codes.to_numpy()
    starts = stretch_starts(codes)
    first = codes[starts]
    if first[0] < 0 or (first.size > 1 and not bool(np.all(first[1:] > first[:-1]))):
        return None
    ends = np.append(starts[1:], codes.size)
    spike = d["is_spike"].to_numpy(dtype=bool)
    excess = d["excess"].to_numpy()
    base, thr, scen = d["baseline"].to_numpy()[starts], d["threshold"].to_numpy()[starts], sc.cat.codes.to_numpy()[starts]
    top = np.array([excess[a:b].max() for a, b in zip(starts, ends)])
    if np.isnan(base).any() or np.isnan(thr).any() or np.isnan(top).any() or (scen < 0).any():
        return None
    out = pd.DataFrame({
        "run_id": pd.Categorical.from_codes(first, categories=rc.cat.categories, ordered=rc.cat.ordered),
        "scenario": pd.Categorical.from_codes(scen, categories=sc.cat.categories, ordered=sc.cat.ordered).astype(str),
        "jobs": (ends - starts).astype(np.int64),
        "spikes": np.array([np.count_nonzero(spike[a:b]) for a, b in zip(starts, ends)], dtype=np.int64),
        "baseline_ns": base, "threshold_ns": thr, "max_excess_ns": top})
    out["run_id"] = out["run_id"].astype(str)
    return out


def spike_periods(x, k: float = 5.0) -> pd.DataFrame:
    """Period(s) of the spikes per run, in time and in jobs; big/small classes when their
    amplitudes split (analysis.spikes.spike_periods; seed 000 §5.3.2). The spikes of every
    source are pooled (``sources`` says so): a culprit's own period is :func:`culprit_periods`."""
    data = _data(x)
    d = detected_spikes(data, k=k)
    if d.empty:
        return pd.DataFrame()
    out = sp.spike_periods(d, time_column="release_ns")
    out["run_id"] = out["run_id"].astype(str)
    out.insert(1, "sources", "pooled")
    return out


def traced_runs(data: ReportData) -> list[str]:
    """Runs with a kernel trace (culprits.parquet, trace.dat or trace.txt)."""
    from ..trace.parse import trace_file

    return [r.run_id for r in data.runs.itertuples()
            if (Path(r.dir) / "culprits.parquet").exists() or trace_file(Path(r.dir)) is not None]


def culprits(x, top: int = 10) -> pd.DataFrame:
    """Per traced run: the tasks and interrupts that held the victim off its CPU, ranked by
    that time (``blocked_ns``: preempted it, ran before it after its wake-up, interrupted it),
    with the time each was present during its jobs (xtalk.trace.culprits.rank over
    culprits.parquet)."""
    from ..trace.culprits import RANK_COLUMNS, rank

    data = _data(x)
    out = []
    for rid in traced_runs(data):
        p = data.run_dir(rid) / "culprits.parquet"
        if not p.exists():
            continue
        r = rank(pd.read_parquet(p)).head(top)
        r.insert(0, "run_id", rid)
        out.append(r)
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame(columns=["run_id", *RANK_COLUMNS])


def segments(x, *, n_boot: int = 2000, seed: int = 0) -> pd.DataFrame:
    """The user-defined trace segments (``seg_<name>_ns`` columns) per configuration × scenario:
    the execution time's statistics over the jobs that have each (analysis/segments.py; CIs
    capped at ``BOOT_JOBS`` jobs per replicate, as the cells'). Empty without segments."""
    from ..analysis.segments import segment_cells

    data = _data(x)
    return _memo(data, ("segments", n_boot, seed), lambda: segment_cells(data.measured, data.runs, n_boot=n_boot, seed=seed,
                                                                          max_jobs=BOOT_JOBS)).copy()


def wakers(x, top: int = 10) -> pd.DataFrame:
    """Per traced run: who woke the victim (a timer callback, an interrupt, a task), for how
    many jobs, and its wake-up latency, median and max (xtalk.trace.wakers.wakers over the
    jobs' ``trace_waker`` columns)."""
    from ..trace.wakers import wakers as ranked

    m = _data(x).measured
    cols = ["run_id", "waker", "kind", "jobs", "median_wakeup_ns", "max_wakeup_ns"]
    if "trace_waker" not in m.columns:
        return pd.DataFrame(columns=cols)
    out = []
    for rid, g in m[m["trace_waker"].notna()].groupby("run_id", observed=True, sort=True):
        w = ranked(g).head(top)
        if len(w):
            w.insert(0, "run_id", str(rid))
            out.append(w)
    return pd.concat(out, ignore_index=True)[cols] if out else pd.DataFrame(columns=cols)


def run_intervals(run_dir: Path) -> tuple[pd.DataFrame, dict[int, str]] | None:
    """(intervals of every task, IRQ, softirq and timer on every CPU, pid -> xtalk name) of a
    run directory with a kernel trace, or None. Tasks carry their xtalk names (victim, enemy …)."""
    from ..outcome import read_outcome
    from ..trace.parse import parse_file, trace_file
    from ..trace.run import labels
    from ..trace.timeline import interrupts, occupancy

    d = Path(run_dir)
    path = trace_file(d)
    if path is None:
        return None
    events = parse_file(path)
    meta = read_outcome(d)
    names = labels(meta) if meta is not None else {}
    iv = pd.concat([occupancy(events), interrupts(events)], ignore_index=True)
    iv["name"] = [names.get(int(p), n) if p is not None and p >= 0 else n for p, n in zip(iv["pid"], iv["name"])]
    return iv, names


def trace_intervals(data: ReportData, run_id: str) -> tuple[pd.DataFrame, dict[int, str]] | None:
    """:func:`run_intervals` of one run of ``data``."""
    return run_intervals(data.run_dir(run_id))


def attribute(jobs: pd.DataFrame, intervals: pd.DataFrame, names: dict[int, str], k: float = 5.0,
              lookback_ns: int | None = None) -> sp.Attribution:
    """analysis.spikes.attribute_spikes for one run's measured jobs, the victim and idle
    excluded; ``lookback_ns`` defaults to a tenth of the period (seed 000: culprits run just
    before the spiking job)."""
    victim = [p for p, n in names.items() if n == "victim"]
    lb = int(jobs["period_ns"].iloc[0] // 10) if lookback_ns is None else lookback_ns
    j = jobs[[c for c in SPIKE_COLUMNS if c in jobs.columns]]
    if "cpu_end" in j.columns and j["cpu_end"].isna().any():  # end CPU not read: assume no migration
        j = j.assign(cpu_end=j["cpu_end"].fillna(j["cpu_start"]))
    return sp.attribute_spikes(j, intervals, k=k, lookback_ns=lb, exclude_pids=[0, *victim])


def attributions(data: ReportData, k: float = 5.0, lookback_ns: int | None = None
                 ) -> list[tuple[str, sp.Attribution, pd.DataFrame]]:
    """(run, :func:`attribute`, its trace's intervals) of every traced run with 3 measured
    jobs or more, computed once per ReportData (each trace is parsed once)."""
    def compute():
        out = []
        for rid in traced_runs(data):
            t = trace_intervals(data, rid)
            if t is None:
                continue
            jobs = data.measured[data.measured["run_id"] == rid]
            if len(jobs) < 3:
                continue
            out.append((rid, attribute(jobs, t[0], t[1], k, lookback_ns), t[0]))
        return out
    return _memo(data, ("attributions", k, lookback_ns), compute)


def attribution_table(rid: str, a: sp.Attribution, top: int = 10) -> pd.DataFrame:
    """One run's ranking as the report shows it: its ``top`` culprits with the run's counts."""
    r = a.ranking.head(top).copy()
    r.insert(0, "run_id", rid)
    r["spikes"], r["normal_jobs"], r["cpu_scope"] = a.n_spikes, a.n_normal, a.cpu_scope
    return r


def spike_attribution(x, k: float = 5.0, top: int = 10, lookback_ns: int | None = None) -> pd.DataFrame:
    """Per traced run: culprits ranked by what they cost the victim's spike jobs, those the
    one-sided Fisher test associates with spikes first (analysis.spikes.attribute_spikes) on
    the victim's CPU, the victim itself excluded. ``lookback_ns`` defaults to a tenth of the
    period (seed 000: culprits run just before the spiking job)."""
    out = [attribution_table(rid, a, top) for rid, a, _ in attributions(_data(x), k, lookback_ns)]
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame()


def culprit_periods(x, k: float = 5.0, lookback_ns: int | None = None) -> pd.DataFrame:
    """Per traced run: the period of each culprit associated with spikes, in the spike jobs
    it is in and in its own wake-ups, with regularity and p-value (analysis.spikes.culprit_periods)."""
    out = [culprit_period_table(rid, a, iv) for rid, a, iv in attributions(_data(x), k, lookback_ns)]
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame(columns=sp.CULPRIT_PERIOD_COLUMNS)


def culprit_period_table(rid: str, a: sp.Attribution, intervals: pd.DataFrame) -> pd.DataFrame:
    """:func:`analysis.spikes.culprit_periods` of one run, labelled with it."""
    c = sp.culprit_periods(a, intervals)
    return c.assign(run_id=rid)


def worst_job(data: ReportData, run_ids: Sequence[str] | None = None) -> pd.Series | None:
    """The measured job with the largest execution time (among ``run_ids``)."""
    j = data.measured if run_ids is None else data.measured[data.measured["run_id"].isin(list(run_ids))]
    return None if j.empty else j.loc[j["exec_ns"].idxmax()]


def timeline(x, run_id: str | None = None, periods: float = 2.0) -> pd.DataFrame:
    """What ran on every CPU in a window of ± ``periods`` periods around the worst job of a
    traced run (the slowest traced run by default): cpu, start_ns, end_ns, kind, name, pid,
    times relative to the job's release. Empty when no run has a trace."""
    data = _data(x)
    from ..trace.parse import trace_file

    traced = [r for r in traced_runs(data) if trace_file(data.run_dir(r)) is not None]
    if run_id is None:
        w = worst_job(data, traced) if traced else None
        if w is None:
            return pd.DataFrame()
        run_id = str(w["run_id"])
    else:
        w = worst_job(data, [run_id])
    t = trace_intervals(data, run_id)
    if t is None or w is None:
        return pd.DataFrame()
    iv = t[0]
    half = int(periods * int(w["period_ns"]))
    lo, hi = int(w["release_ns"]) - half, int(w["end_ns"]) + half
    iv = iv[(iv["end_ns"] > lo) & (iv["start_ns"] < hi)].copy()
    iv["start_ns"] = iv["start_ns"].clip(lower=lo)
    iv["end_ns"] = iv["end_ns"].clip(upper=hi)
    iv["rel_start_ns"] = iv["start_ns"] - int(w["release_ns"])
    iv["rel_end_ns"] = iv["end_ns"] - int(w["release_ns"])
    iv.insert(0, "run_id", run_id)
    iv.attrs.update(job=int(w["job"]), release_ns=int(w["release_ns"]), start_ns=int(w["start_ns"]),
                    end_ns=int(w["end_ns"]), cpu=int(w.get("cpu_start", -1)))
    return iv.sort_values(["cpu", "start_ns"]).reset_index(drop=True)


# --------------------------------------------------------------------------- pWCET


def pwcet_series(data: ReportData, scen: str, conf: str) -> tuple[np.ndarray, int]:
    """The execution times a group's pWCET is fitted on: whole runs, in run order, each in
    job order, until ``PWCET_JOBS``; and the group's number of jobs (cached: the fit and
    the figure read it)."""
    return _memo(data, ("pwcet_series", scen, conf), lambda: _first_runs_series(data, scen, conf))


def _first_runs_series(data: ReportData, scen: str, conf: str) -> tuple[np.ndarray, int]:
    got = _first_runs_of_stretches(data, scen, conf)
    if got is not None:
        return got
    # Interleaved groups, rows without a run, an index other than the rows' positions: the subset.
    g = subset(data, scen, conf, ["run_id", "job", "exec_ns"])
    codes = g["run_id"].cat.codes.to_numpy()
    n_runs = len(g["run_id"].cat.categories)  # every one used (subset): the runs in groupby's order
    cum = np.cumsum(np.bincount(codes[codes >= 0], minlength=n_runs))
    k = min(int(np.searchsorted(cum, PWCET_JOBS)) + 1, n_runs)  # runs until PWCET_JOBS jobs are reached
    mine = (codes >= 0) & (codes < k)
    order = run_job_order(codes[mine], g["job"].to_numpy()[mine], k)
    if order is not None:
        return g["exec_ns"].to_numpy(dtype=float)[mine][order], len(g)
    parts = [r.sort_values("job")["exec_ns"].to_numpy(dtype=float) for _, r in
             g[mine].groupby("run_id", observed=True, sort=True)]  # a repeated job index: pandas' sort
    return (np.concatenate(parts) if parts else np.zeros(0)), len(g)


def _first_runs_of_stretches(data: ReportData, scen: str, conf: str) -> tuple[np.ndarray, int] | None:
    """:func:`_first_runs_series` from the group's stretches of the measured frame (no
    subset: the run codes of the group's rows joined, 5 MB at 10^7 jobs, and the first runs'
    job indices and times read at their rows): the used runs in code order are subset's
    runs, renumbered 0, 1, … as its categories are. None where the group's rows are
    interleaved, a row has no run, or the frame's index is not its positions."""
    m = data.measured
    spans = _group_rows(data, scen, conf)
    idx = m.index
    if not spans or not isinstance(m["run_id"].dtype, pd.CategoricalDtype) or not (
            isinstance(idx, pd.RangeIndex) and idx.start == 0 and idx.step == 1):
        return None
    all_codes = m["run_id"].cat.codes.to_numpy()
    codes = np.concatenate([all_codes[a:b] for a, b in spans])
    if codes.min() < 0:
        return None
    counts = np.bincount(codes, minlength=len(m["run_id"].cat.categories))
    used = np.flatnonzero(counts)
    cum = np.cumsum(counts[used])
    k = min(int(np.searchsorted(cum, PWCET_JOBS)) + 1, used.size)
    mine = codes <= used[k - 1]  # the first k used runs' rows
    at = np.flatnonzero(mine)
    firsts = np.array([a for a, _ in spans])
    lengths = np.array([b - a for a, b in spans])
    offsets = np.cumsum(lengths) - lengths  # each span's first row among the group's
    pos = at + (firsts - offsets)[np.searchsorted(offsets, at, side="right") - 1]
    renumber = np.zeros(counts.size, dtype=np.int64)
    renumber[used] = np.arange(used.size)
    run = renumber[codes[mine]]
    order = run_job_order(run, m["job"].to_numpy()[pos], k)
    if order is None:
        return None
    return m["exec_ns"].to_numpy()[pos].astype(float)[order], int(codes.size)


def pwcet_fits(data: ReportData) -> list[tuple[str, str, int, pw.PWCETResult]]:
    """(scenario, configuration, jobs in the group, pWCET fit) of every group, fitted once
    per ReportData on :func:`pwcet_series` (the table, the figure and the summary read it)."""
    key = "_pwcet"
    if key not in data.__dict__:
        out = []
        for scen, conf in groups(data):
            v, total = pwcet_series(data, scen, conf)
            out.append((scen, conf, total, pw.pwcet(v, seed=0)))
        data.__dict__[key] = out
    return data.__dict__[key]


def pwcet(x) -> pd.DataFrame:
    """pWCET of the execution time per scenario (analysis.pwcet: i.i.d. checks, GPD over a
    threshold, profile-likelihood bounds), or one row with ``refused`` naming the failed
    check. ``n`` is the number of jobs fitted (whole runs up to ``PWCET_JOBS``)."""
    data = _data(x)
    rows = []
    for scen, conf, total, res in pwcet_fits(data):
        base = {"scenario": scen, "configuration": conf, "n": res.n, "jobs": total, "refused": res.refused,
                "model": res.model, "shape": res.fit.shape if res.fit is not None else np.nan}
        if not res.ok:
            rows.append({**base, "exceedance": np.nan, "pwcet_ns": np.nan, "ci_low_ns": np.nan, "ci_high_ns": np.nan})
            continue
        for r in res.table.itertuples():
            rows.append({**base, "exceedance": r.exceedance, "pwcet_ns": r.pwcet, "ci_low_ns": r.ci_low, "ci_high_ns": r.ci_high})
    return pd.DataFrame(rows)


def pwcet_iid(x) -> pd.DataFrame:
    """The i.i.d. checks MBPTA requires, per scenario: Ljung-Box, KS between halves, runs."""
    data = _data(x)
    out = []
    for scen, conf, _, res in pwcet_fits(data):
        if res.iid.empty:
            continue
        t = res.iid.copy()
        t.insert(0, "configuration", conf)
        t.insert(0, "scenario", scen)
        out.append(t)
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame(
        columns=["scenario", "configuration", "test", "statistic", "p_value", "threshold", "passed"])
