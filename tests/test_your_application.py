"""docs/your-application.md, run: its `$ xtalk ...` commands on its example (shortened: fewer
steps, 2 repetitions), and what the page says a user sees — a table whose `jobs` column counts
the program's steps, a slowdown CI per scenario, ε lines about the steps, a report whose
per-job, spike and distribution sections are there, the probes in SQL and Python."""

import json
import re
import shlex
import subprocess

import pytest

import xtalk
from capabilities import policy
from conftest import ROOT, XTALK

DOC = ROOT / "docs/your-application.md"
STEPS, REPETITIONS, WARMUP = 20, 2, 5


def _commands() -> list[str]:
    """The page's console commands, in order (lines `$ xtalk ...`)."""
    return [line[2:] for line in DOC.read_text().splitlines() if line.startswith("$ xtalk ")]


def _short_example() -> str:
    text = (ROOT / "examples/own-app-probes.toml").read_text()
    for old, new in ((' "-n", "100",', f' "-n", "{STEPS}",'), ("repetitions = 5", f"repetitions = {REPETITIONS}")):
        assert old in text, f"examples/own-app-probes.toml changed: {old!r} not found; update this test"
        text = text.replace(old, new)
    return text


@pytest.fixture(scope="module")
def tutorial(tmp_path_factory, agent):
    why = policy("fifo")
    if why:
        pytest.skip(why)
    d = tmp_path_factory.mktemp("tutorial")
    (d / "examples").mkdir()
    (d / "build").mkdir()
    (d / "examples/own-app-probes.toml").write_text(_short_example())
    # Step 1 of the page, as `make build/periodic` does it.
    p = subprocess.run(["cc", "-O2", "-Wall", "-I", ROOT / "include", ROOT / "examples/apps/periodic.c", "-o",
                        d / "build/periodic"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    outputs = []
    for cmd in _commands():
        argv = shlex.split(cmd)[1:]
        if "results/own-app-probes-*" in argv:  # the shell's glob: the one results directory
            found = sorted((d / "results").glob("own-app-probes-*"))
            assert len(found) == 1, found
            argv = [str(found[0]) if a == "results/own-app-probes-*" else a for a in argv]
        out = subprocess.run([*XTALK, *argv], capture_output=True, text=True, cwd=d, timeout=600)
        assert out.returncode == 0, f"{cmd}\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
        outputs.append((cmd, out.stdout))
    return next((d / "results").glob("own-app-probes-*")), outputs


def _each_scenario_judges_epsilon(printed: str) -> None:
    """Each enemy scenario's verdict line judges the file's ε about the steps. Its headline is the
    worst finding (an inconclusive ε beside deadline misses reads DEADLINE MISSES), so the ε
    judgement is looked for in the line itself; the terminal's wrapping is undone first."""
    flat = re.sub(r"\s*\n\s*", " ", printed)
    for sc in ("hog", "read", "rt-hog"):
        m = re.search(rf"· {re.escape(sc)} \(default\): (.*?)(?=· \S+ \(default\):|warning:|$)", flat)
        assert m, (sc, printed)
        assert re.search(r"ε exec median ≤ 1\.5× solo: (HOLDS|VIOLATED|INCONCLUSIVE)", m.group(1)), (sc, m.group(1))


def test_the_page_has_its_commands():
    cmds = _commands()
    assert [c.split()[1] for c in cmds] == ["run", "report", "query", "query"], cmds


@pytest.mark.slow  # the page's whole experiment, report and queries: make test-slow
def test_run_counts_the_steps_and_gives_a_ci_per_scenario(tutorial):
    res, outputs = tutorial
    printed = outputs[0][1]
    rows = {r["scenario"]: r for r in json.loads((res / "summary.json").read_text())}
    assert set(rows) == {"solo", "read", "hog", "rt-hog"}
    for sc, r in rows.items():
        assert r["jobs"] == REPETITIONS * (STEPS - WARMUP), (sc, r["jobs"])
        if sc != "solo":
            assert r["slowdown_median_lo"] <= r["slowdown_median"] <= r["slowdown_median_hi"], r
            assert re.search(rf"│ {re.escape(sc)} .*\d\.\d\d \[\d\.\d\d, \d+\.\d\d\]", printed), sc
    assert "jobs: the spans of probe 'step', released on a 5 ms grid through probe 'wake'" in printed
    _each_scenario_judges_epsilon(printed)
    assert "pilot: the program ran" in printed


@pytest.mark.slow  # the page's whole experiment, report and queries: make test-slow
def test_report_gives_epsilon_lines_and_per_job_sections(tutorial):
    res, outputs = tutorial
    printed = outputs[1][1]
    _each_scenario_judges_epsilon(printed)
    html = (res / "report/index.html").read_text()
    for section in ("Distributions", "Per-job time series", "Spikes and culprits", "Probes and system calls"):
        assert f"<h2>{section}" in html, section
    figures = {p.name for p in (res / "report/figures").glob("*.png")}
    assert any(f.startswith("series_") for f in figures) and "spikes_worst_run.png" in figures
    assert any(f.startswith("hist_exec_") for f in figures) and "probe_hist_1.png" in figures


@pytest.mark.slow  # the page's whole experiment, report and queries: make test-slow
def test_probes_in_sql_and_python(tutorial):
    res, outputs = tutorial
    lines = outputs[2][1].split("\n")
    assert lines[0].split() == ["scenario", "name", "n", "us"]
    body = [ln.split() for ln in lines[1:] if ln.strip()]
    assert {(r[0], r[1], r[2]) for r in body} == {(sc, "step", str(REPETITIONS * STEPS)) for sc in ("hog", "read", "rt-hog",
                                                                                                      "solo")}
    p = xtalk.open(res).probes()
    assert set(p.name) == {"step"} and len(p) == 8 * STEPS
