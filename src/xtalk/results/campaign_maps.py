"""What a campaign's maps show: the statistic mapped over the grid axes (selectable with
`xtalk report --map NAME`), whether each cell's value is known, and which statistic to map
when none is named.

A cell is *concluded* by the one rule of every verdict (analysis/verdict.interference):
the 95 % CI of its ratio (solo's value is the reference) excludes 1 and the cell's A/A noise
floor (slowed down or sped up), or lies within 1 ± the larger of the floor and `min_effect`
(no effect of that size); the floor is the median's, so the p99 maps judge against 1 alone.
For the ``epsilon`` map a cell has concluded when its ε verdict is holds or violated (the CI
excludes the bound). Otherwise it is *inconclusive* and the maps grey and hatch it and leave
it out of the colour scale, so noise is not painted as an effect. By default the map is the
slowdown statistic with the strongest concluded effect: over the slowed-down or sped-up
cells, the largest distance from 1 of the CI end nearest to 1 (a conservative effect size),
counted only beyond 5 % (one cell in twenty concludes on noise at 95 %); with none, the
median execution time (the map of earlier reports).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..analysis import verdict as vd
from ..errors import UsageError


@dataclass(frozen=True)
class MapStat:
    """One mappable statistic: its name on the command line, the cell-table columns of its
    value and CI, and its label on axes and captions."""

    name: str
    column: str
    label: str
    short: str

    def values(self, cells: pd.DataFrame) -> pd.Series:
        """The mapped value of each cell (``epsilon``: the observed statistic over its bound)."""
        if self.name != EPSILON:
            return cells[self.column].astype(float)
        # observed / bound; for a relative ε the bound is relative × solo, so this is the
        # ratio to solo over the relative bound.
        return cells["eps_observed_ms"].astype(float) / cells["eps_bound_ms"].astype(float)

    def words(self, cells: pd.DataFrame) -> pd.Series:
        """Each cell's word for this statistic's CI (:func:`xtalk.analysis.verdict.interference`,
        against the cell's noise floor where this statistic has one, the median's)."""
        lo, hi = cells[f"{self.column}_lo"].astype(float), cells[f"{self.column}_hi"].astype(float)
        floor_col = self.column.replace("_slowdown_median", "_noise_floor")
        floor = (cells[floor_col].astype(float) if self.column.endswith("_slowdown_median") and floor_col in cells
                 else pd.Series(math.nan, index=cells.index))
        return pd.Series([vd.interference(a, b, f, MIN_EFFECT) for a, b, f in zip(lo, hi, floor)],
                         index=cells.index, dtype=object)

    def known(self, cells: pd.DataFrame) -> pd.Series:
        """True where the cell's CI has concluded (see the module's rule)."""
        if self.name == EPSILON:
            return cells["eps_verdict"].isin([vd.HOLDS, vd.VIOLATED])
        return self.words(cells).isin(vd.CONCLUDED)

    def effect(self, cells: pd.DataFrame) -> float:
        """The strongest concluded effect over the non-solo cells: max |log| of the CI end
        nearest to 1 among the slowed-down or sped-up cells; 0 when none has one."""
        if self.name == EPSILON:
            return 0.0
        c = cells[cells["scenario"] != "solo"]
        if c.empty or f"{self.column}_lo" not in c:
            return 0.0
        w = self.words(c).to_numpy()
        lo, hi = c[f"{self.column}_lo"].astype(float).to_numpy(), c[f"{self.column}_hi"].astype(float).to_numpy()
        near = np.where(w == vd.SLOWED_DOWN, lo, np.where(w == vd.SPED_UP, 1 / hi, 1.0))
        near = near[np.isfinite(near) & (near > 1 + MIN_EFFECT)]
        return float(np.log(near).max()) if near.size else 0.0


EPSILON = "epsilon"
STATS = {s.name: s for s in (
    MapStat("exec-median", "exec_slowdown_median", "slowdown (median execution time, × solo)", "exec median"),
    MapStat("exec-p99", "exec_slowdown_p99", "slowdown (p99 execution time, × solo)", "exec p99"),
    MapStat("response-median", "response_slowdown_median", "slowdown (median response time, × solo)", "response median"),
    MapStat("response-p99", "response_slowdown_p99", "slowdown (p99 response time, × solo)", "response p99"),
    MapStat(EPSILON, "eps_ratio", "ε statistic over its bound (1: at the bound)", "ε"),
)}
#: An effect smaller than this (the experiments' default `min_effect`, 5 %) does not choose
#: the map: at 95 % per cell, one cell in twenty of a map concludes on noise.
MIN_EFFECT = vd.MIN_EFFECT
#: The map of earlier reports, kept when no statistic has concluded anywhere.
FALLBACK = "exec-median"


def parse(name: str | None) -> MapStat | None:
    """The statistic named on the command line (None: choose by default); UsageError in one
    line naming the choices."""
    if name is None or name == "":
        return None
    if name not in STATS:
        raise UsageError(f"--map: {name!r} is not a mapped statistic; use one of {', '.join(STATS)}")
    return STATS[name]


def choose(cells: pd.DataFrame, asked: MapStat | None = None) -> tuple[MapStat, str]:
    """(the statistic to map, why): ``asked`` when given, else the slowdown statistic with
    the strongest concluded effect."""
    if asked is not None:
        return asked, "chosen with --map"
    scored = [(s.effect(cells), s) for s in STATS.values() if s.name != EPSILON and f"{s.column}_lo" in cells]
    best, stat = max(scored, key=lambda t: t[0], default=(0.0, STATS[FALLBACK]))
    if best <= 0:
        return STATS[FALLBACK], ("no cell's CI excludes 1 by more than 5 % for any statistic, so the median execution "
                                 "time is shown")
    return stat, (f"the statistic with the strongest concluded effect (a CI excluding 1 whose end nearest to 1 is a "
                  f"factor {math.exp(best):.2f} from it); others with `xtalk report --map NAME` ({', '.join(STATS)})")
