"""A campaign's cells: one row per application × configuration × variant × scenario, with
its slowdown against the solo of the same application, configuration and variant, its ε
verdict (the application's ε, stored on every run as the label ``epsilon``) and its guards.

The campaign summary (terminal, summary.md/json) and the campaign report both read this one
table, so a number cannot disagree between them. The statistics are those of the report
(:mod:`xtalk.results.tables`): the campaign is loaded as a :class:`ReportData` whose
``configuration`` is the *group* of a cell (its application, configuration and variant, the
parts that vary in the campaign), so that every per-(scenario, configuration) table of the
report is per cell, with the right solo, and no two applications or variants are pooled.
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from ..analysis import guards
from .. import units
from ..analysis import verdict as vd
from ..analysis.slowdown import slowdown
from . import campaign_maps as cm
from . import epsilon as eps
from . import tables as tb
from ..analysis import stats as st
from ..store.frames import SOLO, ReportData, convert_stale, load, load_runs

#: The labels that make a group of cells sharing one solo.
GROUP_PARTS = ("application", "configuration", "variant")
#: How a two-way family's `totals` read, per `share` field (campaign/schema.py TwoWay.share):
#: (axis name, unit, parser to that unit).
_SHARE_AXES = {
    "reservation.runtime": ("total CPU time per period", "ms", lambda t: units.duration_ns(t, "total") / 1e6),
    "intensity": ("total CPU time per period", "ms", lambda t: units.duration_ns(t, "total") / 1e6),
    "elements": ("total list footprint", "elements of 64 B", lambda t: float(int(t))),
    "bytes": ("total footprint", "MiB", lambda t: units.size_bytes(t, "total", {}) / 2**20),
}
COUNT_AXIS = "number of enemies"


def is_campaign(path) -> bool:
    """Whether ``path`` is a campaign's results directory (it has campaign.json)."""
    return (Path(path) / "campaign.json").is_file()


@dataclass
class CampaignData:
    """A campaign loaded for analysis: the report's data with one configuration per group."""

    data: ReportData
    #: group -> {application, configuration, variant}
    groups: dict[str, dict]
    #: run_id -> every label of the run (two_way, enemies, total, grid axes...)
    labels: dict[str, dict]
    #: two-way family -> its `share` field (from campaign.toml), for the axis units
    shares: dict[str, str] = field(default_factory=dict)
    name: str = ""


def _shares(path: Path) -> dict[str, str]:
    try:
        doc = tomllib.loads((path / "campaign.toml").read_text())
    except (OSError, ValueError):
        return {}
    return {str(t.get("name")): str(t.get("share", "")) for t in doc.get("two_way", []) if isinstance(t, dict)}


def load_campaign(path) -> CampaignData:
    """Read a campaign directory (only `runs/`, as every reader of a campaign)."""
    path = Path(path)
    runs = load_runs(path)
    convert_stale(runs)
    data = load(path, runs)
    labels: dict[str, dict] = {}
    for r in runs.itertuples():
        meta = data.outcome(r.run_id)  # read once, by load()
        labels[r.run_id] = dict(meta.labels()) if meta else {}
    varying = [p for p in GROUP_PARTS if len({lb.get(p, "") for lb in labels.values()}) > 1] or ["configuration"]
    run_group, groups = {}, {}
    for run_id, lb in labels.items():
        g = " · ".join(lb.get(p, "") or "default" for p in varying)
        run_group[run_id] = g
        groups.setdefault(g, {p: lb.get(p, "default") for p in GROUP_PARTS})
    order = list(dict.fromkeys(run_group[r] for r in runs["run_id"]))
    data.runs = runs.assign(configuration=runs["run_id"].map(run_group))
    for frame in (data.measured, data.warmup):
        if len(frame):
            codes = frame["run_id"].map(run_group).astype(str)
            frame["configuration"] = pd.Categorical(codes, categories=order)
        else:
            frame["configuration"] = pd.Categorical([], categories=order)
    data.memo.clear()
    try:
        import json

        name = json.loads((path / "campaign.json").read_text()).get("name", path.name)
    except (OSError, ValueError):
        name = path.name
    return CampaignData(data, groups, labels, _shares(path), name)


