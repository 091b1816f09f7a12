"""`xtalk compare`: the same experiment measured twice (one planted slower by a known factor)
side by side; labels derived and given; cells only one directory has listed; bad input
refused in one line with exit 2 and nothing written. Pure: synthetic results, no agent."""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from xtalk.outcome import load_outcome, parse_outcome, write_outcome
from xtalk.report import compare as cm
from xtalk.testing.synthetic import Scenario, write_results
from xtalk.testing.synthetic_campaign import write_campaign

from test_report_sections import ENV  # a run.json environment the outcome model accepts

#: Planted: every job of the "rt" directory executes this many times longer.
FACTOR = 2.0
PERIOD, EXEC = 10_000_000, 2_000_000  # response ≈ exec (wake-up ~20 µs), so the p99 ratio ≈ FACTOR


def _environment(root, release: str, rt: bool, vm: bool = False) -> None:
    env = copy.deepcopy(ENV)
    env["kernel"].update(release=release, preempt_rt=rt)
    env["virtualization"].update(hypervisor=vm, vendor="KVMKVMKVM" if vm else None)
    for p in (root / "runs").glob("*/run.json"):
        meta = load_outcome(p.parent).to_dict()
        meta["environment"] = env
        write_outcome(p.parent, parse_outcome(meta))


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    base = tmp_path_factory.mktemp("compare")
    a = write_results(base / "stock", [Scenario("solo"), Scenario("read", slowdown=1.3)], repetitions=2, jobs=200,
                      period_ns=PERIOD, exec_ns=EXEC, seed=1)
    b = write_results(base / "rt", [Scenario("solo"), Scenario("read", slowdown=1.3), Scenario("chase", slowdown=1.1)],
                      repetitions=2, jobs=200, period_ns=PERIOD, exec_ns=EXEC * FACTOR, seed=2)
    return a, b


def _cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "xtalk.cli", "compare", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True)


def test_ratio_finds_the_planted_factor_and_lists_cells_only_one_has(pair, tmp_path):
    a, b = pair
    comp = cm.run([a, b], ["stock", "rt"], tmp_path / "out", console=_Quiet())
    t = comp.table.set_index("scenario")
    assert list(t.index) == ["solo", "read"]  # the common cells, in the first directory's order
    ratio = t["p99 rt / stock"]
    assert ratio.between(FACTOR * 0.95, FACTOR * 1.05).all(), ratio
    # Each label's numbers are its own directory's cells (the summary's numbers).
    assert t.loc["read", "stock: runs"] == 2 and t.loc["read", "rt: jobs"] == 2 * 198
    # The within-directory slowdown against solo, with its CI (the summary's).
    assert t.loc["read", "stock: slowdown_lo"] < t.loc["read", "stock: slowdown_median"] < t.loc["read", "stock: slowdown_hi"]
    assert 1.25 < t.loc["read", "stock: slowdown_median"] < 1.35
    assert comp.long()["slowdown [95% CI]"].iloc[2].startswith("1.3")
    assert comp.partial == [("default", "chase", ["rt"])]
    md = (tmp_path / "out" / "compare.md").read_text()
    assert "default · chase: only in rt" in md and "| rt |" in md
    csv = pd.read_csv(tmp_path / "out" / "compare.csv")
    assert list(csv["scenario"]) == ["solo", "read"] and "p99 rt / stock" in csv.columns
    html = (tmp_path / "out" / "compare.html").read_text()
    assert "data:image/png;base64," in html and "only in rt" in html and "src=\"http" not in html


