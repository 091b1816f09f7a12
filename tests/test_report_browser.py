"""The HTML report in a real browser: headless Chromium loads it from disk with the network
unreachable by construction (file://, no external resource), the page logs no console error
and every figure decodes (naturalWidth > 0). Skipped, with the reason, when Chromium is
missing and cannot be installed (not root, no apt-get, no network)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import chromium
from test_report_sections import ENV, TASKS, _patch_runs, _probes, _rewrite_jobs
from xtalk.report.build import build
from xtalk.testing.synthetic import Application, Scenario, write_application_results, write_results


@pytest.fixture(scope="module")
def browser_exe():
    exe, why = chromium.ensure()
    if exe is None:
        pytest.skip(why)
    return exe


def test_report_renders_in_chromium_without_console_errors(tmp_path, browser_exe):
    root = write_results(tmp_path / "res", [Scenario("solo"), Scenario("pi", enemies=[{"kind": "pi"}], slowdown=1.4,
                                                                        spike_every=30, spike_ns=150_000)],
                         repetitions=2, jobs=200, trace=True, counters=True, serious_jobs=(15,))
    # the sections issue 15 added: platform (a VM without PMU), the probe and system-call portfolio
    _patch_runs(root, environment=ENV)
    pq.write_table(pa.Table.from_pandas(_probes(0, [50_000, 10_000, 20_000], [(1001, 3_000), (1008, 1_000_000)] * 3)),
                   root / "runs" / "0-solo-r0" / "probes.parquet")
    html = build(root, epsilons=["exec:p99:1.2x"], csv=False)
    n_files = len(list((html.parent / "figures").glob("*.png")))
    with chromium.Browser(browser_exe, 1280, 1600) as b:
        session = b.open(html.resolve().as_uri())
        page = b.evaluate(session, chromium.FIGURE_CHECK)
        errors = b.console_errors()
        b.screenshot(session, tmp_path / "report.png")
    assert errors == []
    assert page["figures"] == n_files and n_files >= 15
    bad = [i["alt"] for i in page["imgs"] if not i["ok"]]
    assert not bad, f"figures that did not render: {bad}"
    assert all(s["ok"] for s in page["svgs"])
    assert page["status"] == f"{n_files}/{n_files}"  # the page's own check agrees
    assert "Spikes and culprits" in page["sections"] and "pWCET" in page["sections"]
    assert {"Platform", "Probes and system calls"} <= set(page["sections"])
    assert (tmp_path / "report.png").stat().st_size > 10_000


@pytest.mark.parametrize("kind", ["latency", "taskset"])
def test_victim_kind_sections_render_in_chromium(tmp_path, browser_exe, kind):
    """A latency and a task-set victim: their own section and figure load without error."""
    root = write_results(tmp_path / "res", [Scenario("solo"), Scenario("pi")], repetitions=1, jobs=60)
    if kind == "taskset":
        _rewrite_jobs(root, lambda df, run: df.assign(task=df["job"] % 3))
        victim = {"body": {"kind": "taskset", "tasks": TASKS, "policy": "rm"}, "sched": {"policy": "fifo", "priority": 80}}
    else:
        victim = {"body": {"kind": "latency"}}
    _patch_runs(root, victim=victim)
    html = build(root, csv=False, n_boot=200)
    n_files = len(list((html.parent / "figures").glob("*.png")))
    with chromium.Browser(browser_exe, 1280, 1600) as b:
        session = b.open(html.resolve().as_uri())
        page = b.evaluate(session, chromium.FIGURE_CHECK)
        errors = b.console_errors()
    own = {"latency": "latency_histogram", "taskset": "task_response"}[kind]
    assert (html.parent / "figures" / f"{own}.png").exists()
    assert errors == [] and page["status"] == f"{n_files}/{n_files}" and n_files >= 1
    assert {"latency": "Timer latency", "taskset": "Task set: per task"}[kind] in page["sections"]
    assert "pWCET" not in page["sections"]


def test_application_report_renders_in_chromium(tmp_path, browser_exe):
    """Several applications: the matrix, then each application's figures (histogram grid,
    series, spikes, pWCET or its sentence, the logger's probes) load without error."""
    root, _ = write_application_results(tmp_path / "res", [Application("logger", "D", exec_ns=200_000),
                                                           Application("aocs", "A", exec_ns=650_000)],
                                        repetitions=2, jobs=80, perturb={("default", "aocs", "logger"): 1.3})
    run = next(p for p in (root / "runs").iterdir() if "alone:logger" in p.name)
    (run / "applications" / "logger").mkdir(parents=True)
    pq.write_table(pa.Table.from_pandas(_probes(0, [50_000, 10_000, 20_000], [(1001, 3_000)] * 3)),
                   run / "applications" / "logger" / "probes.parquet")
    html = build(root, csv=False, n_boot=200)
    n_files = len(list((html.parent / "figures").glob("*.png")))
    with chromium.Browser(browser_exe, 1280, 1600) as b:
        session = b.open(html.resolve().as_uri())
        page = b.evaluate(session, chromium.FIGURE_CHECK)
        errors = b.console_errors()
    assert errors == [] and page["status"] == f"{n_files}/{n_files}" and n_files >= 15
    assert {"aocs: Distributions", "aocs: Per-job time series", "aocs: Spikes and culprits", "aocs: pWCET",
            "logger: Probes and system calls"} <= set(page["sections"])


def test_a_broken_figure_is_caught(tmp_path, browser_exe):
    """The check can fail: an undecodable image and a script error are both reported."""
    page = tmp_path / "broken.html"
    page.write_text('<!DOCTYPE html><html><body><figure><img alt="bad" src="data:image/png;base64,AAAA"></figure>'
                    "<script>console.error('boom'); undefined_function();</script></body></html>")
    with chromium.Browser(browser_exe) as b:
        s = b.open(page.as_uri())
        r = b.evaluate(s, chromium.FIGURE_CHECK)
        errors = b.console_errors()
    assert [i["ok"] for i in r["imgs"]] == [False]
    assert any("boom" in e for e in errors) and any("undefined_function" in e for e in errors)
