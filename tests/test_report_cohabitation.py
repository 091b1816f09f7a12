"""The report of several applications leads with the interference matrix (a heat map file per
configuration), the ε verdicts and the failure-propagation verdicts, then each application's
own sections; a one-application report has none of it. Synthetic results, no agent."""

from __future__ import annotations

import re

import pytest

from xtalk.analysis import verdict as vd
from xtalk.report import cohabitation as rc
from xtalk.report.build import build
from xtalk.testing.synthetic import Application, Scenario, write_application_results, write_results
from xtalk.store.frames import load

APPS = [Application("logger", "D", {"metric": "response", "statistic": "max", "bound": "5ms"}),
        Application("aocs", "A", {"metric": "execution", "statistic": "median", "relative": 1.3}),
        Application("payload", "C")]


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    root, _ = write_application_results(
        tmp_path_factory.mktemp("cohab") / "res", APPS, configurations=("shared", "partitioned"), repetitions=3, jobs=120,
        perturb={(c, "aocs", "payload"): 1.6 for c in ("shared", "partitioned")}, faults=[("logger", "memhog")],
        fault_effect={("shared", "logger", "aocs"): 6.0})
    html_path = build(load(root), root / "report", n_boot=300, csv=False, svg=True)
    return root / "report", html_path.read_text(), (root / "report" / "summary.md").read_text()


@pytest.mark.slow  # the report of 3 applications × 2 configurations: make test-slow
def test_the_applications_section_comes_first_in_html(report):
    _, page, _ = report
    ids = re.findall(r'<section id="([^"]+)"', page)
    assert ids[0] == "applications", ids[:5]
    # then each application's own sections, highest criticality first
    own = [i.split("-")[0] for i in ids if i.endswith("-verdicts")]
    assert own == ["aocs", "payload", "logger"]
    lead = page[page.index('<section id="applications"'):page.index("</section>")]
    assert "aocs (A)" in lead and f"ε ≤ 1.3× alone {vd.VIOLATED}" in lead
    # the D logger's fault reaches the A loop when shared, not when partitioned (where the
    # payload's own ×1.6 on the loop is in `all` too, so it is not blamed on the fault)
    assert re.search(rf"failure propagation \[shared\][^<]*: {vd.VIOLATED} — fault:logger:memhog \(D\) → aocs \(A\)", lead)
    assert re.search(rf"failure propagation \[partitioned\][^<]*: {vd.HOLDS} — ", lead)
    assert 'id="fig-interference_matrix_0"' in lead and 'id="fig-interference_matrix_1"' in lead


@pytest.mark.slow  # the report of 3 applications × 2 configurations: make test-slow
def test_heat_map_files_and_tables_written(report):
    out, _, _ = report
    for i in (0, 1):
        assert (out / "figures" / f"interference_matrix_{i}.png").stat().st_size > 1000
        assert (out / "figures" / f"interference_matrix_{i}.svg").exists()
    for t in ("interference_matrix", "application_epsilon", "failure_propagation", "propagation_property"):
        assert (out / "tables" / f"{t}.csv").exists(), t
    assert (out / "figures" / "aocs_box_exec.png").exists()  # an application's own figures, named after it


@pytest.mark.slow  # the report of 3 applications × 2 configurations: make test-slow
def test_summary_md_leads_with_the_applications(report):
    _, _, md = report
    heads = [line for line in md.splitlines() if line.startswith("## ")]
    assert heads[0] == "## Applications", heads
    assert "### Interference matrix [shared]" in md
    # the matrix row of the AOCS loop shows the payload's planted ×1.6
    row = next(line for line in md.splitlines() if line.startswith("| aocs |") and "×1.6" in line)
    assert row


def test_declared_reads_the_experiment_copy():
    apps = rc.declared({"experiment": {"application": [
        {"name": "a", "criticality": "A", "epsilon": {"metric": "execution", "statistic": "p999", "bound": "2ms",
                                                       "relative": None}},
        {"name": "b", "criticality": "D", "epsilon": None}]}})
    assert apps[0].epsilon.metric == "exec" and apps[0].epsilon.statistic == "p99.9" and apps[0].epsilon.bound_ns == 2e6
    assert apps[1].epsilon is None and apps[1].criticality == "D"


def test_one_application_has_no_applications_section(tmp_path):
    root = write_results(tmp_path / "one", [Scenario("solo"), Scenario("pi", slowdown=1.3)], repetitions=2, jobs=80)
    page = build(root, tmp_path / "r", n_boot=200, csv=False).read_text()
    assert 'id="applications"' not in page and re.findall(r'<section id="([^"]+)"', page)[0] == "verdicts"
    assert not (tmp_path / "r" / "figures" / "interference_matrix_0.png").exists()


