"""The report of several measured applications: it leads with who perturbs whom (the
interference matrix as a heat map per configuration, criticality-ordered), each
application's ε verdict in the worst case it met, and the failure-propagation verdicts with
the property "no fault of a lower-criticality application propagates to a higher one";
then one group of the usual sections per application, in which its ``alone:<A>`` runs play
the part of solo.

The verdicts are computed in analysis/cohabitation.py and analysis/propagation.py; this
module reads the applications' criticality and ε from the experiment copy, the per-run
facts of each application from run.json, and formats. Results of one application never
come here (build.py and summary.py check :func:`is_multi` first)."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
from rich.markup import escape

from ..analysis import cohabitation as co
from ..analysis import propagation as pg
from ..analysis import verdict as vd
from ..errors import UsageError
from ..store import run_outcomes
from ..store.frames import SOLO, ReportData
from ..results import epsilon as eps
from .html import Section, verdict_list
from .markdown import md_table

#: Run labels of application experiments (config/applications.py); not campaign parameters.
APP_LABELS = ("applications", "faulty", "fault", "experiment")


def is_multi(jobs: pd.DataFrame) -> bool:
    """Whether the results hold more than one measured application."""
    return co.is_multi(jobs)


def declared(experiment: dict) -> list[co.Application]:
    """The `[[application]]`s of the experiment copy, in declaration order, with their
    criticality and ε (a malformed ε is a UsageError naming the field)."""
    exp = (experiment or {}).get("experiment") or experiment or {}
    out = []
    for i, a in enumerate(exp.get("application") or exp.get("applications") or []):
        if not isinstance(a, dict) or not a.get("name"):
            continue
        spec = a.get("epsilon")
        e = eps.from_application(spec, f"application[{i}].epsilon") if spec else None
        crit = a.get("criticality")
        out.append(co.Application(str(a["name"]), crit if crit in co.CRITICALITY else None, e))
    return out


#: An application's status in run.json (agent/src/outcome.rs ApplicationStatus) other than
#: completed: it did not finish its work (failed by itself, stopped when the run ended
#: early, never started).
_NOT_DONE = {"failed", "stopped", "not_started"}


def application_status(runs: pd.DataFrame) -> pd.DataFrame | None:
    """One row per run × measured process (run_id, application, failed, reason): each
    application as its run.json entry says, and the plan's victim failed when the run did not
    complete and no application's own failure explains it. None when no run lists
    applications (the run's own status then stands for every application)."""
    rows, any_apps = [], False
    for rid, meta in zip(runs.get("run_id", []), run_outcomes(runs)):
        if meta is None:
            continue
        entries = [a for a in meta.applications if a.name]
        any_apps |= bool(entries)
        own = []
        for a in entries:
            failed = a.status in _NOT_DONE
            own.append(failed)
            why = a.error or a.exit or a.status
            rows.append({"run_id": rid, "application": str(a.name), "failed": failed,
                         "reason": f"{a.status}: {why}" if failed else ""})
        victim = (meta.plan.victim.name if meta.plan is not None else None) or "victim"
        failed = meta.status != "completed" and not any(own)
        rows.append({"run_id": rid, "application": str(victim), "failed": failed,
                     "reason": f"run {meta.status}: {meta.reason or ''}" if failed else ""})
    return pd.DataFrame(rows) if any_apps else None


@dataclass
class Cohabitation:
    """Every verdict of several applications (the tables of analysis/cohabitation.py and
    analysis/propagation.py)."""

    apps: list[co.Application]
    matrix: pd.DataFrame
    epsilon: pd.DataFrame
    propagation: pd.DataFrame
    property: pd.DataFrame


def compute(jobs: pd.DataFrame, runs: pd.DataFrame, experiment: dict, *, n_boot: int = 2000,
            status: pd.DataFrame | None = None) -> Cohabitation:
    """The matrix, ε verdicts, propagation verdicts and property check of a job frame with an
    ``application`` column."""
    s = co.Samples(jobs)
    apps = co.applications(s.jobs, declared(experiment))
    present = set(str(x) for x in s.jobs["application"].unique())
    apps = [a for a in apps if a.name in present]
    m = co.matrix(s, apps, n_boot=n_boot)
    e = co.epsilon_verdicts(s, apps, n_boot=n_boot)
    p = pg.propagation(s, runs, apps, status=status, n_boot=n_boot)
    return Cohabitation(apps, m, e, p, pg.property_check(p, apps))


def of_report(data: ReportData, n_boot: int) -> Cohabitation:
    """:func:`compute` on a loaded results directory (once per ReportData)."""
    key = ("cohabitation", n_boot)
    if key not in data.memo:
        status = application_status(data.runs) if "dir" in data.runs else None
        data.memo[key] = compute(data.measured, data.runs, data.experiment, n_boot=n_boot, status=status)
    return data.memo[key]


# --------------------------------------------------------------------------- lines


def _crit(c) -> str:
    return f" ({c})" if isinstance(c, str) and c else ""


def _cfg(c: str) -> str:
    return "" if c == "default" else f" [{c}]"


def _ci(p, lo, hi) -> str:
    if p is None or not np.isfinite(p):
        return "–"
    return f"×{p:.2f}" if not np.isfinite(lo) else f"×{p:.2f} [{lo:.2f}, {hi:.2f}]"


def _needed(r) -> str:
    return "" if r.firm else f"; {co.runs_text(r.runs_needed)}"


def epsilon_lines(c: Cohabitation) -> list[tuple[str, str]]:
    """(verdict, line) per application and configuration."""
    crit = {a.name: a.criticality for a in c.apps}
    out = []
    for r in c.epsilon.itertuples():
        if np.isfinite(r.ratio):
            value = f"{r.metric} {r.statistic} {_ci(r.ratio, r.ratio_low, r.ratio_high)} alone"
        else:
            ci = f" [{r.ci_low_ns / 1e6:.3f}, {r.ci_high_ns / 1e6:.3f}]" if np.isfinite(r.ci_low_ns) else ""
            value = f"{r.metric} {r.statistic} {r.observed_ns / 1e6:.3f} ms{ci}"
        note = f"; {r.note}" if r.note else ""
        trouble = getattr(r, "reference_trouble", "") or ""
        # Against a disturbed alone run the words say so (a relative ε "held" at ×0.05).
        word = r.verdict + (vd.DISTURBED_SUFFIX if trouble and r.verdict != vd.VIOLATED else "")
        note += f"; the reference is disturbed ({trouble})" if trouble else ""
        out.append((word, f"{r.application}{_crit(crit.get(r.application))}{_cfg(r.configuration)}: ε {r.bound} "
                          f"{word} in the worst case met, {r.scenario}: {value}, {r.runs} runs{note}{_needed(r)}"))
    for a in c.apps:
        if a.epsilon is None:
            out.append(("", f"{a.name}{_crit(a.criticality)}: {vd.NO_EPSILON}"))
    return out


def property_lines(c: Cohabitation) -> list[tuple[str, str]]:
    """(verdict, line) per configuration for the failure-propagation property."""
    out = []
    for r in c.property.itertuples():
        tail = f"; {co.runs_text(r.runs_needed)}" if r.verdict == vd.INCONCLUSIVE else ""
        out.append((r.verdict, f"failure propagation{_cfg(r.configuration)}: no fault of a lower-criticality application "
                               f"reaches a higher one: {r.verdict} — {r.why}{tail}"))
    return out


def propagation_lines(c: Cohabitation) -> list[tuple[str, str]]:
    """(verdict, line) per configuration × fault × other application."""
    out = []
    for r in c.propagation.itertuples():
        why = f" — {r.why}" if r.why else ""
        out.append((r.verdict, f"{r.faulty}{_crit(r.faulty_criticality)} {r.fault}{_cfg(r.configuration)} → "
                               f"{r.application}{_crit(r.criticality)}: {r.verdict}{why}{_needed(r)}"))
    return out


def matrix_lines(c: Cohabitation) -> list[tuple[str, str]]:
    """(word, line) for each cell whose CI says the victim was slowed down."""
    out = []
    for r in c.matrix[c.matrix["interference"] == vd.SLOWED_DOWN].itertuples():
        out.append((vd.SLOWED_DOWN, f"{r.victim} beside {r.perturber}{_cfg(r.configuration)}: {r.metric} {r.statistic} "
                                    f"{_ci(r.slowdown, r.low, r.high)} alone ({r.interference})"))
    return out


def lines(c: Cohabitation) -> list[tuple[str, str]]:
    """Every verdict line, property first: what the terminal and summary.md print."""
    return property_lines(c) + epsilon_lines(c) + propagation_lines(c) + matrix_lines(c)


# --------------------------------------------------------------------------- the section


def matrix_display(c: Cohabitation, configuration: str) -> pd.DataFrame:
    """One configuration's matrix with each slowdown and its CI in one cell."""
    g = co.grid(c.matrix, configuration, c.apps)
    m = c.matrix[c.matrix["configuration"] == configuration].set_index(["victim", "perturber"])
    out = pd.DataFrame(index=g.index, columns=g.columns, dtype=object)
    for y in g.index:
        for x in g.columns:
            out.loc[y, x] = _ci(*m.loc[(y, x), ["slowdown", "low", "high"]]) if (y, x) in m.index else "–"
    crit = {a.name: a.criticality or "–" for a in c.apps}
    out.insert(0, "criticality", [crit.get(y, "–") for y in out.index])
    return out


def section(b) -> Section:
    """The leading section (b: the report builder): property, ε and propagation verdicts,
    then the matrix of each configuration as a heat map and a table."""
    c = of_report(b.data, b.n_boot)
    b.keep("interference_matrix", c.matrix)
    b.keep("application_epsilon", c.epsilon)
    b.keep("failure_propagation", c.propagation)
    b.keep("propagation_property", c.property)
    s = Section("applications", "Applications: interference, ε, failure propagation")
    s.text(f"{len(c.apps)} measured applications, highest criticality first: "
           + ", ".join(f"{a.name} ({a.criticality or '–'})" for a in co.by_criticality(c.apps)) + ".")
    s.heading("Failure propagation between criticality levels")
    s.raw(verdict_list(property_lines(c)) if len(c.property) else
          '<p class="note">No fault scenario in these results (fault:&lt;application&gt;:&lt;kind&gt;).</p>')
    s.heading("ε of each application, in the worst case it met")
    s.raw(verdict_list(epsilon_lines(c)))
    if len(c.propagation):
        s.heading("Each fault against each other application")
        s.raw(verdict_list(propagation_lines(c)))
        s.text("Each application is judged in the fault scenario against `all` of the same configuration (every "
               "application, no fault). It is propagated when the fault made it fail, miss deadlines it did not miss "
               "in `all`, or break its ε (or, without ε, grow beyond the CI of `all`); slowed when it grew beyond the "
               "CI of `all` while its ε held; contained otherwise. A verdict a wider CI could change says how many "
               "runs per scenario would settle it (projected at the same effect).")
    for i, cfg in enumerate(dict.fromkeys(c.matrix["configuration"])):
        g = co.grid(c.matrix, cfg, c.apps)
        stat = ", ".join(sorted({f"{a.metric} {a.statistic}" for a in c.apps}))
        crit = {a.name: f"{a.name} ({a.criticality})" if a.criticality else a.name for a in c.apps}
        g = g.rename(index=crit, columns=crit)
        s.figure(b.fig(_heatmap(g, f"who slows whom{_cfg(cfg)}"), f"interference_matrix_{i}",
                       f"Interference matrix{_cfg(cfg)}",
                       f"Row: the application slowed; column: what ran beside it (pair:X+Y, all, all+<scenario>). "
                       f"Cell: its statistic ({stat}) against alone, criticality-ordered (A first)."))
        s.table(matrix_display(c, cfg), f"Interference matrix{_cfg(cfg)}: slowdown against alone [95 % CI]")
    s.text("Slowdown: ratio of the application's statistic beside the others to the same statistic alone, 95 % CI "
           "(median and max: runs, then jobs within runs, resampled, widened for few runs; other quantiles: jobs). "
           "'slowed down': the CI lies above 1 + the application's noise floor (the spread between its alone runs).")
    return s


def _heatmap(g: pd.DataFrame, title: str):
    from .figures import heatmap

    return heatmap(g, title, "slowdown against alone (×)")


def markdown(c: Cohabitation) -> list[str]:
    """summary.md's leading part."""
    out = ["## Applications", "", "### Failure propagation", ""]
    out += [f"- {line}" for _, line in property_lines(c)] or ["_(no fault scenario)_"]
    out += ["", "### ε, worst case", ""] + [f"- {line}" for _, line in epsilon_lines(c)]
    if len(c.propagation):
        out += ["", "### Each fault against each other application", ""] + [f"- {line}" for _, line in propagation_lines(c)]
    for cfg in dict.fromkeys(c.matrix["configuration"]):
        out += ["", f"### Interference matrix{_cfg(cfg)} (row slowed by column, against alone)", "",
                md_table(matrix_display(c, cfg).reset_index())]
    return out + [""]


def console_lines(c: Cohabitation) -> list[str]:
    """The verdicts as rich-markup lines for the terminal (coloured by severity)."""
    colour = {"bad": "red", "warn": "yellow", "": "green"}
    return [f"[{colour[vd.severity(w)]}]{escape(line)}[/]" for w, line in lines(c)]


# --------------------------------------------------------------------------- per application


def application_data(data: ReportData, app: co.Application) -> ReportData:
    """``data`` as one application's results: its jobs only, its ``alone:<A>`` runs named
    solo (the reference every section compares with), the runs it took part in (those in
    which it recorded no job too), and the experiment's victim its own entry (without ε: the
    builder is given it). Made once per loaded results and application: the summary's block
    of the application (summary.application_table) and its sections in the report read this
    one frame, so its cells (tables.cells, memoised on it) are computed once and agree."""
    key = ("application", app.name)
    if key not in data.memo:
        data.memo[key] = _application_data(data, app)
    return data.memo[key]


def _application_data(data: ReportData, app: co.Application) -> ReportData:
    rename = {f"alone:{app.name}": SOLO}

    def own(j: pd.DataFrame) -> pd.DataFrame:
        if j.empty or "application" not in j.columns:
            return j
        j = j[(j["application"] == app.name).to_numpy()].copy()
        for col in ("scenario", "run_id"):
            j[col] = j[col].cat.remove_unused_categories() if hasattr(j[col], "cat") else j[col]
        if hasattr(j["scenario"], "cat"):
            j["scenario"] = j["scenario"].cat.rename_categories(lambda s: rename.get(s, s))
        else:
            j["scenario"] = j["scenario"].replace(rename)
        return j

    measured, warmup = own(data.measured), own(data.warmup)
    ids = set(measured["run_id"].astype(str)) | set(warmup["run_id"].astype(str))
    params = data.parameters
    if len(params) and "applications" in params.columns:
        ids |= {str(r) for r, a in zip(params["run_id"], params["applications"]) if app.name in str(a).split(",")}
    runs = data.runs[data.runs["run_id"].astype(str).isin(ids)].copy()
    runs["scenario"] = runs["scenario"].replace(rename)
    if len(params):
        params = params[params["run_id"].astype(str).isin(ids)].drop(columns=[c for c in APP_LABELS if c in params.columns])
    exp = dict((data.experiment or {}).get("experiment") or {})
    entry = next((dict(a) for a in exp.get("application") or [] if isinstance(a, dict) and a.get("name") == app.name), {})
    entry.pop("epsilon", None)
    exp.update(victim=entry, name=f"{exp.get('name') or data.path.name}/{app.name}")
    exp.pop("application", None)
    return replace(data, runs=runs.reset_index(drop=True), measured=measured, warmup=warmup,
                   experiment={**(data.experiment or {}), "experiment": exp}, parameters=params, memo={})


def ordered(data: ReportData) -> list[co.Application]:
    """The applications present, highest criticality first (the order of their sections)."""
    try:
        decl = declared(data.experiment)
    except UsageError:
        decl = []
    apps = co.applications(data.measured, decl)
    present = set(str(x) for x in data.measured["application"].unique())
    return co.by_criticality([a for a in apps if a.name in present])