def test_the_planted_change_is_significant_and_a_repeat_is_not(pair, tmp_path):
    """The 2× planted in "rt" is a significant change of the median and the p99 whose CI holds
    2; the same experiment measured again (another seed, nothing planted) changes nothing
    significantly, and says how small a change these runs could have detected."""
    a, b = pair
    comp = cm.run([a, b], ["stock", "rt"], tmp_path / "out", console=_Quiet())
    for scenario in ("solo", "read"):
        for stat in ("median", "p99"):
            ch = comp.change("default", scenario, "rt", stat)
            assert ch.significant and ch.direction == "slower", ch
            assert ch.low < FACTOR < ch.high or abs(ch.ratio / FACTOR - 1) < 0.05, ch
            assert ch.words().startswith(f"{ch.ratio:.2f}× slower, significant")
    assert any("rt median" in x and "significant" in x for x in comp.change_lines())
    again = write_results(tmp_path / "again", [Scenario("solo"), Scenario("read", slowdown=1.3)], repetitions=2,
                          jobs=200, period_ns=PERIOD, exec_ns=EXEC, seed=7)
    same = cm.run([a, again], ["first", "again"], tmp_path / "out2", console=_Quiet())
    assert same.changes and not any(ch.significant for *_, ch in same.changes), same.changes
    assert same.change_lines()[0].startswith("no significant change in 4 comparisons")
    assert all(ch.minimum_detectable > 0 for *_, ch in same.changes)
    md = (tmp_path / "out" / "compare.md").read_text()
    assert "## Changes against stock" in md and "machine drift is not controlled" in md


