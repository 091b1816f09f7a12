"""The HTML report in a real browser: headless Chromium loads it from disk with the network
unreachable by construction (file://, no external resource), the page logs no console error
and every figure decodes (naturalWidth > 0). Skipped, with the reason, when Chromium is
missing and cannot be installed (not root, no apt-get, no network)."""

from __future__ import annotations

import pytest

import chromium
from xtalk.report.build import build
from xtalk.report.synthetic import Scenario, write_results


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
    assert (tmp_path / "report.png").stat().st_size > 10_000


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
