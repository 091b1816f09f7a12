"""The report of several applications leads with the interference matrix (a heat map file per
configuration), the ε verdicts and the failure-propagation verdicts, then each application's
own sections; a one-application report has none of it. Synthetic results, no agent."""

from __future__ import annotations

import re

import pytest

from xtalk.analysis import verdict as vd
from xtalk.report import cohabitation as rc
from xtalk.report.build import build
from xtalk.report.synthetic import Application, Scenario, write_application_results, write_results
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
    html_path = build(load(root), root / "report", n_boot=300, csv=False)
    return root / "report", html_path.read_text(), (root / "report" / "summary.md").read_text()


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


def test_heat_map_files_and_tables_written(report):
    out, _, _ = report
    for i in (0, 1):
        assert (out / "figures" / f"interference_matrix_{i}.png").stat().st_size > 1000
        assert (out / "figures" / f"interference_matrix_{i}.svg").exists()
    for t in ("interference_matrix", "application_epsilon", "failure_propagation", "propagation_property"):
        assert (out / "tables" / f"{t}.csv").exists(), t
    assert (out / "figures" / "aocs_box_exec.png").exists()  # an application's own figures, named after it


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
