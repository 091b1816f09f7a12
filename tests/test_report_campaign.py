"""Campaign summaries and reports on planted campaigns (testing/synthetic_campaign.py: the
layout `xtalk campaign run` writes, each cell's slowdown known): the application's ε reaches
every verdict, the two-way views are per family and per configuration with numeric axes and
the slowdown, the report leads with grids and verdicts at a bounded size, and each cell's
guards reach the campaign summary and report."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from conftest import xtalk
from xtalk.campaign.schema import Epsilon
from xtalk.results import campaign_cells as cc
from xtalk.report import campaign_figures as cf
from xtalk.results import tables as tb
from xtalk.report.build import build
from xtalk.report.campaign_summary import write_campaign_summary
from xtalk.results.epsilon import from_campaign_label
from xtalk.testing.synthetic_campaign import Family, write_campaign

PI = Family("pi", "reservation.runtime", [1, 2, 4], ["2ms", "5ms", "10ms"])
CHASE = Family("chase", "elements", [1, 2], [65536, 262144])


def planted(conf: str, fam: str, n: int, total: str) -> float:
    """A grid where text order, pooled families or pooled configurations would all show."""
    if fam == "solo":
        return 1.0
    per = 0.10 if conf == "other" else 0.02
    if fam == "pi":
        return 1.0 + per * n + 0.03 * float(total.removesuffix("ms"))
    return 1.0 + per * n + 0.5 * int(total) / 262144


def pi_excluded(conf: str, fam: str, n: int, total: str) -> bool:
    return fam == "pi" and n == 1 and total == "10ms"  # one enemy cannot use a whole period


@pytest.fixture(scope="module")
def two_way(tmp_path_factory):
    root = write_campaign(tmp_path_factory.mktemp("tw") / "c", families=[PI, CHASE], scenarios={"read": 1.3},
                          slowdown=planted, excluded=pi_excluded, repetitions=2, jobs=60)
    cd = cc.load_campaign(root)
    return root, cd, cc.cell_table(cd, n_boot=300)


# --------------------------------------------------------------------------- ε (defect 2)


def test_the_campaign_label_of_every_epsilon_form_is_read():
    """The label is what campaign/grid.py stores: Epsilon.model_dump_json of the file's table;
    the labels of results written before the one ε grammar (`on`, `relative`) read the same."""
    rel = from_campaign_label(Epsilon(metric="response", statistic="p99", bound="1.5x").model_dump_json())
    assert (rel.metric, rel.statistic, rel.relative, rel.bound_ns) == ("response", "p99", 1.5, None)
    assert from_campaign_label('{"on": "response", "relative": 1.5, "statistic": "p99"}') == rel
    ab = from_campaign_label(Epsilon(metric="exec", statistic="p99.9", bound="3ms").model_dump_json())
    assert (ab.metric, ab.statistic, ab.bound_ns, ab.relative) == ("exec", "p99.9", 3e6, None)
    assert from_campaign_label('{"on": "exec", "bound": "3ms", "statistic": "p999"}') == ab
    old = from_campaign_label('{"bound": "2ms"}')  # an old table's defaults: response, max
    assert (old.metric, old.statistic) == ("response", "max")


def test_campaign_epsilon_reaches_every_verdict(tmp_path):
    root = write_campaign(tmp_path / "c", families=[], scenarios={"mild": 1.1, "heavy": 2.0},
                          epsilon={"on": "response", "relative": 1.5, "statistic": "p99"}, repetitions=3, jobs=80)
    cells = cc.cell_table(cc.load_campaign(root), n_boot=300).set_index(["group", "scenario"])
    for g in ("other", "fifo"):
        assert cells.loc[(g, "mild"), "eps_verdict"] == "holds"
        assert cells.loc[(g, "heavy"), "eps_verdict"] == "violated"
        assert cells.loc[(g, "heavy"), "status"] == "ε VIOLATED"
        assert cells.loc[(g, "heavy"), "epsilon"] == "response p99 ≤ 1.5× solo"
    assert not any("no ε given" in v for v in cells["verdict"])
    # The experiment report's own tables read the label too (the root of the defect).
    v = tb.verdicts(tb.load(root), n_boot=200)
    enemy = v[v["scenario"] != "solo"]
    assert len(enemy) and not enemy["verdict"].str.contains("no ε given").any()
    assert enemy["verdict"].str.contains("ε response p99 ≤ 1.5× solo: VIOLATED").any()
    html = build(root, csv=False).read_text()
    assert "no ε given" not in html and "violated" in html and "response p99 ≤ 1.5× solo" in html


# --------------------------------------------------------------------------- two-way views (defect 3)


def test_two_way_grids_per_family_and_configuration_with_numeric_axes(two_way):
    _, cd, cells = two_way
    grids = {(g.family, g.group): g for g in cc.two_way_grids(cd, cells)}
    assert set(grids) == {("pi", "other"), ("pi", "fifo"), ("chase", "other"), ("chase", "fifo")}
    for (fam, conf), g in grids.items():
        s = g.values
        assert s.index.name == "number of enemies (count)"
        if fam == "pi":
            assert list(s.index) == [1, 2, 4] and list(s.columns) == [2.0, 5.0, 10.0]  # not "10ms, 2ms, 5ms"
            assert s.columns.name == "total CPU time per period (ms)"
            assert np.isnan(s.loc[1, 10.0])  # the excluded cell is a gap
        else:
            assert list(s.index) == [1, 2] and list(s.columns) == [65536.0, 262144.0]
            assert s.columns.name == "total list footprint (elements of 64 B)"
        for n in s.index:
            for t in s.columns:
                if fam == "pi" and (n, t) == (1, 10.0):
                    continue
                written = f"{t:g}ms" if fam == "pi" else str(int(t))
                # The slowdown against this configuration's solo, not a time in ns.
                assert s.loc[n, t] == pytest.approx(planted(conf, fam, int(n), written), rel=0.03), (fam, conf, n, t)


def test_two_way_view_is_a_heat_map_and_a_3d_surface(two_way):
    _, cd, cells = two_way
    g = cc.two_way_grids(cd, cells)[0]
    fig = cf.two_way_view(g, g.title)
    heat, surf = [a for a in fig.axes if a.get_label() != "<colorbar>"][:2]
    assert surf.name == "3d" and heat.name == "rectilinear"
    assert [t.get_text() for t in heat.get_xticklabels()] == ["2", "5", "10"]
    assert [t.get_text() for t in heat.get_yticklabels()] == ["1", "2", "4"]
    assert heat.get_xlabel() == "total CPU time per period (ms)" and surf.get_zlabel() == "exec median (×)"
    assert any(t.get_text() == "excluded" for t in heat.texts)


# --------------------------------------------------------------------------- report scale (defect 12)


def test_report_of_88_cells_leads_with_views_and_stays_small(tmp_path):
    pi = Family("pi", "reservation.runtime", [1, 2, 3, 4], ["1ms", "2ms", "3ms", "4ms", "5ms"])
    chase = Family("chase", "elements", [1, 2, 4, 8], [16384, 65536, 262144, 1048576, 4194304])
    root = write_campaign(tmp_path / "c", families=[pi, chase], scenarios={"read": 1.2, "write": 1.4, "bw": 1.1},
                          repetitions=2, jobs=30)
    html = build(root, csv=False)
    assert (root / "report" / "tables" / "cells.csv").read_text().count("\n") == 88 + 1
    text = html.read_text()
    # One figure per (family, configuration) and one of the explicit scenarios: 5, not one
    # set per cell (88 cells).
    assert text.count("<figure") == 5
    assert len(re.findall(r'<td class="[a-z]*"><a href="cells/', text)) == 88  # the verdict matrix links every cell
    size = sum(p.stat().st_size for p in (root / "report").rglob("*") if p.is_file())
    assert size < 3e6, f"campaign report is {size / 1e6:.1f} MB"
    pages = sorted((root / "report" / "cells").glob("*.html"))
    assert [p.name for p in pages] == ["fifo.html", "other.html"]
    assert pages[0].read_text().count("<h3 id=") == 44  # every cell of the group, one click away
    for target, anchor in set(re.findall(r'href="cells/([^"#]+)#([^"]+)"', text)):  # every link resolves
        assert f'id="{anchor}"' in (root / "report" / "cells" / target).read_text(), (target, anchor)


# --------------------------------------------------------------------------- guards (issue 14 item 4)


def test_each_cells_guards_reach_the_campaign_summary_and_report(tmp_path):
    def solo(conf, fam, n, total):  # in fifo, solo takes 0.95 of the 1 ms deadline: overloaded
        return 4.75 if conf == "fifo" else 1.0

    root = write_campaign(tmp_path / "c", families=[], scenarios={"fast": 0.8, "slow": 1.3}, slowdown=solo,
                          repetitions=2, jobs=60)
    from rich.console import Console

    con = Console(record=True, width=240)
    cells = write_campaign_summary(root, console=con).set_index(["group", "scenario"])
    kinds = {k: {w["kind"] for w in ws} for k, ws in cells["warnings"].items()}
    assert "overloaded_solo" in kinds[("fifo", "solo")] and "overloaded_solo" not in kinds[("other", "solo")]
    assert "faster_under_interference" in kinds[("other", "fast")]
    assert "too_few_runs_for_max" in kinds[("other", "slow")]
    stored = json.loads((root / "summary.json").read_text())
    assert {w["kind"] for r in stored for w in r["warnings"]} >= {"overloaded_solo", "faster_under_interference"}
    md = (root / "summary.md").read_text()
    assert "## Warnings" in md and "fifo / solo: the victim is overloaded alone" in md
    out = con.export_text()
    assert "warning: fifo / solo: the victim is overloaded alone" in out and "ran faster beside the enemies" in out
    html = build(root, csv=False).read_text()
    assert "the victim is overloaded alone" in html and "ran faster beside the enemies" in html
    page = (root / "report" / "cells" / "fifo.html").read_text()
    assert "guard: the victim is overloaded alone" in page


def test_xtalk_summary_and_report_on_a_campaign_directory(two_way, tmp_path):
    root, _, _ = two_way
    r = xtalk("summary", root)
    assert r.returncode == 0, r.stderr
    assert "pi-n4-t10ms" in r.stdout and "ε (response p99 ≤ 1.5× solo)" in r.stdout
    r = xtalk("report", root, "-o", tmp_path / "rep", "--no-csv")
    assert r.returncode == 0, r.stderr
    assert "figures on the main page" in r.stdout
    assert (tmp_path / "rep" / "index.html").is_file() and (tmp_path / "rep" / "summary.md").is_file()


def test_campaign_report_renders_in_chromium(two_way, tmp_path):
    """The main page and a group page in headless Chromium: no console error, every figure
    decodes (skipped, with the reason, without Chromium)."""
    import chromium

    exe, why = chromium.ensure()
    if exe is None:
        pytest.skip(why)
    root, _, _ = two_way
    html = build(root, out=tmp_path / "rep", csv=False)
    n = html.read_text().count("<figure")
    with chromium.Browser(exe, 1280, 1600) as b:
        main = b.evaluate(b.open(html.resolve().as_uri()), chromium.FIGURE_CHECK)
        group = b.evaluate(b.open((tmp_path / "rep" / "cells" / "other.html").resolve().as_uri()), chromium.FIGURE_CHECK)
        errors = b.console_errors()
    assert errors == []
    assert n == 5 and main["figures"] == n and main["status"] == f"{n}/{n}"
    assert all(i["ok"] for i in main["imgs"]) and all(s["ok"] for s in main["svgs"])
    assert {"Verdicts", "Maps", "Worst cells", "Warnings"} <= set(main["sections"])
    assert group["status"] == "0/0" and group["sections"]


def test_a_cell_whose_runs_recorded_no_job_is_listed_as_such(tmp_path):
    root = write_campaign(tmp_path / "c", families=[], scenarios={"read": 1.2, "broken": 1.2}, repetitions=2, jobs=40)
    for d in (root / "runs").glob("*-other-broken-*"):
        (d / "jobs.parquet").unlink()
        meta = json.loads((d / "run.json").read_text())
        (d / "run.json").write_text(json.dumps({**meta, "status": "failed", "jobs_recorded": 0}))
    cells = write_campaign_summary(root).set_index(["group", "scenario"])
    assert cells.loc[("other", "broken"), "status"] == "NO JOBS"
    assert cells.loc[("other", "broken"), ["runs", "runs_ok", "jobs"]].tolist() == [2, 0, 0]
    assert cells.loc[("fifo", "broken"), "eps_verdict"] == "holds"
    assert "| other | broken | 0/2 | 0 |" in (root / "summary.md").read_text()
    assert "no jobs (0/2 runs ok)" in build(root, csv=False).read_text()


def test_a_real_campaign_declaring_epsilon_gets_verdicts_and_guards(tmp_path):
    """A tiny campaign run by the agent (tests/campaign_util.py: `epsilon = { metric = "exec",
    statistic = "max", bound = "1.5x" }`): `xtalk summary` on it gives every cell's ε verdict and guards, and the
    report's verdicts carry that ε."""
    import os

    from campaign_util import campaign_dirs, tiny

    if os.geteuid() != 0:
        pytest.skip("the agent runs victims under real-time policies: needs root")
    r = xtalk("campaign", "run", tiny(tmp_path, jobs=40), "--results", tmp_path / "res", timeout=600)
    assert r.returncode == 0, r.stderr
    (d,) = campaign_dirs(tmp_path / "res")
    assert f"xtalk summary {d}" in r.stdout
    r = xtalk("summary", d)
    assert r.returncode == 0, r.stderr
    assert "ε (exec max ≤ 1.5× solo):" in r.stdout and "of 1 cells" in r.stdout
    stored = {c["scenario"]: c for c in json.loads((d / "summary.json").read_text())}
    assert stored["pi"]["eps_verdict"] in ("holds", "violated", "inconclusive")
    assert stored["pi"]["epsilon"] == "exec max ≤ 1.5× solo"
    # Three runs per side: the maximum's guard fires, in the terminal and in the file.
    assert "too_few_runs_for_max" in {w["kind"] for w in stored["pi"]["warnings"]}
    assert "warning: default / pi: the max slowdown comes from 3 run(s)" in r.stdout
    html = build(d, csv=False).read_text()
    assert "no ε given" not in html and "exec max ≤ 1.5× solo" in html