@pytest.mark.slow  # the report of 3 applications × 2 configurations: make test-slow
def test_run_summary_prints_the_verdicts_briefly(report):
    from rich.console import Console

    from xtalk import store
    from xtalk.report.summary import write_summary

    root = report[0].parent
    console = Console(record=True, width=400)
    write_summary(store.open(root), console)
    text = console.export_text()
    assert re.search(rf"failure propagation \[shared\][^\n]*: {vd.VIOLATED} — ", text)
    assert re.search(rf"aocs \(A\) \[shared\]: ε ≤ 1.3× alone {vd.VIOLATED}", text)
    assert "aocs beside payload [shared]: exec median ×1.6" in text
    md = (root / "summary.md").read_text().splitlines()
    assert [line for line in md if line.startswith("## ")][0] == "## Applications"


# --------------------------------------------------------------------------- each application's own figures

#: Distinct execution times, so each section's numbers can only be its own application's.
OWN = [Application("logger", "D", exec_ns=200_000), Application("aocs", "A", exec_ns=650_000)]
#: index.html of 2 applications × 2 configurations (24 figures; 1.75 MB when written).
INLINE_BOUND = 3_000_000
#: index.html when each application's figures go on its own page (2 × 4 configurations).
PAGED_BOUND = 400_000


def _section(page: str, sid: str) -> str:
    i = page.index(f'<section id="{sid}"')
    return page[i:page.index("</section>", i)]


def _medians(section: str, caption: str) -> dict[str, float]:
    """scenario -> median (ms) of the distribution table under ``caption`` in a section."""
    table = section[section.index(f"<h3>{caption}</h3>"):]
    table = table[:table.index("</table>")]
    heads = re.findall(r"<th>([^<]*)</th>", table)
    rows = [re.findall(r"<td>([^<]*)</td>", r) for r in re.findall(r"<tr>(<td>.*?)</tr>", table)]
    return {r[0]: float(r[heads.index("median")]) for r in rows}


@pytest.fixture(scope="module")
def own_report(tmp_path_factory):
    from test_report_sections import _probes
    import pyarrow as pa
    import pyarrow.parquet as pq

    cfgs = ("shared", "partitioned")
    root, _ = write_application_results(tmp_path_factory.mktemp("own") / "res", OWN, configurations=cfgs, repetitions=3,
                                        jobs=150, perturb={(c, "aocs", "logger"): 1.3 for c in cfgs})
    # the logger is a command with probes: its own records under applications/logger/
    run = next(p for p in (root / "runs").iterdir() if "alone:logger" in p.name)
    (run / "applications" / "logger").mkdir(parents=True)
    pq.write_table(pa.Table.from_pandas(_probes(0, [50_000, 10_000, 20_000], [(1001, 3_000)] * 3)),
                   run / "applications" / "logger" / "probes.parquet")
    html_path = build(load(root), root / "report", n_boot=200, csv=False)
    return root / "report", html_path.read_text()


def test_each_application_has_its_figures(own_report):
    out, page = own_report
    ids = re.findall(r'<section id="([^"]+)"', page)
    for app in ("aocs", "logger"):
        for sec in ("distributions", "series", "spikes", "pwcet"):
            assert f"{app}-{sec}" in ids, (app, sec)
        for i in (0, 1):  # one figure per configuration, not per scenario or run
            for fig in ("hist", "series"):
                assert f'id="fig-{app}_{fig}_{i}"' in _section(page, f"{app}-{'distributions' if fig == 'hist' else 'series'}")
        assert f'id="fig-{app}_spikes_worst_run"' in _section(page, f"{app}-spikes")
        pw = _section(page, f"{app}-pwcet")
        # 444 jobs per scenario: a fit (or its refusal, written on the curve) in each configuration
        assert pw.count(f'id="fig-{app}_pwcet_') == 2 and "i.i.d. checks" in pw
        assert not (out / "figures" / f"{app}_hist_exec_0.png").exists()  # no histogram per scenario
    # the probes are the logger's: its portfolio, none for the AOCS loop
    assert "logger-portfolio" in ids and "aocs-portfolio" not in ids
    assert 'id="fig-logger_probe_hist_7"' in _section(page, "logger-portfolio")