def _victims(cd: CampaignData) -> dict[str, dict]:
    """Each group's victim (its first run's plan), as the guards read it."""
    out: dict[str, dict] = {}
    for r in cd.data.runs.itertuples():
        if r.configuration not in out:
            meta = cd.data.outcome(r.run_id)
            out[r.configuration] = meta.plan.victim.model_dump() if meta and meta.plan else {}
    return out


def _floor(samples: list[np.ndarray], n_boot: int) -> float:
    """The group's noise floor of a median ratio, from pairs of its solo runs (results/tables.py
    does the same over a whole experiment); NaN with fewer than two solo runs."""
    samples = [s for s in samples if s.size >= 2][:tb.AA_RUNS]
    if len(samples) < 2:
        return math.nan
    return float(st.aa_noise_floor(samples, "median", n_boot=n_boot, seed=0).floor)


def _runs_of(data: ReportData) -> dict[tuple[str, str], dict[str, list[np.ndarray]]]:
    """(group, scenario) -> metric -> one array per run, from one pass over the jobs."""
    m = data.measured
    cols = {c: m[c].to_numpy() for c in ("exec_ns", "response_ns", "job")}
    out: dict[tuple[str, str], dict[str, list[np.ndarray]]] = {}
    if m.empty:
        return out
    for (g, sc, _run), idx in m.groupby(["configuration", "scenario", "run_id"], observed=True, sort=False).indices.items():
        d = out.setdefault((str(g), str(sc)), {c: [] for c in cols})
        for c, v in cols.items():
            d[c].append(v[idx])
    return out


#: (group, scenario) -> metric ("exec_ns", "response_ns", "job") -> one array per run.
run_samples = _runs_of


def _miss_counts(data: ReportData) -> pd.DataFrame:
    """Misses (the agent's per-job flag, the times where a table has none), serious misses and
    lost jobs per (group, scenario), by analysis.verdict's definitions (those of an
    experiment's cells, analysis/cells.py), over the whole job table at once."""
    m = data.measured
    if m.empty:
        return pd.DataFrame(columns=["n_missed", "n_serious"])
    c = vd.classify_misses(m[[c for c in ("configuration", "scenario", "run_id", "job", "release_ns", "end_ns", "period_ns",
                                          "deadline_ns", "missed") if c in m.columns]], recorded=True)
    per_run = c.groupby(["configuration", "scenario", "run_id"], observed=True).agg(
        n_missed=("missed", "sum"), n_serious=("serious", "sum"), lo=("job", "min"), hi=("job", "max"),
        n=("job", "nunique"))
    per_run["n_serious"] += per_run["hi"] - per_run["lo"] + 1 - per_run["n"]  # lost jobs count as serious
    return per_run.groupby(level=[0, 1], observed=True)[["n_missed", "n_serious"]].sum()


def _median(runs: list[np.ndarray]) -> float:
    return float(np.median(np.concatenate(runs))) if runs else math.nan