def test_the_generic_two_way_grid_sorts_labels_by_value():
    """tables.two_way_grid (the experiment report's grid over run labels) reads its labels
    as numbers or durations: "10ms" after "5ms", 262144 after 65536."""
    import pandas as pd

    t = pd.DataFrame({"total": ["10ms", "2ms", "5ms", "10ms"], "n": ["4", "1", "1", "1"], "exec_ns": [4.0, 1.0, 2.0, 3.0]})
    g = tb.two_way_grid(t, "total", "n")
    assert list(g.columns) == ["2ms", "5ms", "10ms"] and list(g.index) == ["1", "4"]
    t = pd.DataFrame({"total": ["65536", "262144"], "n": ["2", "10"], "exec_ns": [1.0, 2.0]})
    g = tb.two_way_grid(t, "total", "n")
    assert list(g.columns) == ["65536", "262144"] and list(g.index) == ["2", "10"]


def test_cell_figures_only_on_request(tmp_path):
    """Tables per cell by default; `--cell-figures` adds one figure per cell on the group
    pages (the main page keeps its one figure per two-way view either way)."""
    root = write_campaign(tmp_path / "c", families=[Family("pi", "reservation.runtime", [1, 2], ["2ms"])],
                          scenarios={"read": 1.3}, repetitions=2, jobs=30)
    plain = build(root, tmp_path / "plain", csv=False)
    assert not (tmp_path / "plain" / "figures" / "cells").exists()
    assert all("<figure" not in p.read_text() for p in (tmp_path / "plain" / "cells").glob("*.html"))
    assert not list((tmp_path / "plain" / "figures").glob("*.svg"))  # SVG on request only
    r = xtalk("report", str(root), "-o", str(tmp_path / "figs"), "--no-csv", "--cell-figures", "--svg")
    assert r.returncode == 0, r.stderr
    cells = (tmp_path / "figs" / "tables" / "cells.csv").read_text().count("\n") - 1
    assert cells == 2 * 4  # two configurations × (solo, read, pi-n1, pi-n2)
    pages = list((tmp_path / "figs" / "cells").glob("*.html"))
    assert sum(p.read_text().count("<figure") for p in pages) == cells
    assert len(list((tmp_path / "figs" / "figures" / "cells").glob("*.png"))) == cells
    assert {p.stem for p in (tmp_path / "figs" / "figures").rglob("*.svg")} == {
        p.stem for p in (tmp_path / "figs" / "figures").rglob("*.png")}
    main = (tmp_path / "figs" / "index.html").read_text()
    # One view per configuration and the scenarios' map.
    assert main.count("<figure") == plain.read_text().count("<figure") == 3


