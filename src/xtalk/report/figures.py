"""The report's figures (matplotlib, no display): one function per figure, each returning a
Figure or None when there is nothing to draw.

Heavy data is reduced before drawing so that a figure costs the same at 10^3 and 10^7 jobs:
histograms bin every value (one numpy pass), boxplots are drawn from quantiles, ECDFs from
a few thousand quantiles, per-job series from a min/median/max envelope of ``ENVELOPE_BINS``
bins, scatter plots from a random sample of ``SCATTER_POINTS`` jobs (the first job always
shown, seed 004 Fig. 10).
"""

from __future__ import annotations

import base64
import colorsys
import contextlib
import functools
import gc
import inspect
import io
import re
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # before pyplot: no display, no GUI toolkit
import matplotlib.axis  # noqa: E402
import matplotlib.collections  # noqa: E402
import matplotlib.colors  # noqa: E402
import matplotlib.patches  # noqa: E402
import matplotlib.ticker  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.text  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import PIL.Image  # noqa: E402  (matplotlib's own PNG writer)
import PIL.PngImagePlugin  # noqa: E402

from .. import safepath
from ..analysis import stats as st  # noqa: E402
from ..analysis.wakeup import runs_of_series  # noqa: E402

ENVELOPE_BINS = 600
MAX_RUNS_DRAWN = 8  # lines per panel before a figure stops being readable
SCATTER_POINTS = 4000
ECDF_POINTS = 2000
EXCEEDANCE_POINTS = 800  # log-spaced markers of an exceedance curve...
TAIL_POINTS = 200  # ...beside its top ranks, each drawn
MARKER_COLORS = {"best": "#2a9d8f", "median": "#264653", "first": "#e9c46a", "worst": "#e76f51"}
PALETTE = ["#264653", "#e76f51", "#2a9d8f", "#e9c46a", "#8d5fd3", "#f4a261", "#457b9d", "#9c6644"]

plt.rcParams.update({"svg.fonttype": "none", "figure.dpi": 100, "savefig.dpi": 100, "font.size": 9,
                     "figure.constrained_layout.use": True, "axes.spines.top": False, "axes.spines.right": False, "axes.grid": True, "grid.alpha": 0.3,
                     "path.simplify": True})


@dataclass
class Rendered:
    """A figure written to disk: name, title, caption, the PNG bytes (for embedding), and the
    SVG's path when one was written (else None)."""

    name: str
    title: str
    caption: str
    png: bytes
    png_path: Path
    svg_path: Path | None

    def data_uri(self) -> str:
        return "data:image/png;base64," + base64.b64encode(self.png).decode("ascii")


class PlainLogFormatter(matplotlib.ticker.LogFormatterSciNotation):
    """A log axis's labels (10⁻³, 2×10⁻¹) in Unicode superscripts, not mathtext: the same
    text, without the pyparsing parse mathtext does anew for every figure (its cache is the
    renderer's)."""

    _SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")
    _MATH = re.compile(r"\$\\mathdefault\{(.*)\}\$")
    _POWER = re.compile(r"\^\{(-?\d+)\}")

    def __call__(self, x, pos=None):
        label = super().__call__(x, pos)
        m = self._MATH.fullmatch(label)
        if m is None:
            return label
        plain = self._POWER.sub(lambda p: p.group(1).translate(self._SUPERSCRIPT), m.group(1))
        return plain.replace("\\times", "×").replace("-", "−")


def _plain_log_labels(fig) -> None:
    """Every log axis of ``fig`` labelled by PlainLogFormatter (its state kept: the class of
    matplotlib's own formatter is swapped, whichever module drew the figure)."""
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            for f in (axis.get_major_formatter(), axis.get_minor_formatter()):
                if type(f) is matplotlib.ticker.LogFormatterSciNotation:
                    f.__class__ = PlainLogFormatter


#: zlib level of the PNGs: 3 compresses the figures' flat colours within a few per cent of
#: 6 (savefig's) in half the time.
PNG_COMPRESSION = 3