def cell_table(cd: CampaignData, epsilons: Sequence = (), *, n_boot: int = 1000) -> pd.DataFrame:
    """One row per cell: labels, runs, jobs, statistics, slowdowns with CIs against the
    group's solo (analysis.slowdown.slowdown), misses (analysis.verdict), the ε verdict
    (analysis.verdict.epsilon_verdict) and the guards that fire (``warnings``, as
    summary.json writes them)."""
    data = cd.data
    per = _runs_of(data)
    miss = _miss_counts(data)
    status = data.runs.groupby(["configuration", "scenario"])["status"]
    n_runs, n_ok = status.size(), status.agg(lambda s: int((s == "completed").sum()))
    first_run = data.runs.groupby(["configuration", "scenario"])["run_id"].first()
    order = {s: i for i, s in enumerate(data.scenarios)}
    # Every cell that has runs, with jobs or not: a cell whose runs all failed is listed as such.
    keys = list(dict.fromkeys(list(per) + [(str(g), str(sc)) for g, sc in n_runs.index]))
    keys.sort(key=lambda k: (list(cd.groups).index(k[0]) if k[0] in cd.groups else 99, order.get(k[1], 999)))
    specs = {g: tb.epsilon_specs(data, epsilons, g) for g in dict.fromkeys(k[0] for k in keys)}
    floors = {(g, m): _floor(per.get((g, SOLO), {}).get(m, []), n_boot) for g in specs for m in ("exec_ns", "response_ns")}
    trouble = {g: _solo_trouble(per.get((g, SOLO)), miss, g) for g in specs}
    rows = []
    for g, sc in keys:
        cur, ref = per.get((g, sc)), per.get((g, SOLO))
        lb = cd.labels.get(first_run.get((g, sc)), {})
        row = {"group": g, **cd.groups.get(g, {}), "scenario": sc,
               "two_way": lb.get("two_way", ""), "enemies": lb.get("enemies", ""), "total": lb.get("total", ""),
               "runs": int(n_runs.get((g, sc), 0)), "runs_ok": int(n_ok.get((g, sc), 0)),
               "jobs": int(sum(v.size for v in cur["exec_ns"])) if cur else 0}
        if cur is None:
            rows.append(_no_jobs(row))
            continue
        ex, resp = np.concatenate(cur["exec_ns"]).astype(float), np.concatenate(cur["response_ns"]).astype(float)
        row.update(exec_median_ms=float(np.median(ex)) / 1e6, exec_max_ms=float(ex.max()) / 1e6,
                   response_median_ms=float(np.median(resp)) / 1e6,
                   response_p99_ms=float(np.quantile(resp, 0.99)) / 1e6, response_max_ms=float(resp.max()) / 1e6)
        words = []
        for metric in ("exec_ns", "response_ns"):
            name = metric.removesuffix("_ns")
            if sc == SOLO:
                p, lo, hi, pmax = 1.0, math.nan, math.nan, 1.0
            elif ref is None:
                p, lo, hi, pmax = math.nan, math.nan, math.nan, math.nan
            else:
                p, lo, hi = slowdown(cur[metric], ref[metric], "median", n_boot=n_boot, seed=0)
                # The max ratio without a CI: from a campaign's few runs per cell a CI of the
                # ratio of two maxima is noise (guards.MIN_RUNS_FOR_MAX); `xtalk report` on
                # one cell gives it.
                pmax = float(max(v.max() for v in cur[metric])) / float(max(v.max() for v in ref[metric]))
            row[f"{name}_slowdown_median"], row[f"{name}_slowdown_median_lo"], row[f"{name}_slowdown_median_hi"] = p, lo, hi
            row[f"{name}_slowdown_max"] = pmax
            row.update(_p99(name, sc, cur, ref, n_boot))
            row[f"{name}_noise_floor"] = floors[(g, metric)]
            if sc != SOLO:
                row[f"{name}_interference"] = vd.interference(row[f"{name}_slowdown_median_lo"],
                                                              row[f"{name}_slowdown_median_hi"], floors[(g, metric)])
                words.append(row[f"{name}_interference"])
        mc = miss.loc[(g, sc)] if (g, sc) in miss.index else None
        row.update(deadline_misses=int(mc["n_missed"]) if mc is not None else 0,
                   serious_misses=int(mc["n_serious"]) if mc is not None else 0)
        row.update(_epsilon(specs[g], sc, cur, ref, n_boot))
        eps_words = [row["eps_verdict"]] if row["eps_verdict"] in vd.VERDICTS else []
        row["status"] = vd.status(eps_words, row["serious_misses"], row["deadline_misses"], words,
                                  reference_disturbed=sc != SOLO and bool(trouble.get(g)))
        row["verdict"] = _line(row)
        rows.append(row)
    cells = pd.DataFrame(rows)
    if cells.empty:
        return cells
    rank = {sc: i for i, sc in enumerate(scenario_order(cells))}
    groups = list(dict.fromkeys(cells["group"]))
    cells = cells.iloc[sorted(range(len(cells)), key=lambda i: (groups.index(cells["group"].iat[i]),
                                                                rank[cells["scenario"].iat[i]]))].reset_index(drop=True)
    fired = guards.check(_guard_input(cells), _victims(cd))
    cells["warnings"] = [[w.to_dict() for w in fired if (w.configuration, w.scenario) == (g, s)]
                         for g, s in zip(cells["group"], cells["scenario"])]
    return cells