def test_each_section_holds_its_own_applications_numbers(own_report):
    out, page = own_report
    aocs = _medians(_section(page, "aocs-distributions"), "execution time (ms) per scenario")
    logger = _medians(_section(page, "logger-distributions"), "execution time (ms) per scenario")
    assert 0.62 < aocs["solo"] < 0.68 and 0.62 * 1.3 < aocs["all"] < 0.68 * 1.3, aocs  # alone, and beside the logger
    assert all(0.19 < v < 0.21 for v in logger.values()), logger
    assert "alone:logger" not in logger and "alone:aocs" not in aocs  # each one's alone runs are its solo
    assert set(aocs) == {"solo", "pair:logger+aocs", "all"}
    # the pWCET fitted in the worst case met: the AOCS loop beside the logger
    pw = _section(page, "aocs-pwcet")
    assert re.search(r"exceedance curve, (all|pair:logger\+aocs) \[", pw)
    assert (out / "tables" / "aocs_pwcet.csv").exists() and (out / "tables" / "logger_pwcet.csv").exists()


@pytest.mark.slow  # a second report of 2 applications × 4 configurations: make test-slow
def test_report_size_stays_bounded(own_report, tmp_path):
    out, page = own_report
    assert len(page.encode()) < INLINE_BOUND
    assert not (out / "applications").exists()
    # more applications × configurations: each application's figures on a page of its own
    root, _ = write_application_results(tmp_path / "res", OWN, configurations=("c1", "c2", "c3", "c4"), repetitions=2, jobs=40)
    html_path = build(load(root), root / "report", n_boot=100, csv=False)
    index = html_path.read_text()
    assert len(index.encode()) < PAGED_BOUND and "<figure" in index  # the matrices stay
    for app in ("aocs", "logger"):
        assert f'href="applications/{app}.html"' in index and f'id="{app}-verdicts"' in index
        detail = (root / "report" / "applications" / f"{app}.html").read_text()
        assert f'id="{app}-distributions"' in detail and f'id="fig-{app}_hist_3"' in detail
        # 76 jobs per scenario: one sentence instead of a curve
        assert "fewer than the 300 a pWCET fit needs" in detail and f"{app}_pwcet_" not in detail


def test_a_traced_application_gets_its_culprits_and_timeline(tmp_path):
    """A kernel trace of the AOCS loop's alone run: its spikes' culprits and the timeline
    around its slowest job, its own process drawn as the victim."""
    import json

    import pandas as pd

    from xtalk.testing.synthetic import trace_text

    root, _ = write_application_results(tmp_path / "res", OWN, repetitions=2, jobs=80)
    run = next(p for p in (root / "runs").iterdir() if "alone:aocs" in p.name)
    j = pd.read_parquet(run / "jobs.parquet")
    (run / "trace.txt").write_text(trace_text(j[j["application"] == "aocs"]))
    doc = json.loads((run / "run.json").read_text())
    doc["plan"]["victim"]["name"] = "aocs"  # the plan's victim is the AOCS loop in its alone runs
    (run / "run.json").write_text(json.dumps(doc))
    page = build(load(root), root / "report", n_boot=100, csv=False).read_text()
    aocs, logger = _section(page, "aocs-spikes"), _section(page, "logger-spikes")
    assert "Culprits ranked by the time they took from spike jobs" in aocs and 'id="fig-aocs_timeline"' in aocs
    assert "No run of this application has a kernel trace" in logger


# --------------------------------------------------------------------------- one pass per application