def _png(fig) -> bytes:
    """``fig`` drawn once on its Agg canvas, as PNG bytes: RGB when every pixel is opaque
    (the report's figures: a white face), a quarter less to compress than savefig's RGBA
    for the same pixels; the same dpi and Software fields as savefig writes."""
    fig.canvas.draw()
    rgba = np.asarray(fig.canvas.buffer_rgba())
    image = PIL.Image.fromarray(np.ascontiguousarray(rgba[..., :3]) if (rgba[..., 3] == 255).all() else rgba)
    info = PIL.PngImagePlugin.PngInfo()
    info.add_text("Software", f"Matplotlib version{matplotlib.__version__}, https://matplotlib.org/")
    buf = io.BytesIO()
    image.save(buf, format="png", compress_level=PNG_COMPRESSION, dpi=(fig.dpi, fig.dpi), pnginfo=info)
    return buf.getvalue()


def gc_paused(func):
    """``func`` run with Python's cyclic garbage collector paused (restored after, as it
    was). A figure is tens of thousands of small objects in reference cycles (artists and
    their figure); collected as they are made, the young ones are scanned again and again
    while they live, and their numbers set off full collections of the report's whole heap
    (0.25 s of the figures' CPU at 10^7 jobs, 0.12 s at 10^4). Paused, they are scanned once,
    at the first collection after the figure is drawn and closed, when most are garbage."""

    @functools.wraps(func)
    def paused(*args, **kwargs):
        was = gc.isenabled()
        gc.disable()
        try:
            return func(*args, **kwargs)
        finally:
            if was:
                gc.enable()

    return paused


@contextlib.contextmanager
def measured_once():
    """Within it, an axis's ticks and a text's layout are computed once for the same inputs.

    Laying out and drawing a figure asks each axis for its ticks (locator, formatter, each
    tick moved and relabelled) and for its tick labels' extents a dozen times (the layout's
    two passes, each spine, the axis and title positions, the draw), each time from the same
    view interval and axes box; and each label's layout (its font metrics) anew every time.
    Here ``Axis._update_ticks`` returns the ticks it computed last for that axis when the
    view interval, the axes box, the dpi and the tick lists are the same (the ticks then hold
    what that computation set), and ``Text._get_layout`` is computed once per text, font,
    alignment, rotation, dpi and renderer (a pure function of those: wrapped text is left
    alone). The same ticks, the same extents, so the same pixels. Matplotlib's own methods
    are restored on leaving; the report draws one figure at a time, in one thread."""
    update_ticks = getattr(matplotlib.axis.Axis, "_update_ticks", None)
    get_layout = getattr(matplotlib.text.Text, "_get_layout", None)
    if update_ticks is None or get_layout is None:  # a matplotlib without these internals: as it draws
        yield
        return
    last: dict[int, tuple] = {}  # id(axis) -> (axis, inputs, its ticks to draw, its tick lists)
    layouts: dict[tuple, tuple] = {}
    renderers = []  # alive while their ids key layouts

    def ticks_once(axis):
        d = axis.__dict__
        try:
            key = (tuple(axis.get_view_interval()), axis.axes.bbox.bounds, axis.get_figure(root=True).dpi,
                   id(d.get("majorTicks")), id(d.get("minorTicks")))
        except (AttributeError, TypeError):  # another matplotlib's internals (root= is 3.10's): not cached
            return update_ticks(axis)
        hit = last.get(id(axis))
        if hit is None or hit[1] != key:
            hit = last[id(axis)] = (axis, key, update_ticks(axis), d.get("majorTicks"), d.get("minorTicks"))
        return list(hit[2])

    def layout_once(text, renderer):
        if text.get_wrap():
            return get_layout(text, renderer)
        try:
            key = (text.get_text(), hash(text._fontproperties), text.get_usetex(), text._parse_math, text._linespacing,
                   text._get_multialignment(), text.get_rotation(), text.get_rotation_mode(), text._horizontalalignment,
                   text._verticalalignment, text.get_figure(root=True).dpi, type(renderer), id(renderer))
        except (AttributeError, TypeError):  # as above
            return get_layout(text, renderer)
        hit = layouts.get(key)
        if hit is None:
            renderers.append(renderer)
            hit = layouts[key] = get_layout(text, renderer)
        bbox, lines, box = hit
        return bbox.frozen(), lines, box

    matplotlib.axis.Axis._update_ticks, matplotlib.text.Text._get_layout = ticks_once, layout_once
    try:
        yield
    finally:
        matplotlib.axis.Axis._update_ticks, matplotlib.text.Text._get_layout = update_ticks, get_layout