def test_json_is_the_comparison_with_every_change(pair, tmp_path):
    a, b = pair
    r = _cli(a, b, "--label", "stock", "--label", "rt", "--json", "--out", tmp_path / "out", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["schema_version"] == 1 and doc["labels"] == ["stock", "rt"] and doc["baseline"] == "stock"
    read = next(c for c in doc["cells"] if c["scenario"] == "read")
    assert read["sides"]["stock"]["runs"] == 2
    stats = {c["stat"]: c for c in read["changes"]}
    assert set(stats) == {"median", "p99"}
    assert stats["p99"]["significant"] is True and stats["p99"]["low"] > 1 and stats["p99"]["label"] == "rt"
    assert doc["partial"] == [{"cell": "default", "scenario": "chase", "labels": ["rt"]}]


def test_labels_derived_from_the_recorded_kernel_else_the_directory(pair, tmp_path):
    a, b = pair
    assert cm.labels_for([a, b], []) == ["stock", "rt"]  # no environment recorded: the directory names
    a2, b2 = tmp_path / "a", tmp_path / "b"
    subprocess.run(["cp", "-r", str(a), str(a2)], check=True)
    subprocess.run(["cp", "-r", str(b), str(b2)], check=True)
    _environment(a2, "6.1.0-50-arm64", False)
    _environment(b2, "6.1.0-50-rt-arm64", True)
    assert cm.labels_for([a2, b2], []) == ["stock-6.1.0-50-arm64", "rt-6.1.0-50-rt-arm64"]
    _environment(b2, "6.1.0-50-arm64", False, vm=True)  # native against a KVM guest
    assert cm.labels_for([a2, b2], []) == ["stock-6.1.0-50-arm64", "stock-6.1.0-50-arm64-vm"]
    _environment(b2, "6.1.0-50-arm64", False)  # the same kernel twice: the directory names
    assert cm.labels_for([a2, b2], []) == ["a", "b"]
    assert cm.labels_for([a2, b2], ["x", "y"]) == ["x", "y"]
    r = _cli(a2, b2, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "compare-a-vs-b" / "compare.csv").is_file()


def test_a_campaign_compares_by_cell(tmp_path):
    a = write_campaign(tmp_path / "c1", families=[], configurations=("fifo",), scenarios={"read": 1.5})
    b = write_campaign(tmp_path / "c2", families=[], configurations=("fifo",), scenarios={"read": 1.5, "chase": 1.2},
                       exec_ns=400_000)
    comp = cm.run([a, b], [], tmp_path / "out", console=_Quiet())
    assert comp.kind == "campaign" and list(comp.table["cell"]) == ["aocs · fifo"] * 2
    assert comp.table["p99 c2 / c1"].between(1.6, 2.0).all()  # exec doubled, wake-up (~20 µs) not
    assert comp.partial == [("aocs · fifo", "chase", ["c2"])]


def test_a_latency_victim_compares_its_wake_up_latency(tmp_path):
    lat = {"body": {"kind": "latency"}}
    a = write_results(tmp_path / "a", [Scenario("solo"), Scenario("read")], repetitions=2, jobs=300, victim=lat, seed=1)
    b = write_results(tmp_path / "b", [Scenario("solo"), Scenario("read")], repetitions=2, jobs=300, victim=lat, seed=1)
    for p in (b / "runs").glob("*/jobs.parquet"):  # the same samples, every wake-up latency planted 3× longer
        j = pd.read_parquet(p)
        j["wakeup_latency_ns"] *= 3
        j.to_parquet(p, index=False)
    comp = cm.run([a, b], ["x", "y"], tmp_path / "out", console=_Quiet())
    assert comp.kind == "latency" and "x: p99_us" in comp.table and "x: p99_ms" not in comp.table
    assert comp.table["p99 y / x"].round(9).eq(3.0).all()
    assert "p99 µs" in comp.long().columns


def test_a_latency_campaign_compares_its_wake_up_latency_with_min(tmp_path):
    """A campaign of latency victims (how a guest runs one: through a target) compares as
    latency, keyed by application, with min / p50 / p99 / max µs per label."""
    lat = {"body": {"kind": "latency"}}
    a = write_campaign(tmp_path / "a", families=[], configurations=("default",), scenarios={"write": 1.0},
                       application="latency", victim=lat)
    b = write_campaign(tmp_path / "b", families=[], configurations=("default",), scenarios={"write": 1.0},
                       application="latency", victim=lat)
    for p in (b / "runs").glob("*/jobs.parquet"):
        j = pd.read_parquet(p)
        j["wakeup_latency_ns"] *= 3
        j.to_parquet(p, index=False)
    comp = cm.run([a, b], ["native", "guest"], tmp_path / "out", console=_Quiet())
    assert comp.kind == "latency" and list(comp.table["cell"]) == ["latency"] * 2
    assert list(comp.table["scenario"]) == ["solo", "write"]
    for lb in ("native", "guest"):
        assert all(f"{lb}: {s}" in comp.table for s in ("min_us", "p50_us", "p99_us", "max_us"))
    assert comp.table["p99 guest / native"].round(9).eq(3.0).all()
    assert "min µs" in comp.long().columns


def _traced_latency_campaign(dst: Path) -> Path:
    """The recorded traced latency runs (tests/fixtures/overheads) laid out as a campaign of
    one `latency` application, as a guest or the board brings one back through a target."""
    shutil.copytree(Path(__file__).parent / "fixtures" / "overheads" / "results", dst)
    runs = [{"run_id": d.name, "labels": {**load_outcome(d).labels(), "application": "latency", "criticality": "C",
                                          "variant": "default", "campaign": "traced"}}
            for d in sorted((dst / "runs").iterdir())]
    (dst / "campaign.json").write_text(json.dumps({"name": "traced", "kind": "local", "runs": runs}))
    return dst


def test_a_traced_latency_campaign_compares_its_scheduler_overheads(tmp_path):
    """Campaigns (native, and a guest's or the board's brought back through a target) show
    the measured overheads per label beside the latency, as experiments do."""
    a, b = _traced_latency_campaign(tmp_path / "a"), _traced_latency_campaign(tmp_path / "b")
    comp = cm.run([a, b], ["native", "guest"], tmp_path / "out", console=_Quiet())
    assert comp.kind == "latency" and comp.overheads is not None
    sched = comp.overheads.set_index(["scenario", "overhead"]).loc[("write", "Δsched")]
    assert sched["native: max µs"] == sched["guest: max µs"] > 0
    assert "## Scheduler overheads (µs)" in (tmp_path / "out" / "compare.md").read_text()
    assert (tmp_path / "out" / "overheads.csv").is_file()


@pytest.mark.parametrize("case", ["one", "not_results", "label_count", "label_twice", "mixed", "twice", "same_dir",
                                  "other_victim"])
def test_bad_input_is_one_line_exit_2_and_nothing_written(pair, tmp_path, case):
    a, b = pair
    (tmp_path / "empty").mkdir()
    if case == "same_dir":
        (tmp_path / "link").symlink_to(a)
    other = write_results(tmp_path / "other", [Scenario("solo")], repetitions=1, jobs=50, period_ns=PERIOD,
                          exec_ns=EXEC, victim={"name": "payload"}) if case == "other_victim" else None
    args = {"one": [a], "not_results": [a, tmp_path / "empty"], "label_count": [a, b, "--label", "x"],
            "label_twice": [a, b, "--label", "x", "--label", "x"],
            "mixed": [a, write_campaign(tmp_path / "camp", families=[], configurations=("fifo",))],
            "twice": [a, a], "same_dir": [a, tmp_path / "link"], "other_victim": [a, other]}[case]
    out = tmp_path / "out"
    r = _cli(*args, "--out", out, cwd=tmp_path)
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("xtalk: "), r.stderr
    assert lines[0].removeprefix("xtalk: ").split(":")[0] in ("RESULTS", "--label")
    assert not out.exists()
    assert not any(p.name.startswith("compare-") for p in tmp_path.iterdir())


class _Quiet:
    def print(self, *args, **kwargs):
        pass


def test_two_lab_campaigns_compare_with_the_boards_split_from_the_kernel(tmp_path):
    """The same pool of four boards (planted 0 %, +4 %, +8 %, +12 %) under the stock kernel,
    then under rt (planted 15 % faster), as two campaigns: compare splits the boards' variation
    from rt's effect, whose CI excludes 1; the same pool twice (nothing planted between the
    two) claims no effect. Campaigns without boards get no split."""
    boards = {"board-1": 1.0, "board-2": 1.04, "board-3": 1.08, "board-4": 1.12}
    kw = dict(families=[], configurations=("fifo",), repetitions=3, jobs=60, boards=boards)
    stock = write_campaign(tmp_path / "stock", kernels={"stock": 1.0}, **kw)
    rt = write_campaign(tmp_path / "rt", kernels={"rt": 0.85}, **kw)
    again = write_campaign(tmp_path / "again", kernels={"stock": 1.0}, **kw)
    comp = cm.run([stock, rt], ["stock", "rt"], tmp_path / "out", console=_Quiet())
    splits = {(c, sc, s.stat): s for c, sc, s in comp.board_splits}
    median = splits[("aocs · fifo", "solo", "median")]
    assert median.factor == "side" and set(median.boards) == set(boards) and median.board_concluded
    assert median.offsets["board-4"] > median.offsets["board-1"]
    (effect,) = median.effects
    assert effect.level == "rt" and effect.reference == "stock" and effect.design == "within boards"
    assert effect.significant and 0.8 < effect.ratio < 0.9 and effect.high < 0.95
    md = (tmp_path / "out" / "compare.md").read_text()
    assert "## Boards against results directories" in md and "aocs · fifo · solo: rt: " in md
    doc = comp.to_dict()
    assert {b["stat"] for b in doc["boards"]} == {"p99", "median"}
    same = cm.run([stock, again], ["first", "again"], tmp_path / "out2", console=_Quiet())
    assert same.board_splits and not any(e.significant for *_, s in same.board_splits for e in s.effects)
    plain = cm.run([write_campaign(tmp_path / "p1", families=[], configurations=("fifo",)),
                    write_campaign(tmp_path / "p2", families=[], configurations=("fifo",))], [], tmp_path / "out3",
                   console=_Quiet())
    assert plain.board_splits == [] and "Boards against" not in (tmp_path / "out3" / "compare.md").read_text()
