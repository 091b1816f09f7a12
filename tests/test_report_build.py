"""`xtalk report`: the files it writes, self-containment of the HTML, CSV exports, bad input,
and a real (short) experiment run by the agent."""

from __future__ import annotations

import io
import os
import re
import time

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from rich.console import Console

from conftest import xtalk
from xtalk.outcome import write_outcome
from xtalk.report.build import build
from xtalk.testing.synthetic import Scenario, outcome, write_results

EXPERIMENT = """
name = "rep"
repetitions = 1
settle = "20ms"
[victim]
body = "sum"
bytes = "256KiB"
period = "2ms"
jobs = 50
warmup_jobs = 2
cpus = "last"
[[scenario]]
name = "pi"
enemies = [{ kind = "pi" }]
"""


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    root = write_results(tmp_path_factory.mktemp("build") / "res",
                         [Scenario("solo"), Scenario("pi", enemies=[{"kind": "pi"}], slowdown=1.3, spike_every=25)],
                         repetitions=2, jobs=200, counters=True)
    probes = pd.DataFrame({"probe": [7, 7, 1001], "name": ["", "", "write"], "tid": [1, 1, 1], "cpu_begin": [1, 1, 1],
                           "cpu_end": [1, 1, 1], "begin_ns": [10, 30, 50], "end_ns": [20, 45, 90]})
    probes["duration_ns"] = probes.end_ns - probes.begin_ns
    pq.write_table(pa.Table.from_pandas(probes), root / "runs" / "0-solo-r0" / "probes.parquet")
    return build(root, epsilons=["exec:max:1.2x"])


def test_report_files(report):
    out = report.parent
    assert report.name == "index.html" and out.name == "report"
    pngs = {p.stem for p in (out / "figures").glob("*.png")}
    assert not list((out / "figures").glob("*.svg"))  # SVG only on request (--svg)
    assert {"box_exec", "ecdf_exec", "hist_exec_0", "series_0", "wakeup_0", "pwcet_0",
                             "scatter_ctr_task_clock", "counter_correlation", "spikes_worst_run"} <= pngs
    for name in ("verdicts", "slowdown", "noise_floor", "misses", "distribution_exec", "pwcet", "counters"):
        assert (out / "tables" / f"{name}.csv").exists(), name
    md = (out / "summary.md").read_text()
    assert "## Verdicts" in md and "pi (default)" in md and "exec max ≤ 1.2× solo" in md


def test_svg_on_request_beside_the_same_pngs(report, tmp_path):
    """`--svg` adds an SVG beside every PNG and says so on the page and in the files list; the
    PNGs are the same, byte for byte (one layout for both); without it, no SVG is named."""
    html = build(report.parent.parent, tmp_path / "svg", epsilons=["exec:max:1.2x"], csv=False, svg=True)
    figures, plain = html.parent / "figures", report.parent / "figures"
    pngs = {p.name: p.read_bytes() for p in figures.glob("*.png")}
    assert pngs and pngs == {p.name: p.read_bytes() for p in plain.glob("*.png")}
    svgs = {p.stem: p.read_bytes() for p in figures.glob("*.svg")}
    assert svgs.keys() == {n.removesuffix(".png") for n in pngs} and all(b"<svg" in v[:1000] for v in svgs.values())
    text = html.read_text()
    assert "figures/box_exec.png, .svg)" in text and "figures/*.png, figures/*.svg" in text
    assert ".svg" not in report.read_text() and ".svg" not in (report.parent / "summary.md").read_text()
    # A report without --svg into the same directory leaves no SVG of the earlier one behind.
    build(report.parent.parent, tmp_path / "svg", epsilons=["exec:max:1.2x"], csv=False)
    assert not list(figures.glob("*.svg")) and {p.name for p in figures.glob("*.png")} == pngs.keys()