@gc_paused
def render(fig, out_dir: Path, name: str, title: str, caption: str = "", *, svg: bool = True) -> Rendered:
    """Write ``fig`` as NAME.png (and NAME.svg with ``svg``) under ``out_dir`` and close it."""
    safepath.makedirs(out_dir)
    # The constrained layout is solved once, here; each file is then one draw. (savefig with
    # a layout engine set draws twice: a pass that solves the layout, then the print.) The
    # SVG keeps the PNG's layout: same size, and its text is the viewer's font anyway
    # (svg.fonttype none).
    _plain_log_labels(fig)
    engine = fig.get_layout_engine()
    # Without a layout engine for the saves (rcParams would put one back when savefig
    # restores the figure's "none").
    with measured_once(), plt.rc_context({"figure.constrained_layout.use": False}):
        if engine is not None:
            engine.execute(fig)
        fig.set_layout_engine(None)
        png = _png(fig)
        png_path, svg_path = out_dir / f"{name}.png", (out_dir / f"{name}.svg" if svg else None)
        safepath.write_bytes(png_path, png)
        if svg_path is not None:
            safepath.save_figure(fig, svg_path, format="svg")
        else:  # an SVG of an earlier `--svg` report would no longer be this figure
            safepath.unlink(out_dir / f"{name}.svg")
    plt.close(fig)
    return Rendered(name, title, caption, png, png_path, svg_path)


def _ms(ns):
    return np.asarray(ns, dtype=float) / 1e6


