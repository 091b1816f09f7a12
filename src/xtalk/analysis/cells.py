"""An experiment's cells: the one pass from jobs to the numbers every output of one
experiment shows.

jobs → :func:`per_run` (one row per run) → :func:`cells` (one row per configuration ×
scenario: runs, jobs, response and execution quantiles, misses, migrated jobs, slowdowns
with their CIs) → the verdicts (``results/tables.verdicts``). The terminal summary of
`xtalk run` and `xtalk summary` (summary.md, summary.json), the report's slowdown, misses and
verdict tables and `xtalk query`'s ``cells`` view all read this table, so a number is
computed once and cannot disagree between them. A campaign has its own (results/campaign_cells.py)
with the same definitions.

The definitions, once:

- a cell's jobs are its runs' measured jobs (warm-up left out); migrated jobs stay in every
  timing statistic (only the counter statistics leave them out, their per-core deltas mix two
  CPUs) and are counted in ``migrated_jobs`` (``cpu_start ≠ cpu_end``, both read; the agent's
  ``migrated`` flag where the table has no CPU columns);
- quantiles are ``np.quantile``'s linear interpolation over the pooled jobs (DuckDB's
  ``quantile_cont``);
- a deadline miss is the agent's per-job ``missed`` flag (what it measured; it also marks a
  job that failed its work), the times (end > release + deadline) only where a table has no
  flag (``verdict.classify_misses(recorded=True)``); serious misses and lost jobs from the
  times and the job indices;
- ``runs`` counts every run of the cell, ``runs_ok`` the completed ones, ``runs_with_jobs``
  those that recorded a measured job;
- a slowdown is :func:`xtalk.analysis.slowdown.slowdown` of each run's jobs against the
  reference's (``n_boot`` 2000, ``seed`` 0, a fresh generator per ratio so a cell's CI does not
  depend on the cells before it), the point the ratio over every job, the CI capped at
  ``max_jobs`` jobs per replicate (``ci_subsampled``).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pandas as pd

from . import verdict as vd
from .runorder import stretch_starts
from .slowdown import SOLO, slowdowns_many
from .stats import quantile_of_sorted

__all__ = ["CELL_COLUMNS", "RUN_COLUMNS", "cells", "migrated_mask", "per_run", "runs_of", "summarize", "summary_view"]

METRICS = ("exec", "response")
STATS = ("median", "max")
#: The per-run table.
RUN_COLUMNS = ["configuration", "scenario", "run_id", "status", "jobs", "deadline_misses", "migrated_jobs"]
#: The per-cell table, in order.
CELL_COLUMNS = (["configuration", "scenario", "runs", "runs_ok", "runs_with_jobs", "jobs"]
                + [f"{m}_{s}_ms" for m in METRICS for s in ("median", "p99", "max")]
                + ["deadline_misses", "miss_ratio", "miss_ci_low", "miss_ci_high", "serious_misses", "lost_jobs",
                   "serious_ratio", "max_lateness_ns", "max_responsiveness", "migrated_jobs"]
                + [f"{m}_slowdown_{s}{k}" for m in METRICS for s in STATS for k in ("", "_lo", "_hi")]
                + ["ci_subsampled"])


def migrated_mask(jobs: pd.DataFrame) -> np.ndarray:
    """Jobs that ended on another CPU than they started on (both CPUs read); the agent's
    ``migrated`` flag where the table has no CPU columns."""
    return _migrated_rows(jobs)(0, len(jobs))


def _migrated_rows(jobs: pd.DataFrame):
    """:func:`migrated_mask` of the rows ``lo:hi`` as a function of (lo, hi): on the loader's
    int64 CPU columns it compares the stretch's views (no array of every job); otherwise the
    mask of every job is computed once and sliced."""
    if "cpu_start" in jobs and "cpu_end" in jobs:
        if jobs["cpu_start"].dtype == np.int64 and jobs["cpu_end"].dtype == np.int64:  # the loader's (−1: not read)
            a, b = jobs["cpu_start"].to_numpy(), jobs["cpu_end"].to_numpy()
            return lambda lo, hi: (a[lo:hi] >= 0) & (b[lo:hi] >= 0) & (a[lo:hi] != b[lo:hi])
        a = pd.to_numeric(jobs["cpu_start"], errors="coerce").to_numpy(dtype=float)
        b = pd.to_numeric(jobs["cpu_end"], errors="coerce").to_numpy(dtype=float)
        m = (a >= 0) & (b >= 0) & (a != b)
    elif "migrated" in jobs:
        m = jobs["migrated"].fillna(False).to_numpy(dtype=bool)
    else:
        m = np.zeros(len(jobs), dtype=bool)
    return lambda lo, hi: m[lo:hi]


def _missed(jobs: pd.DataFrame) -> np.ndarray:
    """The miss of each job: the agent's flag, the times where there is none
    (``verdict.classify_misses(recorded=True)``'s ``missed``, computed from the columns
    without copying the table: at 10^7 jobs the copy was most of the per-run pass)."""
    if {"release_ns", "end_ns", "period_ns"} <= set(jobs.columns):
        return vd.missed_flags(jobs, recorded=True)
    if "missed" in jobs:
        return jobs["missed"].fillna(False).to_numpy(dtype=bool)
    return np.zeros(len(jobs), dtype=bool)


#: The job columns the pass reads (those present): a narrow copy, never every column.
_COLUMNS = ["run_id", "scenario", "configuration", "exec_ns", "response_ns", "job", "release_ns", "end_ns", "period_ns",
            "deadline_ns", "missed", "cpu_start", "cpu_end", "migrated"]


def _labels(jobs: pd.DataFrame) -> pd.DataFrame:
    """The columns the pass reads, labels as strings or categoricals of strings (the report's
    loader gives categoricals: converting 10^7 of them to strings would cost seconds), and a
    ``configuration`` ("default") when the table has none."""
    j = jobs[[c for c in _COLUMNS if c in jobs.columns]]
    out = {}
    for c in ("run_id", "scenario", "configuration"):
        if c not in j:
            continue
        col = j[c]
        if isinstance(col.dtype, pd.CategoricalDtype):
            out[c] = col.cat.rename_categories([str(x) for x in col.cat.categories])
        else:
            out[c] = col.astype(str)
    j = j.assign(**out)
    return j if "configuration" in j else j.assign(configuration="default")


def _runs(runs: pd.DataFrame) -> pd.DataFrame:
    r = runs.assign(run_id=runs["run_id"].astype(str), scenario=runs["scenario"].astype(str))
    return r.assign(configuration=r["configuration"].astype(str)) if "configuration" in r else r.assign(configuration="default")


def per_run(jobs: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """One row per run of ``runs`` (the store's run table): its labels, status, measured jobs,
    deadline misses and migrated jobs, by the definitions of this module."""
    j, r = _labels(jobs), _runs(runs)
    lay = _layout(j) if isinstance(j["run_id"].dtype, pd.CategoricalDtype) else None
    if lay is not None:
        counts = _run_counts(j, lay)
    elif isinstance(j["run_id"].dtype, pd.CategoricalDtype):
        missed, migrated = _missed(j), migrated_mask(j)
        # Counts of the category codes (a groupby's factorisation of 10^7 labels is not needed).
        codes, names = label_codes(j["run_id"])
        ok = codes >= 0
        nc = len(names)
        size = np.bincount(codes[ok], minlength=nc)
        seen = np.flatnonzero(size > 0)
        counts = pd.DataFrame({"jobs": size[seen],
                               "deadline_misses": np.bincount(codes[ok & missed], minlength=nc)[seen],
                               "migrated_jobs": np.bincount(codes[ok & migrated], minlength=nc)[seen]},
                              index=pd.Index([str(x) for x in names[seen]], name="run_id"))
    else:
        missed, migrated = _missed(j), migrated_mask(j)
        agg = pd.DataFrame({"run_id": j["run_id"], "missed": missed, "migrated": migrated})
        g = agg.groupby("run_id", sort=False, observed=True)
        counts = pd.DataFrame({"jobs": g.size(), "deadline_misses": g["missed"].sum(), "migrated_jobs": g["migrated"].sum()})
        counts.index = counts.index.astype(str)
    out = r[["configuration", "scenario", "run_id", "status"]].join(counts, on="run_id")
    for c in ("jobs", "deadline_misses", "migrated_jobs"):
        out[c] = out[c].fillna(0).astype(int)
    return out.reset_index(drop=True)[RUN_COLUMNS]


def _run_counts(j: pd.DataFrame, lay: "_Layout") -> pd.DataFrame:
    """Measured jobs, misses and migrated jobs of each run code with jobs, summed stretch by
    stretch of the rows (views of the columns: the counts of the codes, without a mask or a
    copy of the codes per count)."""
    missed, migrated = _missed(j), _migrated_rows(j)
    nc = len(lay.run_names)
    size, miss, mig = (np.zeros(nc, dtype=np.int64) for _ in range(3))
    for a, b, c in zip(lay.first.tolist(), lay.end.tolist(), lay.run.tolist()):
        if c >= 0:  # a job without a run id is in no run
            size[c] += b - a
            miss[c] += np.count_nonzero(missed[a:b])
            mig[c] += np.count_nonzero(migrated(a, b))
    seen = np.flatnonzero(size > 0)
    return pd.DataFrame({"jobs": size[seen], "deadline_misses": miss[seen], "migrated_jobs": mig[seen]},
                        index=pd.Index([str(x) for x in lay.run_names[seen]], name="run_id"))


def _order(r: pd.DataFrame, reference: str) -> list[tuple[str, str]]:
    """(configuration, scenario) of every run: configurations in order of appearance, the
    reference first within each, then scenarios in order of appearance."""
    out = []
    for cfg in dict.fromkeys(r["configuration"]):
        scen = list(dict.fromkeys(r.loc[r["configuration"] == cfg, "scenario"]))
        out += [(cfg, s) for s in sorted(scen, key=lambda s: s != reference)]
    return out


def label_codes(rid: pd.Series) -> tuple[np.ndarray, object]:
    """(integer code of every row, −1 for NaN; the labels the codes index)."""
    if isinstance(rid.dtype, pd.CategoricalDtype):
        return rid.cat.codes.to_numpy(), rid.cat.categories
    return pd.factorize(rid)


def _stretches(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(stable order of the rows by code, first and end position of each code's stretch in it)."""
    order = np.argsort(codes, kind="stable")
    c = codes[order]
    cut = np.flatnonzero(c[1:] != c[:-1]) + 1
    return order, np.concatenate([[0], cut]) if c.size else cut, np.append(cut, c.size)


class _Layout(NamedTuple):
    """The rows as stretches with one configuration, scenario and run each: first row, end
    row and the three label codes of each stretch (−1: no label), and the labels the codes
    index."""
    first: np.ndarray
    end: np.ndarray
    cfg: np.ndarray
    scen: np.ndarray
    run: np.ndarray
    cfg_names: object
    scen_names: object
    run_names: object


def _starts(x: np.ndarray) -> np.ndarray:
    """Where each stretch of equal values of ``x`` begins (0 first; ``x`` not empty)."""
    return np.concatenate([[0], np.flatnonzero(x[1:] != x[:-1]) + 1])


def _layout(j: pd.DataFrame) -> _Layout | None:
    """The stretches of ``j``'s rows (:class:`_Layout`), from the label codes: jobs come in
    runs, so the labels change at a few hundred places of 10^7 rows, and a cell's rows, a
    run's rows and their values are slices of the columns instead of positions and copies.
    None when the rows are interleaved (more than max(64, rows / 64) stretches) or none."""
    n = len(j)
    if not n:
        return None
    limit = max(64, n // 64)
    codes, names, starts = [], [], []
    for c in ("configuration", "scenario", "run_id"):
        k, nm = label_codes(j[c])
        s = _starts(k)
        if s.size > limit:
            return None
        codes.append(k)
        names.append(nm)
        starts.append(s)
    first = np.unique(np.concatenate(starts))
    if first.size > limit:
        return None
    return _Layout(first, np.append(first[1:], n), *(k[first] for k in codes), *names)


def runs_of(rid: pd.Series, ix: np.ndarray) -> list[tuple[object, np.ndarray]]:
    """(label, row positions in table order) of the rows ``ix`` per label of ``rid`` (a run
    id, a configuration), as ``groupby(rid, observed=True)`` gives each group's rows (NaN
    labels left out; the groups in code order: a categorical's categories', else first
    appearance)."""
    codes, names = label_codes(rid)
    codes = codes[ix]
    if codes.size:
        starts = _starts(codes)
        if starts.size <= max(64, codes.size // 64):  # the rows come in runs: each label's rows are slices of ix
            ends = np.append(starts[1:], codes.size)
            parts: dict[int, list[np.ndarray]] = {}
            for a, b, c in zip(starts.tolist(), ends.tolist(), codes[starts].tolist()):
                if c >= 0:
                    parts.setdefault(c, []).append(ix[a:b])
            return [(names[c], p[0] if len(p) == 1 else np.concatenate(p)) for c, p in sorted(parts.items())]
    order, starts, ends = _stretches(codes)
    return [(names[codes[order[a]]], ix[order[a:b]]) for a, b in zip(starts, ends) if codes[order[a]] >= 0]


def _cell_positions(j: pd.DataFrame) -> dict[tuple[str, str], np.ndarray]:
    """Row positions (ascending) of each (configuration, scenario), as
    ``groupby([...], observed=True).indices`` gives them. Jobs come in runs, so the pair
    changes at a few hundred places: each cell's positions are its stretches, put together,
    instead of a factorisation and sort of 10^7 label pairs. Rows interleaved row by row
    (no stretches) go to the groupby."""
    cc, cn = label_codes(j["configuration"])
    sc, sn = label_codes(j["scenario"])
    key = np.where((cc >= 0) & (sc >= 0), cc.astype(np.int64) * len(sn) + sc, -1)
    starts = stretch_starts(key)
    if starts.size > max(64, key.size // 64):
        return {(str(a), str(b)): np.asarray(ix) for (a, b), ix in
                j.groupby(["configuration", "scenario"], sort=False, observed=True).indices.items()}
    ends = np.append(starts[1:], key.size)
    stretches: dict[int, list[np.ndarray]] = {}
    for a, b in zip(starts, ends):
        if key[a] >= 0:  # a NaN label is in no cell
            stretches.setdefault(int(key[a]), []).append(np.arange(a, b))
    return {(str(cn[k // len(sn)]), str(sn[k % len(sn)])): np.concatenate(v) for k, v in stretches.items()}


def _miss_columns(j: pd.DataFrame) -> dict[str, np.ndarray]:
    """The columns verdict.classify_misses(recorded=True) reads, as arrays of the table (no
    copy), and its ``missed`` of every job."""
    per = j["period_ns"].to_numpy(dtype=np.int64)
    return {"missed": vd.missed_flags(j, recorded=True), "release": j["release_ns"].to_numpy(dtype=np.int64),
            "end": j["end_ns"].to_numpy(dtype=np.int64), "period": per,
            "deadline": j["deadline_ns"].to_numpy(dtype=np.int64) if "deadline_ns" in j.columns else per}


def _ranges(ix: np.ndarray) -> list[tuple[int, int]]:
    """(first, end) of each stretch of consecutive positions of ``ix`` (ascending): a cell's
    rows are its runs' stretches."""
    if not ix.size:
        return []
    cut = np.flatnonzero(ix[1:] != ix[:-1] + 1) + 1
    first, last = ix[np.concatenate([[0], cut])], ix[np.append(cut, ix.size) - 1]
    return list(zip(first.tolist(), (last + 1).tolist()))


def _cell_misses(j: pd.DataFrame, ix: np.ndarray, miss: dict) -> tuple[int, int, int, int, float]:
    """(misses, lost jobs, serious misses with the lost jobs, largest lateness, largest
    responsiveness) of a cell's rows: verdict.deadline_misses per run (every row, a NaN run
    id its own group) summed over the runs, from the columns. Counts, lateness (end −
    release − deadline) and responsiveness ((end − release) / deadline, NaN left out as
    pandas' max leaves it) are taken stretch by stretch of the cell's rows, on views of the
    columns: the same sums and maxima as over the cell's rows copied out, without 10^7-row
    temporaries."""
    lost = 0
    if "job" in j.columns:
        job = j["job"].to_numpy(dtype=np.int64)[ix]
        order, starts, ends = _stretches(label_codes(j["run_id"])[0][ix])
        lost = sum(_lost(job[order[a:b]]) for a, b in zip(starts, ends))
    ranges = _ranges(ix)
    if len(ranges) > max(64, ix.size // 64):  # rows interleaved row by row: the cell's rows copied out once
        ranges, miss = [(0, ix.size)], {k: v[ix] for k, v in miss.items()}
    return _range_misses(miss, ranges, lost)


def _lost(s: np.ndarray) -> int:
    """Job indices missing between the first and the last of one run's indices ``s``."""
    distinct = s.size if s.size < 2 or bool(np.all(s[1:] > s[:-1])) else np.unique(s).size
    return int(s.max() - s.min() + 1 - distinct)


def _range_misses(cols: dict, ranges, lost: int) -> tuple[int, int, int, int, float]:
    """:func:`_cell_misses` of the rows ``ranges`` ((first, end) of each) of ``cols``
    (:func:`_miss_columns`), ``lost`` jobs counted by the caller."""
    missed = serious = 0
    late, resp = None, np.nan
    for a, b in ranges:
        rel, end, dl = cols["release"][a:b], cols["end"][a:b], cols["deadline"][a:b]
        missed += int(np.count_nonzero(cols["missed"][a:b]))
        per = cols["period"][a:b]
        if b > a and dl[0] > 0 and dl.min() == dl.max() and (cols["period"] is cols["deadline"] or per.min() == per.max()):
            # One deadline and one period over the rows (a run's): each number from the
            # response times' maximum, the same integers and the same float (the division
            # by one positive deadline and the conversion keep the order), in three passes.
            span = end - rel
            top, d0 = int(span.max()), int(dl[0])
            serious += int(np.count_nonzero(span > 2 * int(per[0])))
            late = top - d0 if late is None else max(late, top - d0)
            m = float(top) / float(d0)
            resp = m if resp != resp else max(resp, m)
            continue
        serious += int(np.count_nonzero(end > rel + 2 * per))
        m = int((end - (rel + dl)).max())
        late = m if late is None else max(late, m)
        with np.errstate(divide="ignore", invalid="ignore"):  # a deadline of 0: inf, or NaN left out
            r = (end - rel) / dl
        r = r[~np.isnan(r)]
        if r.size:
            m = float(r.max())
            resp = m if resp != resp else max(resp, m)
    return missed, lost, serious + lost, late, float(resp)


def _take(v: np.ndarray, spans) -> np.ndarray:
    """The rows ``spans`` ((first, end) of each, in table order) of ``v``: a view for one."""
    return v[spans[0][0]:spans[0][1]] if len(spans) == 1 else np.concatenate([v[a:b] for a, b in spans])


def _job_values(col: pd.Series) -> np.ndarray:
    """A timing column as numpy values a run's sample can be a view of: the float64 column
    itself, or the int64 one when its values lie within ±2^53 (each converts to its float
    exactly, so their order, maxima and the values the bootstrap picks are the floats');
    floats otherwise (NaN for a missing value)."""
    if col.dtype == np.float64:
        return col.to_numpy()
    if col.dtype == np.int64 and len(col):
        v = col.to_numpy()
        if -2**53 < v.min() and v.max() <= 2**53:
            return v
    return col.to_numpy(dtype=float)


class _Cell(NamedTuple):
    """One cell's rows as the slowdowns, quantiles and misses read them."""
    n: int
    #: Per metric, each run's values (run-id order: the bootstrap draws runs by position).
    runs: dict
    #: The cell's values of a metric (table order).
    values: object
    #: :func:`_cell_misses` of the cell (None: the table has no times).
    misses: object


def _cells_by_positions(j: pd.DataFrame, times: bool) -> dict[tuple[str, str], _Cell]:
    """The cells from each one's row positions (:func:`_cell_positions`, :func:`runs_of`):
    rows in any order."""
    parts = _cell_positions(j)
    col = {m: j[f"{m}_ns"].to_numpy(dtype=float) for m in METRICS}
    miss = _miss_columns(j) if times else None
    out = {}
    for key, ix in parts.items():
        runs = sorted(runs_of(j["run_id"], ix), key=lambda kv: str(kv[0]))
        out[key] = _Cell(len(ix), {m: [col[m][p] for _, p in runs] for m in METRICS}, lambda m, ix=ix: col[m][ix],
                         (lambda ix=ix: _cell_misses(j, ix, miss)) if times else None)
    return out


def _cells_by_stretches(j: pd.DataFrame, lay: _Layout, times: bool) -> dict[tuple[str, str], _Cell]:
    """:func:`_cells_by_positions` from the rows' stretches (:func:`_layout`): a run's values
    are a slice of the column (a view, not a copy of each cell's 5·10^6 positions and values),
    the misses are summed over the cell's stretches; the same runs in the same order, the
    same values and counts."""
    col = {m: _job_values(j[f"{m}_ns"]) for m in METRICS}
    miss = _miss_columns(j) if times else None
    job = j["job"].to_numpy(dtype=np.int64) if times and "job" in j.columns else None
    spans: dict[tuple[int, int], list[tuple[int, int]]] = {}
    by_run: dict[tuple[int, int], dict[int, list[tuple[int, int]]]] = {}
    for a, b, c, s, r in zip(lay.first.tolist(), lay.end.tolist(), lay.cfg.tolist(), lay.scen.tolist(), lay.run.tolist()):
        if c >= 0 and s >= 0:  # a NaN label is in no cell
            spans.setdefault((c, s), []).append((a, b))
            by_run.setdefault((c, s), {}).setdefault(r, []).append((a, b))

    def misses(key):
        lost = 0 if job is None else sum(_lost(_take(job, p)) for p in by_run[key].values())  # no run id: a group too
        return _range_misses(miss, spans[key], lost)

    out = {}
    for key, sp in spans.items():
        runs = sorted((str(lay.run_names[r]), r) for r in by_run[key] if r >= 0)  # runs_of's runs, sorted by name
        out[(str(lay.cfg_names[key[0]]), str(lay.scen_names[key[1]]))] = _Cell(
            sum(b - a for a, b in sp), {m: [_take(col[m], by_run[key][r]) for _, r in runs] for m in METRICS},
            lambda m, sp=sp: _take(col[m], sp), (lambda key=key: misses(key)) if times else None)
    return out


def _stat_of_sorted(v: np.ndarray, stat: str) -> float:
    """``np.median`` (the mean of the two middle values of an even count) or ``np.max`` of
    values already sorted: what :func:`slowdown` computes from the pooled runs, without
    concatenating and selecting 10^7 values again."""
    if stat == "max":
        return v[-1]
    n = v.size
    return v[n // 2] if n % 2 else np.mean(v[n // 2 - 1:n // 2 + 1])


def _point(sorted_of, cfg, scen, reference, m, stat, cur, ref) -> float | None:
    """The slowdown's full-data ratio from the caller's sorted cache, when it holds the
    cell's pooled runs (as many values, none NaN); None: :func:`slowdown` pools them."""
    if sorted_of is None:
        return None
    a, b = sorted_of(cfg, scen, m), sorted_of(cfg, reference, m)
    if a.size != sum(len(v) for v in cur) or b.size != sum(len(v) for v in ref) or not a.size or not b.size \
            or np.isnan(a[-1]) or np.isnan(b[-1]):
        return None
    return float(_stat_of_sorted(a, stat) / _stat_of_sorted(b, stat))


def cells(jobs: pd.DataFrame, runs: pd.DataFrame, *, reference: str = SOLO, n_boot: int = 2000, seed: int = 0,
          max_jobs: int | None = None, per_run_table: pd.DataFrame | None = None, sorted_of=None) -> pd.DataFrame:
    """One row per configuration × scenario that has a run (``CELL_COLUMNS``): the numbers
    every output of the experiment shows. ``jobs``: measured jobs with ``run_id``,
    ``scenario``, ``exec_ns``, ``response_ns`` (and, where present, ``configuration``,
    ``missed``, ``job``, ``release_ns``, ``end_ns``, ``period_ns``, ``deadline_ns``,
    ``cpu_start``/``cpu_end`` or ``migrated``); ``runs``: the store's run table. Slowdowns are
    against ``reference`` of the same configuration. ``per_run_table``: :func:`per_run` of the
    same jobs and runs when the caller already has it (the report's run table reads it too);
    ``sorted_of(configuration, scenario, metric)``: a cell's ``<metric>_ns`` values sorted, from
    the caller's cache (the report sorts each group once for every quantile it shows)."""
    j, r = _labels(jobs), _runs(runs)
    pr = per_run(j, r) if per_run_table is None else per_run_table
    times = {"release_ns", "end_ns", "period_ns"} <= set(j.columns)
    # Each cell's rows as stretches, or row positions where the rows are interleaved (no
    # frame per cell: at 10^7 jobs copying them cost seconds).
    lay = _layout(j)
    groups = _cells_by_stretches(j, lay, times) if lay is not None else _cells_by_positions(j, times) if len(j) else {}
    rows = []
    for cfg, scen in _order(r, reference):
        rr = pr[(pr["configuration"] == cfg) & (pr["scenario"] == scen)]
        cell = groups.get((cfg, scen))
        row = {"configuration": cfg, "scenario": scen, "runs": len(rr), "runs_ok": int((rr["status"] == "completed").sum()),
               "runs_with_jobs": int((rr["jobs"] > 0).sum()), "jobs": int(rr["jobs"].sum()),
               "deadline_misses": int(rr["deadline_misses"].sum()), "migrated_jobs": int(rr["migrated_jobs"].sum())}
        n = 0 if cell is None else cell.n
        for m in METRICS:
            if not n:
                v = np.zeros(0)
            elif sorted_of is not None:
                v = sorted_of(cfg, scen, m)
            else:
                v = np.sort(np.asarray(cell.values(m), dtype=float))
            for name, q in (("median", 0.5), ("p99", 0.99), ("max", 1.0)):
                row[f"{m}_{name}_ms"] = quantile_of_sorted(v, q) / 1e6 if n else np.nan  # np.quantile's, v sorted
        if n and times:
            k, lost, ser, max_late, max_resp = cell.misses()
            lo, hi = vd._wilson(k, n)
            row.update(deadline_misses=k, miss_ratio=k / n, miss_ci_low=lo, miss_ci_high=hi, serious_misses=ser,
                       lost_jobs=lost, serious_ratio=ser / (n + lost), max_lateness_ns=max_late,
                       max_responsiveness=max_resp)
        else:
            k = row["deadline_misses"]
            lo, hi = vd._wilson(k, n)
            row.update(miss_ratio=k / n if n else np.nan, miss_ci_low=lo, miss_ci_high=hi, serious_misses=0, lost_jobs=0,
                       serious_ratio=np.nan, max_lateness_ns=np.nan, max_responsiveness=np.nan)
        sub = False
        cur, ref = (None if groups.get(k) is None else groups[k].runs for k in ((cfg, scen), (cfg, reference)))
        every = [{}] * len(METRICS)
        if scen != reference and cur is not None and ref is not None:
            # Both statistics from one set of replicates, both metrics from one set of picks.
            every = slowdowns_many([(cur[m], ref[m]) for m in METRICS], STATS, n_boot=n_boot, seed=seed, max_jobs=max_jobs,
                                   points=[{stat: _point(sorted_of, cfg, scen, reference, m, stat, cur[m], ref[m])
                                            for stat in STATS} for m in METRICS])
        for m, cis in zip(METRICS, every):
            for stat in STATS:
                if scen == reference:
                    p, lo, hi = 1.0, np.nan, np.nan
                elif stat not in cis:
                    p, lo, hi = np.nan, np.nan, np.nan
                else:
                    p, lo, hi = cis[stat]
                    sub = sub or cis[stat].subsampled
                row[f"{m}_slowdown_{stat}"], row[f"{m}_slowdown_{stat}_lo"], row[f"{m}_slowdown_{stat}_hi"] = p, lo, hi
        row["ci_subsampled"] = bool(sub)
        rows.append(row)
    return pd.DataFrame(rows, columns=CELL_COLUMNS)


#: summary.json's columns (the terminal table's) from the cells: its slowdown is the
#: execution time's.
SUMMARY_COLUMNS = {"scenario": "scenario", "runs": "runs", "runs_ok": "runs_ok", "jobs": "jobs",
                   "response_median_ms": "median_response_ms", "response_p99_ms": "p99_response_ms",
                   "response_max_ms": "max_response_ms", "exec_median_ms": "median_exec_ms", "exec_max_ms": "max_exec_ms",
                   "deadline_misses": "deadline_misses", "serious_misses": "serious_misses",
                   "migrated_jobs": "migrated_jobs",
                   **{f"exec_slowdown_{s}{k}": f"slowdown_{s}{k}" for s in STATS for k in ("", "_lo", "_hi")},
                   "configuration": "configuration"}


def summary_view(table: pd.DataFrame, metric: str = "exec_ns") -> pd.DataFrame:
    """The cells in the summary's columns (:func:`summarize`'s, which analysis.guards reads):
    the same numbers, renamed; ``slowdown_*`` are ``metric``'s slowdowns."""
    m = metric.removesuffix("_ns")
    if m not in METRICS:
        raise ValueError(f"metric: {metric!r} has no slowdown; use 'exec_ns' or 'response_ns'")
    names = {(k.replace("exec_slowdown", f"{m}_slowdown") if k.startswith("exec_slowdown") else k): v
             for k, v in SUMMARY_COLUMNS.items()}
    return table[list(names)].rename(columns=names).reset_index(drop=True)


def summarize(jobs: pd.DataFrame, runs: pd.DataFrame, metric: str = "exec_ns", reference: str = SOLO, n_boot: int = 2000,
              seed: int = 0, max_jobs: int | None = None) -> pd.DataFrame:
    """One row per configuration × scenario in the summary's columns (:func:`summary_view`
    of :func:`cells`): what analysis.guards and `xtalk intrusiveness` read."""
    return summary_view(cells(jobs, runs, reference=reference, n_boot=n_boot, seed=seed, max_jobs=max_jobs), metric)
