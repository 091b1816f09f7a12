"""The probe and system-call portfolio of the report (seed 004 §VIII-B/C, METRICS' xTRACT):

- per probe, a histogram of its durations with the markers of the execution-time histograms
  (best, median, first, worst: results/tables.group_markers) and a table with first, best,
  median, mean, p99, worst;
- per system call (the preload library's probes 1000–1014, store/probes.PRELOAD_IDS), a
  boxplot of its durations per scenario (seed 004 Fig. 11, bottom);
- a timeline of the calls and user probes of one run (seed 004 Fig. 11, top): where the time
  between two calls goes.

Read from each run's probes.parquet (store/probes.py); nothing is drawn for results
without probes.
"""

from __future__ import annotations

import inspect
from pathlib import Path

import numpy as np
import pandas as pd

from ..store.probes import PRELOAD_IDS
from ..store.frames import ReportData
from .html import Section

#: Histograms drawn at most (the probes with most samples first); the table has them all.
MAX_HISTOGRAMS = 12
#: Calls and probe samples drawn in the timeline (the first ones of the run).
TIMELINE_SAMPLES = 400
STAT_COLUMNS = ["scenario", "configuration", "probe", "name", "kind", "n", "migrated", "first_us", "best_us", "median_us",
                "mean_us", "p99_us", "worst_us", "slowdown_median", "slowdown_median_lo", "slowdown_median_hi"]


def _directory(run_dir: Path, application: str | None) -> Path:
    """Where a measured process keeps its records: the run directory for the victim
    (``application`` None), else the application's own (run.json's entry; the plan's victim
    when it is that application; ``applications/<name>/`` by default)."""
    if application is None:
        return run_dir
    from ..store.jobs import measured_logs

    return {name: where for name, where, _ in measured_logs(run_dir)}.get(application,
                                                                           run_dir / "applications" / application)


def probes(data: ReportData, application: str | None = None) -> pd.DataFrame:
    """Every probe sample of every run with the run's labels; ``label`` names the probe
    ("write", "probe 7"), ``kind`` is "syscall" (preload library) or "probe" (user).
    ``application``: that measured application's probes instead of the victim's."""
    key = ("_probes", application) if application is not None else "_probes"
    if key in data.memo:
        return data.memo[key]
    parts = []
    for r in data.runs.itertuples():
        p = _directory(Path(r.dir), application) / "probes.parquet"
        if not p.exists():
            continue
        df = pd.read_parquet(p)
        if df.empty:
            continue
        df = df.assign(run_id=r.run_id, scenario=r.scenario, configuration=r.configuration)
        if "migrated" not in df:
            df["migrated"] = df["cpu_begin"] != df["cpu_end"]
        parts.append(df)
    if not parts:
        out = pd.DataFrame(columns=["run_id", "scenario", "configuration", "probe", "name", "label", "kind", "tid",
                                    "begin_ns", "end_ns", "duration_ns", "migrated"])
    else:
        out = pd.concat(parts, ignore_index=True)
        sysc = out["probe"].isin(list(PRELOAD_IDS))
        out["kind"] = np.where(sysc, "syscall", "probe")
        named = out["name"].fillna("").astype(str) if "name" in out else pd.Series("", index=out.index)
        out["label"] = [n or PRELOAD_IDS.get(int(p), f"probe {int(p)}") for n, p in zip(named, out["probe"])]
    data.memo[key] = out
    return out


