"""`xtalk report CAMPAIGN_DIR`: a campaign report that leads with what a campaign is for.

    REPORT/index.html          verdicts (ε per cell, as a matrix), the two-way views (per enemy
                               family and per group: slowdown heat map beside its 3-D surface), the
                               worst cells, the guards, every cell in one table
    REPORT/cells/<group>.html  per-group detail, one click away: each cell's verdict line,
                               guards and numbers
    REPORT/summary.md          the campaign summary (campaign_summary.py)
    REPORT/tables/*.csv        cells.csv, one grid_<family>_<group>.csv per two-way view
    REPORT/figures/            every figure as PNG, and SVG with ``svg`` (cells/ for the detail pages)
    REPORT/figures/cells/      with ``cell_figures`` (`xtalk report --cell-figures`) only: one
                               figure per cell (its execution time beside its group's solo)
    REPORT/csv/jobs.csv        one row per job

The figures on the main page are a fixed number per two-way view, not per cell: a campaign of
88 cells gave 182 figures and 10 MB when each cell was reported like an experiment. Per-cell
figures are drawn only on request, on the group pages; tables otherwise.
"""

from __future__ import annotations

import datetime as dt
import html
import re
import time
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from .. import safepath
from ..analysis import verdict as vd
from . import boards as bd
from ..results import campaign_cells as cc
from . import campaign_figures as cf
from ..results import campaign_maps as cm
from . import campaign_summary as cs
from . import figures as fg
from .export import export_jobs, export_tables
from .html import Section, page, verdict_list

#: Worst cells listed on the main page.
WORST = 10
#: Cell-table columns shown in the HTML (every column is in tables/cells.csv and summary.json).
SHOWN = ["group", "scenario", "runs_ok", "jobs", "exec_median_ms", "response_p99_ms", "exec_slowdown_median",
         "exec_slowdown_median_lo", "exec_slowdown_median_hi", "response_slowdown_median", "deadline_misses",
         "serious_misses", "epsilon", "eps_verdict", "eps_ratio", "status"]
CLASS = {vd.VIOLATED: "bad", vd.INCONCLUSIVE: "warn", vd.HOLDS: "good"}
CSS = (".matrix td.bad{background:#f8d7cf}.matrix td.warn{background:#fbf0c9}.matrix td.good{background:#d6efe9}"
       ".matrix td{text-align:center}.matrix a{color:inherit}")


