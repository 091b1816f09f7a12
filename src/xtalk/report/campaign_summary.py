"""The campaign summary: one row per cell (campaign_cells.cell_table) with its slowdown, its
ε verdict and its guards, printed by `xtalk summary DIR` (which `campaign run` and `resume`
name when they end) and written as DIR/summary.md and DIR/summary.json; the campaign report
writes the same Markdown."""

from __future__ import annotations

import json
import math
from collections import OrderedDict
from pathlib import Path

import pandas as pd
from rich.console import Console
from rich.table import Table

from .. import safepath
from ..analysis import verdict as vd
from . import boards as bd
from ..results import campaign_cells as cc

#: (column, header) of the terminal and Markdown tables.
COLUMNS = [("group", "group"), ("scenario", "scenario"), ("runs", "runs ok"), ("jobs", "jobs"),
           ("exec_median_ms", "median exec ms"), ("response_p99_ms", "p99 resp ms"), ("misses", "misses"),
           ("slowdown", "slowdown median [95% CI]"), ("eps", "ε verdict")]
#: A guard firing on more cells than this is summarised in one line (the cells keep it each).
MANY = 4


def _f(x, nd: int = 3) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{nd}f}"


def _slowdown(r) -> str:
    if r.scenario == "solo":
        return "1 (reference)"
    p, lo, hi = r.exec_slowdown_median, r.exec_slowdown_median_lo, r.exec_slowdown_median_hi
    if isinstance(p, float) and math.isnan(p):
        return "–"
    return f"{p:.2f}" if isinstance(lo, float) and math.isnan(lo) else f"{p:.2f} [{lo:.2f}, {hi:.2f}]"


def eps_text(verdict: str, ratio: float, observed_ms: float) -> str:
    """``holds ×1.21`` (relative ε) or ``violated 3.412 ms`` (absolute)."""
    return f"{verdict} ×{ratio:.2f}" if ratio == ratio else f"{verdict} {observed_ms:.3f} ms"


def _eps(r) -> str:
    if r.eps_verdict in vd.VERDICTS:
        return eps_text(r.eps_verdict, r.eps_ratio, r.eps_observed_ms)
    return "–" if r.scenario == "solo" else str(r.eps_verdict)


def cells_view(cells: pd.DataFrame) -> list[list[str]]:
    """The summary's rows as text cells (terminal and Markdown)."""
    return [[str(r.group), str(r.scenario), f"{r.runs_ok}/{r.runs}", str(r.jobs), _f(r.exec_median_ms),
             _f(r.response_p99_ms), f"{r.deadline_misses} ({r.serious_misses} serious)", _slowdown(r), _eps(r)]
            for r in cells.itertuples()]


def guard_lines(cells: pd.DataFrame) -> list[str]:
    """The guards that fired, one line each; a guard that fires on more than ``MANY`` cells
    in one line with the number of cells and the first one's advice."""
    by_kind: OrderedDict[str, list[dict]] = OrderedDict()
    for ws in cells.get("warnings", []):
        for w in ws:
            by_kind.setdefault(w["kind"], []).append(w)
    out = []
    for kind, ws in by_kind.items():
        if len(ws) > MANY:
            first = ws[0]
            out.append(f"{kind.replace('_', ' ')} on {len(ws)} cells (e.g. {first['configuration']} / {first['scenario']}): "
                       f"{first['message']}")
        else:
            out += [f"{w['configuration']} / {w['scenario']}: {w['message']}" for w in ws]
    return out


def epsilon_line(cells: pd.DataFrame) -> str:
    """How many cells hold, violate, are inconclusive against their application's ε."""
    c = cells[cells["scenario"] != "solo"]
    counts = c["eps_verdict"].value_counts()
    order = (vd.VIOLATED, vd.INCONCLUSIVE, vd.HOLDS)
    parts = [f"{int(counts.get(k, 0))} {k}" for k in order if counts.get(k, 0)]
    rest = int(len(c) - sum(int(counts.get(k, 0)) for k in order))
    if rest:
        why = sorted(set(c["eps_verdict"]) - set(order))
        parts.append(f"{rest} without a verdict ({', '.join(why)})")
    bounds = sorted({e for e in c["epsilon"] if e})
    return f"ε ({'; '.join(bounds) or 'none given'}): " + ", ".join(parts) + f" of {len(c)} cells"