def _color(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


def envelope(x: np.ndarray, y: np.ndarray, bins: int = ENVELOPE_BINS) -> tuple[np.ndarray, ...]:
    """(x centre, min, mean, max) of ``y`` over ``bins`` consecutive chunks of ``x``-sorted
    points; the points themselves when there are fewer than 2·bins. (A mean, not a median:
    one reduceat pass instead of a sort per bin, and the centre line is only a guide.)"""
    order = np.argsort(x, kind="stable")
    x, y = np.asarray(x, dtype=float)[order], np.asarray(y, dtype=float)[order]
    if x.size <= 2 * bins:
        return x, y, y, y
    edges = np.linspace(0, x.size, bins + 1).astype(np.int64)[:-1]
    lo = np.minimum.reduceat(y, edges)
    hi = np.maximum.reduceat(y, edges)
    size = np.diff(np.append(edges, x.size))
    mid = np.add.reduceat(y, edges) / size
    xc = np.add.reduceat(x, edges) / size
    return xc, lo, mid, hi


# --------------------------------------------------------------------------- distributions


@gc_paused
def runtime_histogram(values: np.ndarray, marks: dict[str, float], title: str, xlabel: str = "execution time (ms)",
                      unit: str = "ms", scale: float = 1e6):
    """Histogram with best / median / first / worst markers (seed 004 Fig. 7, and Fig. 8 for
    counters: ``unit=""``, ``scale=1``); log counts so that the tail stays visible."""
    v = np.asarray(values, dtype=float) / scale
    if v.size == 0:
        return None
    fig, ax = plt.subplots(figsize=(7.2, 3.2))
    _hist(ax, v, min(200, max(10, int(np.sqrt(v.size)))))
    ax.set_yscale("log")
    for name in ("best", "median", "first", "worst"):
        if name in marks and np.isfinite(marks[name]):
            x = marks[name] / scale
            ax.axvline(x, color=MARKER_COLORS[name], lw=1.6, label=f"{name} {x:.4g} {unit}".rstrip())
    ax.set_xlabel(xlabel)
    ax.set_ylabel("jobs (log)")
    ax.set_title(title)
    ax.legend(fontsize=8, loc="upper right")
    return fig


#: Rows of a histogram grid (scenarios) before the rest are left to the tables.
MAX_PANELS = 12


@gc_paused
def histogram_grid(rows: list[tuple[str, list[tuple[np.ndarray, dict[str, float]]]]], columns: list[str], title: str,
                   unit: str = "ms", scale: float = 1e6):
    """:func:`runtime_histogram` as a grid: a row per group (scenario), a column per metric
    (execution, response time), each column on one x axis; one figure where a victim gets one
    per scenario (an application's report: a figure per configuration). ``rows``: (label,
    [(values, markers) per column]); the first ``MAX_PANELS`` rows are drawn."""
    rows = [r for r in rows if any(np.asarray(v).size for v, _ in r[1])][:MAX_PANELS]
    if not rows:
        return None
    fig, axes = plt.subplots(len(rows), len(columns), figsize=(4.6 * len(columns), 0.7 + 1.35 * len(rows)),
                             sharex="col", squeeze=False)
    for i, (label, cells) in enumerate(rows):
        for j, (values, marks) in enumerate(cells):
            ax, v = axes[i][j], np.asarray(values, dtype=float) / scale
            if v.size:
                _hist(ax, v, min(120, max(10, int(np.sqrt(v.size)))))
                ax.set_yscale("log")
            for name in ("best", "median", "first", "worst"):
                if name in marks and np.isfinite(marks[name]):
                    x = marks[name] / scale
                    ax.axvline(x, color=MARKER_COLORS[name], lw=1.3, label=f"{name} {x:.4g} {unit}")
            ax.set_title(f"{label} (n={v.size})", fontsize=8, loc="left")
            if v.size:
                ax.legend(fontsize=6, loc="upper right")
            if i == len(rows) - 1:
                ax.set_xlabel(f"{columns[j]} ({unit})")
            if j == 0:
                ax.set_ylabel("jobs (log)", fontsize=7)
    fig.suptitle(title)
    return fig


def _hist(ax, v: np.ndarray, bins: int) -> None:
    """``ax.hist(v, bins)``; values already sorted (the report's cached groups: 5·10^6 a
    group at 10^7 jobs) are counted by binary search at numpy's own edges instead of binned
    one by one: the same counts (numpy's equal-width bins are [e_k, e_k+1), the last closed;
    NaN dropped, as ax.hist drops them), the same bars."""
    style = {"color": "#8ab6d6", "edgecolor": "none"}
    n = v.size
    if n < 2 or not bool(np.all(v[1:] >= v[:-1])) and not np.isnan(v[-1]):
        ax.hist(v, bins=bins, **style)
        return
    if np.isnan(v[-1]):  # sorted last; a NaN elsewhere is a list not sorted
        finite = v[:int(np.searchsorted(v, np.nan, "left"))]
        if finite.size < 2 or np.isnan(finite).any() or not bool(np.all(finite[1:] >= finite[:-1])):
            ax.hist(v, bins=bins, **style)
            return
        v = finite
    edges = np.histogram_bin_edges(v[[0, -1]], bins, range=(v[0], v[-1]))
    below = np.searchsorted(v, edges[1:-1], "left")  # values < each inner edge
    counts = np.diff(np.concatenate(([0], below, [v.size])))
    _bars(ax, edges, counts.astype(float), style["color"])


def _bars(ax, edges: np.ndarray, heights: np.ndarray, color: str) -> None:
    """The bars ``ax.hist(edges[:-1], bins=edges, weights=heights, color=color,
    edgecolor="none")`` draws, as one PatchCollection: the same rectangles (ax.hist's bin
    centres, then ax.bar's widths and left edges: the same floats), the same data limits and
    sticky bottom, the same pixels; one artist to make and draw instead of one per bin (a
    third of a histogram figure's CPU at 200 bins)."""
    x = edges[:-1] + 0.5 * np.diff(edges)  # ax.hist's bin centres
    width = (x[0] + np.diff(edges)) - x[0]  # ax.bar's widths, taken from the first centre
    left = x - width / 2
    rects = [matplotlib.patches.Rectangle((lo, 0.0), w, h) for lo, w, h in zip(left, width, heights)]
    bars = matplotlib.collections.PatchCollection(rects, facecolor=color, edgecolor="none")
    bars.sticky_edges.y.append(0.0)  # ax.bar's: the axis starts at the bars' bottom
    ax.add_collection(bars)


def _sorted(v) -> np.ndarray:
    """``v`` sorted ascending (one O(n) check when the caller already sorted it)."""
    v = np.asarray(v, dtype=float)
    return v if v.size < 2 or bool(np.all(v[1:] >= v[:-1])) else np.sort(v)


def _ms_quantiles(sorted_ns: np.ndarray, qs) -> np.ndarray:
    """``st.sorted_quantiles(_ms(sorted_ns), qs)`` bit for bit, converting only the values it
    reads (not every job's: 5·10^6 a group at 10^7 jobs, four figures)."""
    n = sorted_ns.size
    h = (n - 1) * np.asarray(qs, dtype=float)
    lo = np.floor(h).astype(np.int64)
    hi = np.minimum(lo + 1, n - 1)
    a, b = sorted_ns[lo] / 1e6, sorted_ns[hi] / 1e6
    return a + (h - lo) * (b - a)


@gc_paused
def boxplots(stats_by_group: list[tuple[str, np.ndarray]], title: str, ylabel: str):
    """Boxplots per scenario drawn from quantiles: box p25–p75, median, whiskers p1–p99, the
    maximum as a red point (every job counted, none drawn)."""
    items = []
    for label, v in stats_by_group:
        v = _sorted(v)
        if v.size == 0:
            continue
        p1, q1, med, q3, p99 = _ms_quantiles(v, [0.01, 0.25, 0.5, 0.75, 0.99])
        items.append({"label": label, "whislo": p1, "q1": q1, "med": med, "q3": q3, "whishi": p99, "fliers": [v.max() / 1e6]})
    if not items:
        return None
    fig, ax = plt.subplots(figsize=(7.2, 0.6 + 0.5 * len(items) + 1.5))
    # Matplotlib 3.10 renamed vert=False to orientation="horizontal" (and deprecated vert).
    horizontal = {"orientation": "horizontal"} if "orientation" in inspect.signature(ax.bxp).parameters else {"vert": False}
    ax.bxp(items, showfliers=True, flierprops={"marker": "o", "markerfacecolor": "#e76f51", "markersize": 5}, **horizontal)
    ax.set_xlabel(ylabel + " — box p25–p75, whiskers p1–p99, dot: max")
    ax.set_title(title)
    ax.invert_yaxis()
    return fig


@gc_paused
def ecdfs(groups: list[tuple[str, np.ndarray]], title: str, xlabel: str):
    """Empirical CDFs per scenario (from ``ECDF_POINTS`` quantiles), log-scaled tail axis
    1 − F so that rare slow jobs show."""
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(9.5, 3.2))
    drawn = False
    for i, (label, v) in enumerate(groups):
        v = _sorted(v)
        if v.size == 0:
            continue
        n = v.size
        p = np.linspace(0, 1, min(ECDF_POINTS, n))
        q = _ms_quantiles(v, p)
        a1.plot(q, p, color=_color(i), label=label, lw=1.4)
        sv = v[-min(n, ECDF_POINTS):] / 1e6
        tail = 1.0 - (np.arange(n - sv.size, n) + 0.5) / n
        a2.plot(sv, tail, color=_color(i), lw=1.2, label=label)
        drawn = True
    if not drawn:
        plt.close(fig)
        return None
    a1.set_xlabel(xlabel)
    a1.set_ylabel("fraction of jobs ≤ x")
    a1.legend(fontsize=8)
    a2.set_yscale("log")
    a2.set_xlabel(xlabel)
    a2.set_ylabel("fraction of jobs > x (tail)")
    fig.suptitle(title)
    return fig


