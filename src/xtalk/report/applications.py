"""Each measured application's figures in the report of several applications: the sections a
single victim gets, drawn per application × configuration rather than per scenario × run,
so the report grows with applications × configurations and not with scenarios or runs.

- distributions: the builder's boxplots and ECDFs, then one grid of histograms per
  configuration (a row per scenario, execution and response time side by side);
- series: the run holding the application's slowest job in the configuration, against the
  per-job minimum of its ``alone:<A>`` runs (its solo);
- spikes: per run, their periods, the spikes of the run holding the slowest job; with a
  kernel trace, the culprits over-represented in its spike jobs and what ran around its
  slowest traced job, the application's own process standing for the victim;
- pWCET: per configuration, fitted in the scenario where the application's median execution
  time is highest (its worst case met; fault scenarios apart), with the i.i.d. checks and the
  fit's goodness of fit; too few jobs is one sentence, not a figure;
- probes: report/portfolio.py on the application's own probes.parquet.

Every function takes ``b``, the builder of one application (build._applications): its data
already filtered to the application's jobs (cohabitation.application_data: its alone runs
named solo), ``b.application`` its name, ``b.prefix`` the prefix of its figure files.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from ..analysis import pwcet as pw
from ..store.frames import SOLO, ReportData
from . import figures as fg
from ..results import tables as tb
from ..analysis.spikes import CULPRIT_PERIOD_COLUMNS
from .culprits import ATTRIBUTION_CAPTION, POOLED_CAPTION, culprit_periods
from .html import Section, in_ms
from ..trace.parse import trace_file

METRICS = (("exec_ns", "execution time"), ("response_ns", "response time"))


def _cfg(c: str) -> str:
    return "" if c == "default" else f" [{c}]"


def configurations(data: ReportData) -> list[str]:
    """The configurations in which the application has jobs, in the report's order."""
    return list(dict.fromkeys(cf for _, cf in tb.groups(data)))


def _scenarios(data: ReportData, cf: str) -> list[str]:
    return [sc for sc, c in tb.groups(data) if c == cf]


def distributions(b) -> Section:
    """The builder's boxplots, ECDFs and tables, then a histogram grid per configuration."""
    s = b.distributions()
    for i, cf in enumerate(configurations(b.data)):
        scen = _scenarios(b.data, cf)
        rows = [(sc, [(tb.sorted_values(b.data, sc, cf, col), tb.group_markers(b.data, sc, cf, col))
                      for col, _ in METRICS]) for sc in scen]
        s.figure(b.fig(fg.histogram_grid(rows, [name for _, name in METRICS], f"{b.application}{_cfg(cf)}"),
                       f"hist_{i}", f"{b.application}: execution and response time per scenario{_cfg(cf)}",
                       "A row per scenario (solo: the application alone); markers best, median, first job, worst; "
                       "counts on a log scale."))
        if len(scen) > fg.MAX_PANELS:
            s.text(f"{len(scen) - fg.MAX_PANELS} more scenarios{_cfg(cf)} in the tables above, not drawn.")
    return s


def _worst_run(data: ReportData, cf: str) -> pd.Series | None:
    """The measured job with the largest execution time in configuration ``cf``."""
    m = data.measured
    j = m[(m["configuration"] == cf).to_numpy()]
    return None if j.empty else j.loc[j["exec_ns"].idxmax()]