@pytest.mark.slow  # a report with its tables and a summary of 2 × 2 configurations: make test-slow
def test_the_summary_and_the_report_give_each_application_the_same_numbers(tmp_path):
    """summary.json, summary.md and the report's per-application slowdown and misses tables
    read one computation (the report's per-application data, its cells): the same runs, jobs,
    misses, median and p99 response and median-slowdown CI per application × configuration ×
    scenario, and the same applications' verdicts in both summary.md files."""
    import io
    import json
    import math

    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq
    from rich.console import Console

    from xtalk import store
    from xtalk.report.summary import write_summary

    cfgs = ("shared", "partitioned")
    root, _ = write_application_results(tmp_path / "res", OWN, configurations=cfgs, repetitions=3, jobs=150,
                                        perturb={(c, "aocs", "logger"): 1.3 for c in cfgs})
    runs = sorted((root / "runs").iterdir())
    # The agent flagged two of the AOCS loop's jobs beside the logger (the flag is what it measured) ...
    pair = next(d for d in runs if d.name.endswith("-shared-pair:logger+aocs-r1"))
    t = pq.read_table(pair / "jobs.parquet").to_pandas()
    t.loc[(t["application"] == "aocs") & t["job"].isin([20, 21]), "missed"] = True
    pq.write_table(pa.Table.from_pandas(t, preserve_index=False), pair / "jobs.parquet")
    # ... and the logger recorded no job in one run it took part in: a run of its cell all the same.
    quiet = next(d for d in runs if d.name.endswith("-partitioned-all-r2"))
    t = pq.read_table(quiet / "jobs.parquet").to_pandas()
    pq.write_table(pa.Table.from_pandas(t[t["application"] != "logger"], preserve_index=False), quiet / "jobs.parquet")

    write_summary(store.open(root), Console(file=io.StringIO(), width=250, color_system=None))
    summary = json.loads((root / "summary.json").read_text())
    summary_md = (root / "summary.md").read_text()
    build(root, root / "report", csv=False)
    tables = root / "report" / "tables"
    slow = pd.read_csv(tables / "slowdown.csv").set_index(["application", "configuration", "scenario", "metric"])
    miss = pd.read_csv(tables / "misses.csv").set_index(["application", "configuration", "scenario"])

    def same(a, b) -> bool:
        a, b = (math.nan if x is None else float(x) for x in (a, b))
        return (math.isnan(a) and math.isnan(b)) or abs(a - b) <= 1e-9 * max(1.0, abs(a))

    seen = set()
    for s in summary:
        app, scen = s["scenario"].split(" · ", 1)
        assert app == s["application"]
        key = (app, s["configuration"], "solo" if scen == f"alone:{app}" else scen)
        seen.add(key)
        sl, ms = slow.loc[(*key, "exec")], miss.loc[key]
        assert s["runs"] == sl["runs"] and s["jobs"] == sl["jobs"] == ms["n_jobs"], key
        assert s["deadline_misses"] == ms["n_missed"], key
        assert same(s["median_response_ms"], slow.loc[(*key, "response"), "median_ms"]), key
        assert same(s["p99_response_ms"], slow.loc[(*key, "response"), "p99_ms"]), key
        for k in ("", "_lo", "_hi"):
            assert same(s[f"slowdown_median{k}"], sl[f"slowdown_median{k}"]), (key, k)
        line = next(ln for ln in summary_md.splitlines() if ln.startswith(f"| {s['configuration']} / {s['scenario']} |"))
        assert f" {s['deadline_misses']} " in line and f"{s['median_response_ms']:.3f}" in line, line
        if key[2] != "solo":
            assert f"{s['slowdown_median']:.2f} [{s['slowdown_median_lo']:.2f}, {s['slowdown_median_hi']:.2f}]" in line
    assert seen == set(miss.index)
    by = {(s["application"], s["configuration"], s["scenario"]): s for s in summary}
    assert by[("aocs", "shared", "aocs · pair:logger+aocs")]["deadline_misses"] == 2
    assert by[("logger", "partitioned", "logger · all")]["runs"] == 3
    assert by[("logger", "partitioned", "logger · all")]["jobs"] == 2 * 150 - 2 * 2  # warm-up left out
    # The applications' verdicts and matrices: one computation, the same lines in both summary.md files.
    report_md = (root / "report" / "summary.md").read_text()
    lead = summary_md[summary_md.index("## Applications"):summary_md.index("Slowdown: ratio")]
    assert "### Interference matrix [shared]" in lead and "×1.30 [" in lead
    assert lead in report_md


def test_an_epsilon_against_a_disturbed_alone_run_says_so():
    # examples/cohabitation.toml: aocs ε "held" at ×0.05 because alone:aocs had p99 19 ms.
    from xtalk.testing.synthetic import application_results, experiment_applications

    apps = [Application("aocs", "A", {"metric": "execution", "statistic": "median", "relative": 1.3}),
            Application("payload", "C")]
    jobs, runs = application_results(apps, repetitions=2, jobs=100)
    exp = {"experiment": {"application": experiment_applications(apps)}}
    sound = [line for _, line in rc.epsilon_lines(rc.compute(jobs, runs, exp, n_boot=200)) if line.startswith("aocs")]
    assert sound and "DISTURBED" not in sound[0], sound
    hit = jobs.index[(jobs["scenario"] == "alone:aocs") & (jobs["application"] == "aocs") & ~jobs["warmup"]][10]
    jobs.loc[hit, ["exec_ns", "end_ns"]] = [jobs.loc[hit, "exec_ns"] * 30, jobs.loc[hit, "end_ns"] + jobs.loc[hit, "exec_ns"] * 29]
    (word, line), = [(w, x) for w, x in rc.epsilon_lines(rc.compute(jobs, runs, exp, n_boot=200)) if x.startswith("aocs")]
    assert word.endswith(vd.DISTURBED_SUFFIX) and "the reference is disturbed (alone:aocs:" in line, line
    assert vd.severity(word) in ("warn", "bad")