@gc_paused
def per_job_series(runs: list[tuple[str, np.ndarray, np.ndarray]], reference: pd.DataFrame, title: str,
                   ylabel: str = "execution time (ms)", reference_label: str | None = None):
    """Per-job series of every run (grey envelopes) and the per-job minimum across runs as
    the reference curve (seed 000 Fig. 5.16; ``reference_label`` names where it comes from
    when those are other runs)."""
    if not runs:
        return None
    fig, ax = plt.subplots(figsize=(9.5, 3.4))
    for i, (_, job, v) in enumerate(runs):
        x, lo, mid, hi = envelope(job, _ms(v))
        if lo is hi:
            ax.plot(x, mid, color="0.6", lw=0.5, alpha=0.7, label="runs" if i == 0 else None)
        else:
            ax.fill_between(x, lo, hi, color="0.6", alpha=0.25, lw=0, label="runs (min–max per bin)" if i == 0 else None)
            ax.plot(x, mid, color="0.45", lw=0.5, alpha=0.7)
    if not reference.empty:
        x, lo, _, _ = envelope(reference["job"].to_numpy(), _ms(reference["min_ns"]))
        ax.plot(x, lo, color="#e76f51", lw=1.3, label=reference_label or f"reference: per-job minimum over {int(reference['n_runs'].max())} runs")
    ax.set_xlabel("job")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=8, loc="upper right")
    return fig


# --------------------------------------------------------------------------- counters