# --------------------------------------------------------------------------- maps (issue 32 item 7)


def _late_pi(conf: str, fam: str, n: int, total: str) -> float:
    """A response-tail effect only: every 20th job of a pi cell with 2 or 4 enemies wakes
    0.5 ms late (execution time unchanged, the median response barely)."""
    return 500_000.0 if fam == "pi" and n >= 2 else 0.0


@pytest.fixture(scope="module")
def tail_only(tmp_path_factory):
    root = write_campaign(tmp_path_factory.mktemp("tail") / "c", families=[PI], scenarios={"read": 1.0},
                          late=_late_pi, configurations=("other",), repetitions=2, jobs=60)
    cd = cc.load_campaign(root)
    return root, cd, cc.cell_table(cd, n_boot=300)


def test_the_default_map_is_the_statistic_where_the_effect_is(tail_only, tmp_path):
    """A planted effect on the response p99 only: the maps show response p99, not the
    median execution slowdown, and say why."""
    from xtalk.results import campaign_maps as cm

    root, cd, cells = tail_only
    stat, why = cm.choose(cells)
    assert stat.name == "response-p99", why
    (g,) = cc.two_way_grids(cd, cells, stat)
    assert g.known.loc[[2, 4]].to_numpy().all() and g.values.loc[[2, 4]].to_numpy().min() > 2
    # No effect planted at one enemy: near 1 (concluded or not: at 95 % a cell in twenty is).
    assert np.allclose(g.values.loc[1], 1.0, atol=0.05)
    r = xtalk("report", root, "-o", tmp_path / "rep", "--no-csv")
    assert r.returncode == 0, r.stderr
    assert "maps: response p99 (the statistic with the strongest concluded effect" in r.stdout
    html = (tmp_path / "rep" / "index.html").read_text()
    assert "Each map shows response p99" in html and "Two-way view, pi — other" in html
    grid = (tmp_path / "rep" / "tables" / "grid_pi_other.csv").read_text().splitlines()
    assert [float(x) > 2 for x in grid[-1].split(",")[1:]] == [True, True, True]  # 4 enemies: the tail, ×3


