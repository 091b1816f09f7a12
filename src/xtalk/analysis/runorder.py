"""Rows of many runs in (run, job) order, for analyses that work on every run at once on
the columns instead of a frame per run (at 10^7 jobs, a groupby's split and the concat of
its parts cost seconds)."""

from __future__ import annotations

import numpy as np
import pandas as pd


def run_job_order(codes: np.ndarray, job: np.ndarray, n_runs: int) -> np.ndarray | slice | None:
    """Positions of the rows with a run (``codes`` ≥ 0, as ``pd.factorize`` gives them) in
    run, then job, order (``slice(None)`` when they are in that order already); None when a run repeats a job index (the order of the repeats is
    then a per-run sort's to decide). Rows that come in stretches of one run with
    increasing indices (a results store: each run's measured jobs, then each run's warm-up)
    are ordered stretch by stretch; others by a full sort."""
    if job.dtype.kind not in "iu":
        return None
    if codes.size and codes.min() >= 0 and bool(np.all(codes[1:] >= codes[:-1])) and _increasing_within_runs(codes, job):
        return slice(None)  # already in order (rows a caller put so): every column as it is, no copy
    for make in (lambda: _stretch_order(codes, job), lambda: _sort_order(codes, job, n_runs)):
        order = make()  # the full sort only when the stretches are not (run, job) order
        if order is None:
            continue
        if _increasing_within_runs(codes[order], job[order]):
            return order
    return None


def stretch_starts(x: np.ndarray) -> np.ndarray:
    """Where each stretch of equal values of ``x`` begins (0 first when ``x`` is not empty):
    jobs come in runs, so a label column changes at a few hundred places of 10^7 rows."""
    if not x.size:
        return np.zeros(0, dtype=np.int64)
    # (the changes' positions found first, then 0 put before them: no copy of the mask of every row)
    return np.concatenate([np.zeros(1, dtype=np.intp), np.flatnonzero(x[1:] != x[:-1]) + 1])


def run_codes(col: pd.Series) -> tuple[np.ndarray, object]:
    """``pd.factorize(col, sort=True)``'s codes and labels for the functions above, a
    Categorical's own codes and categories (the same order of runs, −1 for none) without
    hashing every row; the labels then include categories no row uses."""
    if isinstance(col.dtype, pd.CategoricalDtype):
        return col.cat.codes.to_numpy(), col.cat.categories
    return pd.factorize(col, sort=True)


def _increasing_within_runs(c: np.ndarray, j: np.ndarray) -> bool:
    starts = stretch_starts(c)
    if starts.size <= max(64, c.size // 64):
        # Stretch by stretch on views: no masked copies of every row.
        ends = np.append(starts[1:], c.size)
        return all(bool(np.all(j[a + 1:b] > j[a:b - 1])) for a, b in zip(starts, ends))
    same = c[1:] == c[:-1]
    return bool(np.all(j[1:][same] > j[:-1][same]))


def _stretch_order(codes: np.ndarray, job: np.ndarray) -> np.ndarray | None:
    """The stretches of one run each sorted by run and first job: a few hundred of them
    instead of every row. Wrong where a stretch's jobs decrease or interleave with
    another's of its run (the caller checks)."""
    n = codes.size
    if n == 0:
        return None
    starts = stretch_starts(codes)
    if starts.size > max(64, n // 64):
        return None  # runs interleaved row by row: no stretches to speak of
    ends = np.append(starts[1:], n)
    keep = codes[starts] >= 0  # rows without a run are left out, as groupby leaves them
    starts, ends = starts[keep], ends[keep]
    if not starts.size:
        return np.empty(0, dtype=np.int64)
    rank = np.lexsort((job[starts], codes[starts]))
    return np.concatenate([np.arange(starts[i], ends[i]) for i in rank])


def _sort_order(codes: np.ndarray, job: np.ndarray, n_runs: int) -> np.ndarray:
    """Every row with a run, stable: by job, then by run (lexsort's order). The first is a
    merge of a few sorted stretches, the second a radix sort of small codes."""
    order = np.argsort(job, kind="stable")
    small = codes[order].astype(np.int16 if n_runs < 2**15 else np.int64)
    order = order[np.argsort(small, kind="stable")]
    return order[codes[order] >= 0]