@gc_paused
def counter_scatter(x: np.ndarray, y: np.ndarray, first: tuple[float, float] | None, r: float, counter: str, title: str,
                    seed: int = 0):
    """Runtime against a counter, a sample of jobs, the first job highlighted, Pearson r."""
    x, y = np.asarray(x, dtype=float), _ms(y)
    if x.size == 0:
        return None
    if x.size > SCATTER_POINTS:
        pick = np.random.default_rng(seed).choice(x.size, SCATTER_POINTS, replace=False)
        x, y = x[pick], y[pick]
    fig, ax = plt.subplots(figsize=(6.0, 3.6))
    ax.scatter(x, y, s=5, alpha=0.5, color="#264653", lw=0, label="jobs")
    if first is not None:
        ax.scatter([first[0]], [first[1] / 1e6], s=60, marker="*", color="#e9c46a", edgecolor="k", lw=0.5,
                   label="first job", zorder=3)
    ax.set_xlabel(counter)
    ax.set_ylabel("execution time (ms)")
    ax.set_title(f"{title} — Pearson r = {r:.3f}" if np.isfinite(r) else f"{title} — r undefined (constant)")
    ax.legend(fontsize=8)
    return fig


@gc_paused
def correlation_matrix(corr: pd.DataFrame, title: str):
    """Heat map of a correlation matrix, values written in the cells."""
    if corr.empty:
        return None
    n = len(corr)
    fig, ax = plt.subplots(figsize=(1.2 + 0.9 * n, 0.8 + 0.8 * n))
    im = ax.imshow(corr.to_numpy(), vmin=-1, vmax=1, cmap="RdBu_r")
    labels = [c.removeprefix("ctr_") for c in corr.columns]
    ax.set_xticks(range(n), labels, rotation=45, ha="right")
    ax.set_yticks(range(n), labels)
    ax.grid(False)
    for i in range(n):
        for j in range(n):
            v = corr.iat[i, j]
            ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=8, color="white" if abs(v) > 0.6 else "black")
    fig.colorbar(im, ax=ax, shrink=0.8)
    ax.set_title(title)
    return fig


@gc_paused
def heatmap(grid: pd.DataFrame, title: str, value_label: str):
    """A two-way grid (rows × columns) as a heat map with the value in every cell."""
    if grid.empty:
        return None
    fig, ax = plt.subplots(figsize=(1.5 + 0.8 * grid.shape[1], 1.2 + 0.5 * grid.shape[0]))
    v = grid.to_numpy(dtype=float)
    im = ax.imshow(np.ma.masked_invalid(v), cmap="viridis", aspect="auto")
    ax.set_xticks(range(grid.shape[1]), [str(c) for c in grid.columns])
    ax.set_yticks(range(grid.shape[0]), [str(i) for i in grid.index])
    ax.set_xlabel(str(grid.columns.name))
    ax.set_ylabel(str(grid.index.name))
    ax.grid(False)
    finite = v[np.isfinite(v)]
    mid = np.median(finite) if finite.size else 0
    for i in range(v.shape[0]):
        for j in range(v.shape[1]):
            if np.isfinite(v[i, j]):
                ax.text(j, i, f"{v[i, j]:.3g}", ha="center", va="center", fontsize=7, color="white" if v[i, j] < mid else "black")
    fig.colorbar(im, ax=ax, label=value_label)
    ax.set_title(title)
    return fig


# --------------------------------------------------------------------------- wake-up


@gc_paused
def wakeup_curves(ser: pd.DataFrame, drift: pd.DataFrame, title: str):
    """rel(k) = w(k) − w(0) − k·P with the fitted drift, and Δw(k) = w(k) − w(k−1) − P
    (seed 002 Fig. 10 and 11), from analysis.wakeup.wakeup_series; the first
    ``MAX_RUNS_DRAWN`` runs of a scenario."""
    if ser.empty:
        return None
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 3.4))
    runs = runs_of_series(ser)[:MAX_RUNS_DRAWN]  # each run's stretch, not a copy of every run
    for i, (rid, g) in enumerate(runs):
        x, _, mid, _ = envelope(g["k"].to_numpy(), g["rel_ns"].to_numpy() / 1e3)
        a1.plot(x, mid, color=_color(i), lw=0.8, label=str(rid))
        d = drift[drift["run_id"] == rid] if not drift.empty else drift
        if len(d):
            k = g["k"].to_numpy(dtype=float)
            r = d.iloc[0]
            a1.plot([k.min(), k.max()], [(r.intercept_ns + r.slope_ns_per_job * k.min()) / 1e3,
                                         (r.intercept_ns + r.slope_ns_per_job * k.max()) / 1e3],
                    color=_color(i), lw=1.5, ls="--")
        x, lo, _, hi = envelope(g["k"].to_numpy(), np.nan_to_num(g["dw_ns"].to_numpy() / 1e3))
        a2.plot(x, hi, color=_color(i), lw=0.6)
        a2.plot(x, lo, color=_color(i), lw=0.6)
    a1.set_xlabel("k (job)")
    a1.set_ylabel("rel(k) (µs)")
    a1.set_title("relative wake-up, dashed: fitted drift")
    a1.legend(fontsize=7, loc="best")
    a2.set_xlabel("k (job)")
    a2.set_ylabel("Δw(k) (µs)")
    a2.set_title("wake-up delta (min/max envelope)")
    fig.suptitle(title)
    return fig