def _solo_trouble(ref, miss: pd.DataFrame, group: str) -> str | None:
    """Why the group's solo runs are a disturbed reference (guards.reference_trouble), or None."""
    if not ref:
        return None
    ex = np.concatenate(ref["exec_ns"]).astype(float) / 1e6
    mc = miss.loc[(group, SOLO)] if (group, SOLO) in miss.index else None
    return guards.reference_trouble(int(ex.size), int(mc["n_missed"]) if mc is not None else 0,
                                    int(mc["n_serious"]) if mc is not None else 0, float(np.median(ex)), float(ex.max()))


def _no_jobs(row: dict) -> dict:
    """A cell whose runs recorded no job (all failed or timed out before the first): listed,
    every statistic NaN, its status saying so."""
    for k in ("exec_median_ms", "exec_max_ms", "response_median_ms", "response_p99_ms", "response_max_ms"):
        row[k] = math.nan
    for m in ("exec", "response"):
        row.update({f"{m}_slowdown_median": math.nan, f"{m}_slowdown_median_lo": math.nan,
                    f"{m}_slowdown_median_hi": math.nan, f"{m}_slowdown_max": math.nan, f"{m}_noise_floor": math.nan,
                    f"{m}_slowdown_p99": math.nan, f"{m}_slowdown_p99_lo": math.nan, f"{m}_slowdown_p99_hi": math.nan})
    row.update(deadline_misses=0, serious_misses=0, epsilon="", eps_verdict=vd.NO_JOBS, **EPS_EMPTY,
               status=vd.NO_JOBS_STATUS)
    row["verdict"] = (f"{row['group']} · {row['scenario']}: {vd.NO_JOBS_STATUS} — {row['runs']} run(s), {row['runs_ok']} completed, "
                      "none recorded a job; see each run's postmortem/ (xtalk campaign status DIR)")
    return row


#: Each side's order-statistic interval is at this level, so the ratio's holds at 95 %.
_SIDE_LEVEL = math.sqrt(0.95)


def _quantile_bounds(x: np.ndarray, q: float, level: float = _SIDE_LEVEL) -> tuple[float, float]:
    """Distribution-free CI of the ``q`` quantile of ``x`` (order statistics, binomial
    counts). Where the sample is too small for an upper bound (p99 of fewer than ~440 jobs)
    the upper end is the maximum observed: the tail above it is unknown."""
    from scipy.stats import binom

    v = np.sort(x)
    n = v.size
    a = (1 - level) / 2
    lo = int(binom.ppf(a, n, q)) - 1
    hi = int(binom.ppf(1 - a, n, q))
    return float(v[min(max(lo, 0), n - 1)]), float(v[min(hi, n - 1)])