def test_the_mapped_statistic_is_selectable_and_a_bad_name_refused(tail_only, tmp_path):
    root, _, _ = tail_only
    r = xtalk("report", root, "-o", tmp_path / "rep", "--no-csv", "--map", "exec-median")
    assert r.returncode == 0, r.stderr
    assert "maps: exec median (chosen with --map)" in r.stdout
    assert "Each map shows exec median" in (tmp_path / "rep" / "index.html").read_text()
    r = xtalk("report", root, "-o", tmp_path / "bad", "--map", "banana")
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0, r.stderr
    assert "--map: 'banana' is not a mapped statistic; use one of exec-median" in r.stderr
    assert not (tmp_path / "bad").exists()
    from xtalk.testing.synthetic import Scenario, write_results

    exp = write_results(tmp_path / "exp", [Scenario("solo"), Scenario("read", slowdown=1.2)], repetitions=2, jobs=30)
    r = xtalk("report", exp, "-o", tmp_path / "exp-rep", "--map", "response-p99")
    assert r.returncode == 2 and "--map picks the statistic of a campaign's maps" in r.stderr, r.stderr
    assert not (tmp_path / "exp-rep").exists()


def test_an_inconclusive_cell_is_marked_and_leaves_the_colour_scale_alone(tail_only):
    """The exec median map of a campaign without an exec effect: every cell's CI lies within
    ±5 % (min_effect), concluded "within noise" by the one rule (verdict.interference, the
    cells' own word), so none is hatched; a hand-made grid whose inconclusive cell is an
    extreme is hatched and does not set vmax."""
    import pandas as pd

    from xtalk.results import campaign_maps as cm
    from xtalk.report.figures import plt

    _, cd, cells = tail_only
    (g,) = cc.two_way_grids(cd, cells, cm.STATS["exec-median"])
    fig = cf.two_way_view(g, g.title)
    heat = fig.axes[0]
    marked = [p for p in heat.patches if p.get_gid() == "inconclusive"]
    words = cm.STATS["exec-median"].words(cells[cells["scenario"] != "solo"])
    assert set(words) == {"within noise"} and set(cells["exec_interference"].dropna()) == {"within noise"}
    assert marked == [] and int(np.isfinite(g.values.to_numpy()).sum()) == 9
    assert not any(t.get_text().endswith("?") for t in heat.texts)
    plt.close(fig)
    v = pd.DataFrame([[1.2, 5.0], [1.5, np.nan]], index=[1, 2], columns=[2.0, 5.0])
    known = pd.DataFrame([[True, False], [True, False]], index=v.index, columns=v.columns)
    grid = cc.Grid("pi", "other", v, known, known & False, "n", "total", cm.STATS["exec-median"])
    fig = cf.two_way_view(grid, "hand-made")
    heat = fig.axes[0]
    (im,) = heat.images
    assert im.norm.vmax == pytest.approx(1.5) and im.norm.vmin == pytest.approx(1.0)
    (p,) = [p for p in heat.patches if p.get_gid() == "inconclusive"]
    assert p.get_xy() == (0.5, -0.5)  # column 5.0, row 1
    assert "5.00?" in [t.get_text() for t in heat.texts]
    plt.close(fig)


def test_a_campaign_without_two_way_families_has_a_map_by_default(tmp_path):
    root = write_campaign(tmp_path / "c", families=[], scenarios={"read": 1.3, "write": 1.0}, repetitions=2, jobs=40)
    html = build(root, csv=False).read_text()
    assert html.count("<figure") == 1 and "Scenarios × groups: " in html
    table = (root / "report" / "tables" / "map_scenarios.csv").read_text()
    assert table.splitlines()[0].split(",")[1:] == ["other", "fifo"]
