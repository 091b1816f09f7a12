"""Outputs say what their numbers are: units in the `sched` tables and the `prm` lines, a
calibration minimum below the clock's resolution shown as such, a skipped configuration as
a row of the summary with its reason, and run counts in plain words."""

from __future__ import annotations

import json

from rich.console import Console
from typer.testing import CliRunner

from xtalk.calibrate import reading_text, show, source_resolution_ns
from xtalk.report.summary import write_summary
from xtalk.testing.synthetic import Scenario, write_results
from xtalk.runner import run_count_text
from xtalk.sched.cli import app
from xtalk.store import open as open_results

runner = CliRunner()
T41 = "examples/models/seed001-table41.toml"
T43 = "examples/models/seed001-table43.toml"


def _header(output: str) -> list[str]:
    """The header cells of the first rich table, wrapped lines joined."""
    lines = output.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("┏"))
    head = []
    for ln in lines[start + 1:]:
        if ln.startswith("┡"):
            break
        head.append(ln.split("┃")[1:-1])
    return [" ".join(c.strip() for c in col).strip() for col in zip(*head)]


def test_sched_tables_carry_units():
    r = runner.invoke(app, ["analyze", T41])
    assert _header(r.output) == ["task", "wcet (ms)", "period (ms)", "deadline (ms)", "bound (ms)", "schedulable", "slack (ms)"]
    r = runner.invoke(app, ["simulate", T41])
    assert _header(r.output)[-1] == "max response (ms)"
    r = runner.invoke(app, ["vm", T43])
    assert "Θ=160 ms Π=200 ms" in r.output and "ω=300 ms" in r.output


def test_prm_output_carries_units():
    r = runner.invoke(app, ["prm", T41, "--period", "2", "--budget", "1.9"])
    assert r.exit_code == 0, r.output
    assert "minimal Θ for Π=2 ms (Lemma 2.1): " in r.output and "Shin–Lee capacity Θ (Eq. 2.2–2.3): " in r.output
    cap = next(ln for ln in r.output.splitlines() if "Shin–Lee" in ln)
    assert cap.endswith(" ms")
    assert "Γ=(Π=2 ms, Θ=1.9000 ms)" in r.output
    assert "T1: response bound " in r.output and "ms (deadline 4 ms)" in r.output


CLOCKS = {"resolution_ns": {"MONOTONIC": 1, "MONOTONIC_RAW": 1, "THREAD_CPUTIME_ID": 1, "ticks": 0.357},
          "ticks_per_ns": 2.8, "drift_window_ns": 1e8, "drift_ppm_vs_monotonic": {"ticks": 0.1}, "inter_core_offsets": []}


def _source(lo: float) -> dict:
    return {"min": lo, "median": 20.0, "p99": 25.0, "p9999": 40.0, "max": 90.0, "below_110ns": 1.0}


def test_calibration_minimum_below_resolution_is_said():
    assert source_resolution_ns("clock_gettime MONOTONIC", CLOCKS) == 1
    assert source_resolution_ns("rdtscp", CLOCKS) == 0.357
    assert source_resolution_ns("sched_getcpu", CLOCKS) == 0.357  # timed with ticks
    assert reading_text(0.0, 1.0) == "< 1 (resolution)"
    assert reading_text(12.34, 1.0) == "12.3"
    doc = {"pairs": 100, "cpu": 1, "clocks": CLOCKS, "notes": [],
           "sources": {"clock_gettime MONOTONIC": _source(0.0), "rdtscp": _source(0.0), "sched_getcpu": _source(15.0)}}
    con = Console(record=True, width=200)
    show(doc, con)
    text = con.export_text()
    cells = [c.strip() for ln in text.splitlines() if "│" in ln for c in ln.split("│")]
    assert "0.0" not in cells, "no reading shown as costing 0.0 ns"
    assert "< 1 (resolution)" in text and "< 0.357 (resolution)" in text and "min (ns)" in text


def test_skipped_configuration_is_a_row_of_the_summary(tmp_path):
    res = write_results(tmp_path / "r", [Scenario("solo"), Scenario("pi", slowdown=1.2)], repetitions=2, jobs=50)
    doc = json.loads((res / "experiment.json").read_text())
    doc["skipped_configurations"] = [{"configuration": "dlcg", "reason": "cgroup v1 cpu controller has no SCHED_DEADLINE"}]
    (res / "experiment.json").write_text(json.dumps(doc))
    con = Console(record=True, width=250)
    write_summary(open_results(res), console=con)
    text = con.export_text().splitlines()
    row = next(ln for ln in text if "dlcg" in ln)
    assert "skipped (below)" in row, "a row of the table, its reason below it (a paragraph in a column is unreadable)"
    assert "configuration dlcg skipped: cgroup v1 cpu controller has no SCHED_DEADLINE" in text, text
    assert text.index("configuration dlcg skipped: cgroup v1 cpu controller has no SCHED_DEADLINE") > text.index(row)
    md = (res / "summary.md").read_text()
    line = next(ln for ln in md.splitlines() if "dlcg" in ln)
    assert line.startswith("| dlcg / (all) | skipped |") and "cgroup v1 cpu controller has no SCHED_DEADLINE" in line
    assert len(line.split(" | ")) == len(md.splitlines()[4].split(" | ")), "as many cells as the header"


def test_run_count_wording():
    assert run_count_text(6, 2) == "6 runs (3 configuration/scenario pairs × 2 repetitions)"
    assert run_count_text(1, 1) == "1 run (1 configuration/scenario pair × 1 repetition)"
