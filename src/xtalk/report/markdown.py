"""The report's Markdown summary (report/summary.md): verdicts, slowdowns beside the noise
floor, misses, pWCET, and where the full report and the CSV files are."""

from __future__ import annotations

import pandas as pd

from .html import fmt


def md_table(df: pd.DataFrame, max_rows: int = 50) -> str:
    if df is None or df.empty:
        return "_(empty)_\n"
    d = df.head(max_rows)
    lines = ["| " + " | ".join(str(c) for c in d.columns) + " |", "|" + "---|" * len(d.columns)]
    for row in d.itertuples(index=False):
        lines.append("| " + " | ".join(fmt(v).replace("|", "\\|") for v in row) + " |")
    if len(df) > max_rows:
        lines.append(f"\n_{len(df) - max_rows} more rows in the CSV export._")
    return "\n".join(lines) + "\n"


def summary(title: str, verdicts: pd.DataFrame, slowdown: pd.DataFrame | None, floor: pd.DataFrame | None,
            misses: pd.DataFrame | None, pwcet: pd.DataFrame | None, files: list[str], warnings: list[str] = (),
            extra: list[str] = ()) -> str:
    """summary.md; a table given as None (a section the victim's kind hides) is left out,
    ``extra`` lines (platform, the victim kind's own numbers) come after the verdicts."""
    out = [f"# {title}", "", "## Verdicts", ""]
    out += [f"- {r.verdict}" for r in verdicts.itertuples()] or ["_(no jobs)_"]
    if warnings:
        out += ["", "## Warnings", ""] + [f"- {w}" for w in warnings]
    out += ["", *extra]
    if slowdown is not None:
        out += ["", "## Slowdown against solo (95 % CI)", "", md_table(slowdown), "## Noise floor", "",
                "A slowdown whose CI stays within 1 ± floor is indistinguishable from run-to-run noise.", "",
                md_table(floor)]
    if misses is not None:
        out += ["## Deadline misses", "", md_table(misses)]
    if pwcet is not None:
        out += ["## pWCET (execution time)", ""]
        if pwcet.empty:
            out.append("_(no data)_")
    keys = ["scenario", "configuration"]
    if pwcet is not None and "application" in pwcet:  # several applications: each its own rows
        keys = ["application", *keys]
    for k, g in (pwcet.groupby(keys, sort=False) if pwcet is not None else ()):
        scen, conf = (f"{k[0]}: {k[1]}", k[2]) if len(keys) == 3 else k
        r = g.iloc[0]
        if isinstance(r["refused"], str):
            out.append(f"- {scen} ({conf}): **refused** — {r['refused']}")
        else:
            at = g[g["exceedance"].round(15) == 1e-9]
            v = at.iloc[0] if len(at) else g.iloc[-1]
            out.append(f"- {scen} ({conf}): {v['pwcet_ns'] / 1e6:.3f} ms at {v['exceedance']:.0e} per job "
                       f"[{v['ci_low_ns'] / 1e6:.3f}, {v['ci_high_ns'] / 1e6:.3f}] ({r['model']}, ξ = {r['shape']:.3f})")
    out += ["", "## Files", ""] + [f"- `{f}`" for f in files]
    return "\n".join(out) + "\n"
