"""The guard on enemies that reached much less than their rate alone: planted rates make it
fire in the terminal table, summary.json and the HTML report, naming the enemy and the two
rates; an enemy near its rate alone, or one never measured alone, fires nothing."""

import json

import pandas as pd

from conftest import xtalk
from xtalk.analysis import guards
from xtalk.outcome import parse_outcome, write_outcome
from xtalk.testing.synthetic import Scenario, write_results


def _plant(res, scenario: str, achieved: dict[str, float], alone: dict[str, float]):
    """Give every run of `scenario` enemies with these window rates (bytes/s), and record
    their rates alone in experiment.json as the enemies-alone pass does."""
    for rj in (res / "runs").glob("*/run.json"):
        meta = json.loads(rj.read_text())
        if meta["plan"]["labels"]["scenario"] == scenario:
            meta["enemies"] = [{"name": n, "kind": "read", "unit": "bytes", "ops": int(r), "seconds": 1.0, "rate": r,
                                "window_ops": int(r), "window_rate": r, "target_intensity": 100.0, "setup_error": None,
                                "ended_early": None}
                               for n, r in achieved.items()]
            write_outcome(rj.parent, parse_outcome(meta))
    exp = json.loads((res / "experiment.json").read_text())
    exp["enemies_alone"] = [{"configuration": "default", "scenario": scenario, "enemy": n, "kind": "read", "unit": "bytes",
                             "rate": r} for n, r in alone.items()]
    (res / "experiment.json").write_text(json.dumps(exp))


def test_a_starved_enemy_fires_everywhere(tmp_path):
    res = write_results(tmp_path / "r", [Scenario("solo"), Scenario("read", slowdown=1.3)], repetitions=6, jobs=100)
    _plant(res, "read", achieved={"read@0": 3e9, "read@1": 9e9}, alone={"read@0": 10e9, "read@1": 10e9})
    p = xtalk("summary", res)
    assert p.returncode == 0, p.stderr
    rows = {r["scenario"]: r["warnings"] for r in json.loads((res / "summary.json").read_text())}
    (w,) = [w for w in rows["read"] if w["kind"] == "enemy_below_alone_rate"]
    assert "1 of 2 enemies" in w["message"] and "read@0 30% (3 GB/s against 10 GB/s alone)" in w["message"], w
    assert "read@1" not in w["message"], "an enemy at 90 % of its rate alone is not flagged"
    assert not rows["solo"]
    out = " ".join(p.stdout.split())
    assert "read@0 30% (3 GB/s against 10 GB/s alone)" in out, p.stdout
    assert "read@0 30%" in (res / "summary.md").read_text()
    r = xtalk("report", res)
    assert r.returncode == 0, r.stderr
    assert "read@0 30% (3 GB/s against 10 GB/s alone)" in (res / "report" / "index.html").read_text()


def test_without_a_rate_alone_nothing_fires(tmp_path):
    res = write_results(tmp_path / "r", [Scenario("solo"), Scenario("read", slowdown=1.3)], repetitions=6, jobs=100)
    _plant(res, "read", achieved={"read@0": 1e6}, alone={})
    assert xtalk("summary", res).returncode == 0
    rows = {r["scenario"]: r["warnings"] for r in json.loads((res / "summary.json").read_text())}
    assert not [w for w in rows["read"] if w["kind"] == "enemy_below_alone_rate"], rows


def test_the_threshold_is_half_the_rate_alone():
    row = pd.DataFrame([dict(configuration="default", scenario="x", runs_ok=6, slowdown_median=1.2,
                             slowdown_median_lo=1.15, slowdown_median_hi=1.25)])
    def fired(achieved):
        e = {("default", "x"): [{"enemy": "e", "unit": "ops", "achieved": achieved, "alone": 100.0}]}
        return [g for g in guards.check(row, {}, enemies=e) if g.kind == guards.Kind.ENEMY_BELOW_ALONE_RATE]
    assert fired(49.0) and not fired(51.0)