# --------------------------------------------------------------------------- spikes, trace


@gc_paused
def spike_series(run: pd.DataFrame, title: str):
    """One run's execution times, its spike threshold and the spikes marked."""
    if run.empty:
        return None
    fig, ax = plt.subplots(figsize=(9.5, 3.2))
    x, lo, mid, hi = envelope(run["job"].to_numpy(), _ms(run["exec_ns"]))
    if lo is hi:
        ax.plot(x, mid, color="#264653", lw=0.6, label="execution time")
    else:
        ax.fill_between(x, lo, hi, color="#264653", alpha=0.3, lw=0, label="execution time (min–max per bin)")
    s = run[run["is_spike"]]
    ax.scatter(s["job"], _ms(s["exec_ns"]), s=14, color="#e76f51", zorder=3, label=f"{len(s)} spikes")
    ax.axhline(float(run["threshold"].iloc[0]) / 1e6, color="#e76f51", ls="--", lw=1, label="threshold (median + k·MAD)")
    ax.set_xlabel("job")
    ax.set_ylabel("execution time (ms)")
    ax.set_title(title)
    ax.legend(fontsize=8, loc="upper right")
    return fig


def _reddish(rgb) -> bool:
    """A saturated red (hue within ±0.04 of red): kept for the victim alone."""
    h, s_, _ = colorsys.rgb_to_hsv(*rgb[:3])
    return (h < 0.04 or h > 0.96) and s_ > 0.35


#: The victim's colour in every timeline, never given to anything else (a dark red: the
#: enemy colours below are drawn from tab20/tab20b/tab20c, which hold no such red).
VICTIM_COLOR = "#b5001f"
#: Distinct colours for everything else that ran, then the same colours again with a hatch,
#: so that no two names share a look before ``len(OTHER_COLORS) × len(HATCHES)`` names.
OTHER_COLORS = list(dict.fromkeys(
    matplotlib.colors.to_hex(c) for cm in ("tab20", "tab20b", "tab20c") for c in plt.get_cmap(cm).colors
    if not _reddish(c)))
HATCHES = ["", "////", "....", "xxxx", "\\\\"]
LEGEND_NAMES = 14  # legend entries beyond the victim before "+N more"


def timeline_styles(names: list[str], victim: str = "victim") -> dict[str, tuple[str, str]]:
    """name -> (colour, hatch) for a timeline: the victim always ``VICTIM_COLOR`` without a
    hatch, every other name (in the given order: most frequent first) a distinct pair."""
    out = {victim: (VICTIM_COLOR, "")}
    others = [n for n in names if n != victim]
    for i, n in enumerate(others):
        colour, cycle = OTHER_COLORS[i % len(OTHER_COLORS)], i // len(OTHER_COLORS)
        out[n] = (colour, HATCHES[cycle % len(HATCHES)])
    return out


