"""What a results directory's victim is, and the numbers that fit it.

The generic summary (execution-time slowdown against solo) fits a periodic compute body
(chase, sum, pi, spawn, syscall). It misleads for the others, so each gets its own:

- ``latency``: the job is empty; the measurement is wake-up − release per sample
  (cyclictest). Latency statistics in µs and the 1 µs histogram, log counts; no execution
  slowdown, no pWCET of an empty body.
- ``taskset``: per task (never pooled): jobs, misses, skipped jobs, response time beside the
  bound of the response-time analysis the plan's tasks admit (xtalk.sched.uniproc).
- ``aocs``: the compute step is the job (generic statistics hold), plus the comparer's
  verdict: steps compared and mismatches per run (aocs.json).

Every function takes the run table (``Results.runs()`` or ``ReportData.runs``) and jobs
as either gives them, so the terminal summary of `xtalk run` and the report read the same
numbers from the same code.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .. import catalog
from ..analysis import verdict as vd
from ..results.victim_tables import AOCS_COLUMNS, aocs_table, task_jobs  # noqa: F401 - the kinds' tables, re-exported
from ..store import run_outcome
from ..plan import Victim

PERIODIC = "periodic"


def hidden(kind: str) -> set[str]:
    """Generic report sections that say nothing true about a kind: the execution sections
    its body does not declare (the catalog's `sections`; none for PERIODIC)."""
    if kind not in catalog.body_names():
        return set()
    return set(catalog.EXECUTION) - set(catalog.body(kind).sections)


LATENCY_COLUMNS = ["scenario", "configuration", "runs", "samples", "min_us", "avg_us", "p50_us", "p99_us", "p999_us",
                   "max_us", "p99_vs_solo"]
TASK_COLUMNS = ["scenario", "configuration", "task", "name", "jobs", "missed", "skipped", "dmr", "resp_p50_ms",
                "resp_p99_ms", "resp_max_ms", "rta_bound_ms", "deadline_ms", "within_bound", "wcet_ms", "cpu_max_ms",
                "rta_measured_ms", "delay_p50_ms", "delay_max_ms"]
#: The task table's columns the terminal shows (the report and tables/tasks.csv have all).
TERMINAL_TASK_COLUMNS = ["name", "jobs", "missed", "skipped", "resp_p50_ms", "resp_max_ms", "rta_bound_ms", "cpu_max_ms",
                         "rta_measured_ms"]
RM_TOP_PRIORITY = 80  # agent/src/victims/taskset.rs: RM priorities start here when the victim is not fifo


def victim_plan(runs: pd.DataFrame) -> Victim | None:
    """The victim of the first run whose run.json has a plan (None when none has)."""
    for d in runs.get("dir", []):
        meta = run_outcome(d)
        if meta is not None and meta.plan is not None:
            return meta.plan.victim
    return None


def kind_of(runs: pd.DataFrame) -> str:
    """The victim's body where it has a view of its own (a catalog section beyond the
    execution ones: "latency", "taskset", "aocs", "command"), or "periodic" (a periodic
    compute body)."""
    victim = victim_plan(runs)
    kind = victim.body.kind if victim is not None else None
    own = kind in catalog.body_names() and set(catalog.body(kind).sections) - set(catalog.EXECUTION)
    return kind if own else PERIODIC


# --------------------------------------------------------------------------- latency


def latency_table(jobs: pd.DataFrame) -> pd.DataFrame:
    """Per scenario and configuration: samples and wake-up latency (wakeup − release) min,
    avg, p50, p99, p99.9, max in µs; p99_vs_solo the ratio of p99 to solo's. The one latency
    table: the report's section, the terminal summary and `xtalk summary --view latency` all print it."""
    if jobs.empty:
        return pd.DataFrame(columns=LATENCY_COLUMNS)
    lat = (jobs["wakeup_latency_ns"].to_numpy(dtype=float) if "wakeup_latency_ns" in jobs else
           jobs["wakeup_ns"].to_numpy(dtype=float) - jobs["release_ns"].to_numpy(dtype=float)) / 1e3
    conf = jobs["configuration"].astype(str) if "configuration" in jobs else pd.Series("default", index=jobs.index)
    g = pd.DataFrame({"scenario": jobs["scenario"].astype(str), "configuration": conf,
                      "run_id": jobs["run_id"].astype(str), "us": lat})
    rows = []
    for (sc, cf), x in g.groupby(["scenario", "configuration"], sort=False):
        us = x["us"].to_numpy()
        p50, p99, p999 = np.percentile(us, [50, 99, 99.9])
        rows.append({"scenario": sc, "configuration": cf, "runs": x["run_id"].nunique(), "samples": us.size,
                     "min_us": us.min(), "avg_us": us.mean(), "p50_us": p50, "p99_us": p99, "p999_us": p999,
                     "max_us": us.max()})
    t = pd.DataFrame(rows)
    solo = t[t["scenario"] == "solo"].set_index("configuration")["p99_us"]
    t["p99_vs_solo"] = [r.p99_us / solo[r.configuration] if r.configuration in solo and solo[r.configuration] > 0
                        else math.nan for r in t.itertuples()]
    order = sorted(range(len(t)), key=lambda i: (t["configuration"].iat[i], t["scenario"].iat[i] != "solo"))
    return t.iloc[order].reset_index(drop=True)[LATENCY_COLUMNS]


def latency_histogram_figure(jobs: pd.DataFrame, title: str):
    """The cyclictest plot: samples per 1 µs bin on a log axis, one step line per scenario,
    the maximum of each marked."""
    import matplotlib.pyplot as plt

    from . import figures as fg

    if jobs.empty:
        return None
    us = (jobs["wakeup_ns"].to_numpy(dtype=np.int64) - jobs["release_ns"].to_numpy(dtype=np.int64)) // 1000
    names = (jobs["scenario"].astype(str) + np.where(jobs["configuration"].astype(str) == "default", "",
                                                      " (" + jobs["configuration"].astype(str) + ")")).to_numpy()
    fig, ax = plt.subplots(figsize=(9.0, 3.6))
    hi = int(max(us.max(), 0)) + 1
    for i, name in enumerate(dict.fromkeys(names)):
        v = np.clip(us[names == name], 0, None)
        counts = np.bincount(v, minlength=hi).astype(float)
        counts[counts == 0] = np.nan  # empty bins: gaps on a log axis
        colour = fg._color(i)
        ax.step(np.arange(hi + 1), np.append(counts, counts[-1]), where="post", color=colour, lw=1.0,
                label=f"{name} (max {v.max()} µs)")
        ax.axvline(v.max(), color=colour, ls=":", lw=0.8)
    ax.set_yscale("log")
    ax.set_ylim(bottom=0.8)  # a single sample (the tail that matters) stays visible
    ax.set_xlabel("latency (µs, 1 µs bins: bin k holds [k, k+1) µs)")
    ax.set_ylabel("samples (log)")
    ax.set_title(title)
    ax.legend(fontsize=8, loc="upper right")
    return fig


# --------------------------------------------------------------------------- task sets


def rta_bounds(victim: Victim | None, wcet_ms: dict[int, float] | None = None) -> tuple[dict[int, float], str]:
    """Task index -> bound on its response time (ms), and how it was obtained.

    ``rm``: fixed-priority response-time analysis (xtalk.sched.uniproc) with the priorities
    the agent gives the threads (rate monotonic from the victim's priority down, a task's own
    priority winning), valid on one CPU; ∞ where the analysis finds the deadline can be
    missed. ``deadline``: an admitted SCHED_DEADLINE reservation whose runtime covers the
    job finishes by its deadline, so the bound is the deadline. ``wcet_ms`` replaces the
    planned wcet of the tasks it names (a measured one)."""
    from ..sched.taskset import Task
    from ..sched.uniproc import response_time_analysis

    body = victim.body if victim is not None else None
    tasks = body.tasks if body is not None and body.kind == "taskset" else []
    if not tasks:
        return {}, "no tasks in the plan"
    if body.policy == "deadline":
        return ({i: (t.deadline_ns or t.period_ns) / 1e6 for i, t in enumerate(tasks)},
                "SCHED_DEADLINE reservations: an admitted job whose runtime covers it ends by its deadline")
    sched = victim.sched
    top = int(sched.priority or RM_TOP_PRIORITY) if sched.policy == "fifo" else RM_TOP_PRIORITY
    prio = [t.priority for t in tasks]
    for rank, i in enumerate(sorted((i for i, p in enumerate(prio) if p is None), key=lambda i: (tasks[i].period_ns, i))):
        prio[i] = max(top - rank, 1)
    wcet_ms = wcet_ms or {}
    model = [Task(str(i), wcet_ms.get(i, t.wcet_ns / 1e6), t.period_ns / 1e6, (t.deadline_ns or t.period_ns) / 1e6,
                  priority=100 - prio[i]) for i, t in enumerate(tasks)]  # SCHED_FIFO: higher number, higher priority
    cpus = victim.placement.cpus or []
    where = "on one CPU" if len(cpus) == 1 else (f"on one CPU (the tasks may use {len(cpus)} CPUs: a reference, not a "
                                                 "proven bound for global scheduling)" if cpus else "on one CPU (unpinned: "
                                                 "a reference, not a proven bound for global scheduling)")
    return ({int(r.task.name): r.response for r in response_time_analysis(model)},
            f"fixed-priority response-time analysis with the agent's SCHED_FIFO priorities, wcet as planned, {where}")


def task_table(runs: pd.DataFrame, jobs: pd.DataFrame | None = None) -> pd.DataFrame:
    """:func:`tasks_of` the victim of `runs` (its first plan) over their measured jobs."""
    return tasks_of(victim_plan(runs), task_jobs(runs) if jobs is None else jobs)


def tasks_of(victim: Victim | None, jobs: pd.DataFrame) -> pd.DataFrame:
    """One row per scenario, configuration and task: jobs, misses, skipped jobs (never ran,
    counted as missed), deadline-miss ratio, response time (end − release) p50 / p99 / max
    beside the RTA bound (planned wcet) and the deadline; then the planned wcet, the largest
    CPU time a job of the task took (``cpu_max_ms``) and the RTA bound with those measured
    CPU times as wcet (``rta_measured_ms``): when the response exceeds the planned bound,
    this says whether the task's own cost or something else explains it; last the release
    delay (start − release) p50 and max. The one task table: the report, the run summary and
    `xtalk summary --view tasks` all print it."""
    tasks = victim.body.tasks if victim is not None and victim.body.kind == "taskset" else []
    bounds, _ = rta_bounds(victim)
    if "configuration" not in jobs:
        jobs = jobs.assign(configuration="default")
    rows = []
    measured: dict[tuple, dict[int, float]] = {}
    if "cpu_time_ns" in jobs and len(jobs):
        for (sc, cf, k), g in jobs[jobs["cpu_start"] >= 0].groupby(["scenario", "configuration", "task"], sort=False):
            measured.setdefault((sc, cf), {})[int(k)] = float(g["cpu_time_ns"].max()) / 1e6
    measured_bounds = {key: rta_bounds(victim, w)[0] for key, w in measured.items()}
    for (sc, cf, k), g in jobs.groupby(["scenario", "configuration", "task"], sort=False):
        k = int(k)
        skipped = (g["cpu_start"] < 0) & (g.get("cpu_time_ns", pd.Series(1, index=g.index)) == 0)
        ran = g[~skipped]
        resp = (ran["end_ns"] - ran["release_ns"]).to_numpy(dtype=float) / 1e6
        delay = (ran["start_ns"] - ran["release_ns"]).to_numpy(dtype=float) / 1e6
        q = (lambda p: float(np.percentile(resp, p)) if resp.size else math.nan)  # noqa: E731
        t = tasks[k] if k < len(tasks) else None
        bound = bounds.get(k, math.nan)
        rmax = float(resp.max()) if resp.size else math.nan
        rows.append({"scenario": str(sc), "configuration": str(cf), "task": k, "name": t.name if t else str(k), "jobs": len(g),
                     "missed": int(g["missed"].astype(bool).sum()), "skipped": int(skipped.sum()),
                     "dmr": float(g["missed"].astype(bool).mean()), "resp_p50_ms": q(50), "resp_p99_ms": q(99),
                     "resp_max_ms": rmax, "rta_bound_ms": bound,
                     "deadline_ms": ((t.deadline_ns or t.period_ns) if t else math.nan) / 1e6,
                     "within_bound": bool(rmax <= bound) if resp.size and not math.isnan(bound) else None,
                     "wcet_ms": (t.wcet_ns if t else math.nan) / 1e6, "cpu_max_ms": measured.get((sc, cf), {}).get(k, math.nan),
                     "rta_measured_ms": measured_bounds.get((sc, cf), {}).get(k, math.nan),
                     "delay_p50_ms": float(np.median(delay)) if delay.size else math.nan,
                     "delay_max_ms": float(delay.max()) if delay.size else math.nan})
    out = pd.DataFrame(rows, columns=TASK_COLUMNS)
    return out.sort_values(["configuration", "scenario", "task"], key=lambda c: c != "solo" if c.name == "scenario" else c,
                           kind="stable").reset_index(drop=True)


def task_figure(table: pd.DataFrame, jobs: pd.DataFrame, title: str):
    """Response time per task and scenario (box p25–p75, whiskers p1–p99, red dot: max) with
    the RTA bound as a black bar."""
    import inspect

    import matplotlib.pyplot as plt

    if table.empty:
        return None
    items, bounds = [], []
    for r in table.itertuples():
        g = jobs[(jobs["scenario"] == r.scenario) & (jobs["configuration"] == r.configuration) & (jobs["task"] == r.task)
                 & (jobs["cpu_start"] >= 0)]
        v = (g["end_ns"] - g["release_ns"]).to_numpy(dtype=float) / 1e6
        if v.size == 0:
            continue
        p1, q1, med, q3, p99 = np.percentile(v, [1, 25, 50, 75, 99])
        label = f"{r.name} · {r.scenario}" + ("" if r.configuration == "default" else f" ({r.configuration})")
        items.append({"label": label, "whislo": p1, "q1": q1, "med": med, "q3": q3, "whishi": p99, "fliers": [v.max()]})
        bounds.append(r.rta_bound_ms)
    if not items:
        return None
    fig, ax = plt.subplots(figsize=(7.6, 1.2 + 0.4 * len(items)))
    horizontal = {"orientation": "horizontal"} if "orientation" in inspect.signature(ax.bxp).parameters else {"vert": False}
    ax.bxp(items, showfliers=True, flierprops={"marker": "o", "markerfacecolor": "#e76f51", "markersize": 4}, **horizontal)
    for i, b in enumerate(bounds, start=1):
        if np.isfinite(b):
            ax.plot([b, b], [i - 0.4, i + 0.4], color="k", lw=2.2, label="RTA bound" if i == 1 else None)
    ax.set_xlabel("response time, end − release (ms) — box p25–p75, whiskers p1–p99, dot: max; black: RTA bound")
    ax.set_title(title)
    ax.invert_yaxis()
    return fig


# --------------------------------------------------------------------------- AOCS


def aocs_line(t: pd.DataFrame) -> str:
    """One sentence: steps compared and mismatches over every run."""
    have = t[t["compared"].notna()]
    if have.empty:
        return "AOCS: no run wrote aocs.json, so no output was compared."
    comp, mis = int(have["compared"].sum()), int(have["mismatches"].sum())
    bad = have[have["mismatches"] > 0]
    missing = len(t) - len(have)
    s = (f"AOCS outputs: {comp} steps compared over {len(have)} runs, {mis} mismatches"
         + (f" (runs {', '.join(bad['run_id'])})" if len(bad) else ": every step bit-exact"))
    return s + (f"; {missing} runs without aocs.json" if missing else "") + "."


# --------------------------------------------------------------------------- verdict lines


def adapt_verdicts(kind: str, verdicts: pd.DataFrame, runs: pd.DataFrame, jobs: pd.DataFrame) -> pd.DataFrame:
    """Rewrite the generic verdict lines (results/tables.verdicts) for the victim's kind:
    latency statistics instead of an execution slowdown for ``latency``; one clause per task
    with its response against the RTA bound for ``taskset``; steps compared and mismatches
    appended for ``aocs``. Other kinds unchanged."""
    if verdicts.empty or kind not in ("latency", "taskset", "aocs"):
        return verdicts
    v = verdicts.copy()
    tail = [line.split(" — ", 1)[1].split("; ") if " — " in line else [] for line in v["verdict"]]
    keep = [[p for p in parts if "deadline miss" in p or p.startswith("ε") or p == vd.NO_EPSILON] for parts in tail]
    if kind == "latency":
        lt = latency_table(jobs).set_index(["scenario", "configuration"])
        for i, r in enumerate(v.itertuples()):
            if (r.scenario, r.configuration) not in lt.index:
                continue
            x = lt.loc[(r.scenario, r.configuration)]
            vs = "" if r.scenario == "solo" or math.isnan(x["p99_vs_solo"]) else f" (p99 {x['p99_vs_solo']:.2f}× solo)"
            word = getattr(r, "response_interference", None)
            status = vd.latency_status(r.status, word, r.scenario == "solo")
            v.at[v.index[i], "status"] = status
            v.at[v.index[i], "verdict"] = (
                f"{r.application} · {r.scenario} ({r.configuration}): {status} — wake-up latency p50 {x['p50_us']:.1f} µs, "
                f"p99 {x['p99_us']:.1f} µs{vs}, max {x['max_us']:.1f} µs over {int(x['samples'])} samples; " + "; ".join(keep[i]))
    elif kind == "taskset":
        from ..analysis.guards import task_guards

        tt = task_table(runs)
        # The generic lines judge solo on the pooled jobs of tasks designed to differ (a hog
        # planned to overrun misses by design): a task set's reference is judged per task.
        disturbed = {g.configuration for g in task_guards(tt)}
        for i, r in enumerate(v.itertuples()):
            t = tt[(tt["scenario"] == r.scenario) & (tt["configuration"] == r.configuration)]
            clauses = [f"{x.name}: resp max {x.resp_max_ms:.2f} ms {_vs(x.resp_max_ms, x.rta_bound_ms)} bound "
                       f"{_ms(x.rta_bound_ms)}, {x.missed}/{x.jobs} missed" + (f", {x.skipped} skipped" if x.skipped else "")
                       for x in t.itertuples()]
            flag = vd.DISTURBED_SUFFIX if r.configuration in disturbed and r.scenario != "solo" else ""
            eps = [p.replace(vd.DISTURBED_SUFFIX, "") + (flag if p.startswith("ε") else "")
                   for p in keep[i] if p.startswith("ε") or p == vd.NO_EPSILON]
            status = vd.task_status(r.status.replace(vd.DISTURBED_SUFFIX, ""), int(t["missed"].sum()),
                                    bool((t["within_bound"] == False).any())) + flag  # noqa: E712
            v.at[v.index[i], "status"] = status
            v.at[v.index[i], "reference_disturbed"] = bool(flag)
            v.at[v.index[i], "verdict"] = (f"{r.application} · {r.scenario} ({r.configuration}): {status} — "
                                           + "; ".join(clauses + eps))
    else:
        at = aocs_table(runs)
        for i, r in enumerate(v.itertuples()):
            a = at[(at["scenario"] == r.scenario) & (at["configuration"] == r.configuration) & at["compared"].notna()]
            if len(a):
                v.at[v.index[i], "verdict"] = (f"{r.verdict}; {int(a['compared'].sum())} AOCS steps compared, "
                                               f"{int(a['mismatches'].sum())} mismatches")
    return v


def _vs(a: float, b: float) -> str:
    return "?" if math.isnan(a) or math.isnan(b) else "≤" if a <= b else ">"


def _ms(x: float) -> str:
    return "∞ (deadline can be missed)" if math.isinf(x) else "–" if math.isnan(x) else f"{x:.2f} ms"


# --------------------------------------------------------------------------- report section


TITLES = {"latency": "Timer latency", "taskset": "Task set: per task", "aocs": "AOCS outputs"}


def section(b, kind: str):
    """The kind's own report section (b: the report builder), None for a periodic body."""
    from .html import Section

    if kind not in TITLES:
        return None
    data = b.data
    s = Section("victim", TITLES[kind])
    if kind == "latency":
        s.text("The latency victim's job is empty: each sample is its wake-up minus its release (cyclictest's "
               "measurement), so this section replaces the execution-time slowdown, distributions and pWCET.")
        t = b.keep("latency", latency_table(data.measured))
        s.table(t, "Wake-up latency per scenario (µs)")
        s.figure(b.fig(latency_histogram_figure(data.measured, "wake-up latency"), "latency_histogram",
                       "Latency histogram", "1 µs bins as cyclictest -h, counts on a log scale; dotted: each maximum."))
        _overheads(b, s)
        return s
    if kind == "taskset":
        runs = data.runs
        jobs = task_jobs(runs)
        t = b.keep("tasks", task_table(runs, jobs))
        _, how = rta_bounds(victim_plan(runs))
        s.text("Each task on its own line (response = end − release; skipped jobs never ran and count as missed). "
               f"Bound: {how}.")
        s.table(t, "Per task: measured response beside the RTA bound")
        above = t[t["within_bound"] == False]  # noqa: E712
        if len(above):
            s.text("Above the bound: " + ", ".join(f"{r.name} in {r.scenario} ({r.resp_max_ms:.2f} > {r.rta_bound_ms:.2f} ms)"
                                                   for r in above.itertuples())
                   + ". The bound assumes the planned wcet and nothing else on the CPU above the tasks' priorities: "
                   "cpu_max_ms is the most CPU time a job of the task took, rta_measured_ms the bound with those "
                   "measured times as wcet (the response above it is interference or overhead, not the tasks' own cost).")
        s.figure(b.fig(task_figure(t, jobs, "response time per task"), "task_response", "Response time per task",
                       "Every measured job; black bar: the RTA bound of the task."))
        return s
    t = b.keep("aocs", aocs_table(data.runs))
    s.text(aocs_line(t))
    s.table(t, "Per run: steps compared with the expected outputs, mismatches")
    return s


def _overheads(b, s) -> None:
    """Beside the latency table, where the runs have kernel traces: the same latency cut into
    the scheduler overheads of seed 001 §4.5 (report/overheads.py)."""
    from . import overheads as oh

    got = oh.tables(b.data.runs)
    if got is None:
        return
    summary, coverage = b.keep("overheads", got[0]), b.keep("overheads_coverage", got[1])
    s.text(oh.LEGEND)
    s.table(oh.wide(summary), "Scheduler overheads per timer release (µs)")
    s.table(coverage, "Jobs decomposed from the trace (the others by reason), and the latency tail they explain")
    for r in coverage.itertuples():
        s.text(f"{r.scenario} ({r.configuration}): {oh.tail_text(r)}")


def markdown(b, kind: str) -> list[str]:
    """Lines of summary.md for the kind's own numbers (empty for a periodic body)."""
    from .markdown import md_table

    if kind == "latency" and "latency" in b.tables:
        from .overheads import markdown as overheads_md

        extra = overheads_md(b.tables["overheads"], b.tables["overheads_coverage"]) if "overheads" in b.tables else []
        return ["## Timer latency (µs)", "", md_table(b.tables["latency"])] + ([""] + extra if extra else [])
    if kind == "taskset" and "tasks" in b.tables:
        return ["## Task set: response beside the RTA bound", "", md_table(b.tables["tasks"])]
    if kind == "aocs" and "aocs" in b.tables:
        return ["## AOCS outputs", "", aocs_line(b.tables["aocs"]), ""]
    return []


# --------------------------------------------------------------------------- terminal summary


def kind_summary(kind: str, runs: pd.DataFrame, jobs: pd.DataFrame) -> tuple[str, pd.DataFrame, list[str]] | None:
    """(title, table, lines) the terminal summary of `xtalk run` shows for a victim kind whose
    numbers the generic table gets wrong; None for a periodic compute body. For ``latency``
    and ``taskset`` the table replaces the generic one, for ``aocs`` it follows it."""
    if kind == "latency":
        return "timer latency (wake-up − release), µs", latency_table(jobs), []
    if kind == "taskset":
        t = task_table(runs)
        _, how = rta_bounds(victim_plan(runs))
        cols = ([] if set(t["configuration"]) <= {"default"} else ["configuration"]) + TERMINAL_TASK_COLUMNS
        return ("task set, per task (response = end − release, ms)", t[["scenario"] + cols],
                [f"RTA bound: {how}; rta_measured_ms: the same with each task's largest measured CPU time as wcet"])
    if kind == "aocs":
        t = aocs_table(runs)
        return "AOCS outputs per run", t, [aocs_line(t)]
    return None


def replaces_generic(kind: str) -> bool:
    """Whether the kind's table replaces the generic slowdown table in the terminal: its
    body does not declare the slowdown section."""
    return "slowdown" in hidden(kind)