def slug(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", str(s)).strip("_") or "default"


def _cell_link(group: str, scenario: str, text: str) -> str:
    return (f'<a href="cells/{html.escape(slug(group))}.html#{html.escape(slug(scenario))}">'
            f"{html.escape(text)}</a>")


def verdict_matrix(cells: pd.DataFrame) -> str:
    """Rows: scenarios; columns: groups; each cell its ε verdict and ratio, coloured, linking
    to its detail."""
    groups = list(dict.fromkeys(cells["group"]))
    by = cells.set_index(["scenario", "group"])
    head = "<th>scenario</th>" + "".join(f"<th>{html.escape(g)}</th>" for g in groups)
    body = []
    for sc in cc.scenario_order(cells):
        tds = []
        for g in groups:
            if (sc, g) not in by.index:
                tds.append('<td class="note">–</td>')
                continue
            r = by.loc[(sc, g)]
            if r["status"] == vd.NO_JOBS_STATUS:
                text, cls = f"no jobs ({r['runs_ok']}/{r['runs']} runs ok)", "bad"
            elif sc == "solo":
                text, cls = f"reference {r['exec_median_ms']:.3g} ms", ""
            elif r["eps_verdict"] in CLASS:
                text, cls = cs.eps_text(r["eps_verdict"], r["eps_ratio"], r["eps_observed_ms"]), CLASS[r["eps_verdict"]]
            else:
                text, cls = f"×{r['exec_slowdown_median']:.2f} ({r['eps_verdict']})", "warn" if r["serious_misses"] else ""
            if r["serious_misses"]:
                cls, text = "bad", text + f", {r['serious_misses']} serious"
            tds.append(f'<td class="{cls}">{_cell_link(g, sc, text)}</td>')
        body.append(f"<tr><td>{html.escape(sc)}</td>{''.join(tds)}</tr>")
    return f'<table class="matrix"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


class _CampaignBuilder:
    def __init__(self, cd: cc.CampaignData, out: Path, epsilons: Sequence, n_boot: int, cell_figures: bool = False,
                 map_stat: cm.MapStat | None = None, svg: bool = False):
        self.cd, self.out, self.epsilons, self.n_boot, self.svg = cd, out, list(epsilons), n_boot, svg
        self.map_stat = map_stat
        self.cell_figures = cell_figures
        self.figures: list[fg.Rendered] = []
        self.cell_figure_count = 0
        self.tables: dict[str, pd.DataFrame] = {}
        self.cells = cc.cell_table(cd, self.epsilons, n_boot=n_boot)
        self.tables["cells"] = self.cells.drop(columns=["warnings"]).assign(
            warnings=[" | ".join(w["message"] for w in ws) for ws in self.cells["warnings"]])

    def fig(self, figure, name: str, title: str, caption: str) -> fg.Rendered | None:
        if figure is None:
            return None
        r = fg.render(figure, self.out / "figures", name, title, caption, svg=self.svg)
        self.figures.append(r)
        return r

    def verdicts(self) -> Section:
        s = Section("verdicts", "Verdicts")
        c = self.cells
        s.text(cs.epsilon_line(c), cls="")
        s.text("Each cell against its application's ε (the campaign file's `epsilon`, stored on every run), the ratio "
               "to the solo of the same application, configuration and variant with its 95 % CI: holds when the whole "
               "CI is within the bound, violated when it is all above, inconclusive otherwise. Click a cell for its "
               "detail.")
        s.raw(verdict_matrix(c))
        return s

    def boards(self) -> Section | None:
        """A lab campaign's board-to-board variation against its kernel's effect (report/boards.py)."""
        self.board_splits = bd.splits(self.cd)
        if not self.board_splits:
            return None
        f = self.board_splits[0].split.factor
        s = Section("boards", f"Boards and {f}s")
        s.text(f"The variation between boards (a random effect: its SD, 95 % CI) apart from the {f}'s effect (its ratio "
               f"to the reference {f}, 95 % CI accounting for the boards), per cell, on each run's response-time "
               "statistic. Few boards give wide intervals: that is what telling boards from kernels costs.")
        s.raw("<ul>" + "".join(f"<li>{html.escape(x)}</li>" for x in bd.lines(self.board_splits)) + "</ul>")
        self.tables["boards"] = bd.table(self.board_splits)
        return s

    def views(self) -> Section:
        s = Section("views", "Maps")
        stat, why = cm.choose(self.cells, self.map_stat)
        known = (f"Each map shows {stat.short} ({stat.label}): {why}. A cell whose CI has not concluded (it holds 1; "
                 "for the ε map, it holds the bound) is grey, hatched, its value followed by \"?\", and left out of the "
                 "colour scale; a red frame marks a cell whose ε is violated.")
        s.text(known)
        grids = cc.two_way_grids(self.cd, self.cells, stat)
        scen = cc.scenario_grid(self.cells, stat)
        if scen is not None:
            self.tables["map_scenarios"] = scen.values
            s.figure(self.fig(cf.scenario_view(scen, f"Scenarios × groups: {stat.short}"), "map_scenarios",
                              f"Scenarios × groups: {stat.short}",
                              "Each explicit scenario (rows) in each group (columns), against the group's solo."))
        if not grids:
            s.text("This campaign has no [[two_way]] family, so there is no (number of enemies × total) grid to draw.")
            return s
        s.text(f"Two-way views, per enemy family and per group (application, configuration, variant): {stat.short} "
               "against the solo of the same group, over the number of enemies and the total resource they share "
               "(seed 000 ch. 6). Axes are numeric, sorted by value, one unit each; excluded cells (infeasible "
               "shares) are gaps. Tables: tables/grid_<family>_<group>.csv.")
        for i, g in enumerate(grids):
            self.tables[f"grid_{slug(g.family)}_{slug(g.group)}"] = g.values
            s.figure(self.fig(cf.two_way_view(g, f"{g.title}: {stat.short}"), f"view_{i}",
                              f"Two-way view, {g.title}",
                              f"Left: heat map; right: 3-D surface of the same cells. Rows / y: {g.row_label}; "
                              f"columns / x: {g.col_label}."))
        return s

    def worst(self) -> Section:
        s = Section("worst", "Worst cells")
        w = cc.worst(self.cells, WORST)
        s.text(f"The {len(w)} worst cells: ε violated first, then inconclusive, then serious misses and the largest "
               "median slowdown.")
        s.raw(verdict_list([(r.status, r.verdict) for r in w.itertuples()]))
        links = ", ".join(_cell_link(r.group, r.scenario, f"{r.group} · {r.scenario}") for r in w.itertuples())
        s.raw(f'<p class="note">Details: {links}</p>')
        return s

    def warnings(self) -> Section:
        s = Section("warnings", "Warnings")
        lines = cs.guard_lines(self.cells)
        if not lines:
            s.text("No guard fired on any cell.")
        else:
            s.text("Guards (analysis/guards.py) per cell; a guard firing on many cells is one line here, each cell's "
                   "own list is in its detail page and in summary.json.")
            s.raw(verdict_list([(vd.GUARD, line) for line in lines]))
        return s

    def cell_figure(self, per_run: dict, group: str, scenario: str) -> fg.Rendered | None:
        """Boxplots of a cell's execution time beside its group's solo (every job counted)."""
        def values(sc: str) -> np.ndarray:
            runs = per_run.get((group, sc), {}).get("exec_ns", [])
            return np.concatenate(runs) if runs else np.empty(0)

        shown = [(sc, values(sc)) for sc in dict.fromkeys([cc.SOLO, scenario])]
        fig = fg.boxplots([(sc, v) for sc, v in shown if v.size], f"{group} · {scenario}", "execution time (ms)")
        if fig is None:
            return None
        self.cell_figure_count += 1
        safepath.makedirs(self.out / "figures" / "cells")
        return fg.render(fig, self.out / "figures", f"cells/{slug(group)}_{slug(scenario)}",
                         f"Execution time, {group} · {scenario}", "Beside its group's solo; the red dot is the maximum.",
                         svg=self.svg)

    def all_cells(self) -> Section:
        s = Section("cells", "Every cell")
        groups = list(dict.fromkeys(self.cells["group"]))
        s.raw('<p>Per-group detail: ' + ", ".join(
            f'<a href="cells/{html.escape(slug(g))}.html">{html.escape(g)}</a>' for g in groups) + "</p>")
        shown = self.cells[[c for c in SHOWN if c in self.cells.columns]]
        s.table(shown, max_rows=len(shown))
        return s

    def cell_pages(self) -> list[Path]:
        """One small page per group: its cells' verdict lines, guards and numbers (tables only,
        cheap at any number of cells); with ``cell_figures`` also each cell's figure."""
        out = []
        safepath.makedirs(self.out / "cells")
        per_run = cc.run_samples(self.cd.data) if self.cell_figures else {}
        for i, (g, c) in enumerate(self.cells.groupby("group", sort=False)):
            sec = Section("cells", f"{g}: {len(c)} cells")
            sec.raw('<p><a href="../index.html">← campaign report</a></p>')
            for r in c.itertuples():
                sec.raw(f'<h3 id="{html.escape(slug(r.scenario))}">{html.escape(r.scenario)}</h3>')
                sec.raw(verdict_list([(r.status, r.verdict)] + [(vd.GUARD, "guard: " + w["message"]) for w in r.warnings]))
                if self.cell_figures:
                    sec.figure(self.cell_figure(per_run, g, r.scenario))
            sec.table(c.drop(columns=["warnings", "verdict"]), "Numbers", max_rows=len(c))
            p = self.out / "cells" / f"{slug(g)}.html"
            safepath.write_text(p, page(f"{self.cd.name}: {g}", f"{len(c)} cells", [sec], "Part of the campaign report."))
            out.append(p)
        return out


def build_campaign(path, out: Path | None = None, epsilons: Sequence = (), *, csv: bool = True, n_boot: int = 1000,
                   console=None, cell_figures: bool = False, map_stat: str | None = None, svg: bool = False) -> Path:
    """Write the campaign report of campaign directory ``path``; returns index.html.
    ``cell_figures``: also one figure per cell on the group pages (off by default: 88 cells
    drawn cost a minute and megabytes, the tables say the same). ``map_stat``: the statistic
    of the maps (campaign_maps.STATS; default: the strongest concluded effect). ``svg``: each
    figure also as SVG."""
    t0 = time.perf_counter()
    asked = cm.parse(map_stat)  # a bad name fails before any work
    root = Path(path)
    out = Path(out) if out is not None else root / "report"
    safepath.makedirs(out)
    cd = cc.load_campaign(root)
    timings = {"load": time.perf_counter() - t0}
    t = time.perf_counter()
    b = _CampaignBuilder(cd, out, epsilons, n_boot, cell_figures, asked, svg)
    timings["cells"] = time.perf_counter() - t
    sections = []
    for name in ("verdicts", "boards", "views", "worst", "warnings", "all_cells"):
        t = time.perf_counter()
        section = getattr(b, name)()
        if section is not None:
            sections.append(section)
        timings[name] = time.perf_counter() - t
    t = time.perf_counter()
    pages = b.cell_pages()
    timings["cell pages"] = time.perf_counter() - t
    files = ["index.html", "summary.md", f"cells/*.html ({len(pages)} pages, one per group)",
             f"figures/*.png{', figures/*.svg' if svg else ''} (one per two-way view, one for the explicit scenarios)",
             "tables/cells.csv, tables/grid_*.csv, tables/map_scenarios.csv"]
    if b.cell_figure_count:
        files.append(f"figures/cells/*.png{', *.svg' if svg else ''} ({b.cell_figure_count}, one per cell: --cell-figures)")
    if csv:
        n_jobs = export_jobs(cd.data.runs, out / "csv" / "jobs.csv")
        files.append(f"csv/jobs.csv ({n_jobs} rows, one per job)")
    export_tables(b.tables, out / "tables")
    safepath.write_text(out / "summary.md", cs.to_markdown(b.cells, cd.name, bd.markdown(b.board_splits)))
    from . import verdicts as vdoc

    vdoc.write(root, vdoc.document("campaign", cd.name, root, vdoc.campaign_cells(b.cells), cs.document_warnings(b.cells),
                                   environment=cs._environment(cd)))  # DIR/verdicts.json, as `xtalk summary` writes it
    exports = Section("files", "Files")
    exports.raw("<ul>" + "".join(f"<li>{html.escape(f)}</li>" for f in files) + "</ul>")
    exports.text("Python API: xtalk.results.campaign_cells.cell_table(load_campaign(DIR)) returns the cell table.")
    sections.append(exports)
    elapsed = time.perf_counter() - t0
    subtitle = (f"{len(b.cells)} cells, {len(cd.data.runs)} runs, {len(cd.data.measured)} measured jobs, "
                f"generated {dt.datetime.now().strftime('%Y-%m-%d %H:%M:%S')}")
    html_path = out / "index.html"
    safepath.write_text(html_path, page(f"xtalk campaign report: {cd.name}", subtitle, sections,
                                        f"Built in {elapsed:.1f} s by xtalk report.").replace("</style>", CSS + "</style>", 1))
    if console is not None:
        console.print(cs.epsilon_line(b.cells), highlight=False)
        stat, why = cm.choose(b.cells, asked)
        console.print(f"maps: {stat.short} ({why})", highlight=False, soft_wrap=True)
        for line in cs.guard_lines(b.cells):
            console.print(f"[yellow]warning: {line}[/]", highlight=False)
        size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file() and p.parent.name != "csv")
        console.print(f"report: {html_path} ({len(b.figures)} figures on the main page, {b.cell_figure_count} on the "
                      f"group pages, {len(pages)} group pages, "
                      f"{size / 1e6:.1f} MB without csv/) in {elapsed:.1f} s: "
                      + ", ".join(f"{k} {v:.1f}" for k, v in timings.items()), highlight=False, soft_wrap=True)
    return html_path
