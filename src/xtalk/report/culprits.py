"""What the report and `xtalk blame` say about culprits: the captions of the spike tables and
one line per culprit associated with spikes giving its own period (analysis.spikes.culprit_periods).

The spikes of every source pooled have a period of none of them; it stays in the report
only under a caption that says it is pooled.
"""

from __future__ import annotations

import math

import pandas as pd

#: The pooled spike periods' caption.
POOLED_CAPTION = "Spike periods, every source pooled (each culprit's own period: Culprit periods)"
#: The attribution table's caption.
ATTRIBUTION_CAPTION = ("Culprits ranked by the time they took from spike jobs beyond an ordinary job's share "
                       "(excess_ns); those over-represented in spikes (one-sided Fisher test, Bonferroni over the "
                       "culprits: associated) first")
PERIODS_CAPTION = "Culprit periods: the spike jobs each associated culprit is in, and its own wake-ups"


def _p(p: float) -> str:
    return "p < 0.001" if p < 0.001 else f"p = {p:.2g}"


def _series(r) -> str:
    if r.periodic:
        return f"every {r.period_s:.3f} s (regularity {r.regularity:.2f}, {_p(r.p)}, {r.events} events)"
    return f"no period ({r.reason})" if r.reason else "no period"


def period_lines(table: pd.DataFrame) -> list[str]:
    """One line per run × associated culprit: its period in the spike jobs it is in and in
    its own wake-ups; a line saying so when no culprit is associated or none is periodic."""
    if table is None or table.empty:
        return ["No culprit is over-represented in the spike jobs (one-sided Fisher test, Bonferroni over the "
                "culprits): no culprit period to give."]
    lines = []
    for (rid, rank, kind, name), g in table.groupby(["run_id", "rank", "kind", "culprit"], sort=False, dropna=False):
        by = {r.source: r for r in g.itertuples()}
        run = "" if rid is None or (isinstance(rid, float) and math.isnan(rid)) else f"run {rid}: "
        parts = [f"{run}#{rank} {name} ({kind})"]
        if "spike jobs" in by:
            parts.append(f"in its {by['spike jobs'].jobs} spike jobs {_series(by['spike jobs'])}")
        if "wake-ups" in by:
            parts.append(f"its own wake-ups {_series(by['wake-ups'])}")
        lines.append("; ".join(parts))
    if not table["periodic"].any():
        lines.append("No culprit over-represented in the spike jobs is periodic.")
    return lines


def culprit_periods(section, table: pd.DataFrame) -> None:
    """The culprit periods in a report section: the lines, then the table."""
    for line in period_lines(table):
        section.text(line)
    if table is not None and len(table):
        section.table(table, PERIODS_CAPTION)
