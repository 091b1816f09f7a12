"""The per-scenario summary table printed at the end of `xtalk run` and written as
summary.md and summary.json in the results directory."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
from rich.console import Console
from rich.table import Table

from .. import output, safepath
from ..units import rate_text
from ..analysis import guards
from ..analysis import verdict as vd
from ..analysis.cells import runs_of, summary_view
from ..errors import UsageError
from ..store import run_outcome, run_outcomes
from ..store import Results
from ..store.frames import ReportData, load
from . import cohabitation
from ..results import tables as tb


def _f(x: float, nd: int = 3) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{nd}f}"


def ci_text(p: float, lo: float, hi: float) -> str:
    """A slowdown as the summary prints it: `1.20 [1.08, 1.27]`, the estimate alone without a
    CI, `–` without an estimate."""
    if isinstance(lo, float) and math.isnan(lo):
        return _f(p, 2)
    return f"{p:.2f} [{lo:.2f}, {hi:.2f}]"


def _ci(row, stat: str) -> str:
    p, lo, hi = (getattr(row, f"slowdown_{stat}{k}") for k in ("", "_lo", "_hi"))
    reference = row.scenario == "solo" or str(row.scenario).split(" · ")[-1].startswith("alone:")
    if stat == "max" and not reference and row.runs_ok < guards.MIN_RUNS_FOR_MAX:
        return f"– ({row.runs_ok} runs)"  # guards: too few runs for a maximum (the value stays in summary.json)
    return ci_text(p, lo, hi)


def enemy_rates(runs: pd.DataFrame) -> dict[tuple[str, str], str]:
    """Per (configuration, scenario): each enemy kind's mean achieved rate over the victim's
    window, and where this machine's peaks are saved, its copies' share of their channel's
    peak (peaks.py)."""
    out = {}
    peaks, env = _peak_context(runs)
    for s, g in runs.groupby(["configuration", "scenario"]):
        acc: dict[tuple[str, str], list[float]] = {}
        copies: dict[tuple[str, str], int] = {}
        names: dict[tuple[str, str], str] = {}
        asked: dict[tuple[str, str], list[float]] = {}
        for enemies in g.enemies:
            counted: dict[tuple[str, str], int] = {}
            for e in enemies or []:
                if e.get("window_rate") is not None:
                    acc.setdefault((e["kind"], e["unit"]), []).append(e["window_rate"])
                    counted[(e["kind"], e["unit"])] = counted.get((e["kind"], e["unit"]), 0) + 1
                    names.setdefault((e["kind"], e["unit"]), e["name"])
                    if e.get("target_rate"):  # held at a rate (`load`, `rate`): what it was asked
                        asked.setdefault((e["kind"], e["unit"]), []).append(e["target_rate"])
            for k, n in counted.items():
                copies[k] = max(copies.get(k, 0), n)
        parts = []
        for (kind, unit), rates in acc.items():
            mean = sum(rates) / len(rates)
            sh = _share(kind, mean, unit, copies.get((kind, unit), 1), names[(kind, unit)], g, peaks, env)
            want = asked.get((kind, unit))
            goal = _share(kind, sum(want) / len(want), unit, copies.get((kind, unit), 1), names[(kind, unit)], g, peaks,
                          env) if sh and want else None
            parts.append(f"{kind} {rate_text(mean, unit)}" + (f" ({sh.text()}" + (f"; asked {goal.percent:.0f} %" if goal else "")
                                                               + ")" if sh else ""))
        out[s] = ", ".join(parts)
    return out


def _peak_context(runs: pd.DataFrame):
    """The saved peaks of the machine the runs were measured on (None when none) and its
    facts, from the first run.json: the report may be written on another host."""
    from .. import peaks as pk

    for meta in run_outcomes(runs):
        if meta is None or meta.environment is None:
            continue
        env = meta.environment.model_dump()
        try:
            return pk.load(env), env
        except UsageError:  # a stale peak file: the rates stand without percentages
            return None, env
    return None, {}


def _share(kind, rate, unit, copies, name, runs: pd.DataFrame, peaks, env):
    """An enemy kind's share of its channel's peak; its footprint (a chase's level) from
    the scenario's first plan."""
    from .. import catalog, peaks as pk

    if peaks is None:
        return None
    footprint, params, k = None, None, catalog.current().kinds.get(kind)
    if k is not None and (k.footprint_params or kind in pk.OFF_CHANNEL):
        meta = run_outcome(runs.dir.iloc[0]) if "dir" in runs else None
        load = next((e.load for e in (meta.plan.enemies if meta and meta.plan else []) if e.name == name), None)
        params = load.model_dump() if load is not None else None
        footprint = k.footprint(params) if params is not None and k.footprint_params else None
    return pk.share(kind, rate, peaks, unit, copies, footprint, pk.caches_of(env), params)


def enemy_shares(runs: pd.DataFrame, path: Path) -> dict[tuple[str, str], list[dict]]:
    """Per (configuration, scenario): each enemy's mean rate over the victim's window against
    its rate alone (enemy_alone.py; None when it was not measured), for the guards."""
    from ..enemy_alone import recorded

    alone = {(r["configuration"], r["scenario"], r["enemy"]): r["rate"] for r in recorded(path)}
    out: dict[tuple[str, str], list[dict]] = {}
    if "enemies" not in runs:
        return out
    for (cfg, scn), g in runs.groupby(["configuration", "scenario"]):
        acc: dict[str, tuple[str, list[float]]] = {}
        for enemies in g.enemies:
            for e in enemies or []:
                if e.get("window_rate") is not None:
                    acc.setdefault(e["name"], (e["unit"], []))[1].append(e["window_rate"])
        out[(cfg, scn)] = [{"enemy": n, "unit": u, "achieved": sum(v) / len(v), "alone": alone.get((cfg, scn, n))}
                           for n, (u, v) in acc.items()]
    return out


COLUMNS = [("scenario", "scenario"), ("runs", "runs ok"), ("jobs", "jobs"), ("median_response_ms", "median resp ms"),
           ("p99_response_ms", "p99 resp ms"), ("max_response_ms", "max resp ms"), ("max_exec_ms", "max exec ms"),
           ("deadline_misses", "misses"), ("slowdown_median", "slowdown median [95% CI]"),
           ("slowdown_max", "slowdown max [95% CI]")]


def _name(row) -> str:
    return row.scenario if row.configuration == "default" else f"{row.configuration} / {row.scenario}"


def _cells(row) -> list[str]:
    name = _name(row)
    return [name, f"{row.runs_ok}/{row.runs}", str(row.jobs), _f(row.median_response_ms), _f(row.p99_response_ms),
            _f(row.max_response_ms), _f(row.max_exec_ms), str(row.deadline_misses), _ci(row, "median"), _ci(row, "max")]


def skipped_configurations(results: Results) -> list[dict]:
    """The configurations `xtalk run --skip-unavailable` left out, each with its reason (from
    experiment.json): they have no run, yet the summary must say they were asked for."""
    from ..store.check import experiment_doc

    doc = experiment_doc(results.path)
    return [s for s in doc.get("skipped_configurations") or [] if isinstance(s, dict) and s.get("configuration")]


def skipped_cells(skipped: dict) -> list[str]:
    """A summary row for a skipped configuration: its name, "skipped", the reason, no numbers."""
    return [f"{skipped['configuration']} / (all)", "skipped", *["–"] * (len(COLUMNS) - 3),
            f"skipped: {skipped.get('reason') or 'unavailable'}"]


#: Jobs per bootstrap replicate of a summary's slowdown CIs: the report's (results/tables.py),
#: since both read the same cells. Uncapped, 10^7 jobs meant 2000 replicates of 5·10^6 draws each.
BOOT_JOBS = tb.BOOT_JOBS


def summary_table(results: Results, data: ReportData | None = None, floor: float = math.nan) -> pd.DataFrame:
    """The summary as a DataFrame (the Python API behind the table): the experiment's cells
    (results/tables.cells, the table the report's slowdown, misses and verdicts read) in the
    summary's columns, with enemy rates and guards; with several measured applications, one
    block per application (:func:`application_table`). ``data``: the results already loaded
    (the report passes its own, so the cells are computed once). Its ``warnings`` are the
    guards every output shows: the report computes them here too (build.result_guards),
    with ``floor``, the A/A noise floor of the median execution time it shows beside its
    words (the terminal and summary.json have none measured: the rule then reads it as 0)."""
    runs = results.runs() if data is None else data.runs
    # The report's narrow loader (labels as categoricals): Results.jobs() (every column,
    # string labels) took 8 GB at 10^7 jobs when the report computed the guards.
    data = load(results.path, runs) if data is None else data
    if cohabitation.is_multi(data.measured):
        return application_table(data)
    table = summary_view(tb.cells(data))
    rates = enemy_rates(runs)
    table["enemy_rate"] = [rates.get((c, s), "") for c, s in zip(table.configuration, table.scenario)]
    from . import victim_kinds as vk

    tasks = vk.task_table(runs) if vk.kind_of(runs) == "taskset" else None
    fired = guards.check(table, victims(runs), enemies=enemy_shares(runs, results.path), min_effect=min_effect(data),
                         tasks=tasks, spreads=solo_spreads(data), floor=floor)
    table["warnings"] = [[g.to_dict() for g in fired if (g.configuration, g.scenario) == (c, s)]
                         for c, s in zip(table.configuration, table.scenario)]
    cols = ["configuration"] + [c for c in table.columns if c != "configuration"]
    return table[cols]


def solo_spreads(data: ReportData) -> dict[str, float]:
    """Each configuration's run-to-run spread of the solo median (the coefficient of
    variation of its solo runs' median execution times, feasibility.noise_floor's), where it
    has two solo runs or more: what the `ci_too_wide` guard sizes its repetitions by, as the
    end-of-run line of `xtalk run` does. Kept per ReportData: the report's guards and its
    verdicts.json each compute the summary's table (100 medians of 10^5 jobs at 10^7 jobs)."""
    memo = getattr(data, "memo", None)
    if memo is None:
        return _solo_spreads(data)
    if "_solo_spreads" not in memo:
        memo["_solo_spreads"] = _solo_spreads(data)
    return dict(memo["_solo_spreads"])


def _solo_spreads(data: ReportData) -> dict[str, float]:
    import statistics

    m = data.measured
    if not len(m) or "exec_ns" not in m:
        return {}
    solo = np.flatnonzero((m["scenario"] == SOLO_NAME).to_numpy())
    col = m["exec_ns"]
    if isinstance(col.dtype, np.dtype) and col.dtype.kind in "iuf":
        # Each run's values taken from the column as it is, then as floats (not a float copy
        # of every job's: 80 MB at 10^7 jobs).
        raw = col.to_numpy()
        values = lambda pos: raw[pos].astype(float)  # noqa: E731
    else:
        v = col.to_numpy(dtype=float, na_value=np.nan)
        values = lambda pos: v[pos]  # noqa: E731
    out = {}
    # Each run's median from its rows' positions (cells.runs_of: the groupby's runs, no frame
    # per configuration and run; np.median of a run's values is the groupby's median).
    for cfg, ix in runs_of(m["configuration"], solo):
        med = []
        for _, pos in runs_of(m["run_id"], ix):
            x = values(pos)
            x = x[~np.isnan(x)]
            if x.size:
                med.append(float(np.median(x)))
        if len(med) > 1 and statistics.fmean(med) > 0:
            out[str(cfg)] = statistics.stdev(med) / statistics.fmean(med)
    return out


def min_effect(data: ReportData) -> float:
    """The experiment's `min_effect` (analysis/verdict.min_effect), its default where it gives none."""
    return vd.min_effect(data.experiment)


def application_table(data: ReportData) -> pd.DataFrame:
    """The summary of several applications, highest criticality first: each application's
    cells (results/tables.cells of report/cohabitation.application_data, the frame and the
    table its sections in the report read) over the scenarios it ran in, its slowdown
    against its own ``alone:<A>`` runs, its guards (those about a scenario but the
    too-few-runs-for-max one, which the max column already shows; the solo guards need the
    one victim's plan), the scenario shown as ``<A> · <scenario>``."""
    parts = []
    for app in cohabitation.ordered(data):
        t = summary_view(tb.cells(cohabitation.application_data(data, app)))
        alone = f"alone:{app.name}"
        # The max column already says "(3 runs)": one line per scenario and application would bury the verdicts.
        # Its alone runs are the reference and checked as one (misses, tail).
        fired = [g for g in guards.check(t, {}, min_effect=min_effect(data)) if g.kind != guards.Kind.TOO_FEW_RUNS_FOR_MAX]
        shown = [f"{app.name} · {alone if s == SOLO_NAME else s}" for s in t["scenario"]]
        t["warnings"] = [[{**g.to_dict(), "scenario": n} for g in fired if (g.configuration, g.scenario) == (c, s)]
                         for c, s, n in zip(t["configuration"], t["scenario"], shown)]
        t["scenario"] = shown
        t["enemy_rate"] = ""
        parts.append(t.assign(application=app.name))
    table = pd.concat(parts, ignore_index=True)
    cols = ["configuration", "application"] + [c for c in table.columns if c not in ("configuration", "application")]
    return table[cols]


def application_times(table: pd.DataFrame) -> pd.DataFrame | None:
    """Several measured applications under several configurations: each application's
    median execution time (its step, for an AOCS instance) per scenario, one column per
    configuration, so the configurations compare side by side (seed 000 §5.3.1: shared
    against duplicated files, per instance). None for one application or one configuration."""
    if "application" not in table or table["configuration"].nunique() < 2:
        return None
    t = table.assign(scenario=[s.split(" · ", 1)[-1] for s in table["scenario"]])
    # A step of a few µs (an AOCS step on x86) reads badly in ms.
    unit, scale = ("µs", 1e3) if t["median_exec_ms"].max() < 1 else ("ms", 1.0)
    wide = t.pivot_table(index=["application", "scenario"], columns="configuration", values="median_exec_ms",
                         aggfunc="first", sort=False) * scale
    wide.columns = [f"{c} median exec {unit}" for c in wide.columns]
    wide = wide.round(3).reset_index()
    apps = list(dict.fromkeys(t["application"]))
    order = sorted(range(len(wide)), key=lambda i: (apps.index(wide["application"].iat[i]),
                                                    _by_company(wide["scenario"].iat[i])))
    return wide.iloc[order].reset_index(drop=True)


def _by_company(scenario: str) -> tuple[int, str]:
    """Alone first, then `first:<k>` by k, then `all`, then the others by name."""
    if scenario.startswith("alone:") or scenario == SOLO_NAME:
        return 0, ""
    if scenario.startswith("first:") and scenario[6:].isdigit():
        return int(scenario[6:]), ""
    return (10**6, "") if scenario == "all" else (10**6 + 1, scenario)


#: The reference scenario of the cells (an application's `alone:<A>` runs are named so).
SOLO_NAME = "solo"


def victims(runs: pd.DataFrame) -> dict[str, dict]:
    """Each configuration's victim as its first run's plan gives it (period, deadline, sched)."""
    out: dict[str, dict] = {}
    for cfg, d in zip(runs.get("configuration", []), runs.get("dir", [])):
        if cfg not in out:
            meta = run_outcome(d)
            out[cfg] = meta.plan.victim.model_dump() if meta and meta.plan else {}
    return out


def warning_lines(table: pd.DataFrame) -> list[str]:
    """The guards that fired, one line each ("scenario: what is wrong; what to change")."""
    return [guards.Guard(guards.Kind(w["kind"]), w["configuration"], w["scenario"], w["message"]).line()
            for ws in table.get("warnings", []) for w in ws]


def to_markdown(table: pd.DataFrame, title: str, skipped: list[dict] = (), warned: list[str] | None = None) -> str:
    """summary.md's table and warnings (``warned``: the lines to list, the table's guards by default)."""
    lines = [f"# {title}", "", "Slowdown: ratio of execution-time statistics against `solo`, 95 % bootstrap CI over runs and jobs.", "",
             "| " + " | ".join(h for _, h in COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for row in table.itertuples():
        lines.append("| " + " | ".join(_cells(row)) + " |")
    for sk in skipped:
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in skipped_cells(sk)) + " |")
    lines += [""] + [f"- enemies in `{_name(row)}`: {row.enemy_rate} (achieved over the victim's window, per copy)"
                     for row in table.itertuples() if row.enemy_rate]
    warned = warning_lines(table) if warned is None else warned
    if warned:
        lines += ["", "## Warnings", ""] + [f"- {w}" for w in warned]
    return "\n".join(lines) + "\n"


def write_summary(results: Results, console: Console | None = None, *, recap: bool = True,
                  command: list[str] | None = None) -> pd.DataFrame:
    """Compute the summary, print it, and write summary.md, summary.json and verdicts.json
    (report/verdicts.py): the terminal's warnings, summary.md's and the document's are one
    list (:func:`document_warnings`). ``recap``: print the run-time notices experiment.json
    keeps (`xtalk run` printed them as they came, so it passes False). The verdict document
    is returned in the table's ``attrs["verdicts"]``."""
    from . import victim_kinds as vk
    from . import verdicts as vdoc

    runs = results.runs()
    data = load(results.path, runs)  # one load: the table, the guards and the applications' verdicts read it
    table = summary_table(results, data)
    skipped = skipped_configurations(results)
    title = results.path.name
    declared_lines, probe_table = _declared(data, runs, table)
    verdict_rows = victim_verdicts(data, runs)
    epsilon_lines = [(r.status, r.verdict) for r in verdict_rows.itertuples()] if verdict_rows is not None else []
    cohab = applications(data)
    doc, notices, guard_warnings = _document(results, data, table, skipped, verdict_rows, cohab, command)
    table.attrs["verdicts"] = doc
    kind = vk.kind_of(runs)
    own = vk.kind_summary(kind, runs, results.jobs() if kind == "latency" else pd.DataFrame())
    console = output.of(console)  # -q: the verdicts, warnings and the results path only
    if console is not None:  # printed first: a full disk must not cost the table
        if not vk.replaces_generic(kind):
            t = Table(title=title)
            for _, h in COLUMNS:
                t.add_column(h, justify="left" if h == "scenario" else "right")
            for row in table.itertuples():
                t.add_row(*_cells(row))
            for sk in skipped:  # the reason is a paragraph: below the table, not in a column
                t.add_row(*skipped_cells(sk)[:-1], "skipped (below)", style="yellow")
            console.print(t)
            for w in guard_warnings:  # the reasons, right below the table's rows that name them
                if w["kind"] == "configuration_skipped":
                    console.warning(f"[yellow]{w['line']}[/]", highlight=False)
        if own is not None:
            console.print(_rich(own[1], f"{title}: {own[0]}"))
            for line in own[2]:
                console.print(line, highlight=False)
        for row in table.itertuples():
            if row.enemy_rate:
                console.print(f"  enemies in {_name(row)}: {row.enemy_rate} per copy, over the victim's window")
        for line in declared_lines:
            console.print(line, highlight=False)
        for status, line in epsilon_lines:
            console.verdict(f"[bold]{status}[/]: {line}", highlight=False)
        if probe_table is not None:
            console.print(_rich(probe_table, f"{title}: probes (median duration, its slowdown against "
                                             f"{'the application alone' if 'applications' in runs.columns else 'solo'})"))
        shown = [w for w in (notices if recap else []) + guard_warnings  # left out: said on stderr as the store
                 if w["kind"] not in ("runs_left_out", "configuration_skipped")]  # read them; below the table
        for line in vdoc.printed_lines(shown):
            console.warning(f"[yellow]warning: {line}[/]", highlight=False)
        if (times := application_times(table)) is not None:
            console.print(_rich(times, f"{title}: each application's median execution time per configuration"))
    if console is not None:
        for line in cohabitation.console_lines(cohab) if cohab is not None else ():
            console.verdict(line, highlight=False)
        console.result(f"results: {results.path}")
    warned = vdoc.printed_lines(doc["warnings"])
    md = to_markdown(table, title, skipped, warned)
    if epsilon_lines:
        md += "\n## ε\n\n" + "".join(f"- {status}: {line}\n" for status, line in epsilon_lines)
    if declared_lines or probe_table is not None:
        from .markdown import md_table

        md += "".join(f"\n{line}\n" for line in declared_lines)
        md += "\n## Probes\n\n" + md_table(probe_table) + "\n" if probe_table is not None else ""
    if (times := application_times(table)) is not None:
        from .markdown import md_table

        md += "\n## Median execution time per configuration\n\n" + md_table(times) + "\n"
    if cohab is not None:  # the applications' verdicts lead
        head, rest = md.split("\n", 1)
        md = head + "\n\n" + "\n".join(cohabitation.markdown(cohab)) + rest
    if own is not None:
        from .markdown import md_table

        part = f"\n## {own[0]}\n\n" + md_table(own[1]) + "".join(f"\n{line}\n" for line in own[2])
        if vk.replaces_generic(kind):  # the generic slowdown table would mislead: keep its warnings only
            md = f"# {title}\n" + part + ("\n## Warnings\n\n" + "".join(f"- {w}\n" for w in warned) if warned else "")
        else:
            md += part
    if results.left_out:  # damaged runs the store left out (store/check.py): said here as in the terminal
        md += "\n## Runs left out\n\n" + "".join(f"- `{run}`: {why}\n" for run, why in results.left_out.items())
    safepath.write_text(results.path / "summary.md", md)
    safepath.write_text(results.path / "summary.json", json.dumps(json.loads(table.to_json(orient="records")), indent=2))
    vdoc.write(results.path, doc)
    return table


def _document(results: Results, data: ReportData, table: pd.DataFrame, skipped: list[dict], verdict_rows, cohab,
              command: list[str] | None = None) -> tuple[dict, list[dict], list[dict]]:
    """The verdict document of an experiment, with its two lists of warnings (:func:`document_warnings`)."""
    from . import verdicts as vdoc

    notices, guard_warnings = document_warnings(results, table, skipped)
    doc = vdoc.document("experiment", results.path.name, results.path, _doc_cells(table, data, verdict_rows, cohab),
                        notices + guard_warnings, environment=vdoc.environment_of(data.runs), command=command)
    return doc, notices, guard_warnings


def verdicts_document(results: Results, data: ReportData | None = None) -> dict:
    """The experiment's verdict document (report/verdicts.py) as `xtalk summary` writes it,
    nothing printed: what `xtalk report` rewrites from the data it loaded."""
    data = load(results.path, results.runs()) if data is None else data
    table = summary_table(results, data)
    return _document(results, data, table, skipped_configurations(results), victim_verdicts(data, data.runs),
                     applications(data))[0]


def document_warnings(results: Results, table: pd.DataFrame, skipped: list[dict] = ()) -> tuple[list[dict], list[dict]]:
    """Every warning of the summary, as the verdict document holds them and the terminal
    prints them (one line each): the run-time notices `xtalk run` kept in experiment.json
    (failed runs, feasibility and noise warnings, an enemy's note), the skipped
    configurations, the runs left out as damaged, then the guards of the table's rows:
    (the notices kept, the others)."""
    from ..store.check import experiment_doc
    from . import verdicts as vdoc

    kept = experiment_doc(results.path).get("warnings")
    text = lambda v: None if v is None else str(v)  # noqa: E731
    notices = [vdoc.warning(str(w["kind"]), str(w.get("message") or w["line"]), text(w.get("configuration")),
                            text(w.get("scenario")), line=str(w["line"])) for w in (kept if isinstance(kept, list) else [])
               if isinstance(w, dict) and w.get("kind") in vdoc.NOTICE_KINDS and w.get("line")]  # damaged entries left out
    later = [vdoc.warning("configuration_skipped", sk.get("reason") or "unavailable", sk["configuration"],
                             line=f"configuration {sk['configuration']} skipped: {sk.get('reason') or 'unavailable'}")
                for sk in skipped]
    later += [vdoc.warning("runs_left_out", str(why), line=f"run {run} left out: {why}")
                for run, why in (results.left_out or {}).items()]
    guard_warnings = [vdoc.warning(w["kind"], w["message"], w["configuration"], w["scenario"],
                                   application=w.get("application"),
                                   line=guards.Guard(guards.Kind(w["kind"]), w["configuration"], w["scenario"], w["message"]).line())
                      for ws in table.get("warnings", []) for w in ws]
    return notices, later + guard_warnings


def _doc_cells(table: pd.DataFrame, data: ReportData, verdict_rows: pd.DataFrame | None, cohab) -> list[dict]:
    """The verdict document's cells: the table's rows, each victim ε verdict (the ones the
    terminal's ε lines say) and status beside its cell, several applications' ε verdicts
    beside the scenario they were judged on."""
    from . import verdicts as vdoc

    eps = tb.epsilon_table(data) if verdict_rows is not None else None
    cells = vdoc.experiment_cells(table, eps)
    status = {(str(r.configuration), str(r.scenario)): r.status for r in verdict_rows.itertuples()} \
        if verdict_rows is not None else {}
    for c in cells:
        c["status"] = status.get((c["configuration"], c["scenario"]))
    for r in (cohab.epsilon.to_dict("records") if cohab is not None else []):
        ratio = vdoc.finite_or_none(r.get("ratio"))
        record = {"bound": str(r.get("bound")), "metric": r.get("metric"), "statistic": r.get("statistic"),
                  "bound_kind": "relative" if ratio is not None else "absolute", "relative": None, "bound_ms": None,
                  "verdict": r.get("verdict"),
                  "observed": {"value": vdoc.ms_or_none(r.get("observed_ns")), "ci_low": vdoc.ms_or_none(r.get("ci_low_ns")),
                               "ci_high": vdoc.ms_or_none(r.get("ci_high_ns")), "unit": "ms"},
                  "ratio": {"value": ratio, "ci_low": vdoc.finite_or_none(r.get("ratio_low")), "ci_high": vdoc.finite_or_none(r.get("ratio_high"))}
                  if ratio is not None else None, "level": vdoc.LEVEL}
        if record["verdict"] not in vd.VERDICTS:
            continue
        mine = [c for c in cells if c["application"] == r.get("application") and c["configuration"] == str(r.get("configuration"))]
        at = [c for c in mine if c["scenario"].split(" · ", 1)[-1] == str(r.get("scenario"))] or mine[:1]
        for c in at:
            c["epsilon"].append(record)
    return cells


def victim_epsilon_lines(data: ReportData, runs: pd.DataFrame) -> list[tuple[str, str]]:
    """(status, verdict) per scenario for a victim whose file declares `epsilon`, as `xtalk
    report` prints them (results/tables.verdicts); none otherwise."""
    rows = victim_verdicts(data, runs)
    return [] if rows is None else [(r.status, r.verdict) for r in rows.itertuples()]


def victim_verdicts(data: ReportData, runs: pd.DataFrame) -> pd.DataFrame | None:
    """results/tables.verdicts for a victim whose file declares `epsilon`, else None."""
    from ..results import epsilon as eps

    if "applications" in runs.columns or not eps.from_experiment(data.experiment):
        return None
    if not tb.groups(data):  # every job a warm-up one (or none): nothing to judge, the table says 0 jobs
        return None
    return tb.verdicts(data)


def _declared(data: ReportData, runs: pd.DataFrame, table: pd.DataFrame) -> tuple[list[str], pd.DataFrame | None]:
    """What a command's jobs are and its whole-process time (lines), and its probes per cell
    (a table for the console and summary.md); adds `probes`, `process_ms` and
    `process_cpu_ms` to `table` (summary.json) where they exist."""
    from . import declared, portfolio

    several = "applications" in runs.columns
    lines = [(f"{name}: " if several else "") + declared.jobs_sentence(jf) for name, jf in declared.jobs_from_of(runs).items()]
    proc = declared.process_times(runs)
    if not proc.empty and not table.empty:
        at = {(r.configuration, r.scenario): r for r in proc.itertuples()}
        table["process_ms"] = [getattr(at.get((c, s)), "process_ms", None) for c, s in zip(table.configuration, table.scenario)]
        table["process_cpu_ms"] = [getattr(at.get((c, s)), "process_cpu_ms", None)
                                   for c, s in zip(table.configuration, table.scenario)]
        from .victim_kinds import victim_plan

        victim = victim_plan(runs)
        attached = victim is not None and getattr(victim.body, "kind", None) == "attach"
        what = "watched window (the attached process; not a job)" if attached else "whole process (exec to exit; not a job)"
        lines.append(f"{what}: median " + ", ".join(
            f"{r.scenario} {r.process_ms:.1f} ms" + (f" ({r.configuration})" if r.configuration != "default" else "")
            for r in proc.itertuples()))
    if several:  # each application's probes, against it alone
        names = list(dict.fromkeys(n for a in runs["applications"] for n in str(a).split(",") if n))
        parts = [portfolio.probe_statistics(data, n).assign(application=n) for n in names
                 if not portfolio.probes(data, n).empty]
        if not parts:
            return lines, None
        st = pd.concat(parts, ignore_index=True)
        st["name"] = st["application"] + " · " + st["name"]
    elif portfolio.probes(data).empty:
        return lines, None
    else:
        st = portfolio.probe_statistics(data)
    order = {sc: i for i, sc in enumerate(dict.fromkeys([SOLO_NAME, *sorted(st.scenario, key=lambda x: not x.startswith("alone:")),
                                                         *table.get("scenario", [])]))}
    st = st.sort_values(["configuration", "scenario", "probe"], key=lambda c: c.map(order).fillna(len(order))
                        if c.name == "scenario" else c, kind="stable").reset_index(drop=True)
    if not table.empty:
        recs = declared.probe_records(st)
        table["probes"] = [recs.get((c, s), []) for c, s in zip(table.configuration, table.scenario)]
    shown = pd.DataFrame({"scenario": st.scenario + np.where(st.configuration == "default", "", " (" + st.configuration + ")"),
                          "probe": st.name, "n": st.n, "median µs": st.median_us.round(1),
                          "slowdown median [95% CI]": [ci_text(p, lo, hi) if p == p else "–" for p, lo, hi in
                                                       zip(st.slowdown_median, st.slowdown_median_lo, st.slowdown_median_hi)]})
    return lines, shown


def applications(data: ReportData):
    """The verdicts of several measured applications (report/cohabitation.py), or None when
    the results hold one (its summary stays the table above): the report's computation
    (cohabitation.of_report, its ``n_boot``), so summary.md and the report say the same."""
    if not cohabitation.is_multi(data.measured):
        return None
    return cohabitation.of_report(data, N_BOOT)


#: Bootstrap replicates of the applications' verdicts: `xtalk report`'s (build's ``n_boot``).
N_BOOT = 2000


def _rich(df: pd.DataFrame, title: str) -> Table:
    """A DataFrame as a rich table (cells as the report formats them)."""
    from .html import fmt

    t = Table(title=title)
    for c in df.columns:
        t.add_column(str(c), justify="right" if pd.api.types.is_numeric_dtype(df[c]) else "left")
    for row in df.itertuples(index=False):
        t.add_row(*(fmt(v) for v in row))
    return t