def probe_statistics(data: ReportData, application: str | None = None, n_boot: int = 2000,
                     reference: str | None = None) -> pd.DataFrame:
    """Per scenario, configuration and probe: samples, migrated samples, the markers first
    (the earliest sample of the first run), best, median, mean, p99, worst, in µs, and the
    slowdown of the median duration against `reference` (solo; an application's
    `alone:<name>`) in the same configuration with its 95 % CI (analysis/slowdown.py over the
    runs; empty for the reference and where it has no samples)."""
    from ..analysis.slowdown import SOLO, slowdown

    reference = reference or (f"alone:{application}" if application is not None else SOLO)
    p = probes(data, application)
    p = p.assign(_r=p["run_id"].map(_run_order(data))).sort_values(["_r", "begin_ns"], kind="stable")
    per_run = {key: [g["duration_ns"].to_numpy(dtype=float) for _, g in grp.groupby("run_id", sort=False)]
               for key, grp in p.groupby(["scenario", "configuration", "probe"], sort=False)}
    rows = []
    for (sc, cf, pid), g in p.groupby(["scenario", "configuration", "probe"], sort=False):
        v = np.sort(g["duration_ns"].to_numpy(dtype=float))
        ref = per_run.get((reference, cf, pid))
        ci = slowdown(per_run[(sc, cf, pid)], ref, "median", n_boot=n_boot) if ref and sc != reference else None
        rows.append({"scenario": sc, "configuration": cf, "probe": int(pid), "name": g["label"].iloc[0],
                     "kind": g["kind"].iloc[0], "n": v.size, "migrated": int(g["migrated"].sum()),
                     "first_us": float(g["duration_ns"].iloc[0]) / 1e3, "best_us": v[0] / 1e3,
                     "median_us": float(np.median(v)) / 1e3, "mean_us": float(v.mean()) / 1e3,
                     "p99_us": float(np.quantile(v, 0.99)) / 1e3, "worst_us": v[-1] / 1e3,
                     "slowdown_median": ci.estimate if ci else np.nan, "slowdown_median_lo": ci.low if ci else np.nan,
                     "slowdown_median_hi": ci.high if ci else np.nan})
    return pd.DataFrame(rows, columns=STAT_COLUMNS)


def _run_order(data: ReportData) -> dict:
    return {r: i for i, r in enumerate(data.runs["run_id"])}


def markers(data: ReportData, probe: int, application: str | None = None, scenario: str | None = None,
            configuration: str | None = None) -> tuple[np.ndarray, dict[str, float]]:
    """Durations (ns) of one probe over every run (of ``scenario`` and ``configuration``
    when given), and best / median / first / worst as results/tables.group_markers defines
    them (first: the earliest sample of the first run)."""
    p = probes(data, application)
    g = p[p["probe"] == probe]
    if scenario is not None:
        g = g[g["scenario"] == scenario]
    if configuration is not None:
        g = g[g["configuration"] == configuration]
    order = _run_order(data)
    g = g.assign(_r=g["run_id"].map(order)).sort_values(["_r", "begin_ns"])
    v = np.sort(g["duration_ns"].to_numpy(dtype=float))
    return v, {"best": float(v[0]), "median": float(np.median(v)), "first": float(g["duration_ns"].iloc[0]),
               "worst": float(v[-1])}


def duration_unit(ns: float) -> tuple[str, float]:
    """The unit a duration of about ``ns`` reads best in, and its size in ns."""
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if ns >= scale:
            return unit, scale
    return "ns", 1.0


def syscall_boxplots(groups: list[tuple[str, np.ndarray]], title: str):
    """Boxplots of durations in µs on a log axis (calls span decades: a read against a
    sleep), box p25–p75, whiskers p1–p99, the maximum as a red dot."""
    import matplotlib.pyplot as plt

    items = []
    for label, v in groups:
        v = np.sort(np.asarray(v, dtype=float) / 1e3)
        if v.size == 0:
            continue
        p1, q1, med, q3, p99 = np.quantile(v, [0.01, 0.25, 0.5, 0.75, 0.99])
        items.append({"label": f"{label} (n={v.size})", "whislo": p1, "q1": q1, "med": med, "q3": q3, "whishi": p99,
                      "fliers": [v[-1]]})
    if not items:
        return None
    fig, ax = plt.subplots(figsize=(7.6, 1.2 + 0.32 * len(items)))
    horizontal = {"orientation": "horizontal"} if "orientation" in inspect.signature(ax.bxp).parameters else {"vert": False}
    ax.bxp(items, showfliers=True, flierprops={"marker": "o", "markerfacecolor": "#e76f51", "markersize": 4}, **horizontal)
    if max(i["fliers"][0] for i in items) > 0 and min(i["whislo"] for i in items) > 0:
        ax.set_xscale("log")
    ax.set_xlabel("duration (µs, log) — box p25–p75, whiskers p1–p99, dot: max")
    ax.set_title(title)
    ax.invert_yaxis()
    return fig


