"""The campaign report's two-way views (seed 000 ch. 6): per enemy family and per group, the
slowdown over (number of enemies × total) as a heat map and as a 3-D surface (mplot3d).

Both axes are numeric, in one unit each, sorted by value; cells a campaign excluded (an
infeasible share) are gaps, drawn hatched in the heat map and left out of the surface.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .figures import plt

VALUE_LABEL = "slowdown (median execution time, × solo)"


def _ticks(values) -> list[str]:
    return [f"{v:g}" for v in values]


def two_way_view(grid: pd.DataFrame, title: str):
    """One figure per two-way view: the heat map (left) and the 3-D surface (right) of the
    same grid, side by side (one figure, not two: each figure costs a layout and two files)."""
    v = grid.to_numpy(dtype=float)
    if grid.empty or not np.isfinite(v).any():
        return None
    fig = plt.figure(figsize=(11.0, max(3.6, 1.8 + 0.45 * v.shape[0])))
    heatmap(fig.add_subplot(1, 2, 1), grid)
    ax3 = fig.add_subplot(1, 2, 2, projection="3d")
    if not surface(ax3, grid):
        ax3.remove()
    fig.suptitle(title)
    return fig


def heatmap(ax, grid: pd.DataFrame) -> None:
    """Rows: number of enemies; columns: the total; each cell its slowdown, excluded cells hatched."""
    fig = ax.figure
    v = grid.to_numpy(dtype=float)
    finite = v[np.isfinite(v)]
    # Colour from 1 (no slowdown) up: a faster-than-solo cell stands out below the scale.
    lo, hi = min(1.0, float(finite.min())), max(1.0 + 1e-6, float(finite.max()))
    im = ax.imshow(np.ma.masked_invalid(v), cmap="magma_r", vmin=lo, vmax=hi, aspect="auto", origin="lower")
    ax.set_facecolor("#f0f0f0")
    ax.set_xticks(range(v.shape[1]), _ticks(grid.columns))
    ax.set_yticks(range(v.shape[0]), _ticks(grid.index))
    ax.set_xlabel(str(grid.columns.name))
    ax.set_ylabel(str(grid.index.name))
    ax.grid(False)
    mid = (lo + hi) / 2
    for i in range(v.shape[0]):
        for j in range(v.shape[1]):
            if np.isfinite(v[i, j]):
                ax.text(j, i, f"{v[i, j]:.2f}", ha="center", va="center", fontsize=8,
                        color="white" if v[i, j] > mid else "black")
            else:
                ax.add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, hatch="//", edgecolor="#bbb", lw=0))
                ax.text(j, i, "excluded", ha="center", va="center", fontsize=7, color="#777")
    fig.colorbar(im, ax=ax, label=VALUE_LABEL)
    ax.set_title("heat map")


def surface(ax, grid: pd.DataFrame) -> bool:
    """The same grid as a 3-D surface over the numeric axes (a line when one axis has a single
    value); every measured cell also drawn as a point. False when fewer than two cells."""
    v = grid.to_numpy(dtype=float)
    if np.isfinite(v).sum() < 2:
        return False
    x = np.asarray(grid.columns, dtype=float)
    y = np.asarray(grid.index, dtype=float)
    X, Y = np.meshgrid(x, y)
    ok = np.isfinite(v)
    if len(x) >= 2 and len(y) >= 2:
        # Masked cells are NaN: matplotlib leaves those facets out.
        ax.plot_surface(X, Y, np.where(ok, v, np.nan), cmap="magma_r", edgecolor="#555", linewidth=0.3, alpha=0.85,
                        vmin=min(1.0, np.nanmin(v)), vmax=max(1.0 + 1e-6, np.nanmax(v)))
    else:
        ax.plot(X[ok], Y[ok], v[ok], color="#e76f51")
    ax.scatter(X[ok], Y[ok], v[ok], color="#264653", s=10, depthshade=False)
    ax.set_xticks(x, _ticks(x))
    ax.set_yticks(y, _ticks(y))
    ax.set_xlabel(str(grid.columns.name), fontsize=8)
    ax.set_ylabel(str(grid.index.name), fontsize=8)
    ax.set_zlabel("slowdown (× solo)", fontsize=8)
    ax.view_init(elev=24, azim=-128)
    ax.set_title("3-D surface")
    return True