def series(b) -> Section:
    """Per configuration, the run holding the slowest job against the alone reference."""
    s = Section("series", "Per-job time series")
    s.text("Per configuration, the run that holds the application's slowest job (a min–max envelope when it has many "
           "jobs), and in red the per-job minimum over the application's alone runs: where the run leaves that curve, "
           "something beside it took its time.")
    for i, cf in enumerate(configurations(b.data)):
        w = _worst_run(b.data, cf)
        if w is None:
            continue
        rid, sc = str(w["run_id"]), str(w["scenario"])
        g = b.data.measured[(b.data.measured["run_id"] == rid).to_numpy()]
        ref = tb.per_job_reference(b.data, SOLO, "exec_ns", cf)
        label = f"per-job minimum over {int(ref['n_runs'].max())} alone runs" if len(ref) else None
        s.figure(b.fig(fg.per_job_series([(rid, g["job"].to_numpy(), g["exec_ns"].to_numpy())], ref,
                                         f"{b.application}{_cfg(cf)}: run {rid} ({sc})", reference_label=label),
                       f"series_{i}", f"{b.application}: per-job execution time of run {rid}{_cfg(cf)}",
                       f"Scenario {sc}; the run with the application's slowest job in this configuration."
                       + ("" if len(ref) else " No alone run in this configuration: no reference curve.")))
    return s


def _process_names(meta) -> dict[int, str]:
    """pid -> name of every measured process and enemy of a run (its outcome): each application
    by its name (the plan's victim by its own), enemies as ``enemy <name>``."""
    if meta is None or meta.pids is None:
        return {}
    out = {pid: f"enemy {name}" for name, pid in meta.pids.enemies.items()}
    if meta.pids.victim and meta.plan is not None:
        out[meta.pids.victim] = meta.plan.victim.name or "victim"
    for a in meta.applications or []:
        if a.pid:
            out[a.pid] = a.name
    return out


def _renamed(iv: pd.DataFrame, names: dict[int, str]) -> pd.DataFrame:
    return iv.assign(name=[names.get(int(p), n) if p is not None and p == p and p >= 0 else n
                           for p, n in zip(iv["pid"], iv["name"])])


def spikes(b) -> Section:
    """Spikes per run, their periods, the worst run's spikes; culprits from a kernel trace."""
    s = Section("spikes", "Spikes and culprits")
    s.text("A spike is a job whose execution time exceeds its run's median + 5 × 1.4826 × MAD. Periods are searched in "
           "time and in jobs (seed 000 §5.3.2).")
    s.table(in_ms(b.keep("spikes", tb.spikes(b.data))), "Spikes per run")
    s.table(in_ms(b.keep("spike_periods", tb.spike_periods(b.data))), POOLED_CAPTION)
    w = tb.worst_job(b.data)
    if w is not None:
        det = tb.detected_spikes(b.data)
        s.figure(b.fig(fg.spike_series(det[det["run_id"] == w["run_id"]], f"{b.application}: run {w['run_id']}"),
                       "spikes_worst_run", f"{b.application}: spikes of run {w['run_id']} (its slowest job)", ""))
    traced = [r for r in tb.traced_runs(b.data) if trace_file(b.data.run_dir(r)) is not None]
    if not traced:
        s.text("No run of this application has a kernel trace, so no culprit can be named: add a [trace] table to the "
               "experiment and run it as root.")
        return s
    rows, periods = [], []
    for rid in traced:
        t = tb.trace_intervals(b.data, rid)
        jobs = b.data.measured[(b.data.measured["run_id"] == rid).to_numpy()]
        if t is None or len(jobs) < 3:
            continue
        names = _process_names(b.data.outcome(rid))
        own = {p: ("victim" if n == b.application else n) for p, n in names.items()}  # attribute() leaves "victim" out
        iv = _renamed(t[0], names)
        a = tb.attribute(jobs, iv, own)
        rows.append(tb.attribution_table(rid, a))
        periods.append(tb.culprit_period_table(rid, a, iv))
    att = b.keep("spike_attribution", pd.concat(rows, ignore_index=True) if rows else pd.DataFrame())
    s.table(in_ms(att), ATTRIBUTION_CAPTION + ", on the application's CPU")
    culprit_periods(s, b.keep("culprit_periods", pd.concat(periods, ignore_index=True) if periods else
                              pd.DataFrame(columns=CULPRIT_PERIOD_COLUMNS)))
    tl = tb.timeline(b.data)
    if len(tl):
        tl = _renamed(tl, _process_names(b.data.outcome(str(tl["run_id"].iloc[0]))))
        b.keep("timeline", tl)
        a = tl.attrs
        s.figure(b.fig(fg.gantt(tl, f"{b.application}: run {tl['run_id'].iloc[0]}, job {a.get('job')}", victim=b.application),
                       "timeline", f"What ran around {b.application}'s slowest traced job",
                       f"Kernel trace, ± 2 periods; {b.application} on CPU {a.get('cpu')}. Thin bars: interrupts."))
    return s


