"""A campaign's pre-flight, as `xtalk run`'s: each cell's victim work calibrated once
(`victim.utilization`), recorded in the campaign directory and never redone by `resume`;
an infeasible victim refused before any run with the numbers (exit 2); `--skip-feasibility`
runs it anyway; a campaign whose runs failed exits non-zero and `status` lists them."""

from __future__ import annotations

import json

import pytest

from campaign_util import campaign_dirs
from conftest import processes_named, xtalk as run_xtalk
from xtalk.campaign import preflight
from xtalk.campaign.layout import create, load
from xtalk.campaign.prepare import prepare
from xtalk.targets.base import LocalTarget

TWO_CELLS = """
name = "cal"
repetitions = 1
seed = 3
settle = "10ms"

[[application]]
name = "pi"
criticality = "C"
epsilon = { metric = "exec", statistic = "max", bound = "1.5x" }
body = "pi"
utilization = "30%"
period = "4ms"
jobs = 20
warmup_jobs = 2
cpus = "last"
policy = "fifo"
priority = 80

[[application]]
name = "spin"
criticality = "D"
epsilon = { metric = "exec", statistic = "max", bound = "1.5x" }
body = "pi"
utilization = "20%"
period = "4ms"
jobs = 20
warmup_jobs = 2
cpus = "last"
policy = "fifo"
priority = 80
"""

# Each job takes several periods alone (pi with a fixed, large work against 2 ms).
INFEASIBLE = """
name = "over"
repetitions = 1
settle = "10ms"

[[application]]
name = "hog"
criticality = "D"
epsilon = { metric = "response", statistic = "max", bound = "5ms" }
body = "pi"
iterations = 3000000
period = "2ms"
jobs = 10
warmup_jobs = 0
cpus = "last"
"""


class _KilledHere(BaseException):
    """Stands for a SIGKILL of the driver (nothing after it runs)."""


class _Recording(LocalTarget):
    """The local target, recording the run directories of the passes it runs; with
    `die_in`, the first pass whose directory holds that text ends the process there."""

    def __init__(self, die_in: str | None = None):
        super().__init__()
        self.dirs: list[str] = []
        self.die_in = die_in

    def run(self, plan, run_dir):
        if self.die_in and self.die_in in str(run_dir):
            raise _KilledHere(run_dir)
        self.dirs.append(str(run_dir))
        return super().run(plan, run_dir)


def _work(plan: dict) -> int:
    return plan["victim"]["body"]["iterations"]


def test_each_cell_is_calibrated_once_and_a_killed_preflight_resumes_exactly(tmp_path):
    f = tmp_path / "cal.toml"
    f.write_text(TWO_CELLS)
    target = LocalTarget()
    p = prepare(f, [target])
    store = create(tmp_path / "res", "cal", p.text, p.expansion, {"name": "cal", "kind": "local"})
    before = {r["run_id"]: _work(r["plan"]) for r in json.loads((store / "campaign.json").read_text())["runs"]}

    # Killed as the second cell's passes start: the first cell's record is on disk, no run
    # has the new work yet.
    one, two = preflight.cells(load(store)[1])  # in the order of the campaign's runs
    killer = _Recording(die_in=two.replace("/", "--"))
    with pytest.raises(_KilledHere):
        preflight.ensure(store, [killer], say=lambda _: None)
    assert killer.dirs and all(one.replace("/", "--") in d for d in killer.dirs)
    rec = preflight.read(store)
    assert list(rec["cells"]) == [one]
    first = rec["cells"][one]
    assert first["calibration"]["knob"] == "iterations" and first["feasibility"][0]["missed"] <= 0.5
    doc = json.loads((store / "campaign.json").read_text())
    assert "preflight_applied" not in doc
    assert {r["run_id"]: _work(r["plan"]) for r in doc["runs"]} == before

    # Resumed: only the second cell is measured, then every run gets its cell's work.
    again = _Recording()
    preflight.ensure(store, [again], say=lambda _: None)
    assert again.dirs and all(two.replace("/", "--") in d for d in again.dirs), again.dirs
    rec = preflight.read(store)
    assert set(rec["cells"]) == {"pi/default/default", "spin/default/default"}
    assert rec["cells"][one] == first  # not redone
    doc = json.loads((store / "campaign.json").read_text())
    assert doc["preflight_applied"] is True
    for r in doc["runs"]:
        cal = rec["cells"][f"{r['labels']['application']}/default/default"]["calibration"]
        assert _work(r["plan"]) == cal["work"] != before[r["run_id"]]
        assert r["plan"]["labels"]["calibrated_work"].startswith(f"iterations={cal['work']} for ")
    # 30 % and 20 % of the same period: the first application does more work per job.
    assert rec["cells"]["pi/default/default"]["calibration"]["work"] > rec["cells"]["spin/default/default"]["calibration"]["work"]

    # A third call (another resume) measures nothing.
    idle = _Recording()
    preflight.ensure(store, [idle], say=lambda _: None)
    assert idle.dirs == []

    # The campaign runs with that work: every run's plan as applied.
    out = run_xtalk("campaign", "resume", store)
    assert out.returncode == 0, out.stderr
    for r in doc["runs"]:
        ran = json.loads((store / "runs" / r["run_id"] / "plan.json").read_text())
        assert _work(ran) == _work(r["plan"])
    assert preflight.read(store) == rec


def test_an_infeasible_victim_is_refused_before_any_run_and_skip_runs_it(tmp_path):
    f = tmp_path / "over.toml"
    f.write_text(INFEASIBLE)
    out = run_xtalk("campaign", "run", f, "--results", tmp_path / "res")
    assert out.returncode == 2, (out.stdout, out.stderr)
    (line,) = out.stderr.strip().splitlines()
    assert "hog/default/default" in line and "cannot hold its period alone" in line and "median job" in line, line
    assert "--skip-feasibility" in line
    assert campaign_dirs(tmp_path / "res") == []  # refused before the first run: nothing kept
    assert not processes_named()

    # Skipped: the runs happen, each misses its deadlines; they complete, so exit 0.
    out = run_xtalk("campaign", "run", f, "--results", tmp_path / "res", "--skip-feasibility")
    assert out.returncode == 0, out.stderr
    (store,) = campaign_dirs(tmp_path / "res")
    assert "1 done, 0 failed" in out.stdout
    assert json.loads((store / "campaign.json").read_text())["skip_feasibility"] is True
    assert preflight.read(store)["cells"]["hog/default/default"]["feasibility"] is None
