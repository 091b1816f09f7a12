"""The campaign report's maps (seed 000 ch. 6): per enemy family and per group, the mapped
statistic (results/campaign_maps.py) over (number of enemies × total) as a heat map and as a
3-D surface (mplot3d); the explicit scenarios × groups as a heat map.

Axes are numeric where the grid's are, in one unit each, sorted by value; cells a campaign
excluded (an infeasible share) are gaps, hatched and marked "excluded". Cells whose CI has not
concluded are greyed and hatched with their value in grey, and the colour scale is set by the
concluded cells only (and 1), so an inconclusive extreme cannot stretch it; ε-violated cells
have a red frame.
"""

from __future__ import annotations

import numpy as np

from ..analysis import verdict as vd
from .figures import plt

#: Face of an inconclusive cell.
UNKNOWN = "#d9d9d9"
#: Frame of a cell whose ε verdict is violated.
VIOLATED = "#c1121f"


def _ticks(values) -> list[str]:
    return [f"{v:g}" if isinstance(v, (int, float, np.number)) else str(v) for v in values]


def scale(v: np.ndarray, known: np.ndarray) -> tuple[float, float]:
    """The colour scale's (low, high): from the concluded cells and 1 (no effect), never from
    an inconclusive one."""
    k = v[known & np.isfinite(v)]
    lo = min(1.0, float(k.min())) if k.size else 1.0
    hi = max(1.0 + 1e-6, float(k.max())) if k.size else 1.0 + 1e-6
    return lo, hi


def two_way_view(grid, title: str):
    """One figure per two-way view: the heat map (left) and the 3-D surface (right) of the
    same grid (a cc.Grid), side by side (one figure, not two: each figure costs a layout and
    two files)."""
    v = grid.values.to_numpy(dtype=float)
    if grid.values.empty or not np.isfinite(v).any():
        return None
    fig = plt.figure(figsize=(11.0, max(3.6, 1.8 + 0.45 * v.shape[0])))
    heatmap(fig.add_subplot(1, 2, 1), grid)
    ax3 = fig.add_subplot(1, 2, 2, projection="3d")
    if not surface(ax3, grid):
        ax3.remove()
    fig.suptitle(title)
    return fig


def scenario_view(grid, title: str):
    """The explicit scenarios × groups as one heat map (a cc.Grid from scenario_grid)."""
    v = grid.values.to_numpy(dtype=float)
    if grid.values.empty or not np.isfinite(v).any():
        return None
    fig = plt.figure(figsize=(max(5.0, 2.5 + 1.3 * v.shape[1]), max(3.0, 1.6 + 0.4 * v.shape[0])))
    heatmap(fig.add_subplot(1, 1, 1), grid)
    fig.suptitle(title)
    return fig


def heatmap(ax, grid) -> None:
    """Each cell its value; excluded cells hatched "excluded", inconclusive ones greyed and
    hatched (gid "inconclusive"), ε-violated ones framed in red (gid "violated")."""
    fig = ax.figure
    v = grid.values.to_numpy(dtype=float)
    known = grid.known.to_numpy(dtype=bool)
    violated = grid.violated.to_numpy(dtype=bool)
    # Colour from 1 (no effect) up: a faster-than-solo cell stands out below the scale.
    lo, hi = scale(v, known)
    shown = np.ma.masked_where(~(known & np.isfinite(v)), v)
    im = ax.imshow(shown, cmap="magma_r", vmin=lo, vmax=hi, aspect="auto", origin="lower")
    ax.set_facecolor("#f0f0f0")
    ax.set_xticks(range(v.shape[1]), _ticks(grid.values.columns))
    ax.set_yticks(range(v.shape[0]), _ticks(grid.values.index))
    ax.set_xlabel(str(grid.values.columns.name))
    ax.set_ylabel(str(grid.values.index.name))
    ax.grid(False)
    mid = (lo + hi) / 2
    for i in range(v.shape[0]):
        for j in range(v.shape[1]):
            if not np.isfinite(v[i, j]):
                ax.add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, hatch="//", edgecolor="#bbb", lw=0,
                                           gid="excluded"))
                ax.text(j, i, "excluded", ha="center", va="center", fontsize=7, color="#777")
            elif known[i, j]:
                ax.text(j, i, f"{v[i, j]:.2f}", ha="center", va="center", fontsize=8,
                        color="white" if v[i, j] > mid else "black")
            else:
                ax.add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, facecolor=UNKNOWN, hatch="xx", edgecolor="#aaa",
                                           lw=0, gid=vd.INCONCLUSIVE))
                ax.text(j, i, f"{v[i, j]:.2f}?", ha="center", va="center", fontsize=7, color="#666", style="italic")
            if violated[i, j]:
                ax.add_patch(plt.Rectangle((j - 0.48, i - 0.48), 0.96, 0.96, fill=False, edgecolor=VIOLATED, lw=2,
                                           gid=vd.VIOLATED))
    fig.colorbar(im, ax=ax, label=grid.stat.label)
    ax.set_title("heat map (grey, hatched, \"?\": CI holds 1; red frame: ε violated)", fontsize=9)


def surface(ax, grid) -> bool:
    """The same grid as a 3-D surface over the numeric axes (a line when one axis has a single
    value); every measured cell also drawn as a point (hollow grey: inconclusive). False
    when fewer than two cells."""
    v = grid.values.to_numpy(dtype=float)
    known = grid.known.to_numpy(dtype=bool)
    if np.isfinite(v).sum() < 2:
        return False
    x = np.asarray(grid.values.columns, dtype=float)
    y = np.asarray(grid.values.index, dtype=float)
    X, Y = np.meshgrid(x, y)
    ok = np.isfinite(v)
    if len(x) >= 2 and len(y) >= 2:
        # Masked cells are NaN: matplotlib leaves those facets out.
        ax.plot_surface(X, Y, np.where(ok, v, np.nan), cmap="magma_r", edgecolor="#555", linewidth=0.3, alpha=0.85,
                        vmin=scale(v, known)[0], vmax=scale(v, known)[1])
    else:
        ax.plot(X[ok], Y[ok], v[ok], color="#e76f51")
    sure, unsure = ok & known, ok & ~known
    ax.scatter(X[sure], Y[sure], v[sure], color="#264653", s=10, depthshade=False)
    ax.scatter(X[unsure], Y[unsure], v[unsure], facecolors="none", edgecolors="#888", s=14, depthshade=False)
    ax.set_xticks(x, _ticks(x))
    ax.set_yticks(y, _ticks(y))
    ax.set_xlabel(str(grid.values.columns.name), fontsize=8)
    ax.set_ylabel(str(grid.values.index.name), fontsize=8)
    ax.set_zlabel(f"{grid.stat.short} (×)", fontsize=8)
    ax.view_init(elev=24, azim=-128)
    ax.set_title("3-D surface")
    return True
