"""index.html of a bundle: a metadata header, one section per objective, the traceability
matrix; tables with human column names that wrap, and a stylesheet for print (the PDF)."""

from __future__ import annotations

import html
import re

import pandas as pd

from ..report.html import fmt

#: Column names as a reader says them; others: underscores to spaces, units in brackets.
HUMAN = {
    "exec_median_ms": "median execution time (ms)", "exec_max_ms": "max execution time (ms)",
    "response_max_ms": "max response time (ms)", "deadline_misses": "deadline misses", "serious_misses": "serious misses",
    "pwcet_ns": "pWCET (ns)", "ci_low_ns": "CI low (ns)", "ci_high_ns": "CI high (ns)", "n": "jobs fitted",
    "size_bytes": "size (bytes)", "line_bytes": "line (bytes)", "shared_cpus": "shared by CPUs", "run_ids": "run ids",
    "p99_response_ms": "p99 response time (ms)", "p99_vs_solo": "p99 against solo", "miss_ratio": "miss ratio",
    "runs_ok": "runs completed", "failed_jobs": "failed jobs", "period_us": "period (µs)", "budget_bytes": "budget (bytes)",
    "overshoot_bytes_mean": "mean overshoot (bytes)", "overshoot_bytes_max": "max overshoot (bytes)",
}

CSS = """
body{font:13px/1.45 system-ui,sans-serif;margin:0 auto;max-width:1100px;padding:0 24px;color:#111}
h1{font-size:22px;margin:18px 0 4px}h2{font-size:17px;margin:22px 0 6px;border-bottom:1px solid #999}
h3{font-size:14px;margin:12px 0 4px}
table{border-collapse:collapse;font-size:11px;margin:4px 0 10px;width:100%;table-layout:auto}
th,td{border:1px solid #bbb;padding:2px 5px;text-align:left;vertical-align:top;overflow-wrap:break-word}
th{background:#eee}
dl.meta{display:grid;grid-template-columns:max-content 1fr;gap:2px 14px;font-size:12px}dl.meta dt{font-weight:600}
dl.meta dd{margin:0;overflow-wrap:anywhere}
.covered{color:#05612b;font-weight:600}.gap{color:#a00;font-weight:600}.note{color:#333}
@media print{@page{size:A4 landscape;margin:12mm}body{max-width:none;padding:0}
  section{break-inside:auto}h2,h3{break-after:avoid}tr{break-inside:avoid}thead{display:table-header-group}}
"""


#: The objective whose section holds the traceability matrix.
TRACED_BY = "MCP_Accomplishment_Summary_1"


def human(col: str) -> str:
    """A column name as a reader says it."""
    if col in HUMAN:
        return HUMAN[col]
    m = re.fullmatch(r"(.*)_(ms|ns|us|bytes)", col)
    return f"{m.group(1).replace('_', ' ')} ({m.group(2)})" if m else col.replace("_", " ")


def table(df: pd.DataFrame, max_rows: int = 300) -> str:
    """A table with human headers; rows past ``max_rows`` are left to the CSV (said)."""
    if df.empty:
        return '<p class="note">(none)</p>'
    show = df.head(max_rows)
    head = "".join(f"<th>{html.escape(human(str(c)))}</th>" for c in show.columns)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(fmt(v))}</td>" for v in row) + "</tr>"
                   for row in show.itertuples(index=False))
    more = f'<p class="note">{len(df) - max_rows} more rows in the CSV.</p>' if len(df) > max_rows else ""
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{more}"


#: Run ids shown per row of the matrix on the page; all of them are in traceability.csv.
SHOWN_IDS = 24


def _shown(matrix: pd.DataFrame) -> pd.DataFrame:
    """The matrix with long run-id lists cut (a campaign has thousands of runs)."""
    def cut(ids: str) -> str:
        parts = ids.split(" ")
        return ids if len(parts) <= SHOWN_IDS else " ".join(parts[:SHOWN_IDS]) + f" … ({len(parts) - SHOWN_IDS} more in traceability.csv)"
    return matrix.assign(run_ids=[cut(str(x)) if n > SHOWN_IDS else str(x) for x, n in zip(matrix["run_ids"], matrix["runs"])])


def render(meta: dict, findings, artifacts: dict[str, dict[str, str]], matrix: pd.DataFrame) -> str:
    """The whole page. ``meta``: header items; ``artifacts``: objective -> table name -> file."""
    e = html.escape
    head = "".join(f"<dt>{e(k)}</dt><dd>{e(str(v))}</dd>" for k, v in meta.items() if k != "title")
    toc = "".join(f'<li><a href="#{e(f.id)}">{e(f.id)}</a>: {e(f.title)} — '
                  + (f'<span class="gap">not covered</span>' if f.not_covered else '<span class="covered">covered</span>')
                  + "</li>" for f in findings)
    parts = []
    for f in findings:
        s = [f'<section id="{e(f.id)}"><h2>{e(f.id)}: {e(f.title)}</h2><p class="note">Asks: {e(f.asks)}.</p>']
        if f.not_covered:
            s.append(f'<p class="gap">Not covered: {e(f.not_covered)}.</p>')
        for name, t in f.tables.items():
            s.append(f"<h3>{e(name.replace('_', ' '))} <span class=\"note\">({e(artifacts[f.id][name])})</span></h3>")
            s.append(table(t))
        if f.id == TRACED_BY:
            s.append('<h3 id="traceability">traceability: objective → artifact → runs <span class="note">'
                     '(traceability.csv)</span></h3>' + table(_shown(matrix)))
        s += [f'<p class="note">{e(n)}</p>' for n in f.notes]
        parts.append("".join(s) + "</section>")
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{e(meta["title"])}</title>'
            f"<style>{CSS}</style></head><body><h1>{e(meta['title'])}</h1><dl class=\"meta\">{head}</dl>"
            f"<h2>Objectives</h2><ul>{toc}</ul>{''.join(parts)}</body></html>\n")
