"""Per-group statistics of a job column computed in DuckDB over the runs' Parquet files,
without loading the jobs: the fast path of the report's per-configuration percentiles.

A run's labels are constant over its file, so the runs are grouped here (in Python, from the
run table) and each group is one scan of its files: no label column is built per row, no
join on file names, no per-row hash of the group key. The files of a group are read in
parallel (a 10^6-job file is one row group, so parallelism comes from the files).

Exact: quantiles are DuckDB's ``quantile_cont`` (order statistics, linear interpolation
between the two nearest: np.quantile's default), NaN and NULL left out. xtalk.analysis.stats.group_quantiles is the same table from a DataFrame; tests check
that both agree, ties, NaN and empty groups included.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Sequence

import pandas as pd

#: Job indices are below this, so ``job * FILES + file_index`` orders by job then by run.
_FILES = 1 << 24


def _quantile_name(q: float) -> str:
    return f"p{round(q * 100, 6):g}"


def _sql_list(items) -> str:
    return "[" + ", ".join("'" + str(p).replace("'", "''") + "'" for p in items) + "]"


def group_quantiles(runs: pd.DataFrame, column: str, qs: Sequence[float], *,
                    by: Sequence[str] = ("scenario", "configuration"), measured_only: bool = True,
                    first: bool = False, moments: bool = True, threads: int | None = None) -> pd.DataFrame:
    """Per group of ``by`` (run labels, columns of ``runs``, the store's run table with its
    ``dir``): ``n``, ``min``, the quantiles ``qs`` (named p50, p99.9, ...), ``max``, ``mean``
    and ``sd`` (ddof 1) of the finite values of ``column`` in the runs' jobs.parquet, warm-up
    jobs left out when ``measured_only``. ``first``: also the value of the group's first job
    (lowest job index, warm-up included, the earlier run on a tie: the report's "first"
    marker). ``moments`` False: min, max, mean and sd are left NaN (a fifth less work when
    only the quantiles are wanted). Groups with a file, sorted by ``by``; a group with no
    finite value has n 0."""
    qs = [float(q) for q in qs]
    for q in qs:
        if not 0.0 <= q <= 1.0:
            raise ValueError(f"qs: quantile levels must lie in [0, 1], got {q}")
    names = [_quantile_name(q) for q in qs]
    cols = [*by, "n", "min", *names, "max", "mean", "sd"] + (["first"] if first else [])
    groups: dict[tuple, list[Path]] = {}
    for r in runs.itertuples(index=False):
        f = Path(r.dir) / "jobs.parquet"
        if f.exists():
            groups.setdefault(tuple(getattr(r, b) for b in by), []).append(f)
    if not groups:
        return pd.DataFrame(columns=cols)
    # Filters in WHERE when no aggregate needs the warm-up rows (per-aggregate FILTERs cost a
    # third more at 10^8 rows); NaN exists only in float columns, so only they test for it.
    conds = (["NOT warmup"] if measured_only else []) + ([f'NOT isnan("{column}")'] if _floating(groups, column) else [])
    cond = " AND ".join(conds) or "true"
    ok, where = (f"FILTER (WHERE {cond})", "") if first else ("", f"WHERE {cond}")
    qlist = "[" + ", ".join(repr(q) for q in qs) + "]"
    x = f'"{column}"'
    selects = []
    for i, files in enumerate(groups.values()):
        head = f"arg_min({x}, job * {_FILES} + file_index)" if first else "NULL"
        mn, mx, avg, sd = ((f"min({x}) {ok}", f"max({x}) {ok}", f"avg({x}) {ok}", f"stddev_samp({x}) {ok}") if moments
                           else ("NULL",) * 4)
        selects.append(f"""SELECT {i} AS g, count({x}) {ok}, {mn}, quantile_cont({x}, {qlist}) {ok}, {mx}, {avg}, {sd}, {head}
            FROM read_parquet({_sql_list(files)}, union_by_name = true) {where}""")
    import duckdb  # here: a report imports this module (results/tables.py) but never calls it

    con = duckdb.connect()
    try:
        if threads:
            con.execute(f"SET threads = {int(threads)}")
        res = con.execute(" UNION ALL ".join(selects)).fetchall()
    finally:
        con.close()
    keys = list(groups)
    rows = []
    for g, n, mn, q, mx, mean, sd, fst in res:
        row = dict(zip(by, keys[g]))
        row.update(n=int(n), min=_num(mn), **dict(zip(names, q or [math.nan] * len(qs))), max=_num(mx),
                   mean=_num(mean), sd=_num(sd))
        if first:
            row["first"] = _num(fst)
        rows.append(row)
    out = pd.DataFrame(rows, columns=cols)
    for c in names:
        out[c] = out[c].astype(float)
    return out.sort_values(list(by), kind="stable").reset_index(drop=True)


def _floating(groups: dict, column: str) -> bool:
    """Whether ``column`` is a floating-point column in any of the files (NaN possible)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    for files in groups.values():
        for f in files:
            schema = pq.read_schema(f)
            if column in schema.names and pa.types.is_floating(schema.field(column).type):
                return True
    return False


def _num(v) -> float:
    return math.nan if v is None else float(v)