def _p99(name: str, sc: str, cur: dict, ref: dict | None, n_boot: int) -> dict:
    """The cell's p99 slowdown of ``name`` (exec, response) with a 95 % CI that needs no
    bootstrap: each side's order-statistic interval at √0.95, the ratio's ends the quotients
    of the far ends (conservative: a bootstrap of a p99 from a hundred jobs concluded on
    cells with nothing planted). The campaign maps can show it (results/campaign_maps.py)."""
    key = f"{name}_slowdown_p99"
    nan = {key: math.nan, f"{key}_lo": math.nan, f"{key}_hi": math.nan}
    if sc == SOLO:
        return {**nan, key: 1.0}
    if ref is None:
        return nan
    a, b = (np.concatenate(x[f"{name}_ns"]).astype(float) for x in (cur, ref))
    if not a.size or not b.size:
        return nan
    (alo, ahi), (blo, bhi) = _quantile_bounds(a, 0.99), _quantile_bounds(b, 0.99)
    pb = float(np.quantile(b, 0.99))
    if pb <= 0 or blo <= 0:  # a p99 of 0 in solo: no ratio
        return nan
    return {key: float(np.quantile(a, 0.99)) / pb, f"{key}_lo": alo / bhi, f"{key}_hi": ahi / blo}


#: The ε columns of a cell without a verdict: the leading bound's metric and statistic, its
#: relative bound, the observed statistic with its CI, the bound and the ratio to solo with its CI.
EPS_EMPTY = {"eps_metric": None, "eps_statistic": None, "eps_relative": math.nan, "eps_observed_ms": math.nan,
             "eps_observed_lo_ms": math.nan, "eps_observed_hi_ms": math.nan, "eps_bound_ms": math.nan,
             "eps_ratio": math.nan, "eps_ratio_lo": math.nan, "eps_ratio_hi": math.nan}


def _epsilon(specs: list, sc: str, cur: dict, ref: dict | None, n_boot: int) -> dict:
    """The cell's ε verdict; with several bounds (the application's and --epsilon ones) the
    worst leads and ``epsilon`` lists them all."""
    out = {"epsilon": "; ".join(eps.describe(s) for s in specs), "eps_verdict": "", **EPS_EMPTY}
    if sc == SOLO:
        return {**out, "eps_verdict": vd.REFERENCE}
    if not specs:
        return {**out, "eps_verdict": vd.NO_EPSILON}
    frame = {m: pd.DataFrame({f"{m}_ns": np.concatenate(cur[f"{m}_ns"]).astype(float)}) for m in ("exec", "response")}
    solo = {m: pd.DataFrame({f"{m}_ns": np.concatenate(ref[f"{m}_ns"]).astype(float)}) for m in ("exec", "response")} \
        if ref is not None else {}
    results = []
    for spec in specs:
        if spec.relative is not None and not solo:
            continue
        r = vd.epsilon_verdict(solo.get(spec.metric), frame[spec.metric], spec, n_boot=n_boot, seed=0).iloc[0]
        results.append((spec, r))
    if not results:
        return {**out, "eps_verdict": vd.NO_SOLO}
    spec, r = results[vd.worst_epsilon([r["verdict"] for _, r in results])]
    return {**out, "eps_verdict": r["verdict"], "eps_metric": r["metric"], "eps_statistic": r["statistic"],
            "eps_relative": r["relative"], "eps_observed_ms": r["observed_ns"] / 1e6,
            "eps_observed_lo_ms": r["ci_low_ns"] / 1e6, "eps_observed_hi_ms": r["ci_high_ns"] / 1e6,
            "eps_bound_ms": r["bound_ns"] / 1e6, "eps_ratio": r["ratio"], "eps_ratio_lo": r["ratio_ci_low"],
            "eps_ratio_hi": r["ratio_ci_high"]}