@gc_paused
def gantt(iv: pd.DataFrame, title: str, victim: str = "victim"):
    """What ran on each CPU around one job (trace): one lane per CPU, the victim in its
    reserved colour and first in the legend, every other task its own colour (hatched once
    the colours run out); the job's release, start and end as vertical lines; times in ms
    from its release."""
    if iv.empty:
        return None
    iv = iv[iv["pid"] != 0]  # idle
    cpus = sorted(iv["cpu"].unique())
    names = list(iv.groupby("name")["rel_end_ns"].count().sort_values(ascending=False, kind="stable").index)
    styles = timeline_styles(names, victim)
    fig, ax = plt.subplots(figsize=(10, 1.2 + 0.7 * max(1, len(cpus))))
    for lane, cpu in enumerate(cpus):
        g = iv[iv["cpu"] == cpu]
        for kind, h, off in (("process", 0.6, 0.0), ("irq", 0.25, 0.35), ("softirq", 0.25, 0.35), ("timer", 0.25, 0.35)):
            k = g[g["kind"] == kind]
            for name, kn in k.groupby("name", sort=False):  # one call per name: its hatch is per collection
                colour, hatch = styles[name]
                ax.broken_barh(list(zip(kn["rel_start_ns"] / 1e6, (kn["rel_end_ns"] - kn["rel_start_ns"]) / 1e6)),
                               (lane - 0.3 + off, h), facecolors=colour, edgecolor="white" if hatch else "none",
                               hatch=hatch or None, lw=0)
    a = iv.attrs
    if "start_ns" in a and "end_ns" in a:  # the job itself, shaded: it may be far shorter than the window
        ax.axvspan((a["start_ns"] - a["release_ns"]) / 1e6, (a["end_ns"] - a["release_ns"]) / 1e6, color=VICTIM_COLOR,
                   alpha=0.12, lw=0, zorder=0)
    for key, style in (("release_ns", ":"), ("start_ns", "--"), ("end_ns", "-")):
        if key in a:
            ax.axvline((a[key] - a["release_ns"]) / 1e6, color="k", lw=0.8, ls=style)
    ax.set_yticks(range(len(cpus)), [f"CPU {c}" for c in cpus])
    ax.set_xlabel("ms from the worst job's release (dotted: release, dashed: start, solid: end; shaded: the job)")
    # The victim leads the legend even when it ran in none of the drawn intervals' top names.
    shown = [victim] + [n for n in names if n != victim][:LEGEND_NAMES]
    handles = [matplotlib.patches.Patch(facecolor=styles[n][0], hatch=styles[n][1] or None, edgecolor="white")
               for n in shown]
    labels = [f"{n} (victim)" if n == victim else n for n in shown]
    rest = len([n for n in names if n != victim]) - LEGEND_NAMES
    if rest > 0:
        handles.append(matplotlib.patches.Patch(facecolor="none", edgecolor="none"))
        labels.append(f"+{rest} more (tables/timeline.csv)")
    ax.legend(handles, labels, fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.set_title(title)
    return fig


# --------------------------------------------------------------------------- pWCET


@gc_paused
def pwcet_curve(values: np.ndarray, result, title: str):
    """Empirical exceedance (1 − ECDF) of the execution time with the pWCET curve and its
    bounds, or the refusal written on the plot."""
    v = np.sort(_ms(values))
    if v.size == 0:
        return None
    fig, ax = plt.subplots(figsize=(7.2, 3.4))
    n = v.size
    # The top ranks one by one (the tail the fit is about), then log-spaced ranks: a marker
    # per pixel or so is all a 7-inch plot shows (each marker is an element of the SVG).
    keep = np.union1d(np.arange(min(n, TAIL_POINTS)), np.geomspace(1, n, min(n, EXCEEDANCE_POINTS)).astype(np.int64) - 1)
    ax.plot(v[::-1][keep], (keep + 0.5) / n, ".", ms=3, color="#264653", label="observed")
    if result.ok:
        t = result.table
        ax.plot(t["pwcet"] / 1e6, t["exceedance"], color="#e76f51", lw=1.5, label=f"pWCET ({result.model.upper()})")
        hi = np.where(np.isfinite(t["ci_high"]), t["ci_high"], np.nan)
        ax.fill_betweenx(t["exceedance"], t["ci_low"] / 1e6, hi / 1e6, color="#e76f51", alpha=0.2,
                         label=f"{result.level:.0%} bounds")
    else:
        ax.text(0.02, 0.05, "pWCET refused:\n" + result.refused.replace("; ", "\n"), transform=ax.transAxes,
                fontsize=8, color="#b00020", va="bottom")
    ax.set_yscale("log")
    ax.set_xlabel("execution time (ms)")
    ax.set_ylabel("probability of exceedance per job")
    ax.set_title(title)
    ax.legend(fontsize=8, loc="upper right")
    return fig


def markers_of(jobs: pd.DataFrame, column: str) -> dict[str, float]:
    """best / median / first / worst of a job table (analysis.stats.markers, one group)."""
    m = st.markers(jobs, column=column, by=())
    return {k: float(m[k].iloc[0]) for k in ("best", "median", "first", "worst")}
