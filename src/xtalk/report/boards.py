"""A lab campaign's board-to-board variation against its kernel's (or configuration's)
effect, per cell (analysis/boards.py), for the campaign summary and report.

A campaign is a lab campaign when its runs carry a ``board`` label (the labgrid place or SSH
target each ran on, campaign/lab.py) and a factor varies across them: the ``kernel`` label,
else the configuration. Each cell of the other parts (application, variant, scenario, and the
configuration when the factor is the kernel) is split on the p99 and the median of its runs'
response times.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from ..analysis.boards import BoardSplit, board_split, per_run

#: The factors a board split compares, the first present with two levels wins.
FACTORS = ("kernel", "configuration")
STATS = ("p99", "median")


@dataclass(frozen=True)
class CellSplit:
    cell: str
    split: BoardSplit


def factor_of(labels: dict[str, dict]) -> str | None:
    """The factor of a lab campaign (None when no run has a board or nothing varies)."""
    on_board = [lb for lb in labels.values() if lb.get("board")]
    if not on_board:
        return None
    for f in FACTORS:
        if len({lb.get(f) for lb in on_board if lb.get(f)}) >= 2:
            return f
    return None


def splits(cd) -> list[CellSplit]:
    """Every cell's split (a CampaignData from results/campaign_cells.py); empty when the
    campaign is not a lab campaign."""
    f = factor_of(cd.labels)
    m = cd.data.measured
    if f is None or m.empty:
        return []
    parts = [p for p in ("application", "configuration", "variant") if p != f]
    labels = {r: {**lb, "scenario": lb.get("scenario", "")} for r, lb in cd.labels.items()}
    runs = per_run(m, labels, factor=f, stats_=STATS)
    if runs.empty:
        return []
    runs["cell"] = [" · ".join(str(labels[r].get(p) or "default") for p in parts + ["scenario"]) for r in runs["run_id"]]
    out = []
    for cell, rows in runs.groupby("cell", sort=False):
        if rows[f].nunique() < 2:
            continue
        for s in STATS:
            out.append(CellSplit(cell, board_split(rows.rename(columns={s: "value"}), stat=s, factor=f)))
    return out


def lines(found: list[CellSplit]) -> list[str]:
    """One line per statement, each prefixed by its cell."""
    return [f"{c.cell}: {line}" for c in found for line in c.split.lines()]


def markdown(found: list[CellSplit]) -> str:
    """The summary.md section (empty when there is nothing to split)."""
    if not found:
        return ""
    f = found[0].split.factor
    head = [f"## Boards and {f}s", "",
            f"Between-board variation (a random effect: its SD with a 95 % CI) split from the {f}'s effect (the ratio "
            f"against the reference {f}, 95 % CI accounting for the boards), per cell, on the log of each run's "
            "statistic of the response time (analysis/boards.py).", ""]
    return "\n".join(head + [f"- {x}" for x in lines(found)]) + "\n"


def table(found: list[CellSplit]) -> pd.DataFrame:
    """One row per cell, statistic and level: the numbers of :func:`lines`, for tables/boards.csv."""
    rows = []
    for c in found:
        d = c.split.to_dict()
        for e in d["effects"] or [{}]:
            rows.append({"cell": c.cell, "stat": d["stat"], "boards": len(d["boards"]), "runs": d["runs"],
                         "board_sd": d["board_sd"], "board_sd_low": d["board_sd_low"],
                         "board_sd_high": d["board_sd_high"], "run_sd": d["run_sd"],
                         **{f"effect_{k}": v for k, v in e.items()}})
    return pd.DataFrame(rows).fillna(math.nan)