def _line(row: dict) -> str:
    """The cell's verdict in one line, in the words of the single-experiment report."""
    where = f"{row['group']} · {row['scenario']}"
    parts = []
    if row["scenario"] == SOLO:
        parts.append(f"reference: exec median {row['exec_median_ms']:.3f} ms, response p99 {row['response_p99_ms']:.3f} ms")
    else:
        for m in ("exec", "response"):
            ci = tb.ci_text(*(row[f"{m}_slowdown_median{k}"] for k in ("", "_lo", "_hi")))
            parts.append(f"{m} median {ci} ({row[f'{m}_interference']})")
    parts.append(f"{row['deadline_misses']} deadline miss{'es' if row['deadline_misses'] != 1 else ''}, "
                 f"{row['serious_misses']} serious")
    if row["eps_verdict"] in vd.VERDICTS:
        ratio = f" (×{row['eps_ratio']:.2f} [{row['eps_ratio_lo']:.2f}, {row['eps_ratio_hi']:.2f}])" \
            if row["eps_ratio"] == row["eps_ratio"] else f" ({row['eps_observed_ms']:.3f} ms)"
        parts.append(f"ε {row['epsilon']}: {row['eps_verdict'].upper()}{ratio}")
    elif row["scenario"] != SOLO:
        parts.append(row["eps_verdict"])
    return f"{where}: {row['status']} — " + "; ".join(parts)


def scenario_order(cells: pd.DataFrame) -> list[str]:
    """solo, the explicit scenarios, then each two-way family by (total, enemies), numerically."""
    c = cells.drop_duplicates("scenario")
    fam = list(dict.fromkeys(c["two_way"]))
    num = pd.to_numeric(c["enemies"], errors="coerce")
    tot = c["total"].map(lambda t: axis("", [t])[1][0] if t else 0.0)
    key = pd.DataFrame({"s": c["scenario"] != SOLO, "f": c["two_way"].map(fam.index), "t": tot, "n": num})
    return list(c.loc[key.sort_values(["s", "f", "t", "n"], kind="stable").index, "scenario"])


def _guard_input(cells: pd.DataFrame) -> pd.DataFrame:
    """The cell table in the columns analysis.guards reads (the summary's)."""
    return pd.DataFrame({
        "configuration": cells["group"], "scenario": cells["scenario"], "jobs": cells["jobs"],
        "runs_ok": cells["runs_ok"], "deadline_misses": cells["deadline_misses"],
        "serious_misses": cells["serious_misses"], "median_exec_ms": cells["exec_median_ms"], "max_exec_ms": cells["exec_max_ms"],
        "slowdown_median": cells["exec_slowdown_median"], "slowdown_median_lo": cells["exec_slowdown_median_lo"],
        "slowdown_median_hi": cells["exec_slowdown_median_hi"]})


def warning_lines(cells: pd.DataFrame) -> list[str]:
    """Every guard that fired, one line each (`group / scenario: what is wrong; what to change`)."""
    return [guards.Guard(guards.Kind(w["kind"]), w["configuration"], w["scenario"], w["message"]).line()
            for ws in cells.get("warnings", []) for w in ws]


def worst(cells: pd.DataFrame, n: int = 10) -> pd.DataFrame:
    """The ``n`` worst cells: ε violated first, then inconclusive, then by median slowdown."""
    c = cells[cells["scenario"] != SOLO]
    rank = c["eps_verdict"].map({vd.VIOLATED: 0, vd.INCONCLUSIVE: 1}).fillna(2)
    key = pd.DataFrame({"rank": rank, "s": -c["exec_slowdown_median"].fillna(-np.inf), "m": -c["serious_misses"]})
    return c.loc[key.sort_values(["rank", "m", "s"]).index].head(n)


# --------------------------------------------------------------------------- two-way grids


@dataclass
class Grid:
    """One map: a two-way family × a group (rows the number of enemies, columns the total,
    both numeric and sorted by value), or a campaign's explicit scenarios (rows) × groups
    (columns); cells the mapped statistic (``stat``), ``known`` where its CI has concluded,
    ``violated`` where the cell's ε verdict is violated."""

    family: str
    group: str
    values: pd.DataFrame
    known: pd.DataFrame
    violated: pd.DataFrame
    row_label: str
    col_label: str
    stat: cm.MapStat

    @property
    def title(self) -> str:
        return f"{self.family} — {self.group}" if self.group else self.family