def to_markdown(cells: pd.DataFrame, title: str, boards: str = "", left_out: dict | None = None) -> str:
    """summary.md: the cell table, the warnings, then a lab campaign's boards section
    (report/boards.py: ``boards`` is its markdown), then the runs the store left out (damaged,
    settings drifted, or a board's settings not the declared ones) with why."""
    lines = [f"# {title}", "", "One row per cell (application × configuration × variant × scenario). Slowdown: ratio of "
             "median execution times against the solo of the same group, 95 % CI (runs, then jobs, resampled).", "",
             epsilon_line(cells), "",
             "| " + " | ".join(h for _, h in COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in cells_view(cells)]
    warned = guard_lines(cells)
    if warned:
        lines += ["", "## Warnings", ""] + [f"- {w}" for w in warned]
    if boards:
        lines += ["", boards.rstrip("\n")]
    if left_out:
        lines += ["", "## Runs left out", ""] + [f"- `{run}`: {why}" for run, why in left_out.items()]
    return "\n".join(lines) + "\n"


def to_json(cells: pd.DataFrame) -> str:
    """Every column of every cell, warnings as lists of {kind, configuration, scenario, message}."""
    return json.dumps(json.loads(cells.to_json(orient="records")), indent=2)


def document_warnings(cells: pd.DataFrame) -> list[dict]:
    """The warnings as the terminal prints them (:func:`guard_lines`: one line per guard, or
    per kind firing on many cells), for the verdict document; each cell keeps its own too."""
    from . import verdicts as vdoc

    by_kind: OrderedDict[str, list[dict]] = OrderedDict()
    for ws in cells.get("warnings", []):
        for w in ws:
            by_kind.setdefault(w["kind"], []).append(w)
    out = []
    for kind, line in zip([k for k, ws in by_kind.items() for _ in (ws[:1] if len(ws) > MANY else ws)], guard_lines(cells)):
        ws = by_kind[kind]
        one = ws[0] if len(ws) > MANY else next(w for w in ws if line == f"{w['configuration']} / {w['scenario']}: {w['message']}")
        many = len(ws) > MANY
        out.append(vdoc.warning(kind, one["message"], None if many else one["configuration"], None if many else one["scenario"],
                                line=line))
    return out


def write_campaign_summary(path, console: Console | None = None, *, n_boot: int = 1000) -> pd.DataFrame:
    """Compute the cell table, print it, write summary.md, summary.json and verdicts.json in
    the campaign directory; returns the table (empty when no run has jobs yet), the verdict
    document in its ``attrs["verdicts"]``."""
    from . import verdicts as vdoc
    path = Path(path)
    cd = cc.load_campaign(path)
    cells = cc.cell_table(cd, n_boot=n_boot)
    if cells.empty:
        if console is not None:
            console.print(f"{path}: no finished run with jobs yet: no summary")
        return cells
    left_out = dict(cd.data.left_out or {})  # said on stderr as the store read them; kept in the documents
    doc = vdoc.document("campaign", cd.name, path, vdoc.campaign_cells(cells), document_warnings(cells) + [
        vdoc.warning("runs_left_out", str(why), line=f"run {run} left out: {why}") for run, why in left_out.items()],
        environment=_environment(cd))
    cells.attrs["verdicts"] = doc
    if console is not None:  # printed first: a full disk must not cost the table
        t = Table(title=f"{cd.name}: {len(cells)} cells")
        for _, h in COLUMNS:
            t.add_column(h, justify="left" if h in ("group", "scenario", "ε verdict") else "right")
        for row in cells_view(cells):
            t.add_row(*row)
        console.print(t)
        console.print(epsilon_line(cells), highlight=False)
        for line in vdoc.printed_lines([w for w in doc["warnings"] if w["kind"] != "runs_left_out"]):
            console.print(f"[yellow]warning: {line}[/]", highlight=False)
    found = bd.splits(cd)
    if console is not None:
        for line in bd.lines(found):
            console.print(f"boards: {line}", highlight=False, soft_wrap=True)
    safepath.write_text(path / "summary.md", to_markdown(cells, cd.name, bd.markdown(found), left_out))
    safepath.write_text(path / "summary.json", to_json(cells))
    vdoc.write(path, doc)
    return cells


def _environment(cd) -> dict | None:
    """The environment of the campaign's first run with one (the machine it was measured on)."""
    from . import verdicts as vdoc

    runs = cd.data.runs
    return vdoc.environment_of(runs) if runs is not None and "dir" in getattr(runs, "columns", []) else None