def timeline(samples: pd.DataFrame, title: str):
    """Calls and probes of one run against time: one lane per name, a bar per sample, x in
    ms from the first sample drawn (seed 004 Fig. 11, top)."""
    from . import figures as fg  # first: it sets Matplotlib's backend and the report's style
    import matplotlib.pyplot as plt

    if samples.empty:
        return None
    s = samples.sort_values("begin_ns").head(TIMELINE_SAMPLES)
    if "tid" in s and s["tid"].nunique() > 1:  # one lane per thread and name: threads overlap in time
        s = s.assign(label=s["label"] + " · tid " + s["tid"].astype(str))
    t0 = int(s["begin_ns"].min())
    lanes = list(dict.fromkeys(s.sort_values(["kind", "label"])["label"]))
    fig, ax = plt.subplots(figsize=(10, 1.0 + 0.3 * len(lanes)))
    for i, name in enumerate(lanes):
        g = s[s["label"] == name]
        widths = np.maximum((g["end_ns"] - g["begin_ns"]).to_numpy(dtype=float), 1.0) / 1e6
        ax.broken_barh(list(zip((g["begin_ns"] - t0).to_numpy(dtype=float) / 1e6, widths)), (i - 0.35, 0.7),
                       facecolors=fg.OTHER_COLORS[i % len(fg.OTHER_COLORS)], edgecolor="none")
    ax.set_yticks(range(len(lanes)), lanes)
    ax.invert_yaxis()
    ax.set_xlabel(f"ms from the first sample drawn ({len(s)} of {len(samples)} samples of this run)")
    ax.set_title(title)
    return fig


def section(b) -> Section | None:
    """The "Probes and system calls" section (b: the report builder; ``b.application``, when
    set, the measured application whose probes are shown); None without probes."""
    from . import figures as fg  # Matplotlib: for the report's figures, not `xtalk summary`'s statistics

    data, app = b.data, getattr(b, "application", None)
    p = probes(data, app)
    if p.empty:
        return None
    s = Section("portfolio", "Probes and system calls")
    s.text("User probes (include/xtalk/probe.h) and the system calls the preload library wraps "
           "(build/libxtalk_preload.so), as the METRICS portfolio shows them (seed 004 §VIII). Durations in µs; "
           "first = the earliest sample of the first run (it often behaves differently).")
    ref = f"alone:{app}" if app is not None else None
    st = b.keep("probe_statistics", probe_statistics(data, app, n_boot=getattr(b, "n_boot", 2000), reference=ref))
    s.table(st, "Per probe and scenario: first, best, median, mean, p99, worst (µs); the median's slowdown against "
               "solo with its 95 % CI (runs, then samples, resampled)")
    if st["migrated"].sum():
        s.text(f"{int(st['migrated'].sum())} samples began and ended on different CPUs (column migrated).")
    counts = p.groupby("probe").size().sort_values(ascending=False, kind="stable")
    for pid in counts.index[:MAX_HISTOGRAMS]:
        mine = p[p["probe"] == pid]
        name = mine["label"].iloc[0]
        unit, scale = duration_unit(float(mine["duration_ns"].median()))
        # One row per scenario, each with its own markers: pooled, the scenarios' samples
        # hid each other (and one µs axis read "4.258e+04 µs").
        groups = list(dict.fromkeys(zip(mine["scenario"], mine["configuration"])))
        rows = [(sc if cf == "default" else f"{sc} ({cf})", [markers(data, int(pid), app, sc, cf)]) for sc, cf in groups]
        s.figure(b.fig(fg.histogram_grid(rows, [f"{name} duration"], f"{name}, per scenario", unit=unit, scale=scale),
                       f"probe_hist_{int(pid)}", f"Histogram of {name}",
                       "Seed 004 Fig. 7 markers per scenario: best, median, first, worst; counts on a log scale."))
    if len(counts) > MAX_HISTOGRAMS:
        s.text(f"{len(counts) - MAX_HISTOGRAMS} more probes in the table above and in csv/probes.csv.")
    sysc = p[p["kind"] == "syscall"]
    if sysc.empty:
        s.text("No system call recorded: add preload = \"build/libxtalk_preload.so\" to a command victim "
               "(docs/observe.md) for the system-call views.")
        return s
    groups = [(f"{name} · {sc}" if cf == "default" else f"{name} · {sc} ({cf})", g["duration_ns"].to_numpy())
              for (name, sc, cf), g in sysc.groupby(["label", "scenario", "configuration"], sort=True)]
    s.figure(b.fig(syscall_boxplots(groups, "system calls per scenario"), "syscall_box", "System-call durations",
                   "Seed 004 Fig. 11 (bottom): the operating system is subject to interference too."))
    run = sysc.groupby("run_id", sort=False).size().idxmax()
    one = p[p["run_id"] == run]
    s.figure(b.fig(timeline(one, f"run {run}"), "syscall_timeline", f"System calls and probes of run {run}",
                   "Seed 004 Fig. 11 (top): gaps between consecutive calls are time outside them (the application, "
                   "or preemption)."))
    return s