def axis(share: str, totals: Sequence[str]) -> tuple[str, list[float]]:
    """(axis label with its unit, the totals as numbers in that unit)."""
    name, unit, parse = _SHARE_AXES.get(share, ("", "", None))
    if parse is None:  # a family not in campaign.toml: a duration if every total reads as one
        try:
            return "total (ms)", [units.duration_ns(t, "total") / 1e6 for t in totals]
        except ValueError:
            pass
        try:
            return "total", [float(t) for t in totals]
        except ValueError:
            return "total", [math.nan] * len(totals)
    out = []
    for t in totals:
        try:
            out.append(float(parse(t)))
        except (ValueError, TypeError):
            out.append(math.nan)  # e.g. "2*llc": the target's caches are not known here
    return f"{name} ({unit})", out


def _with_map(cells: pd.DataFrame, stat: cm.MapStat) -> pd.DataFrame:
    return cells.assign(_v=stat.values(cells), _k=stat.known(cells), _x=cells["eps_verdict"] == vd.VIOLATED)


def _pivot(x: pd.DataFrame, index: str, columns: str, rows: list, cols: list) -> tuple[pd.DataFrame, ...]:
    out = []
    for c in ("_v", "_k", "_x"):
        g = x.pivot_table(index=index, columns=columns, values=c, aggfunc="first", dropna=False)
        # Every row and column of the grid, so excluded cells show as gaps, not vanish.
        out.append(g.reindex(index=rows, columns=cols))
    v, k, e = out
    return v.astype(float), k.fillna(False).astype(bool), e.fillna(False).astype(bool)


def two_way_grids(cd: CampaignData, cells: pd.DataFrame, stat: cm.MapStat | None = None) -> list[Grid]:
    """Per two-way family and per group, the grid of ``stat`` (default: the median execution
    slowdown; excluded cells NaN)."""
    stat = stat or cm.STATS[cm.FALLBACK]
    out = []
    tw = _with_map(cells[cells["two_way"].astype(str) != ""], stat)
    for family in dict.fromkeys(tw["two_way"]):
        f = tw[tw["two_way"] == family]
        label, values = axis(cd.shares.get(family, ""), list(f["total"]))
        f = f.assign(_total=values, _n=pd.to_numeric(f["enemies"], errors="coerce"))
        if f["_total"].isna().any():  # unreadable totals: keep their order of appearance
            f = f.assign(_total=f["total"].map({t: i for i, t in enumerate(dict.fromkeys(f["total"]))}).astype(float))
            label = "total (as written)"
        rows, cols = sorted(f["_n"].dropna().unique()), sorted(f["_total"].unique())
        for g in dict.fromkeys(f["group"]):
            v, k, e = _pivot(f[f["group"] == g], "_n", "_total", rows, cols)
            for frame in (v, k, e):
                frame.index.name, frame.columns.name = f"{COUNT_AXIS} (count)", label
            out.append(Grid(str(family), str(g), v, k, e, v.index.name, label, stat))
    return out


def scenario_grid(cells: pd.DataFrame, stat: cm.MapStat | None = None) -> Grid | None:
    """The explicit scenarios (not solo, not two-way cells) × the groups, as one map; None
    when the campaign has no such scenario."""
    stat = stat or cm.STATS[cm.FALLBACK]
    x = cells[(cells["scenario"] != SOLO) & (cells["two_way"].astype(str) == "")]
    if x.empty:
        return None
    x = _with_map(x, stat)
    rows, cols = list(dict.fromkeys(x["scenario"])), list(dict.fromkeys(cells["group"]))
    v, k, e = _pivot(x, "scenario", "group", rows, cols)
    for frame in (v, k, e):
        frame.index.name, frame.columns.name = "scenario", "group"
    return Grid("scenarios", "", v, k, e, "scenario", "group", stat)
