"""The self-contained HTML page: styles and the one script inline, figures as base64 PNG
data URIs, no external resource of any kind, so the file opens offline and can be mailed.

Plain string building with :func:`html.escape` on every value that comes from data.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ..analysis import verdict as vd

if TYPE_CHECKING:  # matplotlib is loaded by what draws a figure, not by `xtalk summary`
    from .figures import Rendered

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#1d2327;background:#fafafa}
header{background:#264653;color:#fff;padding:14px 28px}header h1{margin:0;font-size:22px}
header p{margin:4px 0 0;opacity:.85}
nav{position:sticky;top:0;background:#fff;border-bottom:1px solid #ddd;padding:6px 28px;z-index:2;font-size:13px}
nav a{margin-right:14px;color:#264653;text-decoration:none}nav a:hover{text-decoration:underline}
main{padding:8px 28px 40px;max-width:1200px}
section{background:#fff;border:1px solid #e3e3e3;border-radius:6px;padding:10px 18px;margin:16px 0}
h2{font-size:18px;margin:6px 0 8px;color:#264653}h3{font-size:15px;margin:14px 0 6px}
table{border-collapse:collapse;font-size:12px;margin:6px 0 10px;display:block;overflow-x:auto;max-width:100%}
th,td{border:1px solid #e1e1e1;padding:3px 7px;text-align:right;white-space:nowrap}
th{background:#f1f4f5;position:sticky;top:0}td:first-child,th:first-child{text-align:left}
figure{margin:10px 0 14px}figure img{max-width:100%;height:auto;border:1px solid #eee}
figcaption{font-size:12px;color:#555;max-width:900px}
ul.verdicts{list-style:none;padding:0}ul.verdicts li{margin:5px 0;padding:6px 10px;border-left:5px solid #2a9d8f;background:#f6fbfa}
ul.verdicts li.bad{border-color:#e76f51;background:#fdf4f1}ul.verdicts li.warn{border-color:#e9c46a;background:#fdfaf0}
.note{color:#555;font-size:13px}.refused{color:#b00020;font-weight:600}
.badge{display:inline-block;padding:0 6px;border-radius:3px;font-size:12px;font-weight:600;background:#e3e3e3}
"""

# Counts the figures that rendered once the page has loaded; a reader sees it in the footer
# and the headless-browser test reads it (no figure may fail to decode).
SCRIPT = """
window.addEventListener('load', function () {
  var imgs = Array.prototype.slice.call(document.querySelectorAll('figure img'));
  var ok = imgs.filter(function (i) { return i.complete && i.naturalWidth > 0; }).length;
  var el = document.getElementById('render-check');
  if (el) { el.textContent = ok + ' of ' + imgs.length + ' figures rendered'; }
  document.body.setAttribute('data-figures-ok', ok + '/' + imgs.length);
});
"""


@dataclass
class Section:
    """A titled part of the report: a list of HTML blocks (already escaped)."""

    id: str
    title: str
    blocks: list[str] = field(default_factory=list)

    def text(self, s: str, cls: str = "note") -> "Section":
        self.blocks.append(f'<p class="{cls}">{html.escape(s)}</p>')
        return self

    def heading(self, s: str) -> "Section":
        self.blocks.append(f"<h3>{html.escape(s)}</h3>")
        return self

    def table(self, df: pd.DataFrame, caption: str | None = None, max_rows: int = 200) -> "Section":
        if caption:
            self.heading(caption)
        self.blocks.append(table_html(df, max_rows))
        return self

    def figure(self, fig: Rendered | None) -> "Section":
        if fig is not None:
            self.blocks.append(
                f'<figure id="fig-{html.escape(fig.name)}"><img src="{fig.data_uri()}" alt="{html.escape(fig.title)}">'
                f"<figcaption><b>{html.escape(fig.title)}.</b> {html.escape(fig.caption)}"
                f' <span class="note">(files: figures/{html.escape(fig.name)}.png{", .svg" if fig.svg_path else ""})</span>'
                "</figcaption></figure>")
        return self

    def raw(self, s: str) -> "Section":
        self.blocks.append(s)
        return self


def fmt(v) -> str:
    """A cell: 4 significant digits for floats, '–' for missing."""
    if v is None or (isinstance(v, float) and math.isnan(v)) or v is pd.NA or v is pd.NaT:
        return "–"
    if isinstance(v, (bool, np.bool_)):
        return "yes" if v else "no"
    if isinstance(v, (float, np.floating)):
        if math.isinf(v):
            return "∞" if v > 0 else "−∞"
        a = abs(v)
        if a != 0 and (a < 1e-3 or a >= 1e7):
            return f"{v:.3g}"
        return f"{v:.4g}" if a < 1000 else f"{v:,.0f}"
    return str(v)


def in_ms(df: pd.DataFrame) -> pd.DataFrame:
    """For display: every *_ns column in ms, renamed *_ms."""
    if df is None or df.empty:
        return df
    out = df.copy()
    for c in [c for c in out.columns if str(c).endswith("_ns")]:
        if pd.api.types.is_numeric_dtype(out[c]):
            out[c] = out[c].astype(float) / 1e6
            out = out.rename(columns={c: str(c)[:-3] + "_ms"})
    return out


def table_html(df: pd.DataFrame, max_rows: int = 200) -> str:
    if df is None or df.empty:
        return '<p class="note">(empty)</p>'
    show = df if isinstance(df.index, pd.RangeIndex) else df.reset_index()
    more = len(show) - max_rows
    show = show.head(max_rows)
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in show.columns)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(fmt(v))}</td>" for v in row) + "</tr>"
                   for row in show.itertuples(index=False))
    tail = f'<p class="note">{more} more rows in the CSV export.</p>' if more > 0 else ""
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{tail}"


def verdict_list(rows: list[tuple[str, str]]) -> str:
    """(status, line) pairs as a coloured list, by the status's severity
    (analysis.verdict.severity: red for violations and misses, yellow for inconclusive,
    slowed down and guards)."""
    items = []
    for status, line in rows:
        cls = vd.severity(status)
        items.append(f'<li class="{cls}">{html.escape(line)}</li>')
    return '<ul class="verdicts">' + "".join(items) + "</ul>"


def page(title: str, subtitle: str, sections: list[Section], footer: str = "") -> str:
    nav = "".join(f'<a href="#{html.escape(s.id)}">{html.escape(s.title)}</a>' for s in sections)
    body = "".join(f'<section id="{html.escape(s.id)}"><h2>{html.escape(s.title)}</h2>{"".join(s.blocks)}</section>'
                   for s in sections)
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{html.escape(title)}</title><style>{CSS}</style></head>"
            f"<body><header><h1>{html.escape(title)}</h1><p>{html.escape(subtitle)}</p></header>"
            f"<nav>{nav}</nav><main>{body}"
            f'<p class="note">{html.escape(footer)} <span id="render-check"></span></p></main>'
            f"<script>{SCRIPT}</script></body></html>\n")