def worst_scenario(data: ReportData, cf: str) -> str:
    """The scenario of configuration ``cf`` with the highest median execution time, fault
    scenarios and solo apart (solo when there is no other)."""
    scen = [sc for sc in _scenarios(data, cf) if sc != SOLO and not sc.startswith("fault:")] or [SOLO]
    return max(scen, key=lambda sc: float(tb.quantiles(tb.sorted_values(data, sc, cf, "exec_ns"), 0.5)))


def _only(data: ReportData, pairs: list[tuple[str, str]]) -> ReportData:
    """``data`` restricted to some (scenario, configuration) groups (the tables' functions
    then compute only those)."""
    def keep(j: pd.DataFrame) -> pd.DataFrame:
        if j.empty:
            return j
        m = np.zeros(len(j), dtype=bool)
        for sc, cf in pairs:
            m |= ((j["scenario"] == sc) & (j["configuration"] == cf)).to_numpy()
        return j[m]

    return replace(data, measured=keep(data.measured), warmup=keep(data.warmup), memo={})


def pwcet(b) -> Section:
    """Per configuration, the pWCET in the application's worst case met, or why there is none."""
    s = Section("pwcet", "pWCET")
    s.text("Per configuration, in the scenario where the application's median execution time is highest (faults "
           "apart): the i.i.d. checks MBPTA requires (Ljung-Box, KS between halves, runs test), then a generalized "
           "Pareto tail with profile-likelihood bounds, its fit checked by a KS test (ks_p). A failed check refuses "
           "the estimate, and that refusal is the result.")
    worst = [(worst_scenario(b.data, cf), cf) for cf in configurations(b.data)]
    sub = _only(b.data, worst)
    t = tb.pwcet(sub)
    iid = b.keep("pwcet_iid", tb.pwcet_iid(sub))
    fits = tb.pwcet_fits(sub)
    if len(t):
        ks = {(sc, cf): (r.fit.ks_p if r.fit is not None else np.nan) for sc, cf, _, r in fits}
        t = t.assign(ks_p=[ks.get((sc, cf), np.nan) for sc, cf in zip(t["scenario"], t["configuration"])])
    b.keep("pwcet", t)
    for i, (sc, cf, total, res) in enumerate(fits):
        where = f"{sc}{_cfg(cf)}"
        if res.refused and res.refused.startswith("sample_size"):
            s.text(f"{where}: {res.n} jobs, fewer than the {_min_samples()} a pWCET fit needs, so no estimate is drawn; "
                   "more jobs or runs per scenario would give one.")
            continue
        if not res.ok:
            s.raw(f'<p class="refused">{_esc(where)}: pWCET refused — {_esc(res.refused)}</p>')
        v, _ = tb.pwcet_series(sub, sc, cf)
        s.figure(b.fig(fg.pwcet_curve(v, res, f"{b.application}: {where}"), f"pwcet_{i}",
                       f"{b.application}: exceedance curve, {where}", f"{res.n} jobs fitted of {total}."))
    shown = t[t["refused"].isna()] if len(t) else t
    if len(shown):
        s.table(in_ms(shown), "pWCET estimates")
    if len(iid):
        s.table(iid, "i.i.d. checks")
    return s


def _min_samples() -> int:
    import inspect

    return int(inspect.signature(pw.pwcet).parameters["min_samples"].default)


def _esc(x) -> str:
    import html

    return html.escape(str(x))