def test_the_png_writer_keeps_savefigs_pixels():
    """The report's own PNG writer (one draw, RGB when opaque, zlib level 3) gives the very
    pixels matplotlib's savefig does, in a smaller file."""
    import numpy as np
    from PIL import Image

    from xtalk.report import figures as fg

    fig = fg.boxplots([("solo", np.arange(1, 200) * 1e5), ("pi", np.arange(1, 200) * 1.3e5)], "t", "execution time (ms)")
    mine = fg._png(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    fg.plt.close(fig)
    a, b = Image.open(io.BytesIO(mine)), Image.open(buf)
    assert a.mode == "RGB" and a.size == b.size and a.info["dpi"] == b.info["dpi"]
    assert np.array_equal(np.asarray(a), np.asarray(b.convert("RGB"))) and len(mine) < len(buf.getvalue())


def test_the_wake_up_series_are_let_go_once_their_section_is_drawn(tmp_path):
    """The wake-up section's series (every job, 12 columns) leave the report's cache when the
    section is done, the other cached tables stay: at 10^7 jobs they were 0.9 GB held beside
    the spike section's own."""
    from xtalk.store.frames import load, load_runs

    root = write_results(tmp_path / "res", [Scenario("solo"), Scenario("pi", enemies=[{"kind": "pi"}], slowdown=1.3)],
                         repetitions=1, jobs=60)
    data = load(root, load_runs(root))
    build(data, tmp_path / "out", csv=False)
    assert len(pd.read_csv(tmp_path / "out" / "tables" / "wakeup_drift.csv")) == 2
    assert (tmp_path / "out" / "figures" / "wakeup_1.png").exists()
    assert not [k for k in data.memo if k[:1] == ("wakeup",)]
    assert [k for k in data.memo if k[:1] == ("spikes",)]


def test_html_is_self_contained_and_holds_every_figure(report):
    html = report.read_text()
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", html, re.I)
    assert "<link" not in html and not re.search(r"<script[^>]+src", html)
    imgs = re.findall(r'<img src="([^"]+)"', html)
    assert imgs and all(i.startswith("data:image/png;base64,") for i in imgs)
    assert len(imgs) == len(list((report.parent / "figures").glob("*.png")))
    for section in ("Verdicts", "Distributions", "Per-job time series", "Counters", "Wake-up behaviour",
                    "Spikes and culprits", "pWCET"):
        assert f"<h2>{section}</h2>" in html


def test_csv_one_row_per_job_and_per_probe_sample(report):
    jobs = pd.read_csv(report.parent / "csv" / "jobs.csv")
    assert len(jobs) == 4 * 200 and {"run_id", "scenario", "repetition", "exec_ns", "ctr_task_clock"} <= set(jobs.columns)
    assert jobs.groupby("run_id").size().eq(200).all()
    probes = pd.read_csv(report.parent / "csv" / "probes.csv")
    assert len(probes) == 3 and set(probes.run_id) == {"0-solo-r0"} and list(probes.duration_ns) == [10, 15, 40]


def test_bad_input_is_one_line_and_exit_2(tmp_path):
    r = xtalk("report", tmp_path)
    assert r.returncode == 2 and "not an xtalk results directory" in r.stderr and r.stderr.count("\n") == 1
    root = write_results(tmp_path / "res", [Scenario("solo")], repetitions=1, jobs=30)
    r = xtalk("report", root, "--epsilon", "exec:max")
    assert r.returncode == 2 and "--epsilon" in r.stderr and r.stderr.count("\n") == 1
    assert not (root / "report" / "index.html").exists()  # nothing written on bad input


def test_report_on_a_real_experiment(tmp_path):
    f = tmp_path / "exp.toml"
    f.write_text(EXPERIMENT)
    # The report is the matter: no feasibility, noise-floor or enemies-alone passes.
    r = xtalk("run", f, "--results", tmp_path / "res", "--skip-feasibility", timeout=120)
    assert r.returncode == 0, r.stderr
    (res,) = (tmp_path / "res").iterdir()
    r = xtalk("report", res, "--epsilon", "response:max:1s", timeout=120)
    assert r.returncode == 0, r.stderr
    assert "report:" in r.stdout and (res / "report" / "index.html").exists()
    v = pd.read_csv(res / "report" / "tables" / "verdicts.csv")
    assert list(v.scenario) == ["solo", "pi"] and v.jobs.eq(50).all()
    assert (v.epsilon_verdicts.str.contains("response max ≤ 1000 ms")).all()


def test_report_on_a_nearly_empty_experiment(tmp_path):
    """One short solo run and a failed run without jobs: every section still renders, and
    what cannot be estimated says so instead of failing."""
    root = write_results(tmp_path / "res", [Scenario("solo")], repetitions=1, jobs=8)
    (root / "runs" / "9-x-r0").mkdir()
    write_outcome(root / "runs" / "9-x-r0", outcome("9-x-r0", {"scenario": "x"}, status="failed").model_copy(
        update={"reason": "agent killed", "jobs_recorded": 0}))
    html = build(root, csv=True)
    text = html.read_text()
    assert "pWCET refused" in text and "sample_size" in text
    floor = pd.read_csv(html.parent / "tables" / "noise_floor.csv")
    assert floor.samples.eq(1).all() and floor.floor.isna().all()  # one solo run: no spread to show
    runs = pd.read_csv(html.parent / "tables" / "runs.csv")
    assert set(runs.status) == {"completed", "failed"}


def _report_bytes(out):
    """Every file of a report by name, the build's date and duration taken out of the pages;
    SVG files by name only (matplotlib gives their clip paths random ids)."""
    strip = re.compile(rb"generated [0-9-]+ [0-9:]+|Built in [0-9.]+ s")
    return {str(p.relative_to(out)): b"" if p.suffix == ".svg" else strip.sub(b"", p.read_bytes())
            for p in sorted(out.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("child", ["works", "fails", "slow"])
def test_forked_sections_give_the_same_report(tmp_path, monkeypatch, child):
    """The sections a second process shares at scale (build.FORKED_SECTIONS) give the same
    files, byte for byte, as one process; a child that fails leaves them to the parent, and
    one that is slow leaves the parent to take those it has not taken yet."""
    import xtalk.report.build as bd

    root = write_results(tmp_path / "res", [Scenario("solo"), Scenario("pi", enemies=[{"kind": "pi"}], slowdown=1.3,
                                                                        spike_every=25)], repetitions=2, jobs=300)
    one = build(root, tmp_path / "one", epsilons=["exec:max:1.2x"])
    monkeypatch.setattr(bd, "FORK_JOBS", 0)
    monkeypatch.setattr(bd, "_usable_cpus", lambda: 2)
    monkeypatch.setattr(bd, "_other_threads", lambda: [])  # threads other tests of the session left
    if child == "fails":
        real = bd._Builder.spikes

        def spikes(self):
            if os.getpid() != parent:
                raise RuntimeError("the child fails")
            return real(self)
        parent = os.getpid()
        monkeypatch.setattr(bd._Builder, "spikes", spikes)
    if child == "slow":  # the child holds its first section until the parent has taken one
        real_claim, claimed = bd._Forked.claim, tmp_path / "parent-claimed"

        def claim(self):
            name = real_claim(self)
            if name is not None and os.getpid() == parent:
                claimed.touch()
            elif name is not None and not getattr(self, "held", False):
                self.held = True
                deadline = time.monotonic() + 120
                while not claimed.exists() and time.monotonic() < deadline:
                    time.sleep(0.01)
            return name
        parent = os.getpid()
        monkeypatch.setattr(bd._Forked, "claim", claim)
    forks, forked = [], bd._Forked

    class Counted(forked):
        def __init__(self, *a):
            forks.append(1)
            super().__init__(*a)
    monkeypatch.setattr(bd, "_Forked", Counted)
    console = Console(file=io.StringIO(), width=400)
    two = build(root, tmp_path / "two", epsilons=["exec:max:1.2x"], console=console)
    assert forks == [1]  # the forked path was taken
    assert _report_bytes(one.parent) == _report_bytes(two.parent)
    timings = console.file.getvalue().rsplit(" s: ", 1)[1]
    here = [n for n in bd.FORKED_SECTIONS if f"{n} (here)" in timings]
    if child == "slow":
        assert here and len(here) < len(bd.FORKED_SECTIONS), timings  # both sides computed some
    for name in bd.FORKED_SECTIONS:  # each computed once, on one side
        assert len(re.findall(rf"(?:^|, ){name}(?: \(here\))? [\d.]+", timings)) == 1, timings


def test_no_fork_beside_other_threads(tmp_path, monkeypatch):
    """A caller's own threads (a server, a pool calling build()) rule the fork out."""
    import threading

    import xtalk.report.build as bd

    root = write_results(tmp_path / "res", [Scenario("solo"), Scenario("pi", enemies=[{"kind": "pi"}])], repetitions=2,
                         jobs=300)
    monkeypatch.setattr(bd, "FORK_JOBS", 0)
    monkeypatch.setattr(bd, "_usable_cpus", lambda: 2)
    data = bd.load(root)
    real = bd._other_threads
    before = set(real())  # threads other tests of the session may have left
    monkeypatch.setattr(bd, "_other_threads", lambda: [t for t in real() if t not in before])
    assert bd._fork_worth(data, list(bd.SECTIONS))
    stop = threading.Event()
    other = threading.Thread(target=stop.wait, name="a caller's thread")
    other.start()
    try:
        assert not bd._fork_worth(data, list(bd.SECTIONS))
    finally:
        stop.set()
        other.join()


def test_a_failing_parent_stops_its_forked_child(tmp_path, monkeypatch):
    """A section failing in the parent (or an interrupt) while the forked sections run: the
    error reaches the caller and no child process is left behind."""
    import xtalk.report.build as bd

    root = write_results(tmp_path / "res", [Scenario("solo"), Scenario("pi", enemies=[{"kind": "pi"}])], repetitions=2,
                         jobs=300)
    monkeypatch.setattr(bd, "FORK_JOBS", 0)
    monkeypatch.setattr(bd, "_usable_cpus", lambda: 2)
    monkeypatch.setattr(bd, "_other_threads", lambda: [])  # threads other tests of the session left
    forks, forked = [], bd._Forked

    class Counted(forked):
        def __init__(self, *a):
            super().__init__(*a)
            forks.append(self.pid)
    monkeypatch.setattr(bd, "_Forked", Counted)

    def verdicts(self):
        raise RuntimeError("the parent fails")
    monkeypatch.setattr(bd._Builder, "verdicts", verdicts)
    with pytest.raises(RuntimeError, match="the parent fails"):
        build(root, tmp_path / "out", csv=False)
    assert len(forks) == 1 and forks[0]  # a child was forked
    me = str(os.getpid())
    assert str(forks[0]) not in [p for p in os.listdir("/proc") if p.isdigit() and _ppid(p) == me]


def _ppid(pid: str) -> str | None:
    try:
        stat = open(f"/proc/{pid}/stat").read()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[1]


def test_a_report_pinned_to_one_cpu_does_not_fork(tmp_path, monkeypatch):
    """The CPUs the process may use, not the machine's: a report under `taskset -c 0` (or a
    one-CPU cpuset) computes every section itself."""
    import xtalk.report.build as bd

    root = write_results(tmp_path / "res", [Scenario("solo"), Scenario("pi", enemies=[{"kind": "pi"}])], repetitions=2,
                         jobs=300)
    monkeypatch.setattr(bd, "FORK_JOBS", 0)
    monkeypatch.setattr(bd, "_other_threads", lambda: [])  # threads other tests of the session left
    data = bd.load(root)
    mine = os.sched_getaffinity(0)
    try:
        os.sched_setaffinity(0, {min(mine)})
        assert bd._usable_cpus() == 1 and not bd._fork_worth(data, list(bd.SECTIONS))
    finally:
        os.sched_setaffinity(0, mine)
    assert bd._usable_cpus() == len(mine)
